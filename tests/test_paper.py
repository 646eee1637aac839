"""The paper's own paths: the README's paper commands build the paper's settings (configs/paper.py), and a short run of
each trains and samples on a miniature fixture in the dataset's real layout; resume and torchrun as researchers use
them."""
import os
import re
import shlex
from dataclasses import fields, replace
from types import SimpleNamespace

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from conftest import CHELSEA, COFFEE, ROOT, sample_run, train_image_run, train_video_run
from PIL import Image

import configs.paper as paper
import dit
import train_image
import train_video
import unet3d
from config import load_checkpoint
from plumbing.cli import UserError, user_errors
from puzzles import puzzle_set
from sources.files import HELD_OUT, TEST_FRACTION, VAL_FRACTION, band, hashed_split
from train import load_state
from unet3d import UNet3D

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


LAYOUTS = {"imagenet": imagenet, "folder": imagenet, "jpwleg3": jpwleg3, "movingmnist": mnist_seq,
           "clevrer": video_folder, "ucf101": ucf101, "qst": video_folder}


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
    text = open(f"{ROOT}/docs/training.md").read()
    section = text[text.index("## Reproducing the paper on GPUs"):]
    section = section[:section.index("\n## ", 4)]
    commands = []
    for line in re.findall(r"^(?:torchrun .*?|python) (train_\w+\.py .*)$", section, flags=re.M):
        script, *flags = shlex.split(line.split("#")[0])
        commands.append((script, flags))
    return commands


def flag(flags, name):
    return flags[flags.index(name) + 1] if name in flags else None


def model_name(module, model):
    """The name in dit.CONFIGS or unet3d.CONFIGS of a Config's network, the settings make_config fits to the data
    aside."""
    configs, fitted = ((dit.CONFIGS, ("piece_size", "patch_size", "codes", "code_dim")) if module is train_image else
                       (unet3d.CONFIGS, ("in_channels", "frames_per_piece")))
    return next(name for name, c in configs.items() if replace(c, **{k: getattr(model, k) for k in fitted}) == model)


# ----------------------------------------------------------------------------- the README's commands


