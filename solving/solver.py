"""
A trained checkpoint ready to solve: its EMA network, diffusion, position table and sampling options, for a bag of your
own pieces (`solving.load(path).solve(pieces)`, solving/bag.py), python -m solving.own and the bench. Not in the paper.

    solver = solving.load("checkpoints/image-photos-3x3.pt")
    result = solver.solve(pieces, seed=0)     # result.positions, .confidence, .puzzle_confidence, .image
    result = solver.solve(pieces, judge="classic")        # the judge over samples (solving/judge.py), an option
"""
import contextlib
import os
from dataclasses import replace

import torch

from diffusion import GaussianDiffusion
from dit import DiT
from jpdvt import SampleOptions, code_costs, follow_cells, given_codes, pinned_cells, position_table, solve
from plumbing.checkpoint import load_checkpoint
from plumbing.cli import AUTOCAST, SAMPLING, UserError, autocast, cpu_threads, resolve_device
from solving.judge import JUDGES, judge
from sources.vae import load_codec
from unet3d import UNet3D


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
        self.model = (DiT if config.puzzle.kind == "image" else UNet3D)(config.model)
        self.model.load_state_dict(ckpt["ema"])
        self.model.to(device).eval()
        self.diffusion = GaussianDiffusion(1000, config.prediction)
        self.table = position_table(config).to(device)

    @property
    def generates(self):
        """Trained with missing pieces, so it generates their content."""
        return self.trained.missing > 0

    def told(self, batch, pinned=None):
        """(given, pinned) (B, N) bool: the pieces whose code the network is told, and those kept on their true cells
        in the assignment (default: the anchor of the solver's puzzles, if they have one). A model trained without an
        anchor is told no code: a pinned piece only keeps its cell."""
        pinned = given_codes(batch, self.config.puzzle.anchor) if pinned is None else pinned
        return (pinned if self.trained.anchor else torch.zeros_like(pinned)), pinned

    def costs(self, batch, given, opts=None):
        """(costs (S, B, N, positions), content with missing pieces generated) of a batch of pixel puzzles (code_costs;
        latents for a latent model), with the solver's options or opts."""
        inputs = self.codec.encode_batch(batch) if self.codec else batch
        with solving_threads(self.device), autocast(self.device, self.precision):
            return code_costs(self.model, self.diffusion, inputs, table=self.table, opts=opts or self.opts,
                              given=given, latent=self.codec is not None)

    def solve_batch(self, batch, pinned=None, opts=None, judge_name="none"):
        """(positions (B, N), content with missing pieces generated, in pixels) of a batch: jpdvt.solve, the paper's
        method, or with judge_name "classic" the judge over the samples (solving/judge.py)."""
        opts, (given, pinned) = opts or self.opts, self.told(batch, pinned)
        if judge_name == "none":
            inputs = self.codec.encode_batch(batch) if self.codec else batch
            with solving_threads(self.device), autocast(self.device, self.precision):
                positions, content = solve(self.model, self.diffusion, inputs, self.table, opts, given,
                                           latent=self.codec is not None, pinned=pinned)
        else:
            costs, content = self.costs(batch, given, opts)
            positions = self.judged(costs, batch, pinned, opts)
            if opts.samples > 1 and batch["missing"].any():    # as jpdvt.solve: the drawings follow the cells
                content = follow_cells(content, costs, positions, batch)
        return positions, self.codec.decode(content) if self.codec else content

    def judged(self, costs, batch, pinned, opts):
        """The judge's pick (solving/judge.py) of a batch's sampled costs (S, B, N, positions)."""
        return judge(costs, batch["content"], batch["missing"], pinned_cells(batch, pinned), opts.assign,
                     self.config.puzzle)

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
        8) that put it where the answer does.
        """
        from solving.bag import solve_bag
        if isinstance(pieces, (str, bytes, os.PathLike)):
            raise UserError(f"solve takes the pieces themselves (a list of PIL images or arrays, or a {{name: piece}} "
                            f"dict), not a path like {str(pieces)!r}; open the files first")
        if judge not in JUDGES:
            raise UserError(f"judge must be one of {', '.join(JUDGES)}, got {judge!r}")
        self.opts.generator.manual_seed(seed)
        return solve_bag(self, pieces, pins or {}, judge, callback)


@contextlib.contextmanager
def solving_threads(device):
    """On a CPU, a compute thread per core but one while solving (plumbing.cli.cpu_threads; OMP_NUM_THREADS, if set,
    decides), then the process's own count again: a thread per core makes the threads wait on each other on a machine
    busy with other work, and a library call leaves the process's setting as it found it."""
    before = torch.get_num_threads()
    cpu_threads(device, world=1, workers=1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def load_solver(path, device="auto", precision="fp32"):
    """solving.load: a Solver with the sampling its checkpoint stores (chosen on val), else plumbing.cli.SAMPLING."""
    if precision not in AUTOCAST:
        raise UserError(f"precision must be one of {', '.join(AUTOCAST)}, got {precision!r}")
    ckpt, device = load_checkpoint(path), resolve_device(device)
    stored = {k: v for k, v in ckpt.get("sampling", {}).items() if k in SAMPLING}
    return Solver(ckpt, ckpt["config"], device, SampleOptions(**{**SAMPLING, **stored}), precision)
