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
  code distance: Hungarian, the least total distance (our default, chosen on val), or greedy, each piece in turn the
  nearest free position, as the paper's text describes it (metrics.py; --assign greedy). A pinned piece keeps its
  cell: the anchor, whose code is told to a network trained with one; an anchored scoring of a network trained
  without one pins the anchor in the assignment only (solve's `pinned`). A missing piece takes part like
  the others, as in the paper, which generates the positions of given and missing pieces alike: nobody knows which
  cells the missing pieces came from, so its generated code may win any cell. The cell it gets is where its
  generated content goes, and it can take a real piece's cell (the displaced real piece then counts as wrong).
- Temporal super-resolution (a video use of the same solve, the supplement's): the code of every given piece is
  told, and only the missing pieces between them are generated.
- What differs between image and video puzzles: the table of true codes (position_table) and the scores (score);
  the rest branches nowhere. A video puzzle is always anchored (VideoConfig.anchor), an image puzzle when its
  settings say so (ImageConfig.anchor: in training, or as the scoring protocol, sample.py --anchor).

    model = DiT(config.model); diffusion = GaussianDiffusion(1000, config.prediction)
    table, given = position_table(config), given_codes(batch, config.puzzle.anchor)
    weights = {"code": 1.0, "content": 0.1}                     # train_image.py's (train_video.py: 0.2 and 0.8)
    losses = puzzle_loss(model, diffusion, batch, table=table, given=given, weights=weights)
    positions, content = solve(model, diffusion, batch, table=table, opts=SampleOptions(steps=50), given=given)
    scores = score(config.puzzle, positions, batch)             # piece_acc, puzzle_acc (clips: kendall, exact, ...)
"""
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from metrics import (
    assign,
    assign_batch,
    kendall_distance,
    kendall_reversible,
    piece_accuracy,
    puzzle_accuracy,
    relabel_generated,
)
from posenc import grid_table, sequence_table

# ----------------------------------------------------------------------------
# The method: training objective and solver
# ----------------------------------------------------------------------------

@dataclass
class SampleOptions:
    """How solve() samples and assigns (sample.py's flags of the same names)."""
    steps: int = 50                # sampling steps, respaced out of T = 1000
    sampler: str = "ddpm"          # ancestral DDPM or deterministic DDIM (diffusion.SAMPLERS)
    assign: str = "hungarian"      # codes -> positions: hungarian (optimal) or greedy (paper's text; metrics.ASSIGNERS)
    samples: int = 1               # independent samples of the codes, assigned on their mean distance (not in
                                   # the paper, which samples once)
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


def solve(model, diffusion, batch, table, opts, given, latent=False, pinned=None):
    """
    Returns (positions (B, N) int array: predicted position of each piece, content with missing pieces generated):
    code_costs, then arrange. pinned (B, N) bool: the pieces kept on their true cells in the assignment (default:
    `given`, the pieces whose code the network is told; a model trained without an anchor is told nothing, and an
    anchored scoring protocol pins its anchor in the assignment only). With several samples, a missing piece's cell
    comes from all of them; its drawing is the first sample's, re-paired with the cells (follow_cells).
    """
    costs, generated = code_costs(model, diffusion, batch, table=table, opts=opts, given=given, latent=latent)
    positions = arrange(costs, pinned_cells(batch, given if pinned is None else pinned), opts.assign)
    if opts.samples > 1 and batch["missing"].any():
        generated = follow_cells(generated, costs, positions, batch)
    return positions, generated


def arrange(costs, pinned, method):
    """
    (B, N) int array: the pieces matched to positions one to one from the samples' costs (S, B, N, positions), a
    pinned piece (pinned_cells) on its cell. Hungarian (the least total distance) or the paper's greedy rule, on the
    mean distance of the S samples (a small ensemble: a mean of distances keeps each sample's vote, where a mean of
    codes from samples that chose different cells would sit between them, near neither).
    """
    return assign_batch(costs.mean(0), method, pinned=pinned)                          # (B, N)


def follow_cells(generated, costs, positions, batch):
    """The first sample's drawings re-paired with the cells that the answer gives the missing pieces: a missing piece
    has no content of its own, so each of those cells shows the drawing whose first-sample code lies nearest it (one to
    one), not whichever drawing the piece that won the cell happened to make."""
    first, out = costs[0], generated.clone()
    for b, miss in enumerate(batch["missing"].cpu().numpy()):
        m = np.flatnonzero(miss)
        if len(m) > 1:                                # drawing of piece m[i] -> the cell held by piece m[pair[i]]
            pair = assign(first[b][m][:, positions[b, m]].cpu().numpy(), "hungarian")
            out[b, m[pair]] = generated[b, m]
    return out


def pinned_cells(batch, pinned):
    """(B, N) long: the true cell of each pinned piece (pinned (B, N) bool: the anchor), -1 elsewhere: the assignment
    keeps a pinned piece on its cell."""
    return torch.where(pinned, batch["true_pos"], torch.full_like(batch["true_pos"], -1))


# ----------------------------------------------------------------------------
# What differs between image and video puzzles
# ----------------------------------------------------------------------------

def position_table(config):
    """The true code of every position: images (rows * cols, D), the 2D code of every grid cell in raster order (D:
    the DiT's code_dim; with codes="token", (rows * cols, K, D): the code copied onto each of a piece's K tokens);
    videos (pieces, 16), the 1D code of every time slot."""
    puzzle, model = config.puzzle, config.model
    if puzzle.kind == "video":
        return sequence_table(puzzle.pieces)
    table = grid_table(*puzzle.grid, dim=model.code_dim)
    if model.codes == "token":
        k = (model.piece_size // model.patch_size) ** 2
        table = table[:, None].expand(-1, k, -1).contiguous()
    return table


def score(puzzle, positions, batch):
    """
    The scores of predicted positions (B, N) (numpy) of a batch of `puzzle`'s puzzles, each a (B,) array (their mean is
    the figure).
    - Images: piece and puzzle accuracy over the pieces the model had to place: not the anchor, if the puzzles have one
      (its cell is told), nor the missing pieces (their content is generated).
    - Clips: the Kendall distance of the order and whether it is exact, strict (every slot, the anchor and generated
      pieces included) and with generated pieces as a set (which generated piece fills which missing slot is
      arbitrary), and the authors' reversible Kendall distance.
    """
    true_pos, missing = batch["true_pos"].cpu().numpy(), batch["missing"].cpu().numpy()
    if puzzle.kind == "image":
        placed = ~missing & ~given_codes(batch, puzzle.anchor).cpu().numpy()
        return {"piece_acc": np.array([piece_accuracy(*one) for one in zip(positions, true_pos, placed)]),
                "puzzle_acc": np.array([puzzle_accuracy(*one) for one in zip(positions, true_pos, placed)])}
    as_set = relabel_generated(positions, true_pos, missing)
    return {"kendall": kendall_distance(positions, true_pos),
            "exact": (positions == true_pos).all(1).astype(float),
            "kendall_set": kendall_distance(positions, as_set),
            "exact_set": (positions == as_set).all(1).astype(float),
            "kendall_rev": kendall_reversible(positions, true_pos)}
