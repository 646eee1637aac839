"""
A trained checkpoint in a user's hands: `jpdvt.load(path)` returns a Solver, whose `solve(pieces)` solves a bag of
pieces nobody has solved (solving/bag.py) and whose `costs` / `solve_batch` solve batches of test puzzles
(sample.py). Beyond the method (jpdvt.solve), it holds the checkpoint's settings, the noise of its solves, the
confidence tables fitted on val (solving/confidence.py, its base class) and, for latent video models, the
autoencoder.

    solver = jpdvt.load("checkpoints/image-photos-3x3.pt")
    result = solver.solve(pieces, seed=0)      # result.positions, .confidence, .puzzle_confidence, .image
"""
from dataclasses import replace

import torch

from diffusion import GaussianDiffusion
from jpdvt import SampleOptions, code_costs, given_codes, kind_of, solve
from plumbing.checkpoint import load_checkpoint
from plumbing.cli import autocast, resolve_device
from solving.bag import order_clips, solve_image_bag
from solving.confidence import Calibrated, fitted_with
from sources.vae import check_autoencoder, load_codec

# the sampling of a checkpoint without an estimator (sampling_defaults)
SAMPLING = {"steps": 50, "sampler": "ddpm", "samples": 1, "assign": "hungarian", "precision": "auto"}


class Solver(Calibrated):
    """A checkpoint's EMA model on `device` with its config, diffusion and position table, the sampling options
    (SampleOptions, with the generator of the noise), the precision policy of training (auto: bf16 autocast on CUDA,
    fp32 on CPU and mps), the calibration table of its confidence (if fitted) and, for latent models, the
    autoencoder."""

    def __init__(self, config, ckpt, device, precision, opts, seed=0):
        self.config, self.step, self.device, self.precision, self.opts = config, ckpt["step"], device, precision, opts
        self.seed = seed                                          # solve(pieces)'s noise unless told another
        if opts.generator is None:
            self.opts = replace(opts, generator=torch.Generator(device).manual_seed(seed))
        self.data = ckpt.get("data")                              # training files' record (sources.files.split_seen)
        self.calibration = ckpt.get("calibration")                # solving.confidence.calibrate's tables, fitted on val
        self.trained_missing = ckpt["config"].puzzle.missing     # up to this many pieces missing in training
        self.kind = kind_of(config)
        if self.kind.vae:
            check_autoencoder(self.kind.vae, (self.data or {}).get("vae"))
        self.codec = load_codec(self.kind.vae) if self.kind.vae else None
        self.model = self.kind.network(config.model)
        self.model.load_state_dict(ckpt["ema"])
        self.model.to(device).eval()
        self.diffusion = GaussianDiffusion(1000, config.prediction)
        self.table = self.kind.table().to(device)

    @property
    def generates(self):
        """Trained with missing pieces, so it generates their content."""
        return self.trained_missing > 0

    @classmethod
    def load(cls, path, device="auto"):
        """The solver of checkpoint `path` with sampling_defaults (the sampling and precision its confidence table
        was fitted with, else sample.py's: DDPM-50, Hungarian, 1 sample, auto precision), noise seed 0."""
        ckpt, device = load_checkpoint(path), resolve_device(device)
        sampling = sampling_defaults(ckpt)
        precision = sampling.pop("precision")
        opts = SampleOptions(generator=torch.Generator(device).manual_seed(0), **sampling)
        return cls(ckpt["config"], ckpt, device=device, precision=precision, opts=opts)

    def costs(self, batch, given=None, callback=None, grid=None, opts=None):
        """(cost (B, N, positions), content with missing pieces generated) of a batch of pixel puzzles
        (jpdvt.code_costs; latents for a latent model: see pixels()). given: the pieces whose code is told (default:
        the anchor, if the model has one); callback: called after every sampling step; grid: another grid than the
        model's (images); opts: other sampling options than the solver's."""
        given = given_codes(batch, self.kind.anchored) if given is None else given
        if self.codec:
            batch = self.codec.encode_batch(batch)
        opts = replace(opts or self.opts, callback=callback)
        table = self.table if grid is None else self.kind.table(grid).to(self.device)
        with autocast(self.device, self.precision):
            return code_costs(self.model, self.diffusion, batch, table=table, opts=opts, given=given,
                              latent=self.codec is not None)

    def solve_batch(self, batch, given=None, callback=None):
        """(positions (B, N), content): jpdvt.solve with the solver's model, options and precision (latents for a
        latent model: see pixels()), the told pieces on their own cells."""
        given = given_codes(batch, self.kind.anchored) if given is None else given
        if self.codec:
            batch = self.codec.encode_batch(batch)
        with autocast(self.device, self.precision):
            return solve(self.model, self.diffusion, batch, table=self.table, given=given,
                         opts=replace(self.opts, callback=callback), latent=self.codec is not None)

    def pixels(self, content):
        """Generated content as pixels (decoded by the autoencoder of a latent model), for pictures."""
        return self.codec.decode(content) if self.codec else content

    def solve(self, pieces, pins=None, grid=None, callback=None, seed=None):
        """
        Solve a bag of pieces nobody has solved (solving/bag.py): images (a list of PIL images or arrays, an (N, H, W,
        3) array, or a {name: piece} dict whose names errors use; resized to the model's piece size) or, for a video
        model, clips ((F, H, W, C) arrays of the model's frames per piece). pins: {index: (row, col)} (video: {index:
        0}) of pieces whose place you know, for models trained with an anchor (a video model always: its first piece).
        grid: (rows, cols) when it differs from the model's; cells beyond the pieces are missing and generated by a
        model trained with missing pieces. callback(i, x, x0): called after every sampling step (images). seed: the
        noise of this solve (default: the solver's, 0 from jpdvt.load): the same seed, the same positions and
        confidences. The confidence is None unless the checkpoint holds a table fitted with the solver's settings, the
        model's grid and as many missing pieces. Returns a solving.bag.Result.
        """
        self.opts.generator.manual_seed(self.seed if seed is None else seed)
        names = list(pieces) if isinstance(pieces, dict) else list(range(len(pieces)))
        pieces = list(pieces.values()) if isinstance(pieces, dict) else list(pieces)
        if self.config.kind == "video":
            return order_clips(self, dict(zip(names, pieces)), pins or {})
        return solve_image_bag(self, dict(zip(names, pieces)), pins or {}, grid=grid, callback=callback)


def sampling_defaults(ckpt):
    """{steps, sampler, samples, assign, precision}: the checkpoint's estimator, the settings its confidence table was
    fitted with (sample.py --split val --calibrate), else SAMPLING. jpdvt.load and sample.py solve with them unless
    told otherwise, so the confidence applies: a table fitted in fp32 on a CPU solves in fp32 on a GPU too."""
    cal = ckpt.get("calibration")
    fitted = fitted_with(cal["settings"]) if cal else {}
    return {k: fitted.get(k, v) for k, v in SAMPLING.items()}
