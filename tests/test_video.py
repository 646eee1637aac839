"""Video side: VideoPuzzles, solving with known positions, train_video.py, sample.py's video modes, bad inputs."""
import json
import shutil
from importlib.util import find_spec

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from conftest import py
from diffusion import GaussianDiffusion
from jpdvt import solve
from posenc import sequence_table
from errors import UserError
from puzzles import VideoPuzzles
from synthetic import moving_digits
from unet3d import CONFIGS, UNet3D

TINY_VIDEO = ["--size", "16", "--pieces", "3", "--frames-per-piece", "2", "--batch-size", "2", "--eval-puzzles", "2",
              "--eval-steps", "2", "--warmup", "0"]

# A stand-in for the optional `diffusers` package: an "autoencoder" that average-pools 8x8 pixels into 4 channels.
FAKE_DIFFUSERS = '''
import torch
import torch.nn.functional as F


class _Out:
    def __init__(self, **parts):
        self.__dict__.update(parts)


class AutoencoderKL(torch.nn.Module):
    config = _Out(latent_channels=4, scaling_factor=0.18215)

    @classmethod
    def from_pretrained(cls, folder, **options):
        return cls()

    def encode(self, x):                                  # (B, 3, H, W) -> latent_dist.mean (B, 4, H/8, W/8)
        z = F.avg_pool2d(x, 8)
        return _Out(latent_dist=_Out(mean=torch.cat([z, z.mean(1, keepdim=True)], 1)))

    def decode(self, z):                                  # (B, 4, h, w) -> sample (B, 3, 8h, 8w)
        return _Out(sample=F.interpolate(z[:, :3], scale_factor=8.0))
'''


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
    out = tmp_path_factory.mktemp("video_run")
    py("train_video.py", *TINY_VIDEO, "--missing", "1", "--max-steps", "6", "--ckpt-every", "3", "--eval-every", "3",
       "--out", out)
    return out / "ckpt.pt"


# ----------------------------------------------------------------------------- datasets

def test_digits_puzzles_anchor_missing_and_splits():
    train = VideoPuzzles("digits", "train", pieces=5, frames_per_piece=4, size=32, missing=2)
    test = VideoPuzzles("digits", "test", pieces=5, frames_per_piece=4, size=32, missing=2)
    item = test[0]
    assert item["content"].shape == (5, 4, 1, 32, 32)
    assert item["content"].min() >= -1 and item["content"].max() <= 1 and item["content"].max() > 0
    assert item["order"][0] == 0 and sorted(item["order"].tolist()) == list(range(5))   # the anchor stays first
    assert all(test[i]["missing"].sum() == 2 and not test[i]["missing"][0] for i in range(5))  # exactly K at test
    counts = {int(train[i]["missing"].sum()) for i in range(30)}
    assert counts == {0, 1, 2} and not any(train[i]["missing"][0] for i in range(30))  # 0..K in training
    assert torch.equal(train[3]["content"], VideoPuzzles("digits", "train", 5, 4, 32, missing=2)[3]["content"])
    assert not torch.equal(train[3]["content"], test[3]["content"])                     # disjoint streams
    rgb = VideoPuzzles("digits", "test", 3, 2, 16, channels=3, frame_stride=2)[0]
    assert rgb["content"].shape == (3, 2, 3, 16, 16) and not rgb["missing"].any()


def test_curriculum_grows_the_piece_count():
    train = VideoPuzzles("digits", "train", 6, 2, 16, missing=3, curriculum=(3, 4, 2))   # 4 steps of 2 puzzles
    counts = [len(train[i]["order"]) for i in range(12)]
    assert counts == [3, 3, 3, 3, 4, 4, 5, 5, 6, 6, 6, 6]
    assert all(train[i]["missing"].sum() <= len(train[i]["order"]) - 2 for i in range(12))
    test = VideoPuzzles("digits", "test", 6, 2, 16, curriculum=(3, 4, 2))
    assert len(test[0]["order"]) == 6                                            # test puzzles: all pieces


