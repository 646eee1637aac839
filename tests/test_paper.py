"""The paper's own paths: the README's paper commands build the paper's settings (configs/paper.py), and a short run of
each trains and samples on a miniature fixture in the dataset's real layout; resume and torchrun as researchers use
them."""
import hashlib
import os
import re
import shlex
from types import SimpleNamespace

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from conftest import CHELSEA, COFFEE, ROOT, sample_run, train_image_run, train_video_run
from PIL import Image

import configs.paper as paper
import jpdvt
import train_image
import train_video
from plumbing.checkpoint import load_checkpoint
from plumbing.cli import UserError
from plumbing.training import check_processes, resume_or_init
from sources.files import HELD_OUT, TEST_FRACTION, VAL_FRACTION, band, fingerprint, hashed_split

# ----------------------------------------------------------------------------- fixtures in the real layouts


def photo(path, seed, size=(120, 100)):
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    Image.fromarray(small).resize(size, Image.BICUBIC).save(path)


def imagenet(root):
    """ImageNet's layout: train/<wnid>/*.JPEG and val/<wnid>/*.JPEG (the paper scores ImageNet's val split), with two
    training images in the small hashed band held out for training's check (sources.files.HELD_OUT)."""
    names = {"train": [f"n01440764_{i}.JPEG" for i in range(6)], "val": ["ILSVRC2012_val_1.JPEG"]}
    names["train"] += [name for name in (f"n01440764_{i}.JPEG" for i in range(6, 2000))
                       if hashed_split(f"/r/n01440764/{name}", "/r", HELD_OUT["imagenet"]) == "val"][:2]
    for split, files in names.items():
        (root / split / "n01440764").mkdir(parents=True)
        for i, name in enumerate(files):
            photo(root / split / "n01440764" / name, seed=i + 100 * (split == "val"))
    return root


def jpwleg3(root):
    """JPwLEG-3's MET images: three subfolders of .jpg, no split folders (2000 test / 1000 val of 12000 by hash)."""
    for k, sub in enumerate(("a", "b", "c")):
        (root / sub).mkdir(parents=True)
        for i in range(12):
            photo(root / sub / f"{i}.jpg", seed=10 * k + i, size=(450, 440))
    return root


def mnist_seq(root, clips=12):
    """mnist_test_seq.npy: (20 frames, clips, 64, 64) uint8."""
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    np.save(root / "mnist_test_seq.npy", rng.integers(0, 256, (20, clips, 64, 64), dtype=np.uint8))
    return root / "mnist_test_seq.npy"


def video_folder(root):
    """A CLEVRER- or QST-like video folder with class subfolders: {train,val,test}/<class>/<clip>.gif, 128 frames
    each (the paper's 8 pieces x 4 frames at CLEVRER's stride 4)."""
    rng = np.random.default_rng(0)
    for i, rel in enumerate(("train/ApplyEyeMakeup", "train/Archery", "val/Archery", "test/ApplyEyeMakeup")):
        (root / rel).mkdir(parents=True)
        iio.imwrite(root / rel / f"v_{i}.gif", rng.integers(0, 256, (128, 16, 16, 3), np.uint8), duration=100, loop=0)
    return root


def ucf101(root):
    """UCF101 as it ships: <class>/v_<class>_gGG_cCC clips, no split folders (the real ones are .avi; .gif here, which
    needs no ffmpeg). Groups 1-7 are the test split; of the others, one whose hash puts it in val, one in train."""
    rng = np.random.default_rng(0)
    for name in ("ApplyEyeMakeup", "Archery"):
        (root / name).mkdir(parents=True)
        later = [g for g in range(8, 26) if band(f"{root}/{name}/v_{name}_g{g:02d}_c01.gif", str(root), "ucf101",
                                                 (TEST_FRACTION, VAL_FRACTION)) == "val"][:1]
        for g in (1, *later, 9 if later != [9] else 10):
            for c in (1, 2):
                iio.imwrite(root / name / f"v_{name}_g{g:02d}_c{c:02d}.gif",
                            rng.integers(0, 256, (128, 16, 16, 3), np.uint8), duration=100, loop=0)
    return root


