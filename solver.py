"""
A trained checkpoint, ready to solve: its EMA network on a device with the diffusion, the table of true codes, the
sampling options and (for latent video models) the autoencoder. sample.py builds one from its flags.

Paper: "Predicted position encodings" (supplement); the method itself is jpdvt.solve.

    ckpt = load_checkpoint("checkpoints/image-shapes-3x3.pt")
    solver = Solver(ckpt["config"], ckpt, device=torch.device("cpu"), precision="auto", opts=SampleOptions(steps=50))
    positions, content = solver.solve(batch)          # batch: puzzles.collate of {content, true_pos, missing}
"""
from dataclasses import replace

import torch

from diffusion import GaussianDiffusion
from jpdvt import solve
from training import autocast
from vae import load_codec


class Solver:
    """A checkpoint's EMA model on `device` with its config, diffusion and position table, the sampling options
    (jpdvt.SampleOptions, with the generator of the noise), the precision policy of training (auto: bf16 autocast
    and TF32 on CUDA, fp32 on CPU) and, for latent models, the autoencoder."""

    def __init__(self, config, ckpt, device, precision, opts):
        self.config, self.step, self.device, self.precision, self.opts = config, ckpt["step"], device, precision, opts
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        self.data = ckpt.get("data")                              # the training files' record (sources.split_seen)
        self.codec = load_codec(config.puzzle.vae) if config.puzzle.vae else None
        self.model = config.build_network()
        self.model.load_state_dict(ckpt["ema"])
        self.model.to(device).eval()
        self.diffusion = GaussianDiffusion(1000, config.prediction)
        self.table = config.puzzle.table().to(device)

    def solve(self, batch, known=None, callback=None):
        """Solve a batch of pixel puzzles: (positions (B, N), content with missing pieces generated; latents for a
        latent model: see pixels()). callback: called after every sampling step (jpdvt.solve)."""
        if self.codec:
            batch = self.codec.encode_batch(batch)
        opts = replace(self.opts, callback=callback)
        with autocast(self.device, self.precision):
            return solve(self.model, self.diffusion, batch, table=self.table, opts=opts,
                         anchored=self.config.puzzle.anchor, known=known, latents=self.codec is not None)

    def pixels(self, content):
        """Generated content as pixels (decoded by the autoencoder of a latent model), for pictures."""
        return self.codec.decode(content) if self.codec else content
