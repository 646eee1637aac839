"""
Latent diffusion for videos: frames <-> latents with a Stable-Diffusion-style autoencoder (`--vae DIR`).

Paper: supplement, "Video Experiments": larger videos are diffused in the latent space of the Stable Diffusion
autoencoder (256x256x3 frames -> 32x32x4 latents, scaled by 0.18215 to about unit variance); MovingMNIST stays
in pixels. The autoencoder is a diffusers `AutoencoderKL` read from a local folder (config.json + weights); the
diffusers package is optional and only needed with --vae.

    codec = load_codec("/models/sd-vae")          # VaeCodec, loaded once per process
    latents = codec.encode(frames)      # (..., 3, 256, 256) in [-1, 1] -> (..., 4, 32, 32), not clipped
    frames = codec.decode(latents)      # back to pixels, for pictures
"""
import functools
import os

import torch

from plumbing.cli import UserError

# the Stable Diffusion autoencoder: 8x smaller frames; its latents are scaled to about unit variance by the
# config's scaling_factor (0.18215 for SD 1.x/2.x, the default when a config has none)
VAE_FACTOR, LATENT_SCALE = 8, 0.18215


class VaeCodec:
    """
    Frames <-> latents with a Stable-Diffusion-style autoencoder (diffusers AutoencoderKL) from a local folder
    (config.json + weights). Used to diffuse in latent space: batches are encoded on the device before the loss,
    generated latents are decoded only for pictures.
    """

    def __init__(self, folder):
        if not os.path.isdir(folder):
            raise UserError(f"--vae {folder} is not a folder; pass a local diffusers AutoencoderKL folder "
                            "(config.json and weights)")
        try:
            from diffusers import AutoencoderKL
        except ImportError:
            raise UserError("--vae needs the optional diffusers package: pip install diffusers") from None
        from diffusers.utils import logging
        logging.set_verbosity_error()                          # keep a bad folder's message to one line
        try:
            self.vae = AutoencoderKL.from_pretrained(folder, low_cpu_mem_usage=False).eval().requires_grad_(False)
        except (OSError, ValueError):
            raise UserError(f"--vae {folder} could not be loaded as a diffusers AutoencoderKL; pass a folder with "
                            "config.json and diffusion_pytorch_model.safetensors") from None
        cfg = self.vae.config
        self.channels = cfg.latent_channels                      # 4 for Stable Diffusion
        self.scale = getattr(cfg, "scaling_factor", None) or LATENT_SCALE
        self.shift = getattr(cfg, "shift_factor", None) or 0.0

    @torch.no_grad()
    def _frames(self, x, fn):
        """Apply fn to every frame of x (..., C, H, W), 64 frames at a time."""
        self.vae.to(x.device)
        flat = x.reshape(-1, *x.shape[-3:])                    # b n f c h w -> (b n f) c h w
        out = torch.cat([fn(chunk) for chunk in flat.split(64)])
        return out.reshape(*x.shape[:-3], *out.shape[1:])      # (b n f) c h w -> b n f c h w

    def encode(self, frames):
        """(..., 3, H, W) in [-1, 1] -> scaled latents (..., channels, H/8, W/8), about unit variance. The mean of the
        latent distribution, never a sample: a frame has one latent, so python -m sources.latents can store it once."""
        return self._frames(frames, lambda x: (self.vae.encode(x).latent_dist.mean - self.shift) * self.scale)

    def decode(self, latents):
        """Scaled latents (..., channels, h, w) -> frames (..., 3, 8h, 8w) in [-1, 1]."""
        return self._frames(latents, lambda z: self.vae.decode(z / self.scale + self.shift).sample.clamp(-1, 1))

    def encode_batch(self, batch):
        """The puzzle batch with its frames replaced by latents."""
        return {**batch, "content": self.encode(batch["content"])}


@functools.lru_cache(maxsize=2)
def load_codec(folder):
    """The VaeCodec of `folder`, loaded once per process (train_video.py needs its channels, then the codec)."""
    return VaeCodec(folder)