LAYOUTS = {"imagenet": imagenet, "jpwleg3": jpwleg3, "movingmnist": mnist_seq, "clevrer": video_folder,
           "ucf101": ucf101, "qst": video_folder}


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """layout(dataset) -> the data path of a miniature fixture in that dataset's layout, made once per module."""
    made = {}

    def make(dataset):
        kind = LAYOUTS[dataset].__name__
        if kind not in made:
            made[kind] = LAYOUTS[dataset](tmp_path_factory.mktemp("data") / kind)
        return made[kind]
    return make


def readme_paper_commands():
    """The training commands of the README's 'Reproducing the paper on GPUs' section, as argument lists (after
    the script)."""
    text = open(f"{ROOT}/README.md").read()
    section = text[text.index("## Reproducing the paper on GPUs"):]
    section = section[:section.index("\n## ", 4)]
    commands = []
    for line in re.findall(r"^(?:torchrun .*?|python) (train_\w+\.py .*)$", section, flags=re.M):
        script, *flags = shlex.split(line.split("#")[0])
        commands.append((script, flags))
    return commands


def flag(flags, name):
    return flags[flags.index(name) + 1] if name in flags else None


# ----------------------------------------------------------------------------- the README's commands


def test_readme_lists_every_paper_experiment():
    commands = readme_paper_commands()
    datasets = [flag(f, "--dataset") for _, f in commands]
    assert set(datasets) == {"imagenet", "jpwleg3", "movingmnist", "clevrer", "ucf101", "qst"}
    assert any("--gap" in f for _, f in commands) and any("--missing" in f for _, f in commands)


@pytest.mark.parametrize("script,flags", readme_paper_commands(), ids=lambda x: x if isinstance(x, str) else
                         " ".join(x[:2] + x[-2:]))