def test_movingmnist_split_and_resize(tmp_path):
    data = np.zeros((20, 10, 64, 64), np.uint8)
    data[:, :, 10:20, 10:20] = np.arange(10, dtype=np.uint8)[None, :, None, None] * 20 + 20  # video v: 20 + 20v
    np.save(tmp_path / "mnist_test_seq.npy", data)
    train = VideoPuzzles("movingmnist", "train", 5, 4, 64, data_dir=str(tmp_path))
    test = VideoPuzzles("movingmnist", "test", 5, 4, 32, missing=1, data_dir=str(tmp_path))
    assert (len(train), len(test)) == (9, 1)                                            # 90% / 10%
    assert train[2]["content"].max() == pytest.approx(60 / 255 * 2 - 1)
    item = test[0]
    assert item["content"].shape == (5, 4, 1, 32, 32) and item["missing"].sum() == 1
    assert item["content"].max() == pytest.approx(200 / 255 * 2 - 1, abs=0.05)  # the last video (bicubic overshoot)
    with pytest.raises(UserError, match="fewer than the 40"):
        VideoPuzzles("movingmnist", "test", 5, 4, 64, frame_stride=2, data_dir=str(tmp_path))


def test_video_folder_skips_unreadable_and_short(tmp_path):
    (tmp_path / "train" / "frames").mkdir(parents=True)
    (tmp_path / "test").mkdir()
    write_clip(tmp_path / "train" / "a.gif")
    write_clip(tmp_path / "train" / "short.gif", frames=4)
    (tmp_path / "train" / "broken.gif").write_bytes(b"not a gif")
    for t, frame in enumerate(moving_digits(np.random.default_rng(0), 8, 24)):
        iio.imwrite(tmp_path / "train" / "frames" / f"{t}.png", (frame * 255).astype(np.uint8))
    write_clip(tmp_path / "test" / "b.gif", frames=6)
    train = VideoPuzzles("videos", "train", 3, 2, 16, channels=3, data_dir=str(tmp_path))
    assert len(train) == 4
    items = [train[i] for i in range(len(train))]
    assert all(it["content"].shape == (3, 2, 3, 16, 16) for it in items)
    assert train.skipped == {str(tmp_path / "train" / "broken.gif"), str(tmp_path / "train" / "short.gif")}
    assert VideoPuzzles("videos", "test", 3, 2, 16, data_dir=str(tmp_path))[0]["content"].shape == (3, 2, 1, 16, 16)
    with pytest.raises(UserError, match="none of the 1 test videos"):
        VideoPuzzles("videos", "test", 4, 2, 16, data_dir=str(tmp_path))[0]                   # 6 frames < 8


# ----------------------------------------------------------------------------- solving with known positions

def test_solve_with_all_positions_known_generates_only_missing():
    torch.manual_seed(0)
    model = UNet3D(CONFIGS["tiny"]).eval()                    # untrained: the masking alone must hold
    content = torch.rand(2, 5, 4, 1, 16, 16) * 2 - 1
    missing = torch.zeros(2, 5, dtype=torch.bool)
    missing[:, [1, 3]] = True
    batch = {"content": content, "order": torch.arange(5).expand(2, -1), "missing": missing}
    pos, out = solve(model, GaussianDiffusion(1000, "x0"), batch, sequence_table(5), True, steps=2,
                     known=torch.ones_like(missing))
    assert (pos == np.arange(5)).all()                        # every code given: positions are the true ones
    assert torch.equal(out[~missing], content[~missing])      # given pieces untouched
    assert not torch.equal(out[missing], content[missing])    # missing pieces generated


def test_solve_assigns_on_the_mean_distance_of_several_samples():
    table = sequence_table(4)
    draws = [table[[1, 0, 2, 3]], table, table + 0.01]        # the first sample swaps pieces 0 and 1

    class Draws:                                              # a diffusion whose samples are the draws above
        def sample(self, fn, given, masks, *args, **kw):
            return {"pos": draws[self.calls.pop(0)][None], "content": given["content"] + len(self.calls)}

    batch = {"content": torch.zeros(1, 4, 1, 1, 8, 8), "order": torch.arange(4)[None],
             "missing": torch.zeros(1, 4, dtype=torch.bool)}
    for samples, want in [(1, [1, 0, 2, 3]), (3, [0, 1, 2, 3])]:
        diffusion = Draws()
        diffusion.calls = list(range(samples))
        pos, content = solve(None, diffusion, batch, table, False, samples=samples)
        assert pos.tolist() == [want] and not diffusion.calls
        assert torch.equal(content, batch["content"] + samples - 1)   # the first sample's content


