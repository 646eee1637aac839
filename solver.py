"""
A trained checkpoint, ready to solve: its EMA network on a device with the diffusion, the table of true codes, the
sampling options and (for latent video models) the autoencoder. `jpdvt.load(path)` makes one; so does sample.py.

Paper: "Predicted position encodings" (supplement); the method itself is jpdvt.code_costs and jpdvt.solve; the
confidence is confidence.py's (not in the paper).

    solver = jpdvt.load("checkpoints/image-photos-3x3.pt")
    result = solver.solve(pieces)          # pieces: PIL images or an (N, H, W, 3) array, in any order
    result.positions                       # (N, 2): each piece's (row, col); video models: (N,) time slots
    result.confidence, result.puzzle_confidence, result.image
    positions, content = solver.solve_batch(batch)     # a puzzles.collate batch (sample.py's test puzzles)
"""
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np
import torch
from PIL import Image

import kinds
from animate import DISPLAY, enlarge
from checkpoint import load_checkpoint
from cli import UserError, resolve_device
from confidence import margins, probability
from diffusion import GaussianDiffusion
from jpdvt import SampleOptions, code_costs, given_codes
from metrics import assign, assign_batch
from pictures import assemble, mark_cells
from posenc import MIRRORS, grid_table, mirrored_cells
from puzzles import video_tensor
from sources import as_image, clip_frames, piece_pixels
from training import autocast
from vae import load_codec

FITTED_BEFORE = {"symmetries": 1}  # settings that tables fitted before they existed were fitted with
# how an own bag of pieces is sampled unless told otherwise: sample.py's defaults, replaced by the settings the
# checkpoint's confidence table was fitted with, if it has one (so that its confidence holds)
SAMPLING = {"steps": 50, "sampler": "ddpm", "samples": 1, "assign": "hungarian", "symmetries": 1}
FAR = 1e6                         # a cost no assignment takes: pinned pieces' other cells, others' pinned cells


@dataclass
class Result:
    """What solve(pieces) found, for the pieces in the order given."""
    positions: np.ndarray          # (N, 2) (row, col) of each piece; video models: (N,) time slot of each piece
    confidence: Optional[np.ndarray]   # (N,) probability that each piece is in place (None: no calibration table)
    puzzle_confidence: Optional[float]  # probability that every piece is in place
    image: Optional[Image.Image]   # images: the assembly, generated content in the empty cells (outlined in red)
    margins: np.ndarray            # (N,) the raw evidence: next-best minus assigned code distance (confidence.py)
    generated: np.ndarray          # images: (M, 2) (row, col) of the cells whose content was generated
    cells: np.ndarray              # images: the raster cell of every piece, given then generated (animations)
    tiles: np.ndarray              # images: the given pieces at the picture's resolution (N, S, S, 3) in [0, 1]


