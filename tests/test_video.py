"""Video side: VideoPuzzles, solving with known positions, train_video.py, sample.py and python -m solving.own on clips
(super-resolution), bad inputs."""
import json
from dataclasses import replace
from importlib.util import find_spec

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from conftest import DIGITS_CKPT, own_run, sample_run, tiny_run, train_video_run
from PIL import Image

import train_video
from config import TrainConfig, load_checkpoint
from diffusion import GaussianDiffusion
from jpdvt import SampleOptions, anchor_pieces, solve
from plumbing.cli import UserError, user_errors
from posenc import sequence_table
from puzzles import ENDLESS, VideoConfig, VideoPuzzles, puzzle_set
from sources.synthetic import moving_digits
from train import step_batches
from unet3d import CONFIGS, UNet3D

TINY_VIDEO = ["--size", "16", "--pieces", "3", "--frames-per-piece", "2", "--batch-size", "2", "--eval-puzzles", "2",
              "--eval-steps", "2", "--warmup", "0", "--workers", "0"]


def write_clip(path, frames=12, size=40, seed=3):
    """A moving-digits GIF of `frames` frames."""
    clip = (moving_digits(np.random.default_rng(seed), frames, size) * 255).astype(np.uint8)
    iio.imwrite(path, clip, duration=100, loop=0)
    return path


def red_pixels(gif):
    """Red-border pixels per frame of a GIF (the digits are grey, so only marks are red)."""
    g = iio.imread(gif, index=None).astype(int)
    return ((g[..., 0] > 200) & (g[..., 1] < 60) & (g[..., 2] < 60)).sum(axis=(1, 2))


@pytest.fixture(scope="module")
def video_ckpt(tmp_path_factory):
    return tiny_run(tmp_path_factory, train_video_run, TINY_VIDEO, steps=4)


def digits(**kw):
    return VideoConfig(**{"pieces": 5, "frames_per_piece": 4, "size": 32, **kw})


# ----------------------------------------------------------------------------- datasets

def test_digits_puzzles_anchor_missing_and_splits():
    train, test = VideoPuzzles(digits(missing=2), "train", 0), puzzle_set(digits(missing=2), "test", 0)
    item = test[0]
    assert item["content"].shape == (5, 4, 1, 32, 32)
    assert item["content"].min() >= -1 and item["content"].max() <= 1 and item["content"].max() > 0
    assert item["true_pos"][0] == 0 and sorted(item["true_pos"].tolist()) == list(range(5))  # the anchor stays first
    assert all(test[i]["missing"].sum() == 2 and not test[i]["missing"][0] for i in range(5))  # exactly K at test
    counts = {int(train[i]["missing"].sum()) for i in range(30)}
    assert counts == {0, 1, 2} and not any(train[i]["missing"][0] for i in range(30))  # 0..K in training
    assert torch.equal(train[3]["content"], VideoPuzzles(digits(missing=2), "train", 0)[3]["content"])
    assert not torch.equal(train[3]["content"], test[3]["content"])                     # disjoint streams
    assert not torch.equal(puzzle_set(digits(missing=2), "val", 0)[3]["content"], test[3]["content"])
    rgb = VideoPuzzles(digits(pieces=3, frames_per_piece=2, size=16, channels=3, frame_stride=2), "test", 0)[0]
    assert rgb["content"].shape == (3, 2, 3, 16, 16) and not rgb["missing"].any()


def test_curriculum_grows_the_piece_count():
    cfg = digits(pieces=6, frames_per_piece=2, size=16, missing=3, curriculum=(3, 4, 2))   # 4 steps of 2 puzzles
    train = puzzle_set(cfg, "train", 0)
    counts = [len(train[i]["true_pos"]) for i in range(12)]
    assert counts == [3, 3, 3, 3, 4, 4, 5, 5, 6, 6, 6, 6]
    assert all(train[i]["missing"].sum() <= len(train[i]["true_pos"]) - 2 for i in range(12))
    assert len(puzzle_set(cfg, "test", 0)[0]["true_pos"]) == 6          # test puzzles: all pieces


