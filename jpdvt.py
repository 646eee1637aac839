"""
The JPDVT method, for images and videos alike: the training objective, the solver, and what differs between image
and video puzzles.

Paper: Sec. 3.1, "Masked Jigsaw Transformer Diffusion", and the supplement's "Predicted position encodings".
Read this file after posenc.py and diffusion.py; the networks are in dit.py and unet3d.py, the puzzles in puzzles.py.

- A puzzle batch is {content (B, N, ...) pieces in shuffled order, true_pos (B, N) the true position of each
  piece, missing (B, N) bool}. Its diffusion state has two parts: "code", the positional code of every piece (the
  row of the position table at its true position), and "content", the pixels (or latents) of the pieces.
- `given` (B, N) bool marks the pieces whose code the model is told (given_codes: the first piece of an anchored
  puzzle; temporal super-resolution, which generates new pieces between given ones of a clip, passes its own:
  every given piece). For each part of each piece:

  | piece                 | code: noised, in the loss, put back each step | content: the same   | scored               |
  | --------------------- | --------------------------------------------- | ------------------- | -------------------- |
  | placed (has content)  | yes, yes, no (generated)                      | no, no, yes (clean) | yes                  |
  | missing               | yes, yes, no (generated)                      | yes, yes, no        | images no, videos yes|
  | anchored (code told)  | no, no, yes (its true code)                   | no, no, yes (clean) | images no, videos yes|

  Scores: an image puzzle is scored per piece, so only the pieces the model had to place count; a clip is scored
  as one order (the Kendall distance of the paper's Table 5), so every slot counts, the first one's too.

- puzzle_loss (training): per-part weighted MSE over the generated entries (each part's mean over its generated
  entries in the batch).
- solve (inference): sample the codes (and missing content), then match the pieces to the true positions one to one by
  code distance: Hungarian, the least total distance, or greedy, each piece in turn the nearest free position, as the
  paper's text describes it (metrics.py). A piece whose code is told keeps its cell. A missing piece takes part like
  the others, as in the paper, which generates the positions of given and missing pieces alike: nobody knows which
  cells the missing pieces came from, so its generated code may win any cell. The cell it gets is where its
  generated content goes, and it can take a real piece's cell (the displaced real piece then counts as wrong).
- Temporal super-resolution (a video use of the same solve, the supplement's): the code of every given piece is
  told, and only the missing pieces between them are generated.
- Images / Videos (kind_of(config)): the table of true codes, the network, the told pieces and the scores of each.
- load: a trained checkpoint ready to solve your own bag of pieces (solving/solver.py holds it).

    model = DiT(config.model); diffusion = GaussianDiffusion(1000, config.prediction)
    given = given_codes(batch, anchored=False)
    weights = {"code": 1.0, "content": 0.1}                     # train_image.py's (train_video.py: 0.2 and 0.8)
    losses = puzzle_loss(model, diffusion, batch, table=table, given=given, weights=weights)
    positions, content = solve(model, diffusion, batch, table=table, opts=SampleOptions(steps=50), given=given)
    result = jpdvt.load("checkpoints/image-photos-3x3.pt").solve(pieces)   # .positions, .confidence, .image
"""
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from dit import DiTConfig
from metrics import (
    assign_batch,
    kendall_distance,
    kendall_reversible,
    piece_accuracy,
    puzzle_accuracy,
    relabel_generated,
)
from posenc import grid_table, sequence_table
from puzzles import ImageConfig, VideoConfig, judge

# ----------------------------------------------------------------------------
# The method: training objective and solver
# ----------------------------------------------------------------------------

JUDGES = {"none": "the mean distance of the samples decides (the paper: one sample)",
          "edges": "of the samples' arrangements, the one whose pieces fit best across their borders (images, by "
                   "Gallagher's MGC) or cuts (clips) wins (puzzles.judge; not in the paper)"}


@dataclass
class SampleOptions:
    """How solve() samples and assigns (sample.py's flags of the same names)."""
    steps: int = 50                # sampling steps, respaced out of T = 1000
    sampler: str = "ddpm"          # ancestral DDPM or deterministic DDIM (diffusion.SAMPLERS)
    assign: str = "hungarian"      # codes -> positions: hungarian (optimal) or greedy (paper's text; metrics.ASSIGNERS)
    samples: int = 1               # independent samples of the codes, assigned on their mean distance (not in
                                   # the paper, which samples once)
    judge: str = "none"            # none, or edges: of the samples' arrangements, keep the one whose pieces fit best
                                   # across their borders (puzzles.judge; not in the paper)
    generator: Optional[torch.Generator] = None   # the noise of the samples (None: torch's global generator)
    callback: Optional[Callable] = None           # callback(i, x, x0) after every step of the first sample


