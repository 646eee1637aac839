"""
The JPDVT method, for images and videos alike: the training objective, the solver, and what differs between image
and video puzzles.

Paper: Sec. 3.1, "Masked Jigsaw Transformer Diffusion", and the supplement's "Predicted position encodings".
Read this file after posenc.py and diffusion.py; the networks are in dit.py and unet3d.py, the puzzles in puzzles.py.

- A puzzle batch is {content (B, N, ...) pieces in shuffled order, true_pos (B, N) the true position of each
  piece, missing (B, N) bool}. Its diffusion state has two parts: "code", the positional code of every piece (the
  row of the position table at its true position), and "content", the pixels (or latents) of the pieces.
- `given` (B, N) bool marks the pieces whose code the model is told ("told" below), `pinned` those kept on their true
  cells in the assignment; one table says both, and what is scored ("The anchor", below), and told_and_pinned decides
  them. For each part of
  each piece:

  | piece                 | code: noised, in the loss, put back each step | content: the same   |
  | --------------------- | --------------------------------------------- | ------------------- |
  | placed (has content)  | yes, yes, no (generated)                      | no, no, yes (clean) |
  | missing               | yes, yes, no (generated)                      | yes, yes, no        |
  | told (the anchor)     | no, no, yes (its true code)                   | no, no, yes (clean) |

- puzzle_loss (training): per-part weighted MSE over the generated entries (each part's mean over its generated
  entries in the batch).
- solve (inference): sample the codes (and missing content), then match the pieces to the true positions one to one by
  code distance: Hungarian, the least total distance (our default, chosen on val), or greedy, each piece in turn the
  nearest free position, as the paper's text describes it (metrics.py; --assign greedy). A pinned piece keeps its
  cell. A missing piece takes part like the others, as in the paper, which generates the positions of given and
  missing pieces alike: nobody knows which cells the missing pieces came from, so its generated code may win any
  cell. The cell it gets is where its generated content goes, and it can take a real piece's cell (the displaced real
  piece then counts as wrong). sample.py, solving.Solver and super-resolution all solve through `solve`; an option
  not in the paper, the judge (opts.judge, solving/judge.py), picks from the samples in place of the assignment.
- What differs between image and video puzzles: the table of true codes (position_table) and the scores (score);
  the rest branches nowhere.

    model = DiT(config.model); diffusion = GaussianDiffusion(1000, config.prediction)
    table, given = position_table(config), anchor_pieces(batch, config.puzzle.anchor)
    weights = {"code": 1.0, "content": 0.1}                     # config.TrainConfig's (train_video.py: 0.2 and 0.8)
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
    judge: Optional[Callable] = None  # judge(costs, batch, cells, assign) -> positions, instead of the assignment: the
    # judge over samples (solving/judge.py; not in the paper); None: the assignment (`assign`), as in the paper


SAMPLING = ("steps", "sampler", "samples", "assign")   # the options a checkpoint may store (its "sampling", chosen
# on val); sample.py's flags override them


# ----------------------------------------------------------------------------
# The anchor: which pieces are told, pinned and scored
# ----------------------------------------------------------------------------
# told: the network is given the piece's true code (the argument named `given` in puzzle_loss, code_costs, solve and
# the networks; the paper's "given" pieces, E^g, are another thing: those with content); pinned: the assignment keeps
# it on its true cell; scored: it counts in the figures (score, which skips pinned pieces). One function decides told
# and pinned, told_and_pinned, for training, sample.py, solving.Solver (a bag of pieces) and super-resolution alike.
#
# | puzzles                                    | told                | pinned              | scored                 |
# | ------------------------------------------ | ------------------- | ------------------- | ---------------------- |
# | image, trained and scored with an anchor   | the anchor          | the anchor          | placed pieces but it   |
# | image, trained without, scored with one    | none                | the anchor          | placed pieces but it   |
# | image without an anchor (--no-anchor)      | none                | none                | every placed piece     |
# | clip (always anchored: its first piece)    | the anchor          | the anchor          | every slot (the order) |
# | clip, super-resolution, any masked model   | the anchor          | every given piece   | (generated frames)     |
# | clip, a super-resolution model (superres)  | every given piece   | every given piece   | (generated frames)     |
# | your own pieces with pins (solving/bag.py) | the first pin, if trained with an anchor | every pin | (none) |
#
# A model trained with an anchor and scored without one (--no-anchor) is told nothing: it never sees its anchor.
# The anchor is the first shuffled piece (anchor_pieces). Training tells the anchor's code and nothing else, and the
# anchor is never missing: so a network is told at most one code, that of a piece with content, and only if it
# trained with an anchor. A super-resolution model (VideoConfig.superres = K) trains on one pattern instead: the
# pieces at slots 0, K+1, 2(K+1), ... given, the K between each pair missing, and told every given piece's code (a
# low-rate video comes in time order), so it is told them all (pinned_pieces). DEVIATION: the supplement applies the
# masked model directly; here a model is fine-tuned on the pattern so that the network is only told combinations it
# trained on. "Placed" pieces have content; a missing piece's content is generated and not scored in an image (a clip
# scores every slot, the generated pieces' too).

def anchor_pieces(batch, anchored):
    """(B, N) bool: the anchor, piece 0 when `anchored` (images: the first shuffled piece, at a random cell; videos:
    the first piece in time, which stays first), else none."""
    anchor = torch.zeros_like(batch["missing"])
    anchor[:, 0] = anchored
    return anchor


def pinned_pieces(batch, puzzle):
    """(B, N) bool: the pieces whose true cell is known in the puzzles of `puzzle` (an ImageConfig or VideoConfig):
    the anchor, and in super-resolution (puzzle.superres) every given piece."""
    pinned = anchor_pieces(batch, puzzle.anchor)
    return pinned | ~batch["missing"] if getattr(puzzle, "superres", 0) else pinned


def told_and_pinned(batch, pinned, trained):
    """(told, pinned) (B, N) bool from the pieces pinned to their true cells (B, N) bool, for a network trained on the
    puzzles of `trained` (its ImageConfig or VideoConfig): it is told the code of the first pinned piece with content
    of each puzzle, and only if it trained with an anchor; a super-resolution model (trained.superres) every pinned
    piece with content. The other pins hold their cells in the assignment only (the table above)."""
    can = pinned & ~batch["missing"]
    if getattr(trained, "superres", 0):
        return can, pinned
    first = can & (can.long().cumsum(1) == 1)
    return first & bool(trained.anchor), pinned


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
    pieces whose code is told (anchor_pieces); t: (B,) long diffusion steps and noise {"code", "content"}: the draws
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
    first sample's). given (B, N) bool: the pieces whose true code is told (told_and_pinned). latent: the content is
    autoencoder latents (about unit variance), so its predictions are not clipped to [-1, 1] like codes and pixels are.
    opts.callback(i, x, x0): called after every sampling step of the first sample with the state and predicted x0,
    {"code": (B, N, D), "content": (B, N, ...)} (GaussianDiffusion.sample; solving/animate.py draws them); it changes
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


def solve(model, diffusion, batch, table, opts, given, pinned=None, codec=None):
    """
    Returns (positions (B, N) int array: predicted position of each piece, content with missing pieces generated):
    code_costs, then place. pinned (B, N) bool: the pieces kept on their true cells in the assignment (default:
    `given`, the pieces whose code the network is told; told_and_pinned decides both). codec: a latent video model's
    autoencoder (sources/vae.py): the pieces are encoded before sampling and the content decoded after it.
    """
    inputs = codec.encode_batch(batch) if codec else batch
    costs, generated = code_costs(model, diffusion, inputs, table=table, opts=opts, given=given,
                                  latent=codec is not None)
    cells = pinned_cells(batch, given if pinned is None else pinned)
    positions, generated = place(costs, generated, batch, opts, cells)
    return positions, codec.decode(generated) if codec else generated


def place(costs, generated, batch, opts, cells):
    """(positions (B, N), content) from the samples' costs (S, B, N, positions): the assignment (arrange) or,
    with opts.judge, the judge's pick (not in the paper); a pinned piece (cells (B, N): its true cell, else -1) keeps
    its cell. With several samples, a missing piece's cell comes from all of them; its drawing is the first sample's,
    re-paired with the cells (follow_cells)."""
    positions = opts.judge(costs, batch, cells, opts.assign) if opts.judge else arrange(costs, cells, opts.assign)
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


def score(puzzle, positions, batch, pinned=None):
    """
    The scores of predicted positions (B, N) (numpy) of a batch of `puzzle`'s puzzles, each a (B,) array (their mean is
    the figure); pinned (B, N) bool: the pieces kept on their cells (default: the puzzles' anchor, anchor_pieces).
    - Images: piece and puzzle accuracy over the pieces the model had to place: not a pinned piece (the anchor: its
      cell is known), nor the missing pieces (their content is generated).
    - Clips: the Kendall distance of the order and whether it is exact, strict (every slot, the anchor and generated
      pieces included) and with generated pieces as a set (which generated piece fills which missing slot is
      arbitrary), and the authors' reversible Kendall distance.
    """
    true_pos, missing = batch["true_pos"].cpu().numpy(), batch["missing"].cpu().numpy()
    if puzzle.kind == "image":
        pinned = anchor_pieces(batch, puzzle.anchor) if pinned is None else pinned
        placed = ~missing & ~pinned.cpu().numpy()
        return {"piece_acc": np.array([piece_accuracy(*one) for one in zip(positions, true_pos, placed)]),
                "puzzle_acc": np.array([puzzle_accuracy(*one) for one in zip(positions, true_pos, placed)])}
    as_set = relabel_generated(positions, true_pos, missing)
    return {"kendall": kendall_distance(positions, true_pos),
            "exact": (positions == true_pos).all(1).astype(float),
            "kendall_set": kendall_distance(positions, as_set),
            "exact_set": (positions == as_set).all(1).astype(float),
            "kendall_rev": kendall_reversible(positions, true_pos)}