# ----------------------------------------------------------------------------- scripts

def test_training_run_writes_checkpoint_and_log(video_ckpt):
    ck = torch.load(video_ckpt, weights_only=True)
    assert set(ck) == {"config", "model", "ema", "opt", "step"} and ck["step"] == 6
    cfg = ck["config"]
    assert cfg["kind"] == "video" and cfg["anchor"] and (cfg["pieces"], cfg["frames_per_piece"]) == (3, 2)
    assert cfg["model"]["in_channels"] == 1 and cfg["model"]["frames_per_piece"] == 2 and cfg["vae"] is None
    log = (video_ckpt.parent / "log.txt").read_text()
    assert "steps/s" in log and "eval step 3 kendall" in log and "final step 6 kendall" in log


def test_resume_video(video_ckpt, tmp_path):
    shutil.copy(video_ckpt, tmp_path / "ckpt.pt")
    py("train_video.py", "--resume", tmp_path / "ckpt.pt", "--max-steps", "7", "--eval-every", "0", "--out", tmp_path)
    ck = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert ck["step"] == 7 and ck["config"]["missing"] == 1 and ck["config"]["size"] == 16


def test_resume_video_is_exact(tmp_path):
    flags = [*TINY_VIDEO, "--missing", "1", "--eval-every", "0", "--ckpt-every", "100", "--curriculum", "2", "3"]
    py("train_video.py", *flags, "--max-steps", "4", "--out", tmp_path / "a")
    py("train_video.py", *flags, "--max-steps", "2", "--out", tmp_path / "b")
    py("train_video.py", "--resume", tmp_path / "b" / "ckpt.pt", "--max-steps", "4", "--out", tmp_path / "b")
    a, b = (torch.load(tmp_path / r / "ckpt.pt", weights_only=True) for r in "ab")
    assert a["step"] == b["step"] == 4
    for part in ("model", "ema"):
        for k in a[part]:
            assert torch.allclose(a[part][k], b[part][k], atol=1e-5), (part, k)


def test_sample_metrics_and_gif(video_ckpt, tmp_path):
    out = py("sample.py", "--ckpt", video_ckpt, "--num-puzzles", "3", "--steps", "2", "--batch-size", "2",
             "--samples", "2", "--out", tmp_path).stdout
    assert "mean Kendall distance" in out and "x2 samples" in out
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert {"kendall", "exact", "num_puzzles", "sec_per_puzzle", "dataset", "pieces", "frames_per_piece", "missing",
            "sampler", "steps", "samples", "assign", "seed", "ckpt", "train_step"} <= set(m)
    assert m["samples"] == 2 and 0 <= m["kendall"] <= 1 and 0 <= m["exact"] <= 1 and m["num_puzzles"] == 3 and m["missing"] == 1
    assert (m["dataset"], m["pieces"], m["frames_per_piece"], m["train_step"]) == ("digits", 3, 2, 6)
    gif = iio.imread(tmp_path / "examples.gif", index=None)
    assert gif.shape == (6, 14 + 3 * 102 + 6, 3 * 102 + 6, 3)  # 6 frames; 3 puzzles x 3 columns of 96 px frames
    assert red_pixels(tmp_path / "examples.gif").sum() > 0     # generated pieces are marked


def test_sample_own_clip(video_ckpt, tmp_path):
    clip = write_clip(tmp_path / "clip.gif", frames=9)
    out = py("sample.py", "--ckpt", video_ckpt, "--video", clip, "--steps", "2", "--out", tmp_path).stdout
    assert "predicted positions" in out and "Kendall distance" in out
    assert iio.imread(tmp_path / "clip_solved.gif", index=None).shape[0] == 6
    assert red_pixels(tmp_path / "clip_solved.gif").sum() == 0  # no missing pieces by default