def given_codes(batch, anchored):
    """(B, N) bool: the pieces whose true positional code is given to the model: piece 0 when `anchored` (images: the
    first shuffled piece, at a random cell; videos: the first piece in time, which stays first), else none."""
    given = torch.zeros_like(batch["missing"])
    given[:, 0] = anchored
    return given


def model_fn(model, missing, given):
    """Adapt model(code, content, t, missing, given) -> (code, content) to the diffusion's dict interface."""
    def fn(xt, t):
        code, content = model(xt["code"], xt["content"], t, missing, given)
        return {"code": code, "content": content}
    return fn


# ----------------------------------------------------------------------------
# Training objective
# ----------------------------------------------------------------------------

def clean_parts(batch, table):
    """The clean diffusion state x0 of a batch: the true code of every piece (B, N, D) and the content (B, N, ...)."""
    return {"code": table[batch["true_pos"]], "content": batch["content"]}


def puzzle_loss(model, diffusion, batch, table, given, weights, t=None, noise=None):
    """Diffusion loss of one batch; table (num_positions, D) holds the true code of every position; given (B, N): the
    pieces whose code is told (given_codes); t: (B,) long diffusion steps and noise {"code", "content"}: the draws
    (default: drawn here, diffusion.draw)."""
    masks = {"code": ~given, "content": batch["missing"]}                        # what is generated
    return diffusion.training_losses(model_fn(model, batch["missing"], given), clean_parts(batch, table), masks,
                                     weights=weights, t=t, noise=noise)


# ----------------------------------------------------------------------------
# Solver
# ----------------------------------------------------------------------------

def piece_codes(code, table):
    """(codes (B, N, D), cells (positions, D)): a piece's code and the true code of each cell. With a code per token
    (dit.CODES "token": code (B, N, K, D), table (positions, K, D)) a piece's mean over its K tokens, as the authors'
    sampler averages its tokens' predictions; else code and table as they are."""
    return (code.mean(2), table[:, 0]) if code.dim() == 4 else (code, table)


@torch.no_grad()
def code_costs(model, diffusion, batch, table, opts, given, latent=False):
    """
    Sample the codes (and missing content) of a batch opts.samples times: returns (costs (S, B, N, positions): each
    sample's distance from each piece's sampled code to every true code; content with missing pieces generated, the
    first sample's). given (B, N) bool: the pieces
    whose true code is told (given_codes; all True generates only the missing content at known positions: temporal
    super-resolution). latent: the content is autoencoder latents (about unit variance), so its predictions are not
    clipped to [-1, 1] like codes and pixels are.
    opts.callback(i, x, x0): called after every sampling step of the first sample with the state and predicted x0,
    {"code": (B, N, D), "content": (B, N, ...)} (GaussianDiffusion.sample; bench/animate.py draws them); it changes
    no result.
    """
    keep = ~batch["missing"]
    content = batch["content"] * keep.view(*keep.shape, *[1] * (batch["content"].dim() - 2))   # missing: zeros
    code = table[batch["true_pos"]]                                  # (B, N, D), or (B, N, K, D): a copy per token
    start = {"code": code * given.view(*given.shape, *[1] * (code.dim() - 2)), "content": content}  # untold codes:
    # zeros (both are placeholders: sample() starts every generated entry from noise)
    masks = {"code": ~given, "content": batch["missing"]}
    fn, b = model_fn(model, batch["missing"], given), len(content)
    costs = []
    for s in range(opts.samples):
        out = diffusion.sample(fn, start, masks, steps=opts.steps, sampler=opts.sampler, generator=opts.generator,
                               latent=("content",) if latent else (), callback=opts.callback if s == 0 else None)
        pred, cells = piece_codes(out["code"].float(), table.float())                       # (B, N, D), (P, D)
        costs.append(torch.cdist(pred, cells[None].expand(b, -1, -1)))                      # (B, N, positions)
        if s == 0:
            generated = out["content"]
    return torch.stack(costs), generated


def solve(model, diffusion, batch, table, opts, given, latent=False, grid=None):
    """
    Returns (positions (B, N) int array: predicted position of each piece, content with missing pieces generated, the
    first sample's): code_costs, then arrange. grid (rows, cols): image puzzles, for the judge. With several samples
    and missing pieces, a missing piece's cell comes from all samples and its drawing from the first, which drew it
    for the cell its own code pointed to: solving/solver.follow_cells re-pairs them for pictures.
    """
    costs, generated = code_costs(model, diffusion, batch, table=table, opts=opts, given=given, latent=latent)
    return arrange(costs, batch, given, opts, grid), generated


