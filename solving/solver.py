"""
A trained checkpoint ready to solve: its EMA network, diffusion, position table and sampling options, for a bag of your
own pieces (`solving.load(path).solve(pieces)`, solving/bag.py), python -m solving.own and the bench. Not in the paper.

    solver = solving.load("checkpoints/image-photos-3x3.pt")
    result = solver.solve(pieces, seed=0)     # result.positions, .confidence, .puzzle_confidence, .image
    result = solver.solve(pieces, judge="classic")        # the judge over samples (solving/judge.py), an option
"""
import os
from dataclasses import replace

import torch

from config import PARTS, load_checkpoint
from diffusion import GaussianDiffusion
from jpdvt import SAMPLING, SampleOptions, code_costs, pinned_pieces, position_table, solve, told_and_pinned
from plumbing.cli import AUTOCAST, UserError, autocast, resolve_device, solving_threads
from solving.judge import judge_for
from sources.vae import load_codec


class Solver:
    """A checkpoint's EMA network on `device` with its config, diffusion, position table, sampling options (the
    generator of their noise included) and precision (fp32 unless asked; bf16 or fp16 autocast on a GPU); for a
    latent video model, the autoencoder."""

    def __init__(self, ckpt, config, device, opts, precision="fp32"):
        self.config, self.step, self.device, self.precision = config, ckpt["step"], device, precision
        self.opts = replace(opts, generator=opts.generator or torch.Generator(device).manual_seed(0))
        self.trained = ckpt["config"].puzzle          # the puzzles it trained on: its anchor, up to K missing
        vae = getattr(config.puzzle, "vae", None)
        self.codec = load_codec(vae) if vae else None
        self.model = PARTS[config.puzzle.kind].network(config.model)
        self.model.load_state_dict(ckpt["ema"])
        self.model.to(device).eval()
        self.diffusion = GaussianDiffusion(1000, config.prediction)
        self.table = position_table(config).to(device)

    @property
    def generates(self):
        """Trained with missing pieces, so it generates their content."""
        return self.trained.missing > 0 or self.trained.kind == "video" and self.trained.superres > 0

    def told(self, batch, pinned=None):
        """(told, pinned) (B, N) bool: the pieces whose code the network is told, and those kept on their true cells
        in the assignment (default: jpdvt.pinned_pieces of the solver's puzzles: the anchor, or for a super-resolution
        model every given piece): told_and_pinned."""
        pinned = pinned_pieces(batch, self.config.puzzle) if pinned is None else pinned
        return told_and_pinned(batch, pinned, self.trained)

    def costs(self, batch, given, opts=None):
        """(costs (S, B, N, positions), content with missing pieces generated) of a batch of pixel puzzles (code_costs;
        latents for a latent model), with the solver's options or opts."""
        inputs = self.codec.encode_batch(batch) if self.codec else batch
        with solving_threads(self.device), autocast(self.device, self.precision):
            return code_costs(self.model, self.diffusion, inputs, table=self.table, opts=opts or self.opts,
                              given=given, latent=self.codec is not None)

    def solve_batch(self, batch, pinned=None, opts=None):
        """(positions (B, N), content with missing pieces generated, in pixels) of a batch: jpdvt.solve, with the
        solver's options or opts (opts.judge: the judge over samples, not in the paper)."""
        told, pinned = self.told(batch, pinned)
        with solving_threads(self.device), autocast(self.device, self.precision):
            return solve(self.model, self.diffusion, batch, self.table, opts or self.opts, told, pinned, self.codec)

    def with_judge(self, name, opts=None):
        """The solver's options or opts, with the judge of that name (solving/judge.py JUDGES; "none": the paper's
        assignment)."""
        return replace(opts or self.opts, judge=judge_for(name, self.config.puzzle))

    def solve(self, pieces, pins=None, seed=0, judge="none", callback=None):
        """
        Solve a bag of pieces nobody has solved (solving/bag.py): image pieces (a list of PIL images or arrays, an (N,
        H, W, 3) array, or a {name: piece} dict whose names errors use; resized to the model's piece size) or, for a
        video model, clips ((F, H, W, C) arrays of the model's frames per piece). Fewer image pieces than the model's
        grid has cells: the empty cells are missing, drawn by a model trained with missing pieces. pins: {index: (row,
        col)} (video: {index: 0}) of pieces whose place you know, kept on their cells: a model trained with an
        anchor needs one, whose code it is told (a video model always: its first piece); one trained without is
        told nothing and the pins hold in the assignment only. seed: the noise of this solve (the same seed, the same
        result). judge: "none" (the paper's method) or "classic" (solving/judge.py). callback(i, x, x0): after every
        sampling step. Returns a solving.bag.Result, with each piece's confidence: the share of the samples (at least
        8) that put it where the answer does (under the judge: its board), and .moved: how many pieces the judge
        moved from the model's own answer (None without a judge).
        """
        from solving.bag import solve_bag
        if isinstance(pieces, (str, bytes, os.PathLike)):
            raise UserError(f"solve takes the pieces themselves (a list of PIL images or arrays, or a {{name: piece}} "
                            f"dict), not a path like {str(pieces)!r}; open the files first")
        self.opts.generator.manual_seed(seed)
        return solve_bag(self, pieces, pins or {}, judge, callback)


def load_solver(path, device="auto", precision="fp32"):
    """solving.load: a Solver with the sampling its checkpoint stores (chosen on val), else SampleOptions' defaults."""
    if precision not in AUTOCAST:
        raise UserError(f"precision must be one of {', '.join(AUTOCAST)}, got {precision!r}")
    ckpt, device = load_checkpoint(path), resolve_device(device)
    stored = {k: v for k, v in ckpt.get("sampling", {}).items() if k in SAMPLING}
    return Solver(ckpt, ckpt["config"], device, SampleOptions(**stored), precision)