class Solver:
    """A checkpoint's EMA model on `device` with its config, diffusion and position table, the sampling options
    (jpdvt.SampleOptions, with the generator of the noise), the precision policy of training (auto: bf16 autocast
    and TF32 on CUDA, fp32 on CPU), the calibration table of its confidence (if fitted) and, for latent models, the
    autoencoder."""

    def __init__(self, config, ckpt, device, precision, opts, symmetries=1):
        self.config, self.step, self.device, self.precision, self.opts = config, ckpt["step"], device, precision, opts
        self.symmetries = symmetries                              # images: average over 1, 2 or 4 mirrored puzzles
        self.data = ckpt.get("data")                              # the training files' record (sources.split_seen)
        self.calibration = ckpt.get("calibration")                # confidence.fit tables, fitted on val
        self.kind = kinds.of(config)
        self.codec = load_codec(self.kind.vae) if self.kind.vae else None
        self.model = self.kind.network(config.model)
        self.model.load_state_dict(ckpt["ema"])
        self.model.to(device).eval()
        self.diffusion = GaussianDiffusion(1000, config.prediction)
        self.table = self.kind.table().to(device)

    @classmethod
    def load(cls, path, device="auto", opts=None, symmetries=None):
        """The solver of checkpoint `path`: sample.py's defaults (DDPM-50, Hungarian, 1 sample, no mirrors, seed 0),
        or the sampling its confidence table was fitted with, if it has one (so that its confidence holds); opts and
        symmetries override them."""
        ckpt, device = load_checkpoint(path), resolve_device(device)
        sampling = sampling_defaults(ckpt)
        mirrors = sampling.pop("symmetries")
        opts = opts or SampleOptions(generator=torch.Generator(device).manual_seed(0), **sampling)
        return cls(ckpt["config"], ckpt, device=device, precision="auto", opts=opts, symmetries=symmetries or mirrors)

    def costs(self, batch, given=None, callback=None, grid=None, opts=None, symmetries=None):
        """(cost (B, N, positions), content with missing pieces generated) of a batch of pixel puzzles
        (jpdvt.code_costs; latents for a latent model: see pixels()). given: the pieces whose code is told (default:
        the anchor, if the model has one); callback: called after every sampling step of the puzzle as given; grid:
        another grid than the model's (images); opts: other sampling options than the solver's. With symmetries 2 or 4
        (default: the solver's; images), the costs are the mean over the puzzle and its mirrors (posenc.MIRRORS),
        each mapped back to the puzzle's cells."""
        given = given_codes(batch, self.kind.anchored) if given is None else given
        if self.codec:
            batch = self.codec.encode_batch(batch)
        opts = replace(opts or self.opts, callback=callback)
        table = self.table if grid is None else grid_table(*grid).to(self.device)
        mirrors = MIRRORS[:symmetries or self.symmetries] if self.config.kind == "image" else MIRRORS[:1]
        total, content = 0, None
        for dims in mirrors:                                       # the content flipped, the solution mirrored
            cells = mirrored_cells(*(grid or self.config.puzzle.grid), dims) if dims else None
            mirrored = batch if not dims else {**batch, "content": batch["content"].flip(dims),
                                               "true_pos": cells.to(self.device)[batch["true_pos"]]}
            with autocast(self.device, self.precision):
                cost, out = code_costs(self.model, self.diffusion, mirrored, table=table, opts=opts, given=given,
                                       latent=self.codec is not None)
            # back to the puzzle's cells: cell p's cost is the mirrored puzzle's at cells[p] (mirrors are their own
            # inverse; missing pieces are fresh draws in each mirror, their rows averaged like --samples')
            total = total + (cost if not dims else cost[..., cells.to(cost.device)])
            content = out if content is None else content
            opts = replace(opts, callback=None)
        return total / len(mirrors), content

    def mean_costs(self, batch, given=None, grid=None):
        """The costs of the one-call posterior-mean estimate of the codes (steps 1, with its own noise, so the solve's
        stays as it was): the evidence of the confidence (confidence.py)."""
        opts = SampleOptions(steps=1, sampler="ddim", generator=torch.Generator(self.device).manual_seed(0))
        return self.costs(batch, given=given, grid=grid, opts=opts, symmetries=1)[0]

    def solve_batch(self, batch, given=None, callback=None):
        """(positions (B, N), content): the one-to-one assignment of costs() (jpdvt.solve)."""
        cost, content = self.costs(batch, given=given, callback=callback)
        return assign_batch(cost, self.opts.assign), content

    def pixels(self, content):
        """Generated content as pixels (decoded by the autoencoder of a latent model), for pictures."""
        return self.codec.decode(content) if self.codec else content

    def settings(self):
        """What a confidence table depends on: the sampling options and the number of missing pieces."""
        o = self.opts
        return {"steps": o.steps, "sampler": o.sampler, "samples": o.samples, "assign": o.assign,
                "missing": self.config.puzzle.missing, "symmetries": self.symmetries}

    def differs(self, settings=None):
        """{name: (fitted, now)} of the settings (default: the solver's) that differ from its confidence table's."""
        fitted = self.calibration["settings"]
        return {k: (fitted.get(k, FITTED_BEFORE.get(k)), v) for k, v in (settings or self.settings()).items()
                if fitted.get(k, FITTED_BEFORE.get(k)) != v}

    def mismatch(self):
        """The settings of the solver that differ from its confidence table's, as 'name: table -> solver' text."""
        return ", ".join(f"{k}: {fitted} -> {now}" for k, (fitted, now) in self.differs().items())

    def calibrated(self, settings=None):
        """Is there a confidence table fitted with these settings (default: the solver's)? A table fitted with
        other sampling options or another number of missing pieces does not describe this solve."""
        return self.calibration is not None and not self.differs(settings)

    def confidence(self, margin, part="piece", settings=None):
        """Probabilities of being right for margins (confidence.probability), or None without a table fitted with
        these settings (calibrated)."""
        return probability(self.calibration[part], margin) if self.calibrated(settings) else None

    # ------------------------------------------------------------------------- your own pieces

    def solve(self, pieces, pins=None, grid=None, callback=None, seed=None):
        """
        Solve a bag of pieces nobody has solved: images (a list of PIL images or arrays, an (N, H, W, 3) array, or
        a {name: piece} dict whose names errors use; resized to the model's piece size) or, for a video model, clips
        ((F, H, W, C) arrays of the model's frames per piece). pins: {index: (row, col)} (video: {index: 0}) of
        pieces whose place you know, for models trained with an anchor (a video model always: its first piece).
        grid: (rows, cols) when it differs from the model's; cells beyond the pieces are missing and generated by a
        model trained with missing pieces. callback: an animate.Recorder (images). The confidence is None unless the
        checkpoint holds a table fitted with the solver's settings, the model's grid and as many missing pieces.
        seed: the noise of this solve (the same seed gives the same positions and confidences); None draws on from
        the solver's generator (opts.generator), so calls may differ.
        """
        if seed is not None:
            self.opts.generator.manual_seed(seed)
        names = list(pieces) if isinstance(pieces, dict) else list(range(len(pieces)))
        pieces = list(pieces.values()) if isinstance(pieces, dict) else list(pieces)
        if self.config.kind == "video":
            return self._order(dict(zip(names, pieces)), pins or {})
        puzzle = self.config.puzzle
        grid, side, n = tuple(grid or puzzle.grid), puzzle.piece_size, len(pieces)
        cells = grid[0] * grid[1]
        if not 1 <= n <= cells:
            raise UserError(f"{n} pieces do not fit a {grid[0]}x{grid[1]} grid (--grid); give between 1 and {cells}")
        pins = check_pins(pins or {}, n, grid, anchored=self.kind.anchored)
        images = [as_image(p, name) for name, p in zip(names, pieces)]
        content = np.zeros((cells, side, side, 3), np.float32)
        content[:n] = [piece_pixels(im, side, name) for name, im in zip(names, images)]
        true_pos, pinned = np.zeros(cells, np.int64), np.zeros(cells, bool)
        for i, (r, c) in pins.items():
            true_pos[i], pinned[i] = r * grid[1] + c, True
        batch = {"content": torch.from_numpy(content).permute(0, 3, 1, 2)[None] * 2 - 1,
                 "true_pos": torch.from_numpy(true_pos)[None], "missing": torch.from_numpy(np.arange(cells) >= n)[None]}
        batch = {k: v.to(self.device) for k, v in batch.items()}
        given = torch.from_numpy(pinned)[None].to(self.device)
        cost, generated = self.costs(batch, given=given, callback=callback, grid=grid)
        cost = cost[0].float().cpu().numpy()
        cost[pinned] = FAR                                         # a pinned piece takes its cell, and no other one
        cost[:, true_pos[pinned]] = FAR
        cost[pinned, true_pos[pinned]] = 0
        pos = assign(cost, self.opts.assign)
        margin = margins(self.mean_costs(batch, given=given, grid=grid).cpu().numpy(), pos[None])[0][:n]
        settings = {**self.settings(), "missing": cells - n} if grid == tuple(puzzle.grid) else None
        conf = self.confidence(margin, settings=settings) if settings else None
        if conf is not None:
            conf[pinned[:n]] = 1.0                                 # told, not found
        free = margin[~pinned[:n]]
        whole = self.confidence(free.min(), part="puzzle", settings=settings) if settings and len(free) else None
        whole = 1.0 if conf is not None and not len(free) else whole
        show = int(min(DISPLAY, max(side, np.median([min(im.size) for im in images]))))   # the pieces' own pixels
        tiles = np.stack([piece_pixels(im, show, name) for name, im in zip(names, images)])
        every = np.concatenate([tiles, enlarge(generated[0, n:], show, smooth=True)])
        img = mark_cells(assemble(every, pos, grid, border=2, fill=1.0), pos[n:], grid, side=show, border=2)
        return Result(positions=np.stack(divmod(pos[:n], grid[1]), axis=1), confidence=conf,
                      puzzle_confidence=None if whole is None else float(whole),
                      image=Image.fromarray((img * 255).round().astype(np.uint8)), margins=margin,
                      generated=np.stack(divmod(pos[n:], grid[1]), axis=1), cells=pos, tiles=tiles)

    def _order(self, clips, pins):
        """Video models: the time slot of each clip; the pinned piece is the first (the model's anchor)."""
        puzzle = self.config.puzzle
        if len(clips) != puzzle.pieces:
            raise UserError(f"this model orders {puzzle.pieces} pieces of {puzzle.frames_per_piece} frame(s), got "
                            f"{len(clips)}; give exactly {puzzle.pieces}")
        if len(pins) != 1 or any(slot != 0 for slot in pins.values()):
            raise UserError("a video model is told which piece comes first, its anchor: pin it (--pin FILE=0)")
        frames = [clip_frames(c, puzzle, name) for name, c in clips.items()]
        first = next(iter(pins))
        order = [first] + [i for i in range(len(clips)) if i != first]         # the first piece in front, as trained
        batch = {"content": video_tensor(np.stack([frames[i] for i in order]))[None],
                 "true_pos": torch.arange(len(clips))[None], "missing": torch.zeros(1, len(clips), dtype=bool)}
        batch = {k: v.to(self.device) for k, v in batch.items()}
        pos = assign(self.costs(batch)[0][0].cpu().numpy(), self.opts.assign)
        margin = margins(self.mean_costs(batch).cpu().numpy(), pos[None])[0]
        slots, mine = np.empty(len(clips), np.int64), np.empty(len(clips))
        slots[order], mine[order] = pos, margin
        conf, whole = self.confidence(mine), self.confidence(margin[1:].min(), part="puzzle")
        if conf is not None:
            conf[first] = 1.0
        return Result(positions=slots, confidence=conf, puzzle_confidence=None if whole is None else float(whole),
                      image=None, margins=mine, generated=np.zeros((0, 2), int), cells=slots, tiles=None)