def arrange(costs, batch, given, opts, grid=None):
    """
    (B, N) int array: the pieces matched to positions one to one from the samples' costs (S, B, N, positions), a told
    piece on its cell. Hungarian (the least total distance) or the paper's greedy rule, on the mean distance of the K
    samples (a small ensemble: a mean of distances keeps each sample's vote, where a mean of codes from samples that
    chose different cells would sit between them, near neither). With opts.judge "edges", each sample's own
    arrangement and the ensemble's are candidates, and the one whose placed pieces fit best across their shared
    borders (images) or cuts (clips) wins.
    """
    pinned = pinned_cells(batch, given)
    if opts.judge == "none":
        return assign_batch(costs.mean(0), opts.assign, pinned=pinned)                  # (B, N)
    return judge(costs, batch["content"], batch["missing"], pinned, opts.assign, grid)


def pinned_cells(batch, given):
    """(B, N) long: the true cell of each piece whose code is told (the anchor), -1 elsewhere: the assignment keeps a
    told piece on its cell."""
    return torch.where(given, batch["true_pos"], torch.full_like(batch["true_pos"], -1))


# ----------------------------------------------------------------------------
# What differs between image and video puzzles
# ----------------------------------------------------------------------------

class Kind:
    """What image and video puzzles share (each says whether it is `anchored`: piece 0's code given)."""

    def given(self, batch):
        """(B, N) bool: given_codes of a batch of these puzzles (the anchor, if they have one)."""
        return given_codes(batch, self.anchored)


@dataclass
class Images(Kind):
    """Image puzzles (train_image.py): an R x C grid of square pieces; `model` (a dit.DiTConfig) sets the codes."""
    p: ImageConfig
    model: Optional[DiTConfig] = None
    vae = None                               # image pieces are always diffused in pixels

    @property
    def grid(self):
        """(rows, cols): where the judge finds each piece's neighbours."""
        return self.p.grid

    @property
    def anchored(self):
        """The code of the first shuffled piece (at a random cell) is given."""
        return self.p.anchor

    def table(self, grid=None):
        """(rows * cols, D): the 2D code of every grid position, raster order (D: the model's code_dim); with
        codes="token", (rows * cols, K, D): the same code copied onto each of a piece's K tokens."""
        dim, codes = (self.model.code_dim, self.model.codes) if self.model else (32, "piece")
        table = grid_table(*(grid or self.p.grid), dim=dim)
        if codes == "token":
            k = (self.model.piece_size // self.model.patch_size) ** 2
            table = table[:, None].expand(-1, k, -1).contiguous()
        return table

    def score(self, positions, batch):
        """Piece and puzzle accuracy of predicted positions (B, N) over the pieces the model had to place (metrics.json
        says so: sample.REPORT's "counted")."""
        true_pos, missing = batch["true_pos"].cpu().numpy(), batch["missing"].cpu().numpy()
        placed = ~missing & ~self.given(batch).cpu().numpy()      # not the anchored piece
        return {"piece_acc": piece_accuracy(positions, true_pos, placed),
                "puzzle_acc": puzzle_accuracy(positions, true_pos, placed)}


@dataclass
class Videos(Kind):
    """Temporal puzzles (train_video.py): a clip cut into pieces of consecutive frames; the first stays first."""
    p: VideoConfig
    anchored = True                          # the first piece in time stays first and its code is given
    grid = None                              # slots in a row: the judge compares consecutive pieces

    @property
    def vae(self):
        """The autoencoder folder: diffuse its latents (None: pixels)."""
        return self.p.vae

    def table(self):
        """(pieces, 16): the 1D code of every time slot."""
        return sequence_table(self.p.pieces)

    def score(self, positions, batch):
        """Kendall distance and exact order of predicted slots (B, N), strict (the README's figures) and with generated
        pieces as a set (which generated piece fills which missing slot is arbitrary), and the authors' reversible
        Kendall distance (metrics.json says what each counts: sample.REPORT's "counted")."""
        true_pos, missing = batch["true_pos"].cpu().numpy(), batch["missing"].cpu().numpy()
        as_set = relabel_generated(positions, true_pos, missing)
        return {"kendall": float(np.mean(kendall_distance(positions, true_pos))),
                "exact": puzzle_accuracy(positions, true_pos),
                "kendall_set": float(np.mean(kendall_distance(positions, as_set))),
                "exact_set": puzzle_accuracy(positions, as_set),
                "kendall_rev": float(np.mean(kendall_reversible(positions, true_pos)))}


def kind_of(config):
    """The kind of a Config or of its puzzle config, bound to that puzzle config (an image kind also to the Config's
    model config, which sets its codes)."""
    puzzle = getattr(config, "puzzle", config)
    return Images(puzzle, getattr(config, "model", None)) if puzzle.kind == "image" else Videos(puzzle)


def load(path, device="auto", precision="auto"):
    """A trained checkpoint ready to solve your own pieces: `jpdvt.load(path).solve(pieces)` (solving/solver.py)."""
    from solving.solver import load_solver  # what a bag of your own needs beyond the method: solving/
    return load_solver(path, device, precision)