def test_movingmnist_split_and_resize(tmp_path):
    data = np.zeros((20, 10, 64, 64), np.uint8)                # (frames, videos, H, W), as the .npy ships
    data[:, :, 10:20, 10:20] = np.arange(10, dtype=np.uint8)[None, :, None, None] * 20 + 20  # video v: 20 + 20v
    np.save(tmp_path / "mnist_test_seq.npy", data)
    mm = VideoConfig(dataset="movingmnist", data_dir=str(tmp_path), pieces=5, frames_per_piece=4, size=64)
    train = puzzle_set(mm, "train", 0)
    val, test = (VideoPuzzles(replace(mm, size=32, missing=1), s, 0) for s in ("val", "test"))
    assert (len(train.clips.videos), len(val), len(test)) == (8, 1, 1)                     # 80% / 10% / 10%
    assert len(train) == ENDLESS                                # training: fresh puzzles of the clips, epoch by epoch
    assert train[2]["content"].max() == pytest.approx((20 + 20 * train.clips.clip_index(2)) / 255 * 2 - 1)
    item = test[0]
    assert item["content"].shape == (5, 4, 1, 32, 32) and item["missing"].sum() == 1
    assert item["content"].max() == pytest.approx(200 / 255 * 2 - 1, abs=0.05)  # the last video (bicubic overshoot)
    assert val[0]["content"].max() == pytest.approx(180 / 255 * 2 - 1, abs=0.05)
    with pytest.raises(UserError, match="fewer than the 40"):
        VideoPuzzles(replace(mm, frame_stride=2), "test", 0)


# ----------------------------------------------------------------------------- finite sets of clips

def labelled_clip(clip, frames, size=64):
    """Frames whose every pixel says which clip and frame they are: 20 * clip + frame (frame < 20)."""
    return np.stack([np.full((size, size), 20 * clip + t, np.uint8) for t in range(frames)])


def write_mnist_seq(folder, clips=12):
    """A miniature mnist_test_seq.npy in the real layout: (20 frames, clips, 64, 64) uint8."""
    data = np.stack([labelled_clip(c, 20)[:, None] for c in range(clips)], axis=1)[:, :, 0]
    np.save(folder / "mnist_test_seq.npy", data)
    return folder / "mnist_test_seq.npy"


def write_frame_folders(root, clips=4, frames=8, size=16):
    """A video folder with class subfolders: train/<class>/<clip>/NN.png frame folders, a val/ and a test/ clip."""
    for c in range(clips + 2):
        folder = root / ({clips: "val/a/x", clips + 1: "test/a/y"}.get(c) or f"train/{'ab'[c % 2]}/clip{c}")
        folder.mkdir(parents=True)
        for t, frame in enumerate(labelled_clip(c, frames, size)):
            Image.fromarray(np.repeat(frame[..., None], 3, -1)).save(folder / f"{t:02d}.png")


def decode(item):
    """(clip, first frame of the window, true_pos, missing) of a puzzle of labelled clips."""
    values = np.round((item["content"][..., 0, 0, 0].numpy() + 1) / 2 * 255).astype(int)   # (N, F)
    anchor = values[0, 0]                                       # piece 0 is the window's first piece
    return anchor // 20, anchor % 20, tuple(item["true_pos"].tolist()), tuple(item["missing"].tolist())


