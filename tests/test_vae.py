"""Latent diffusion (--vae) with the real diffusers AutoencoderKL: tiny random weights, scripts run as a user would."""
import imageio.v3 as iio
import pytest
import torch
from conftest import sample_run, train_video_run

from config import load_checkpoint

diffusers = pytest.importorskip("diffusers",
                                reason="--vae needs the optional diffusers package (pip install diffusers)")

# Smallest --size the tiny U-Net takes with --vae: patch_size 4 * 2**(3 levels - 1) * the autoencoder's 8.
VAE_SIZE = 128
TINY_VAE_VIDEO = ["--dataset", "digits", "--size", str(VAE_SIZE), "--pieces", "3", "--frames-per-piece", "2",
                  "--batch-size", "2", "--eval-puzzles", "2", "--eval-steps", "2", "--warmup", "0",
                  "--workers", "0"]
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
    train_video_run(*TINY_VAE_VIDEO, "--missing", "1", "--max-steps", "2", "--vae", vae, "--out", run)
    cfg = load_checkpoint(run / "ckpt.pt", "video")["config"]
    assert cfg.model.in_channels == 4 and cfg.puzzle.channels == 3 and cfg.puzzle.vae == str(vae)
    metrics = sample_run("--ckpt", run / "ckpt.pt", "--num-puzzles", "2", "--steps", "2", "--out", samples)
    assert metrics["num_puzzles"] == 2 and metrics["kendall"] * 6 == pytest.approx(round(metrics["kendall"] * 6))
    assert metrics["kendall_set"] <= metrics["kendall"]       # generated pieces compared as a set agree more
    assert iio.imread(samples / "examples.gif", index=None).shape[0] == 6       # decoded back to 3 x 2 frames


def test_codec_latents_are_unit_scale_not_clipped(tmp_path):
    from sources.vae import VaeCodec
    codec = VaeCodec(str(tiny_autoencoder(tmp_path / "vae")))
    torch.manual_seed(1)
    frames = torch.rand(2, 3, 2, 3, 64, 64) * 2 - 1                             # (B, pieces, frames, C, H, W)
    latents = codec.encode(frames)
    assert latents.shape == (2, 3, 2, 4, 8, 8) and torch.isfinite(latents).all()
    outside = (latents.abs() > 1).float().mean().item()
    assert outside > 0.05                  # about unit scale: clamping latents to [-1, 1] would change them
    decoded = codec.decode(latents)
    assert decoded.shape == frames.shape and decoded.min() >= -1 and decoded.max() <= 1
    batch = codec.encode_batch({"content": frames, "true_pos": torch.zeros(2, 3)})
    assert torch.equal(batch["content"], latents) and batch["true_pos"].shape == (2, 3)
