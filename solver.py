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
from metrics import assign
from pictures import assemble, mark_cells
from posenc import grid_table
from puzzles import video_tensor
from sources import as_image, clip_frames, piece_pixels
from training import autocast
from vae import load_codec


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

    def __init__(self, config, ckpt, device, precision, opts):
        self.config, self.step, self.device, self.precision, self.opts = config, ckpt["step"], device, precision, opts
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
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
    def load(cls, path, device="auto", opts=None, precision="auto"):
        """The solver of checkpoint `path` (sample.py's defaults: DDPM-50, Hungarian, 1 sample, seed 0)."""
        ckpt, device = load_checkpoint(path), resolve_device(device)
        opts = opts or SampleOptions(generator=torch.Generator(device).manual_seed(0))
        return cls(ckpt["config"], ckpt, device=device, precision=precision, opts=opts)

    def costs(self, batch, given=None, callback=None, table=None, opts=None):
        """(cost (B, N, positions), content with missing pieces generated) of a batch of pixel puzzles
        (jpdvt.code_costs; latents for a latent model: see pixels()). given: the pieces whose code is told (default:
        the anchor, if the model has one); callback: called after every sampling step; table: the true codes of
        another grid than the model's; opts: other sampling options than the solver's."""
        given = given_codes(batch, self.kind.anchored) if given is None else given
        if self.codec:
            batch = self.codec.encode_batch(batch)
        opts = replace(opts or self.opts, callback=callback)
        with autocast(self.device, self.precision):
            return code_costs(self.model, self.diffusion, batch, table=self.table if table is None else table,
                              opts=opts, given=given, latent=self.codec is not None)

    def mean_costs(self, batch, given=None, table=None):
        """The costs of the one-call posterior-mean estimate of the codes (steps 1, with its own noise, so the solve's
        stays as it was): the evidence of the confidence (confidence.py)."""
        opts = SampleOptions(steps=1, sampler="ddim", generator=torch.Generator(self.device).manual_seed(0))
        return self.costs(batch, given=given, table=table, opts=opts)[0]

    def solve_batch(self, batch, given=None, callback=None):
        """(positions (B, N), content): the one-to-one assignment of costs() (jpdvt.solve)."""
        cost, content = self.costs(batch, given=given, callback=callback)
        return np.stack([assign(c, self.opts.assign) for c in cost.cpu()]), content

    def pixels(self, content):
        """Generated content as pixels (decoded by the autoencoder of a latent model), for pictures."""
        return self.codec.decode(content) if self.codec else content

    def confidence(self, margin, part="piece"):
        """Probabilities of being right for margins (confidence.probability), or None without a calibration table."""
        return None if self.calibration is None else probability(self.calibration[part], margin)

    # ------------------------------------------------------------------------- your own pieces

    def solve(self, pieces, pins=None, grid=None, callback=None):
        """
        Solve a bag of pieces nobody has solved: images (a list of PIL images or arrays, an (N, H, W, 3) array, or
        a {name: piece} dict whose names errors use; resized to the model's piece size) or, for a video model, clips
        ((F, H, W, C) arrays of the model's frames per piece). pins: {index: (row, col)} (video: {index: 0}) of
        pieces whose place you know, for models trained with an anchor (a video model without a pin tries each
        piece as the first and keeps the surest order). grid: (rows, cols) when it differs from the model's; cells
        beyond the pieces are missing and generated.
        callback: an animate.Recorder (images).
        """
        names = list(pieces) if isinstance(pieces, dict) else list(range(len(pieces)))
        pieces = list(pieces.values()) if isinstance(pieces, dict) else list(pieces)
        if self.config.kind == "video":
            return self._order(dict(zip(names, pieces)), pins or {})
        puzzle = self.config.puzzle
        grid, side, n = tuple(grid or puzzle.grid), puzzle.piece_size, len(pieces)
        cells = grid[0] * grid[1]
        if not 1 <= n <= cells:
            raise UserError(f"{n} pieces do not fit a {grid[0]}x{grid[1]} grid; pass --grid with at least {n} cells")
        if pins and not self.kind.anchored:
            raise UserError("this model was trained without --anchor, so it cannot use a pinned piece; drop --pin")
        if self.kind.anchored and not pins:
            raise UserError("this model was trained with --anchor: pin one piece whose place you know (--pin)")
        images = [as_image(p, name) for name, p in zip(names, pieces)]
        content = np.zeros((cells, side, side, 3), np.float32)
        content[:n] = [piece_pixels(im, side, name) for name, im in zip(names, images)]
        true_pos, known = np.zeros(cells, np.int64), np.zeros(cells, bool)
        for i, (r, c) in (pins or {}).items():
            true_pos[i], known[i] = r * grid[1] + c, True
        batch = {"content": torch.from_numpy(content).permute(0, 3, 1, 2)[None] * 2 - 1,
                 "true_pos": torch.from_numpy(true_pos)[None], "missing": torch.from_numpy(np.arange(cells) >= n)[None]}
        batch = {k: v.to(self.device) for k, v in batch.items()}
        told, table = torch.from_numpy(known)[None].to(self.device), grid_table(*grid).to(self.device)
        cost, generated = self.costs(batch, given=told, callback=callback, table=table)
        pos = assign(cost[0].float().cpu().numpy(), self.opts.assign)
        margin = margins(self.mean_costs(batch, given=told, table=table).cpu().numpy(), pos[None])[0][:n]
        margin[known[:n]] = np.inf                                 # pinned: told, not found
        free = margin[~known[:n]]
        whole = self.confidence(free.min(), part="puzzle") if len(free) else 1.0
        show = int(min(DISPLAY, max(side, np.median([min(im.size) for im in images]))))   # the pieces' own pixels
        tiles = np.stack([piece_pixels(im, show, name) for name, im in zip(names, images)])
        every = np.concatenate([tiles, enlarge(generated[0, n:], show, smooth=True)])
        img = mark_cells(assemble(every, pos, grid, border=2, fill=1.0), pos[n:], grid, side=show, border=2)
        return Result(positions=np.stack(divmod(pos[:n], grid[1]), axis=1), confidence=self.confidence(margin),
                      puzzle_confidence=None if whole is None else float(whole),
                      image=Image.fromarray((img * 255).round().astype(np.uint8)), margins=margin,
                      generated=np.stack(divmod(pos[n:], grid[1]), axis=1), cells=pos, tiles=tiles)

    def _order(self, clips, pins):
        """Video models: the time slot of each clip; the first piece is the model's anchor (pinned, or tried)."""
        puzzle = self.config.puzzle
        if len(clips) != puzzle.pieces:
            raise UserError(f"this model orders {puzzle.pieces} pieces of {puzzle.frames_per_piece} frame(s), got "
                            f"{len(clips)}; pass exactly {puzzle.pieces}")
        if any(slot != 0 for slot in pins.values()) or len(pins) > 1:
            raise UserError("a video model is told only which piece comes first: --pin FILE=0")
        frames = [clip_frames(c, puzzle, name) for name, c in clips.items()]
        best = None
        for first in pins or range(len(clips)):                 # the first piece goes in front, as in training
            order = [first] + [i for i in range(len(clips)) if i != first]
            batch = {"content": video_tensor(np.stack([frames[i] for i in order]))[None],
                     "true_pos": torch.arange(len(clips))[None], "missing": torch.zeros(1, len(clips), dtype=bool)}
            batch = {k: v.to(self.device) for k, v in batch.items()}
            pos = assign(self.costs(batch)[0][0].cpu().numpy(), self.opts.assign)
            margin = margins(self.mean_costs(batch).cpu().numpy(), pos[None])[0][1:]
            if best is None or margin.min() > best[2].min():
                best = (order, pos, margin)
        order, pos, margin = best
        slots = np.empty(len(clips), np.int64)
        slots[order] = pos
        mine = np.empty(len(clips))
        mine[order] = np.concatenate([[np.inf], margin])
        conf, whole = self.confidence(mine), self.confidence(margin.min(), part="puzzle")
        return Result(positions=slots, confidence=conf, puzzle_confidence=None if whole is None else float(whole),
                      image=None, margins=mine, generated=np.zeros((0, 2), int), cells=slots, tiles=None)