def test_readme_paper_command_builds_the_paper_settings(script, flags, layout, monkeypatch):
    """Each command, with --data-dir pointed at a miniature fixture (and a stand-in for the autoencoder of --vae),
    gives exactly the table's settings; what the command itself says (grid, pieces, gap, missing) comes from its
    flags."""
    dataset = flag(flags, "--dataset")
    flags = [str(layout(dataset)) if f == flag(flags, "--data-dir") else f for f in flags]
    vae = flag(flags, "--vae")
    monkeypatch.setattr(train_video, "load_codec", lambda folder: SimpleNamespace(channels=4))   # SD: 4 channels
    module = train_image if script == "train_image.py" else train_video
    args = module.get_parser().parse_args(flags)
    config, line = module.make_config(args)
    table = (paper.IMAGE if module is train_image else paper.VIDEO)[dataset]
    for name, (value, _) in table.items():
        if name in ("epochs", "vae") or f"--{name.replace('_', '-')}" in flags:
            continue
        have = {"model": args.model, "prediction": config.prediction, "patch_size": config.model.patch_size,
                "codes": getattr(config.model, "codes", None), "code_dim": config.model.code_dim,
                **{k: getattr(config.train, k) for k in vars(config.train)},
                **{k: getattr(config.puzzle, k) for k in vars(config.puzzle)}}[name]
        assert have == value, (name, have, value)
        assert f"{name} {value} (paper table: " in line
    if module is train_image:                                 # 300 epochs of the training split at batch 256
        files = len(jpdvt.kind_of(config).puzzles("train", 0).files)
        assert config.train.max_steps == -(-300 * files // 256) and "300 epochs of" in line
        assert config.model.hidden == 768 and config.model.depth == 12 and config.model.heads == 12
    else:
        assert config.model.channels == (64, 128, 256, 512) and config.model.heads == 8
        if vae:
            assert config.puzzle.vae == vae and config.model.in_channels == 4 and config.puzzle.size == 256
    assert int(flag(flags, "--pieces") or 0) == getattr(config.puzzle, "pieces", 0)


def test_flags_override_the_paper_and_no_paper_turns_it_off(layout):
    data = layout("imagenet")
    config, line = train_image.make_config(train_image.get_parser().parse_args(
        ["--dataset", "imagenet", "--data-dir", str(data), "--lr", "3e-4", "--model", "tiny"]))
    assert config.train.lr == 3e-4 and "lr 0.0003 (flag)" in line and config.model.hidden == 128
    assert config.prediction == "x0" and "prediction x0 (paper table: DEVIATION from the text (Sec. 3.1" in line
    assert config.puzzle.anchor and (config.model.codes, config.model.code_dim) == ("token", 8)
    assert config.train.ema_decay == 0.9999                          # the authors' EMA
    config, _ = train_image.make_config(train_image.get_parser().parse_args(     # the released code's protocol
        ["--dataset", "imagenet", "--data-dir", str(data), "--no-anchor"]))
    assert not config.puzzle.anchor and config.train.lr == 1e-4
    config, line = train_image.make_config(train_image.get_parser().parse_args(
        ["--dataset", "imagenet", "--data-dir", str(data), "--no-paper"]))
    assert config.prediction == "x0" and not config.puzzle.anchor and "paper:" not in line
    with pytest.raises(UserError, match="--paper: the paper has no experiment on --dataset folder"):
        train_image.make_config(train_image.get_parser().parse_args(["--dataset", "folder", "--data-dir", str(data),
                                                                      "--paper"]))


TINY = {"train_image.py": ["--model", "tiny", "--piece-size", "16", "--batch-size", "4", "--max-steps", "2",
                           "--eval-puzzles", "2", "--eval-steps", "2", "--workers", "0"],
        "train_video.py": ["--model", "tiny", "--size", "32", "--batch-size", "2", "--max-steps", "2",
                           "--eval-puzzles", "2", "--eval-steps", "2", "--workers", "0"]}


@pytest.mark.parametrize("dataset", ["imagenet", "jpwleg3", "movingmnist", "ucf101"])
def test_short_run_on_each_layout_trains_and_samples(dataset, layout, tmp_path):
    """The paper's settings with a tiny model: a few steps train on the fixture, and sample.py scores its test split."""
    script, flags = next((s, f) for s, f in readme_paper_commands() if flag(f, "--dataset") == dataset)
    flags = [str(layout(dataset)) if f == flag(flags, "--data-dir") else f for f in flags]
    if "--vae" in flags:
        flags = flags[:flags.index("--vae")] + flags[flags.index("--vae") + 2:]
    run_ = train_image_run if script == "train_image.py" else train_video_run
    run_(*flags, *TINY[script], "--out", tmp_path / "run")
    log = (tmp_path / "run" / "log.txt").read_text()
    assert log.startswith("settings: ") and "prediction x0 (paper table: DEVIATION" in log and "final step 2" in log
    m = sample_run("--ckpt", tmp_path / "run" / "ckpt.pt", "--num-puzzles", "2", "--steps", "2", "--out",
                   tmp_path / "s")
    assert m["split"] == "test" and m["num_puzzles"] >= 1 and m["dataset"] == dataset


# ----------------------------------------------------------------------------- resume, as the README says


def test_resume_longer_is_logged_and_a_changed_flag_is_refused(tmp_path):
    flags = ["--grid", "2", "--piece-size", "8", "--batch-size", "4", "--eval-every", "0", "--workers", "0",
             "--warmup", "0", "--schedule", "cosine"]
    train_image_run(*flags, "--max-steps", "2", "--out", tmp_path)
    ckpt = tmp_path / "ckpt.pt"
    with pytest.raises(UserError, match=r"^--lr 0\.01 differs from the checkpoint's 0\.002: a resumed run keeps its "
                                        r"settings; drop --lr, or start a new run from its weights with --init$"):
        train_image_run("--resume", ckpt, "--lr", "0.01")
    with pytest.raises(UserError, match="--model shapes a fresh run and cannot be given with --resume"):
        train_image_run("--resume", ckpt, "--model", "small")
    with pytest.raises(UserError, match="--anchor True differs from the checkpoint's False"):
        train_image_run("--resume", ckpt, "--anchor")                    # it would change the training stream
    train_image_run("--resume", ckpt, "--lr", "0.002", "--grid", "2", "--max-steps", "4")   # equal flags pass
    log = (tmp_path / "log.txt").read_text()
    assert "resume: --max-steps 4 (the checkpoint had 2)" in log
    assert "the cosine schedule now ends at step 4, not 2: the learning rate at step 2 becomes 0.001 (was 0)" in log
    assert load_checkpoint(ckpt)["config"].train["max_steps"] == 4 and load_checkpoint(ckpt)["step"] == 4


# ----------------------------------------------------------------------------- torchrun: the global batch


def test_check_processes_refuses_a_batch_that_does_not_split():
    tc = SimpleNamespace(batch_size=3, precision="fp32", accum=1)
    message = ("--batch-size 3 is the global batch and must split evenly into 2 process(es) x --accum 1 "
               "micro-batches; use a multiple of 2")
    with pytest.raises(UserError, match=re.escape(message)):
        check_processes(tc, 2, torch.device("cpu"))
    check_processes(SimpleNamespace(batch_size=4, precision="fp32", accum=1), 2, torch.device("cpu"))


def test_each_torchrun_process_refuses_a_batch_that_does_not_split(tmp_path, monkeypatch, capsys):
    """What each of 2 torchrun processes does with --batch-size 3 (here one process told it is rank 1 of 2; torchrun's
    own launch: tests/test_image.py): train.py refuses before a step, run_cli leaves the process group and prints one
    line, exit code 2."""
    import plumbing.cli as cli
    import train
    monkeypatch.setenv("OMP_NUM_THREADS", "1")                     # as torchrun sets it
    monkeypatch.setattr(train, "setup_distributed", lambda device: (1, 2, torch.device("cpu")))
    left = []
    monkeypatch.setattr(cli, "end_process_group", lambda: left.append(True))
    args = train_image.get_parser().parse_args(["--grid", "2", "--piece-size", "8", "--max-steps", "1", "--eval-every",
                                                "0", "--workers", "0", "--device", "cpu", "--batch-size", "3",
                                                "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as stop:
        cli.run_cli(train_image.main, args)
    message = ("--batch-size 3 is the global batch and must split evenly into 2 process(es) x --accum 1 "
               "micro-batches; use a multiple of 2")
    assert stop.value.code == 2 and left == [True]
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {message}"]
    assert not os.path.exists(tmp_path / "ckpt.pt")


def test_fp16_on_cpu_is_refused(tmp_path, capsys):
    """In process, as train_image.py's __main__ runs it (run_cli: one line, exit code 2; a subprocess's own launch:
    tests/test_reliability.py)."""
    import plumbing.cli as cli
    args = train_image.get_parser().parse_args(["--precision", "fp16", "--device", "cpu", "--max-steps", "1",
                                                "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as stop:
        cli.run_cli(train_image.main, args)
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(lines) == 1
    assert lines[0].startswith("error: --precision fp16 needs a CUDA device")


# ----------------------------------------------------------------------------- which split a model saw


def test_scoring_a_split_the_model_trained_on_says_so(tmp_path, capsys):
    data = tmp_path / "photos"
    for split, n in (("train", 40), ("test", 2)):
        (data / split).mkdir(parents=True)
        for i in range(n):
            photo(data / split / f"{split}{i}.png", seed=i + 100 * (split == "test"), size=(64, 64))
    train_image_run("--dataset", "folder", "--data-dir", data, "--grid", "2", "--piece-size", "8", "--batch-size", "2",
                    "--max-steps", "1", "--eval-puzzles", "2", "--eval-steps", "1", "--workers", "0", "--out",
                    tmp_path / "run")
    ckpt = tmp_path / "run" / "ckpt.pt"
    record = torch.load(ckpt, weights_only=True)["data"]
    assert record["splits"] == ["train"] and 0 < record["files"] < 40          # the hashed val band is held out
    flags = ["--ckpt", ckpt, "--split", "val", "--num-puzzles", "2", "--steps", "1", "--out", tmp_path / "s"]
    assert sample_run(*flags)["split_seen"] is False
    saw_val = dict(torch.load(ckpt, weights_only=True), data={**record, "splits": ["train", "val"], "files": 40})
    torch.save(saw_val, tmp_path / "saw_val.pt")
    capsys.readouterr()
    assert sample_run(*flags[:1], tmp_path / "saw_val.pt", *flags[2:])["split_seen"] is None    # digest differs
    assert "not today's train + val split" in capsys.readouterr().out
    names = sorted(os.path.relpath(f, data) for f in (data / "train").iterdir())
    saw_val["data"]["digest"] = hashlib.md5("\n".join(names).encode()).hexdigest()   # every train/ file: train + val
    torch.save(saw_val, tmp_path / "saw_val.pt")
    m = sample_run(*flags[:1], tmp_path / "saw_val.pt", *flags[2:])
    out = capsys.readouterr().out
    assert m["split_seen"] is True and "this score is not held out" in out and "NOT held out" in out
    trained = next(f for f in (data / "train").iterdir() if hashed_split(str(f), str(data / "train")) == "train")
    trained.unlink()                                          # the folder changed since training: cannot tell
    assert sample_run(*flags)["split_seen"] is None


def test_shipped_checkpoint_finds_its_data_from_any_folder(tmp_path, monkeypatch):
    """The shipped photo checkpoints store ../shared/data/photos, relative to the repository: a copy in a checkout with
    that folder beside it (crops of the shipped photos, docs/PHOTOS.md) finds it from another working folder."""
    ck = torch.load(f"{ROOT}/checkpoints/image-photos-3x3.pt", weights_only=True)
    assert ck["config"]["puzzle"]["data_dir"] == "../shared/data/photos"
    data = tmp_path / "work" / "shared" / "data" / "photos"
    for split, n in (("train", 4), ("val", 2), ("test", 2)):
        (data / split).mkdir(parents=True)
        for i in range(n):
            img = Image.open((COFFEE, CHELSEA)[i % 2]).convert("RGB")
            x, y = 40 * i + 60 * (split != "train"), 20 * i + 40 * (split == "test")
            img.crop((x, y, x + 200, y + 200)).save(data / split / f"{split}{i}.jpg")
    files = sorted(str(f) for split in ("train", "val") for f in (data / split).iterdir())
    ck["data"] = fingerprint(files, str(data), ["train", "val"])     # the fixture's train + val, as a record
    (tmp_path / "work" / "jpdvt" / "checkpoints").mkdir(parents=True)
    torch.save(ck, tmp_path / "work" / "jpdvt" / "checkpoints" / "photos.pt")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")                  # ../shared/data/photos is not found from here
    m = sample_run("--ckpt", tmp_path / "work" / "jpdvt" / "checkpoints" / "photos.pt", "--num-puzzles", "2",
                   "--steps", "1", "--out", tmp_path / "s")
    assert m["num_puzzles"] == 2 and m["split_seen"] is False    # False: today's train + val files are the record's
    ck = torch.load(f"{ROOT}/checkpoints/image-shapes-3x3.pt", weights_only=True)
    ck["config"]["puzzle"].update(dataset="folder", data_dir="nowhere/photos")
    torch.save(ck, tmp_path / "moved.pt")
    with pytest.raises(UserError, match=r"was trained on nowhere/photos, which is found neither from here nor next "
                                        r"to the checkpoint; pass --data-dir with that folder$"):
        sample_run("--ckpt", tmp_path / "moved.pt", "--out", tmp_path / "s")


def test_settings_line_shows_only_settings_in_force(layout):
    args = train_image.get_parser().parse_args(["--dataset", "imagenet", "--data-dir", str(layout("imagenet")),
                                                "--max-steps", "100"])
    config, line = train_image.make_config(args)
    assert "max_steps 100 (flag)" in line and "; epochs " not in line
    assert config.train.max_steps == 100 and config.puzzle.gap == 21 and "gap 21 (paper table: Sec. 4.3" in line


def test_latent_paper_dataset_without_vae_is_refused(layout):
    args = train_video.get_parser().parse_args(["--dataset", "ucf101", "--data-dir", str(layout("ucf101"))])
    with pytest.raises(UserError, match=r"^--dataset ucf101 with the paper's settings diffuses 256 px frames as Stable "
                                        r"Diffusion latents: pass --vae FOLDER"):
        train_video.make_config(args)


def test_resume_refuses_paper_and_loads_no_empty_scaler(tmp_path):
    train_image_run("--grid", "2", "--piece-size", "8", "--batch-size", "2", "--max-steps", "1", "--eval-every", "0",
                    "--workers", "0", "--out", tmp_path)
    with pytest.raises(UserError, match="--paper shapes a fresh run and cannot be given with --resume"):
        train_image_run("--resume", tmp_path / "ckpt.pt", "--no-paper")
    with pytest.raises(UserError, match="--init starts a new run .* give one"):
        train_image_run("--resume", tmp_path / "ckpt.pt", "--init", tmp_path / "ckpt.pt")
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert ckpt["scaler"] == {}                              # fp32: the scaler was off
    config = load_checkpoint(tmp_path / "ckpt.pt")["config"]
    model = jpdvt.kind_of(config).network(config.model)
    opt = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cpu", enabled=True)       # as a resume with --precision fp16 on CUDA would have
    ema = jpdvt.kind_of(config).network(config.model)
    assert resume_or_init(ckpt, None, config, objects=(model, ema, opt, scaler)) == (1, None)


def test_fine_tune_keeps_the_record_of_the_run_it_continues(tmp_path, capsys):
    data = tmp_path / "photos"
    (data / "train").mkdir(parents=True)
    for i in range(30):
        photo(data / "train" / f"{i}.png", seed=i, size=(64, 64))
    base = ["--grid", "2", "--piece-size", "8", "--batch-size", "2", "--max-steps", "1", "--eval-puzzles", "1",
            "--eval-steps", "1", "--workers", "0"]
    train_image_run(*base, "--dataset", "folder", "--data-dir", data, "--out", tmp_path / "a")
    train_image_run(*base, "--init", tmp_path / "a" / "ckpt.pt", "--out", tmp_path / "b")     # then on shapes
    record = torch.load(tmp_path / "b" / "ckpt.pt", weights_only=True)["data"]
    assert record["splits"] == [] and record["before"]["splits"] == ["train"]
    flags = ["--dataset", "folder", "--data-dir", data, "--split", "val", "--num-puzzles", "1", "--steps", "1"]
    assert sample_run("--ckpt", tmp_path / "b" / "ckpt.pt", *flags, "--out", tmp_path / "s")["split_seen"] is False
    capsys.readouterr()
    m = sample_run("--ckpt", f"{ROOT}/checkpoints/image-shapes-3x3.pt", *flags, "--out", tmp_path / "s")
    assert m["split_seen"] is False and "training files" not in capsys.readouterr().out   # trained on shapes


def test_resume_refuses_a_data_folder_with_other_training_files(tmp_path):
    """--data-dir may name where the same photos moved, not other photos: the training stream stays the run's."""
    from PIL import Image
    rng = np.random.default_rng(0)
    for name, n in (("data", 6), ("moved", 6), ("other", 7)):
        for split, count in (("train", n), ("val", 2), ("test", 2)):
            (tmp_path / name / split).mkdir(parents=True)
            for i in range(count):
                pixels = (rng.random((32, 32, 3)) * 255).astype(np.uint8) if name != "moved" else None
                path = tmp_path / name / split / f"{i}.png"
                if name == "moved":
                    path.write_bytes((tmp_path / "data" / split / f"{i}.png").read_bytes())
                else:
                    Image.fromarray(pixels).save(path)
    flags = ["--dataset", "folder", "--grid", "2", "--piece-size", "8", "--batch-size", "4", "--eval-every", "0",
             "--eval-puzzles", "2", "--eval-steps", "2", "--workers", "0"]
    train_image_run(*flags, "--data-dir", tmp_path / "data", "--max-steps", "1", "--out", tmp_path / "run")
    ckpt = tmp_path / "run" / "ckpt.pt"
    with pytest.raises(UserError, match=r"^--data-dir .*other holds other training files \(7\) than the checkpoint "
                                        r"trained on \(6\): a resumed run keeps its training stream"):
        train_image_run("--resume", ckpt, "--data-dir", tmp_path / "other", "--max-steps", "2")
    train_image_run("--resume", ckpt, "--data-dir", tmp_path / "moved", "--max-steps", "2")
    assert load_checkpoint(ckpt)["step"] == 2 and "before" not in load_checkpoint(ckpt)["data"]


def test_resume_refuses_an_autoencoder_for_a_pixel_run():
    """A pixel run cannot resume on latents: --vae is refused, in one sentence (its network reads pixels)."""
    from plumbing.checkpoint import Config
    from plumbing.flags import resumed
    from puzzles import VideoConfig
    from train import TrainConfig
    from unet3d import UNetConfig
    config = Config(puzzle=VideoConfig(), model=UNetConfig(), train=TrainConfig())
    with pytest.raises(UserError, match="^--vae may only name where a latent run's autoencoder moved"):
        resumed(config, {"vae": "/models/sd-vae"}, step=1)


def test_sampling_refuses_another_autoencoder(tmp_path):
    """A latent checkpoint solved with --vae naming another autoencoder than the one it trained with is refused in one
    sentence, before the autoencoder loads (so without diffusers)."""
    from sources.vae import folder_digest
    for name, weights in (("vae", b"1234"), ("other", b"1235")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "diffusion_pytorch_model.safetensors").write_bytes(weights)
    ckpt = torch.load(f"{ROOT}/checkpoints/video-digits-5x4.pt", weights_only=True)
    ckpt["config"]["puzzle"]["vae"] = str(tmp_path / "vae")
    ckpt["data"] = {"splits": [], "files": 0, "digest": None, "vae": folder_digest(tmp_path / "vae")}
    torch.save(ckpt, tmp_path / "latent.pt")
    with pytest.raises(UserError, match=r"^--vae .*other holds another autoencoder than the one this checkpoint "):
        sample_run("--ckpt", tmp_path / "latent.pt", "--vae", tmp_path / "other", "--out", tmp_path / "s")


def test_resume_refuses_another_autoencoder(tmp_path):
    """--vae may name where the same autoencoder moved, not another one: the latents, and so the training stream, stay
    the run's (the record is checked without loading the autoencoder, so without diffusers)."""
    from types import SimpleNamespace

    from plumbing.checkpoint import training_files
    for name, weights in (("vae", b"1234"), ("moved", b"1234"), ("other", b"1235")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
        (tmp_path / name / "diffusion_pytorch_model.safetensors").write_bytes(weights)
    at = lambda name: SimpleNamespace(data_dir=None, vae=str(tmp_path / name))     # noqa: E731
    first = training_files(None, at("vae"), before=None, resuming=False)
    assert first["vae"] and first["splits"] == []
    assert training_files(None, at("moved"), before=first, resuming=True) == first
    with pytest.raises(UserError, match=r"^--vae .*other holds another autoencoder than the one the checkpoint "
                                        r"trained with: a resumed run keeps its training stream"):
        training_files(None, at("other"), before=first, resuming=True)
    assert training_files(None, at("other"), before=first, resuming=False)["before"] == first     # --init: a new run
    (tmp_path / "moved" / ".cache").mkdir()                   # a download's cache files are not the autoencoder
    (tmp_path / "moved" / ".cache" / "x.metadata").write_text("downloaded today")
    unrecorded = {k: v for k, v in first.items() if k != "vae"}
    assert training_files(None, at("moved"), before=unrecorded, resuming=True) == first      # now recorded
