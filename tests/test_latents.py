"""Stored latents (sources/latents.py): clips encoded once give the batches and the training that encoding every step
gives. A stand-in autoencoder (no diffusers, no data beside the checkout) runs through sources.vae.VaeCodec's code."""
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import main_of, train_video_run
from PIL import Image

import sources.latents as latents
import train_video
from config import load_checkpoint
from plumbing.cli import UserError
from puzzles import VideoPuzzles, collate
from sources.vae import VaeCodec

SIZE = 128                # the smallest --size the tiny U-Net takes with --vae: 16 x 16 latents
FLAGS = ["--dataset", "videos", "--size", str(SIZE), "--pieces", "3", "--frames-per-piece", "2", "--batch-size",
         "2", "--eval-puzzles", "2", "--eval-steps", "2", "--warmup", "0", "--workers", "0", "--no-paper"]


class StandInAutoencoder(torch.nn.Module):
    """What VaeCodec calls of a diffusers AutoencoderKL: encode(x).latent_dist (mean and a random sample), decode(z)
    .sample, config; 8x smaller frames, 4 latent channels, small random weights."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.enc = torch.nn.Conv2d(3, 8, 8, stride=8)         # mean and log-variance of 4 channels
        self.dec = torch.nn.ConvTranspose2d(4, 3, 8, stride=8)
        self.config = SimpleNamespace(latent_channels=4, scaling_factor=0.18215, shift_factor=None)

    def encode(self, x):
        mean, logvar = self.enc(x).chunk(2, dim=1)
        return SimpleNamespace(latent_dist=SimpleNamespace(
            mean=mean, sample=lambda: mean + (logvar / 2).exp() * torch.randn_like(mean)))

    def decode(self, z):
        return SimpleNamespace(sample=self.dec(z))


def stand_in_codec(folder):
    """A VaeCodec of the stand-in autoencoder (its folder holds a config.json: the store fingerprints it)."""
    codec = VaeCodec.__new__(VaeCodec)
    codec.vae = StandInAutoencoder().eval().requires_grad_(False)
    codec.channels, codec.scale, codec.shift = 4, 0.18215, 0.0
    return codec


@pytest.fixture
def vae(tmp_path, monkeypatch):
    """A stand-in autoencoder folder, loaded by train_video.py and sources.latents as load_codec would."""
    folder = tmp_path / "vae"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"stand_in": True}))
    codec = stand_in_codec(folder)
    monkeypatch.setattr(train_video, "load_codec", lambda f: codec)
    monkeypatch.setattr(latents, "load_codec", lambda f: codec)
    return str(folder), codec


def frame_folder(path, frames, seed):
    """A frame folder of `frames` smooth RGB frames (a bright square moving over a gradient)."""
    os.makedirs(path)
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[:SIZE, :SIZE] / SIZE
    base = np.stack([x, y, rng.random() * np.ones_like(x)], -1)
    for t in range(frames):
        img = base.copy()
        r, c = 8 + 6 * t, 20 + 3 * t
        img[r:r + 24, c:c + 24] = 1
        Image.fromarray((img * 255).astype(np.uint8)).save(os.path.join(path, f"{t:03d}.png"))


@pytest.fixture
def videos(tmp_path):
    """train/ (6 clips, one unreadable and one too short to skip), val/ (2) and test/ (1) frame folders."""
    root = tmp_path / "videos"
    for i in range(4):
        frame_folder(root / "train" / f"clip{i}", 7 + i, seed=i)
    frame_folder(root / "train" / "short", 4, seed=9)                   # under 3 pieces x 2 frames: skipped
    (root / "train" / "broken.gif").write_bytes(b"not a gif")             # unreadable: skipped
    for i in range(2):
        frame_folder(root / "val" / f"clip{i}", 8, seed=10 + i)
    frame_folder(root / "test" / "clip0", 8, seed=20)
    return str(root)


def encode(vae, videos, out, *flags):
    main_of(latents, "--vae", vae, "--dataset", "videos", "--data-dir", videos, "--size", SIZE, "--device", "cpu",
            "--out", out, *flags)
    return out


def batches(vae, videos, store, split, positions):
    """The batch of `positions` of a split encoded on the fly (VaeCodec.encode_batch) and read from the store."""
    config = train_video.make_config(train_video.get_parser().parse_args(
        [*FLAGS, "--data-dir", videos, "--vae", vae[0]]))
    pixels = VideoPuzzles(config.puzzle, split)
    stored = VideoPuzzles(config.puzzle, split, clips=latents.LatentClips(store, config.puzzle, split))
    return (vae[1].encode_batch(collate([pixels[i] for i in positions])),
            collate([stored[i] for i in positions]))


def test_encoder_takes_the_mean(vae):
    frames = torch.rand(5, 3, SIZE, SIZE) * 2 - 1
    codec = vae[1]
    assert torch.equal(codec.encode(frames), codec.encode(frames))     # the mean, never a sample: one target
    raw = codec.vae.encode(frames)
    assert not torch.allclose(raw.latent_dist.sample(), raw.latent_dist.mean)


@pytest.mark.parametrize("dtype, tol", [("float32", 1e-5), ("float16", 2e-3)])
def test_stored_batches_equal_the_on_the_fly_ones(vae, videos, tmp_path, dtype, tol):
    store = encode(vae[0], videos, tmp_path / "latents", "--dtype", dtype)
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["splits"]["train"]["frames"] == [0, 7, 8, 9, 10, 4]        # broken.gif, clip0..3, short
    assert np.load(store / "train" / "000001.npy").shape == (7, 4, SIZE // 8, SIZE // 8)
    for split, positions in (("train", range(12)), ("val", range(2))):   # two epochs: every clip, skips included
        live, stored = batches(vae, videos, store, split, list(positions))
        assert live.keys() == stored.keys() and stored["content"].dtype == torch.float32
        assert torch.equal(live["true_pos"], stored["true_pos"]) and torch.equal(live["missing"], stored["missing"])
        scale = live["content"].abs().max()
        assert (live["content"] - stored["content"]).abs().max() <= tol * scale, split


def test_training_from_the_store_trains_as_encoding_every_step(vae, videos, tmp_path):
    store = encode(vae[0], videos, tmp_path / "latents", "--dtype", "float32")
    run = [*FLAGS, "--data-dir", videos, "--vae", vae[0], "--missing", "1", "--max-steps", "2"]
    train_video_run(*run, "--out", tmp_path / "live")
    train_video_run(*run, "--latents", store, "--out", tmp_path / "stored")
    live, stored = (load_checkpoint(tmp_path / name / "ckpt.pt", "video") for name in ("live", "stored"))
    assert stored["config"].puzzle.vae == vae[0] and stored["config"].model.in_channels == 4   # sample.py decodes
    assert stored["config"] == live["config"] and stored["step"] == 2
    for k, v in live["model"].items():
        torch.testing.assert_close(stored["model"][k], v, rtol=1e-4, atol=1e-5)
    train_video_run("--resume", tmp_path / "stored" / "ckpt.pt", "--max-steps", "3", "--latents", store)
    assert load_checkpoint(tmp_path / "stored" / "ckpt.pt", "video")["step"] == 3


def test_a_store_of_other_settings_is_refused(vae, videos, tmp_path):
    store = encode(vae[0], videos, tmp_path / "latents", "--frame-stride", "2")
    args = train_video.get_parser().parse_args([*FLAGS, "--data-dir", videos, "--vae", vae[0]])
    config = train_video.make_config(args)
    with pytest.raises(UserError, match="frame_stride 2, this run has 1"):
        latents.LatentClips(store, config.puzzle, "train")
    with pytest.raises(UserError, match="no manifest.json"):
        latents.LatentClips(tmp_path / "nothing", config.puzzle, "train")
