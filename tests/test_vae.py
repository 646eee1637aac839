"""Latent diffusion (--vae) with the real diffusers AutoencoderKL: tiny random weights, scripts run as a user would."""
import json
import math

import imageio.v3 as iio
import pytest
import torch

from conftest import py

diffusers = pytest.importorskip("diffusers",
                                reason="--vae needs the optional diffusers package (pip install diffusers)")

# Smallest --size the tiny U-Net takes with --vae: patch_size 4 * 2**(3 levels - 1) * the autoencoder's 8.
VAE_SIZE = 128
TINY_VAE_VIDEO = ["--dataset", "digits", "--size", str(VAE_SIZE), "--pieces", "3", "--frames-per-piece", "2",
                  "--batch-size", "2", "--eval-puzzles", "2", "--eval-steps", "2", "--warmup", "0"]
# Stable Diffusion's latent scale: its autoencoder's raw latents have std about 1 / 0.18215, so scaled ones about 1.
SD_SCALE = 0.18215


def tiny_autoencoder(folder, seed=0):
    """
    A diffusers AutoencoderKL with small random weights, the same 8x downsampling and 4 latent channels as Stable
    Diffusion's, saved to `folder`. The random encoder's latents are far smaller than the real one's, so its last
    1x1 conv (and the decoder's first, inversely) is rescaled to give raw latents of std about 1 / SD_SCALE on
    inputs in [-1, 1], like Stable Diffusion's autoencoder.
    """
    torch.manual_seed(seed)
    vae = diffusers.AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 4,
                                  up_block_types=("UpDecoderBlock2D",) * 4, block_out_channels=(8, 16, 16, 16),
                                  latent_channels=4, norm_num_groups=8, layers_per_block=1, sample_size=64).eval()
    with torch.no_grad():
        std = vae.encode(torch.rand(4, 3, 64, 64) * 2 - 1).latent_dist.mean.std().item()
        k = 1 / SD_SCALE / std
        half = vae.quant_conv.weight.shape[0] // 2           # the mean half of (mean, logvar)
        vae.quant_conv.weight[:half] *= k
        vae.quant_conv.bias[:half] *= k
        vae.post_quant_conv.weight /= k
    vae.save_pretrained(folder)
    return folder


def test_latent_diffusion_with_real_autoencoder(tmp_path):
    vae = tiny_autoencoder(tmp_path / "vae")
    run, samples = tmp_path / "run", tmp_path / "samples"
    py("train_video.py", *TINY_VAE_VIDEO, "--missing", "1", "--max-steps", "3", "--vae", vae, "--out", run)
    cfg = torch.load(run / "ckpt.pt", weights_only=True)["config"]
    assert cfg["model"]["in_channels"] == 4 and cfg["channels"] == 3 and cfg["vae"] == str(vae)
    py("sample.py", "--ckpt", run / "ckpt.pt", "--num-puzzles", "2", "--steps", "2", "--out", samples)
    metrics = json.loads((samples / "metrics.json").read_text())
    assert math.isfinite(metrics["kendall"]) and 0 <= metrics["kendall"] <= 1 and metrics["num_puzzles"] == 2
    assert (samples / "examples.gif").exists()
    assert iio.imread(samples / "examples.gif", index=None).shape[0] == 6       # decoded back to 3 x 2 frames


def test_codec_latents_are_unit_scale_not_clipped(tmp_path):
    from vae import VaeCodec
    codec = VaeCodec(str(tiny_autoencoder(tmp_path / "vae")))
    torch.manual_seed(1)
    frames = torch.rand(2, 3, 2, 3, 64, 64) * 2 - 1                             # (B, pieces, frames, C, H, W)
    latents = codec.encode(frames)
    assert latents.shape == (2, 3, 2, 4, 8, 8) and torch.isfinite(latents).all()
    outside = (latents.abs() > 1).float().mean().item()
    print(f"latent std {latents.std().item():.3f}, fraction |latent| > 1: {outside:.3f}")
    assert outside > 0.05                  # about unit scale: clamping latents to [-1, 1] would change them
    decoded = codec.decode(latents)
    assert decoded.shape == frames.shape and decoded.min() >= -1 and decoded.max() <= 1
    batch = codec.encode_batch({"content": frames, "order": torch.zeros(2, 3)})
    assert torch.equal(batch["content"], latents) and batch["order"].shape == (2, 3)