def epoch_puzzles(train_set, per_epoch, batch=3):
    """The training puzzles of the first two epochs, as training draws them (train.step_batches)."""
    tc = TrainConfig(batch_size=batch, max_steps=-(-2 * per_epoch // batch))
    items = [decode(train_set[i]) for b in step_batches(tc, 0) for i in b]
    return items[:per_epoch], items[per_epoch:2 * per_epoch]


@pytest.mark.parametrize("layout", ["npy", "frame folders"])
def test_finite_clips_give_fresh_puzzles_every_epoch(tmp_path, layout):
    if layout == "npy":
        write_mnist_seq(tmp_path)
        cfg = VideoConfig(dataset="movingmnist", data_dir=str(tmp_path), pieces=3, frames_per_piece=2, size=64,
                          missing=1)
        clips = 9                                               # 12 clips: 9 train, 1 val, 2 test
    else:
        write_frame_folders(tmp_path)
        cfg = VideoConfig(dataset="videos", data_dir=str(tmp_path), pieces=3, frames_per_piece=2, size=16,
                          channels=3, missing=1)
        clips = 4
    first, second = epoch_puzzles(puzzle_set(cfg, "train", 0), per_epoch=clips)
    per_clip = [sorted(p[0] for p in epoch) for epoch in (first, second)]
    assert per_clip[0] == per_clip[1]                           # the same clips, each as often, every epoch
    assert len(set(per_clip[0])) == clips
    assert sorted(first) != sorted(second)                      # but other windows, shuffles and missing pieces
    assert sum(a != b for a, b in zip(sorted(first), sorted(second))) >= clips // 2


def test_curriculum_follows_the_step_on_a_finite_set(tmp_path):
    write_mnist_seq(tmp_path)
    cfg = VideoConfig(dataset="movingmnist", data_dir=str(tmp_path), pieces=4, frames_per_piece=2, size=64,
                      curriculum=(2, 4, 3))                     # 2 pieces at step 0, all 4 by step 4 (batch 3)
    train = puzzle_set(cfg, "train", 0)
    tc = TrainConfig(batch_size=3, max_steps=6)
    counts = [{len(train[i]["true_pos"]) for i in b} for b in step_batches(tc, 0)]
    assert counts == [{2}, {2}, {3}, {3}, {4}, {4}]             # 9 train clips: the steps run past an epoch


def test_resume_is_exact_on_a_finite_set(tmp_path):
    write_mnist_seq(tmp_path)
    flags = [*TINY_VIDEO, "--dataset", "movingmnist", "--data-dir", tmp_path, "--missing", "1", "--eval-every", "0",
             "--ckpt-every", "100", "--batch-size", "4"]
    train_video_run(*flags, "--max-steps", "4", "--out", tmp_path / "a")        # 16 puzzles: past the 9 clips
    train_video_run(*flags, "--max-steps", "2", "--out", tmp_path / "b")
    train_video_run("--resume", tmp_path / "b" / "ckpt.pt", "--max-steps", "4")
    a, b = (torch.load(tmp_path / r / "ckpt.pt", weights_only=True) for r in "ab")
    assert a["step"] == b["step"] == 4
    for k in a["model"]:
        assert torch.allclose(a["model"][k], b["model"][k], atol=1e-5), k


def test_video_folder_skips_unreadable_and_short(tmp_path):
    (tmp_path / "train" / "frames").mkdir(parents=True)
    for split in ("val", "test"):                               # both held-out folders: train/ is all training
        (tmp_path / split).mkdir()
        write_clip(tmp_path / split / "b.gif", frames=6)
    write_clip(tmp_path / "train" / "a.gif")
    write_clip(tmp_path / "train" / "short.gif", frames=4)
    (tmp_path / "train" / "broken.gif").write_bytes(b"not a gif")
    for t, frame in enumerate(moving_digits(np.random.default_rng(0), 8, 24)):
        iio.imwrite(tmp_path / "train" / "frames" / f"{t}.png", (frame * 255).astype(np.uint8))
    folder = VideoConfig(dataset="videos", data_dir=str(tmp_path), pieces=3, frames_per_piece=2, size=16, channels=3)
    train = puzzle_set(folder, "train", 0)
    assert len(train.files) == 4
    items = [train[i] for i in range(4)]                        # the first epoch
    assert all(it["content"].shape == (3, 2, 3, 16, 16) for it in items)
    assert train.clips.skipped == {str(tmp_path / "train" / "broken.gif"), str(tmp_path / "train" / "short.gif")}
    grey = replace(folder, channels=1)
    assert puzzle_set(grey, "test", 0)[0]["content"].shape == (3, 2, 1, 16, 16)
    with pytest.raises(UserError, match="none of the 1 test videos"):
        puzzle_set(replace(grey, pieces=4), "test", 0)[0]                  # 6 frames < 8


# ----------------------------------------------------------------------------- solving with known positions

def test_solve_with_all_positions_known_generates_only_missing():
    torch.manual_seed(0)
    model = UNet3D(CONFIGS["tiny"]).eval()                    # untrained: the masking alone must hold
    content = torch.rand(2, 5, 4, 1, 16, 16) * 2 - 1
    missing = torch.zeros(2, 5, dtype=torch.bool)
    missing[:, [1, 3]] = True
    batch = {"content": content, "true_pos": torch.arange(5).expand(2, -1), "missing": missing}
    pos, out = solve(model, GaussianDiffusion(1000, "x0"), batch, sequence_table(5), SampleOptions(steps=2),
                     given=torch.ones_like(missing))
    assert (pos == np.arange(5)).all()                        # every code given: positions are the true ones
    assert torch.equal(out[~missing], content[~missing])      # given pieces untouched
    assert not torch.equal(out[missing], content[missing])    # missing pieces generated


def test_solve_assigns_on_the_mean_distance_of_several_samples():
    table = sequence_table(4)
    draws = [table[[1, 0, 2, 3]], table, table + 0.01]        # the first sample swaps pieces 0 and 1

    class Draws:                                              # a diffusion whose samples are the draws above
        def sample(self, fn, given, masks, *args, **kw):
            return {"code": draws[self.calls.pop(0)][None], "content": given["content"] + len(self.calls)}

    batch = {"content": torch.zeros(1, 4, 1, 1, 8, 8), "true_pos": torch.arange(4)[None],
             "missing": torch.zeros(1, 4, dtype=torch.bool)}
    for samples, want in [(1, [1, 0, 2, 3]), (3, [0, 1, 2, 3])]:
        diffusion = Draws()
        diffusion.calls = list(range(samples))
        pos, content = solve(None, diffusion, batch, table, SampleOptions(samples=samples), anchor_pieces(batch, False))
        assert pos.tolist() == [want] and not diffusion.calls
        assert torch.equal(content, batch["content"] + samples - 1)   # the first sample's content


# ----------------------------------------------------------------------------- scripts

def test_training_run_writes_checkpoint_and_log(video_ckpt):
    ck = torch.load(video_ckpt, weights_only=True)
    assert set(ck) == {"format", "config", "model", "ema", "opt", "step"} and ck["step"] == 4
    config = load_checkpoint(video_ckpt, "video")["config"]
    assert config.puzzle == VideoConfig(pieces=3, frames_per_piece=2, size=16, missing=1)
    assert config.puzzle.anchor and config.model.in_channels == 1 and config.model.frames_per_piece == 2
    log = (video_ckpt.parent / "log.txt").read_text()
    assert "eval step 2 kendall" in log and "final step 4 kendall" in log
    first = log.splitlines()[0]                               # RECIPE's settings where no flag is given
    assert first.startswith("settings: dataset digits; ") and "; weight_code 0.2; weight_content 0.8; " in first
    assert "; channels 1; " in first and "; model_channels (" in first          # pixel channels, U-Net widths
    assert "; lr 0.001; " in first and "; batch_size 2; " in first and "; max_steps 4; " in first


def test_resume_video_is_exact(tmp_path, monkeypatch):
    """With --curriculum and missing pieces; the curriculum's stream items per step come from the checkpoint, not
    from WORLD_SIZE at resume (set to 2 here, without torchrun, the old way would grow the pieces twice as slowly)."""
    flags = [*TINY_VIDEO, "--missing", "1", "--eval-every", "0", "--ckpt-every", "100", "--curriculum", "2", "3"]
    train_video_run(*flags, "--max-steps", "3", "--out", tmp_path / "a")
    train_video_run(*flags, "--max-steps", "1", "--out", tmp_path / "b")
    assert torch.load(tmp_path / "b" / "ckpt.pt", weights_only=True)["step"] == 1
    with pytest.raises(UserError, match="^--vae cannot be given with --resume"):   # a pixel run stays in pixels
        train_video_run("--resume", tmp_path / "b" / "ckpt.pt", "--vae", tmp_path, "--max-steps", "3")
    monkeypatch.setenv("WORLD_SIZE", "2")
    train_video_run("--resume", tmp_path / "b" / "ckpt.pt", "--max-steps", "3")     # settings from the checkpoint
    a, b = (torch.load(tmp_path / r / "ckpt.pt", weights_only=True) for r in "ab")
    assert a["step"] == b["step"] == 3 and a["config"] == b["config"]
    for part in ("model", "ema"):
        for k in a[part]:
            assert torch.allclose(a[part][k], b[part][k], atol=1e-5), (part, k)


def test_sample_metrics_and_gif(video_ckpt, tmp_path, capsys):
    m = sample_run("--ckpt", video_ckpt, "--num-puzzles", "3", "--steps", "2", "--batch-size", "2", "--samples", "2",
                   "--out", tmp_path)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("sampling: ddpm, 2 steps, 2 sample(s) averaged (ours, not the paper's), hungarian "
                             "assignment, judge none (")
    assert out[-2].startswith("3 test puzzles x 1 pass(es): mean Kendall distance")
    assert json.loads(json.dumps(m)) == json.loads((tmp_path / "metrics.json").read_text())
    assert {"kendall", "exact", "kendall_set", "exact_set", "num_puzzles", "sec_per_puzzle", "dataset", "pieces",
            "frames_per_piece", "missing", "sampler", "steps", "samples", "assign", "seed", "ckpt",
            "train_step"} <= set(m)
    assert (m["samples"], m["num_puzzles"], m["missing"]) == (2, 3, 1)
    assert (m["dataset"], m["pieces"], m["frames_per_piece"], m["train_step"]) == ("digits", 3, 2, 4)
    # with 3 pieces a clip's Kendall distance is a multiple of 1/3 and its order exact or not
    assert m["kendall"] * 9 == pytest.approx(round(m["kendall"] * 9))
    assert m["exact"] * 3 == pytest.approx(round(m["exact"] * 3))
    # generated pieces compared as a set can only agree more with the truth
    assert m["kendall_set"] <= m["kendall"] and m["exact_set"] >= m["exact"]
    gif = iio.imread(tmp_path / "examples.gif", index=None)
    assert gif.shape == (6, 14 + 3 * 102 + 6, 3 * 102 + 6, 3)  # 6 frames; 3 puzzles x 3 columns of 96 px frames
    assert red_pixels(tmp_path / "examples.gif").sum() > 0     # generated pieces are marked


def test_trained_model_orders_clips(tmp_path):
    """The shipped digits model puts most test clips in order (an untrained one would be at chance, Kendall 0.5)."""
    m = sample_run("--ckpt", DIGITS_CKPT, "--num-puzzles", "4", "--steps", "10", "--out", tmp_path)
    assert m["kendall"] <= 0.1 and m["exact"] >= 0.75, m


def test_superres_needs_a_model_trained_with_missing_pieces(tmp_path):
    with pytest.raises(UserError, match=r"^--superres generates pieces, and .*video-digits-5x4.pt trained without "
                                        r"missing pieces \(--missing 0\), so it cannot; use a video model trained "
                                        r"with --superres K or --missing K$"):
        own_run("--ckpt", DIGITS_CKPT, "--superres", "1", "--out", tmp_path)


def test_superres(video_ckpt, tmp_path):
    own_run("--ckpt", video_ckpt, "--superres", "1", "--num-puzzles", "2", "--steps", "2", "--out", tmp_path)
    red = red_pixels(tmp_path / "superres.gif")
    assert len(red) == 6 and red[[0, 1, 4, 5]].sum() == 0 and red[[2, 3]].min() > 0  # piece 1 generated, marked
    clip = write_clip(tmp_path / "low.gif", frames=4)          # 2 pieces of 2 frames: the low-rate input
    own_run("--ckpt", video_ckpt, "--video", clip, "--superres", "1", "--steps", "2", "--out", tmp_path)
    assert iio.imread(tmp_path / "low_superres.gif", index=None).shape[0] == 6


# ----------------------------------------------------------------------------- bad input

BAD_INPUTS = {
    "pieces 1": (["--pieces", "1"], "--pieces"),
    "frames-per-piece 0": (["--frames-per-piece", "0"], "--frames-per-piece"),
    "missing >= pieces-1": (["--pieces", "3", "--missing", "2"], "--missing"),
    "missing < 0": (["--missing", "-1"], "--missing"),
    "size not divisible": (["--size", "20"], "multiple of 16"),
    "curriculum": (["--curriculum", "1", "5"], "--curriculum"),
    "npy of the wrong shape": (["--dataset", "movingmnist", "--data-dir", "{tmp}/bad.npy"], "shape"),
    "empty video folder": (["--dataset", "videos", "--data-dir", "{tmp}/empty"], "empty holds no"),
    "unreadable video folder": (["--dataset", "videos", "--data-dir", "{tmp}/broken"], "none of the 1 val videos"),
}


def test_a_curriculum_longer_than_the_run_is_noted(capsys):
    """--curriculum 3 2000 with the default 300 steps would end at 4 of 10 pieces: the script says so (a run to be
    resumed longer may mean it)."""
    args = train_video.get_parser().parse_args(["--pieces", "10", "--frames-per-piece", "2", "--curriculum", "3",
                                                "2000"])
    train_video.make_config(args)
    assert ("note: --curriculum 3 2000 reaches all 10 pieces at step 2000; this run stops at --max-steps 300 with 4"
            in capsys.readouterr().out)
    args = train_video.get_parser().parse_args(["--pieces", "10", "--frames-per-piece", "2", "--curriculum", "3",
                                                "2000", "--max-steps", "5000"])
    train_video.make_config(args)
    assert "note: --curriculum" not in capsys.readouterr().out
    for first, max_steps in (("10", "300"), ("3", "2000")):   # all pieces from the start: no note; 9 at the end
        args = train_video.get_parser().parse_args(["--pieces", "10", "--curriculum", first, "2000", "--max-steps",
                                                    max_steps])
        train_video.make_config(args)
        assert ("note: --curriculum" in capsys.readouterr().out) == (first == "3")


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_train_video_bad_input(case, tmp_path, capsys):
    np.save(tmp_path / "bad.npy", np.zeros((10, 20, 64, 64), np.uint8))
    (tmp_path / "empty").mkdir()
    for split in ("train", "val", "test"):
        (tmp_path / "broken" / split).mkdir(parents=True)
        (tmp_path / "broken" / split / "x.gif").write_bytes(b"not a gif")
    flags, expected = BAD_INPUTS[case]
    args = train_video.get_parser().parse_args([f.format(tmp=tmp_path) for f in flags] + ["--out", str(tmp_path)])
    with pytest.raises(SystemExit) as stop, user_errors():
        train_video.main(args)
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines


def test_sample_video_bad_input(video_ckpt, tmp_path):
    short = write_clip(tmp_path / "short.gif", frames=3)
    with pytest.raises(UserError, match="has 3 frames at --frame-stride 1, fewer than the 4"):
        own_run("--ckpt", video_ckpt, "--video", short, "--superres", "1", "--out", tmp_path)
    with pytest.raises(UserError, match="--video names a clip to raise the frame rate of: add --superres K"):
        own_run("--ckpt", video_ckpt, "--video", short, "--out", tmp_path)
    with pytest.raises(UserError, match="--superres 2 does not fit this 3-piece checkpoint"):
        own_run("--ckpt", video_ckpt, "--superres", "2", "--out", tmp_path)


@pytest.mark.skipif(find_spec("diffusers") is not None, reason="diffusers is installed")
def test_vae_without_diffusers_says_what_to_install(tmp_path):
    with pytest.raises(UserError) as e:
        train_video_run("--vae", tmp_path, "--size", "128", "--out", tmp_path)
    assert str(e.value) == "--vae needs the optional diffusers package: pip install diffusers"