def sampling_defaults(ckpt):
    """{steps, sampler, samples, assign, symmetries} to solve a bag of pieces with: SAMPLING, replaced by the settings
    of the checkpoint's confidence table, if it has one (jpdvt.load and sample.py --pieces / --frames)."""
    fitted = (ckpt.get("calibration") or {}).get("settings", {})
    return {k: fitted.get(k, FITTED_BEFORE.get(k, v)) for k, v in SAMPLING.items()}


def check_pins(pins, n, grid, anchored):
    """{piece index: (row, col)} of the pinned pieces, each inside the grid and on a cell of its own; a model trained
    with an anchor needs one, one without cannot use any. Raises UserError naming what is wrong."""
    if pins and not anchored:
        raise UserError("this model was trained without --anchor, so it cannot use a pinned piece; drop --pin")
    if anchored and not pins:
        raise UserError("this model was trained with --anchor: pin a piece whose place you know (--pin FILE=ROW,COL)")
    for i, (r, c) in pins.items():
        if not (0 <= i < n and 0 <= r < grid[0] and 0 <= c < grid[1]):
            raise UserError(f"pin ({r}, {c}) is outside the {grid[0]}x{grid[1]} grid (rows and columns count from 0)")
    if len(set(pins.values())) < len(pins):
        raise UserError("two pins name the same cell; pin each piece to a cell of its own")
    return pins