def test_readme_lists_every_paper_experiment():
    commands = readme_paper_commands()
    datasets = [flag(f, "--dataset") for _, f in commands]
    assert set(datasets) == {"imagenet", "folder", "jpwleg3", "movingmnist", "clevrer", "ucf101", "qst"}
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
    config = module.make_config(args)
    table = (paper.IMAGE if module is train_image else paper.VIDEO)[dataset]
    for name, (value, _) in table.items():
        if name in ("epochs", "vae") or f"--{name.replace('_', '-')}" in flags:
            continue
        have = {"model": model_name(module, config.model), "prediction": config.prediction,
                "patch_size": config.model.patch_size, "codes": getattr(config.model, "codes", None),
                "code_dim": getattr(config.model, "code_dim", None),
                **{f.name: getattr(config.train, f.name) for f in fields(config.train)},
                **{f.name: getattr(config.puzzle, f.name) for f in fields(config.puzzle)}}[name]
        assert have == value, (name, have, value)
    if module is train_image:                                 # 300 epochs of the training split at batch 256
        files = len(puzzle_set(config.puzzle, "train", 0).files)
        assert config.train.max_steps == -(-300 * files // 256)
        assert config.model.hidden == 768 and config.model.depth == 12 and config.model.heads == 12
    else:
        assert config.model.channels == (64, 128, 256, 512) and config.model.heads == 8
        if vae:
            assert config.puzzle.vae == vae and config.model.in_channels == 4 and config.puzzle.size == 256
    assert int(flag(flags, "--pieces") or 0) == getattr(config.puzzle, "pieces", 0)


def test_flags_override_the_paper_and_no_paper_turns_it_off(layout):
    data = layout("imagenet")
    config = train_image.make_config(train_image.get_parser().parse_args(
        ["--dataset", "imagenet", "--data-dir", str(data), "--lr", "3e-4", "--model", "tiny"]))
    assert config.train.lr == 3e-4 and config.model.hidden == 128 and config.prediction == "x0"
    assert config.puzzle.anchor and (config.model.codes, config.model.code_dim) == ("token", 8)
    assert config.train.ema_decay == 0.9999 and config.train.batch_size == 256   # the authors' EMA, the paper's batch
    config = train_image.make_config(train_image.get_parser().parse_args(     # the released code's protocol
        ["--dataset", "imagenet", "--data-dir", str(data), "--no-anchor"]))
    assert not config.puzzle.anchor and config.train.lr == 1e-4
    config = train_image.make_config(train_image.get_parser().parse_args(
        ["--dataset", "imagenet", "--data-dir", str(data), "--no-paper"]))            # the tiny CPU recipe
    assert config.prediction == "x0" and not config.puzzle.anchor and config.model.hidden == 128
    assert (config.puzzle.piece_size, config.puzzle.gap) == train_image.PIECES["imagenet"]
    assert (config.train.batch_size, config.train.lr, config.train.ema_decay) == (64, 2e-3, 0.999)
    config = train_image.make_config(train_image.get_parser().parse_args(    # a folder of photos: Table 3's 150 pieces
        ["--dataset", "folder", "--data-dir", str(data), "--paper"]))
    assert (config.puzzle.grid, config.puzzle.piece_size, config.puzzle.gap) == ((10, 15), 64, 5)
    with pytest.raises(UserError, match="--paper: the paper has no experiment on --dataset shapes"):
        train_image.make_config(train_image.get_parser().parse_args(["--dataset", "shapes", "--paper"]))


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
    first = log.splitlines()[0]                               # the resolved settings: the table's where no flag is
    assert first.startswith("settings: ") and "; ema_decay 0.9999; " in first and "; lr 0.0001; " in first
    assert first.endswith("; prediction x0") and "final step 2" in log
    m = sample_run("--ckpt", tmp_path / "run" / "ckpt.pt", "--num-puzzles", "2", "--steps", "2", "--out",
                   tmp_path / "s")
    assert m["split"] == "test" and m["num_puzzles"] >= 1 and m["dataset"] == dataset


# ----------------------------------------------------------------------------- resume, as the README says


def test_resume_takes_only_longer_runs_and_refuses_any_other_setting(tmp_path):
    """--resume continues with the checkpoint's settings whole: only --max-steps, the checks' intervals, --data-dir
    (tests/test_reliability.py) and how the process runs may be given; any other flag is refused, naming it, even with
    the checkpoint's own value."""
    flags = ["--grid", "2", "--piece-size", "8", "--batch-size", "4", "--eval-every", "0", "--workers", "0",
             "--warmup", "0"]
    train_image_run(*flags, "--max-steps", "2", "--out", tmp_path)          # constant: a longer run keeps its curve
    ckpt = tmp_path / "ckpt.pt"
    with pytest.raises(UserError, match=r"^--lr cannot be given with --resume: a resumed run keeps its checkpoint's "
                                        r"settings; drop it, or start a new run from its weights with --init$"):
        train_image_run("--resume", ckpt, "--lr", "0.01")
    for refused in (["--lr", "0.002"], ["--model", "small"], ["--anchor"], ["--grid", "2"], ["--precision", "fp32"],
                    ["--accum", "2"], ["--no-paper"], ["--seed", "0"]):
        name = refused[0].replace("--no-", "--")
        with pytest.raises(UserError, match=f"^{name} cannot be given with --resume"):
            train_image_run("--resume", ckpt, *refused)
    train_image_run("--resume", ckpt, "--max-steps", "4", "--ckpt-every", "3", "--eval-every", "0", "--log-every", "1",
                    "--workers", "0", "--device", "cpu")
    log = (tmp_path / "log.txt").read_text()                  # --out: the checkpoint's folder, its log continued
    settings = [line for line in log.splitlines() if line.startswith("settings: ")]
    assert len(settings) == 2 and "; max_steps 2; " in settings[0] and "; max_steps 4; " in settings[1]
    assert settings[0].replace("max_steps 2", "max_steps 4").replace("ckpt_every 500", "ckpt_every 3") == settings[1]
    ck = load_checkpoint(ckpt)
    assert (ck["config"].train.max_steps, ck["config"].train.ckpt_every, ck["step"]) == (4, 3, 4)
    assert "step 3 loss" in log and "step 4 loss" in log


# ----------------------------------------------------------------------------- torchrun: the global batch


def test_each_torchrun_process_refuses_a_batch_that_does_not_split(tmp_path, monkeypatch, capsys):
    """What each of 2 torchrun processes does with --batch-size 3 (here one process told it is rank 1 of 2; torchrun's
    own launch: tests/test_train.py): train.py refuses before a step, user_errors leaves the process group and prints
    one line, exit code 2."""
    import plumbing.cli as cli
    import train
    monkeypatch.setenv("OMP_NUM_THREADS", "1")                     # as torchrun sets it
    monkeypatch.setattr(train, "setup_distributed", lambda device: (1, 2, torch.device("cpu")))
    left = []
    monkeypatch.setattr(cli, "end_process_group", lambda: left.append(True))
    args = train_image.get_parser().parse_args(["--grid", "2", "--piece-size", "8", "--max-steps", "1", "--eval-every",
                                                "0", "--workers", "0", "--device", "cpu", "--batch-size", "3",
                                                "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as stop, cli.user_errors():
        train_image.main(args)
    message = ("--batch-size 3 is the global batch and must split evenly into 2 process(es) x --accum 1 "
               "micro-batches; use a multiple of 2")
    assert stop.value.code == 2 and left == [True]
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {message}"]
    assert not os.path.exists(tmp_path / "ckpt.pt")


def test_fp16_on_cpu_is_refused(tmp_path, capsys):
    """In process, as train_image.py's __main__ runs it (user_errors: one line, exit code 2; a subprocess's own launch:
    tests/test_reliability.py)."""
    args = train_image.get_parser().parse_args(["--precision", "fp16", "--device", "cpu", "--max-steps", "1",
                                                "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as stop, user_errors():
        train_image.main(args)
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(lines) == 1
    assert lines[0].startswith("error: --precision fp16 needs a CUDA device")


# ----------------------------------------------------------------------------- where a model's data is


def test_shipped_checkpoint_finds_its_data_from_any_folder(tmp_path, monkeypatch):
    """The shipped photo checkpoints name their folder, photos (no developer's path): a copy in a checkout with that
    folder at its root (crops of the shipped photos, docs/PHOTOS.md) finds it from another working folder."""
    ck = torch.load(f"{ROOT}/checkpoints/image-photos-3x3.pt", weights_only=True)
    assert ck["config"]["puzzle"]["data_dir"] == "photos"
    data = tmp_path / "work" / "jpdvt" / "photos"
    for split, n in (("train", 4), ("val", 2), ("test", 2)):
        (data / split).mkdir(parents=True)
        for i in range(n):
            img = Image.open((COFFEE, CHELSEA)[i % 2]).convert("RGB")
            x, y = 40 * i + 60 * (split != "train"), 20 * i + 40 * (split == "test")
            img.crop((x, y, x + 200, y + 200)).save(data / split / f"{split}{i}.jpg")
    (tmp_path / "work" / "jpdvt" / "checkpoints").mkdir(parents=True)
    torch.save(ck, tmp_path / "work" / "jpdvt" / "checkpoints" / "photos.pt")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")                  # photos/ is not found from here
    m = sample_run("--ckpt", tmp_path / "work" / "jpdvt" / "checkpoints" / "photos.pt", "--num-puzzles", "2",
                   "--steps", "1", "--out", tmp_path / "s")
    assert m["num_puzzles"] == 2 and m["dataset"] == "folder"
    ck = torch.load(f"{ROOT}/checkpoints/image-shapes-3x3.pt", weights_only=True)
    ck["config"]["puzzle"].update(dataset="folder", data_dir="nowhere/photos")
    torch.save(ck, tmp_path / "moved.pt")
    with pytest.raises(UserError, match=r"was trained on nowhere/photos, which is found neither from here nor next "
                                        r"to the checkpoint; pass --data-dir with that folder$"):
        sample_run("--ckpt", tmp_path / "moved.pt", "--out", tmp_path / "s")


def test_a_key_of_the_paper_table_that_is_no_setting_is_refused(layout, monkeypatch):
    """A mistyped key in configs/paper.py's table (here IMAGE["imagenet"]) is refused, named, by make_config: not
    dropped without a word."""
    monkeypatch.setitem(paper.IMAGE, "imagenet", {**paper.IMAGE["imagenet"], "ema_decy": (0.9999, "a typo")})
    args = train_image.get_parser().parse_args(["--dataset", "imagenet", "--data-dir", str(layout("imagenet"))])
    with pytest.raises(UserError, match=r"^configs/paper.py's IMAGE\['imagenet'\] has a setting that jpdvt does not "
                                        r"know: ema_decy; correct or remove it$"):
        train_image.make_config(args)


def test_max_steps_replaces_the_papers_epochs(layout):
    """--max-steps given replaces the table's 300 epochs; --epochs with --max-steps is refused."""
    data = str(layout("imagenet"))
    config = train_image.make_config(train_image.get_parser().parse_args(["--dataset", "imagenet", "--data-dir", data,
                                                                          "--max-steps", "100"]))
    assert config.train.max_steps == 100 and config.puzzle.gap == 21
    with pytest.raises(UserError, match="^give --epochs or --max-steps, not both$"):
        train_image.make_config(train_image.get_parser().parse_args(["--dataset", "imagenet", "--data-dir", data,
                                                                     "--max-steps", "100", "--epochs", "2"]))


def test_latent_paper_dataset_without_vae_is_refused(layout):
    args = train_video.get_parser().parse_args(["--dataset", "ucf101", "--data-dir", str(layout("ucf101"))])
    with pytest.raises(UserError, match=r"^--dataset ucf101 with the paper's settings diffuses 256 px frames as Stable "
                                        r"Diffusion latents: pass --vae FOLDER"):
        train_video.make_config(args)


def test_resume_refuses_init_and_restores_the_optimizer(tmp_path):
    train_image_run("--grid", "2", "--piece-size", "8", "--batch-size", "2", "--max-steps", "1", "--eval-every", "0",
                    "--workers", "0", "--out", tmp_path)
    with pytest.raises(UserError, match="--init starts a new run .* give one"):
        train_image_run("--resume", tmp_path / "ckpt.pt", "--init", tmp_path / "ckpt.pt")
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert "scaler" not in ckpt                              # the fp16 scaler's scale restarts on resume
    config = load_checkpoint(tmp_path / "ckpt.pt")["config"]
    model, ema = ((dit.DiT if config.puzzle.kind == "image" else UNet3D)(config.model) for _ in range(2))
    opt = torch.optim.AdamW(model.parameters())
    assert load_state(ckpt, model, ema, opt) == 1 and opt.state_dict()["state"]         # AdamW's moments back
    for k, v in model.state_dict().items():
        assert torch.equal(v, ckpt["model"][k]) and torch.equal(ema.state_dict()[k], ckpt["ema"][k]), k
    fresh = torch.optim.AdamW(model.parameters())                     # --init: the EMA weights, a fresh optimizer
    assert load_state({"model": None, "ema": ckpt["ema"], "opt": None, "step": 0}, model, ema, fresh) == 0
    assert not fresh.state_dict()["state"] and torch.equal(next(iter(model.state_dict().values())),
                                                           next(iter(ckpt["ema"].values())))