def test_superres(video_ckpt, tmp_path):
    py("sample.py", "--ckpt", video_ckpt, "--superres", "1", "--num-puzzles", "2", "--steps", "2", "--out", tmp_path)
    red = red_pixels(tmp_path / "superres.gif")
    assert len(red) == 6 and red[[0, 1, 4, 5]].sum() == 0 and red[[2, 3]].min() > 0  # piece 1 generated, marked
    clip = write_clip(tmp_path / "low.gif", frames=4)          # 2 pieces of 2 frames: the low-rate input
    py("sample.py", "--ckpt", video_ckpt, "--video", clip, "--superres", "1", "--steps", "2", "--out", tmp_path)
    assert iio.imread(tmp_path / "low_superres.gif", index=None).shape[0] == 6


def test_latent_diffusion_with_autoencoder(tmp_path):
    (tmp_path / "lib" / "diffusers").mkdir(parents=True)
    (tmp_path / "lib" / "diffusers" / "__init__.py").write_text(FAKE_DIFFUSERS)
    (tmp_path / "lib" / "diffusers" / "utils.py").write_text(
        "class logging:\n    @staticmethod\n    def set_verbosity_error():\n        pass\n")
    (tmp_path / "vae").mkdir()
    env = {"PYTHONPATH": str(tmp_path / "lib")}
    py("train_video.py", *TINY_VIDEO, "--size", "128", "--missing", "1", "--max-steps", "2", "--eval-every", "0",
       "--vae", tmp_path / "vae", "--out", tmp_path / "run", env=env)
    cfg = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)["config"]
    assert cfg["model"]["in_channels"] == 4 and cfg["channels"] == 3 and cfg["vae"] == str(tmp_path / "vae")
    py("sample.py", "--ckpt", tmp_path / "run" / "ckpt.pt", "--num-puzzles", "2", "--steps", "2",
       "--out", tmp_path / "s", env=env)
    assert iio.imread(tmp_path / "s" / "examples.gif", index=None).shape[0] == 6   # decoded back to frames


# ----------------------------------------------------------------------------- bad input

BAD_INPUTS = {
    "pieces 1": (["train_video.py", "--pieces", "1"], "--pieces"),
    "frames-per-piece 0": (["train_video.py", "--frames-per-piece", "0"], "--frames-per-piece"),
    "missing >= pieces-1": (["train_video.py", "--pieces", "3", "--missing", "2"], "--missing"),
    "missing < 0": (["train_video.py", "--missing", "-1"], "--missing"),
    "size not divisible": (["train_video.py", "--size", "20"], "multiple of 16"),
    "npy of the wrong shape": (["train_video.py", "--dataset", "movingmnist", "--data-dir", "{tmp}/bad.npy"],
                               "shape"),
    "empty video folder": (["train_video.py", "--dataset", "videos", "--data-dir", "{tmp}/empty"], "no train videos"),
    "unreadable video folder": (["train_video.py", "--dataset", "videos", "--data-dir", "{tmp}/broken"],
                                "none of the 1 test videos"),
    "video too short": (["sample.py", "--ckpt", "{video_ckpt}", "--video", "{tmp}/short.gif"], "fewer than"),
    "superres that does not fit": (["sample.py", "--ckpt", "{video_ckpt}", "--superres", "2"], "--superres 2"),
    "image checkpoint with --video": (["sample.py", "--ckpt", "{image_ckpt}", "--video", "{tmp}/short.gif"],
                                      "video checkpoint"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_one_line_error(case, tmp_path, request):
    np.save(tmp_path / "bad.npy", np.zeros((10, 20, 64, 64), np.uint8))
    (tmp_path / "empty").mkdir()
    for split in ("train", "test"):
        (tmp_path / "broken" / split).mkdir(parents=True)
        (tmp_path / "broken" / split / "x.gif").write_bytes(b"not a gif")
    write_clip(tmp_path / "short.gif", frames=5)
    args, expected = BAD_INPUTS[case]
    names = {"tmp": tmp_path}
    names.update({k: request.getfixturevalue(k) for k in ("video_ckpt", "image_ckpt") if any(k in a for a in args)})
    proc = py(*[a.format(**names) for a in args], check=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(find_spec("diffusers") is not None, reason="diffusers is installed")
def test_vae_without_diffusers_says_what_to_install(tmp_path):
    proc = py("train_video.py", "--vae", tmp_path, "--size", "128", check=False)
    assert proc.returncode != 0 and proc.stderr.strip() == "error: --vae needs the optional diffusers package: " \
                                                           "pip install diffusers"
