"""
The JPDVT method, for images and videos alike: the training objective and the solver.

Paper: "Masked Jigsaw Transformer Diffusion" (Sec. 3.1) and the supplement's "Predicted position encodings". Read
this file after posenc.py and diffusion.py; the networks are in dit.py and unet3d.py, what differs between images
and videos in kinds.py.

- A puzzle batch is {content (B, N, ...) pieces in shuffled order, true_pos (B, N) the true position of each
  piece, missing (B, N) bool}. Its diffusion state has two parts: "code", the positional code of every piece (the
  row of the position table at its true position), and "content", the pixels (or latents) of the pieces.
- `given` (B, N) bool marks the pieces whose code the model is told (given_codes: the first piece of an anchored
  puzzle; all of them in temporal super-resolution). For each part of each piece:

  | piece                 | code: noised, in the loss, put back each step | content: the same   | scored               |
  | --------------------- | --------------------------------------------- | ------------------- | -------------------- |
  | placed (content given)| yes, yes, no (generated)                      | no, no, yes (clean) | yes                  |
  | missing               | yes, yes, no (generated)                      | yes, yes, no        | images no, videos yes|
  | anchored (code given) | no, no, yes (its true code)                   | no, no, yes (clean) | images no, videos yes|

- puzzle_loss (training): per-part weighted MSE over the generated entries (each part's mean over its generated
  entries in the batch).
- solve (inference): sample the codes (and missing content), then give each piece the true position whose code
  is nearest to its predicted one (a one-to-one assignment: Hungarian, or greedy as the paper's text describes it,
  piece by piece by L2 distance; the authors' released code uses L1 and, for images, goes position by position).

    model = DiT(config.model); diffusion = GaussianDiffusion(1000, config.prediction)
    given = given_codes(batch, anchored=False)
    losses = puzzle_loss(model, diffusion, batch, table=table, given=given, weights={"code": 1.0, "content": 0.1})
    positions, content = solve(model, diffusion, batch, table=table, opts=SampleOptions(steps=50), given=given)
"""
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from metrics import assign_batch


@dataclass
class SampleOptions:
    """How solve() samples and assigns (sample.py's flags of the same names)."""
    steps: int = 50                # sampling steps, respaced out of T = 1000
    sampler: str = "ddpm"          # ancestral DDPM or deterministic DDIM (diffusion.SAMPLERS)
    assign: str = "hungarian"      # codes -> positions: hungarian (optimal) or greedy (paper's text; metrics.ASSIGNERS)
    samples: int = 1               # independent samples of the codes, assigned on their mean distance
    generator: Optional[torch.Generator] = None   # the noise of the samples (None: torch's global generator)
    callback: Optional[Callable] = None           # callback(i, x, x0) after every step of the first sample


def load(path, device="auto"):
    """A trained checkpoint ready to solve your own pieces: solver.Solver (sample.py's defaults: DDPM-50, Hungarian).

        solver = jpdvt.load("checkpoints/image-photos-3x3.pt")
        result = solver.solve(pieces)     # result.positions, .confidence, .puzzle_confidence, .image
    """
    from solver import Solver  # solver.py builds on this module: imported when first used
    return Solver.load(path, device=device)


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

def puzzle_loss(model, diffusion, batch, table, given, weights, t=None):
    """Diffusion loss of one batch; table (num_positions, D) holds the true code of every position; given (B, N): the
    pieces whose code is told (given_codes); t: (B,) long diffusion steps (default: one at random per puzzle)."""
    x0 = {"code": table[batch["true_pos"]], "content": batch["content"]}      # (B, N, D), (B, N, ...)
    masks = {"code": ~given, "content": batch["missing"]}                        # what is generated
    return diffusion.training_losses(model_fn(model, batch["missing"], given), x0, masks, weights=weights, t=t)


# ----------------------------------------------------------------------------
# Solver
# ----------------------------------------------------------------------------

@torch.no_grad()
def code_costs(model, diffusion, batch, table, opts, given, latent=False):
    """
    Sample the codes (and missing content) of a batch: returns (cost (B, N, positions): each piece's distance from
    its sampled code to every true code, the mean over opts.samples samples; content with missing pieces generated,
    the first sample's). given (B, N) bool: the pieces whose true code is told (given_codes; all True generates only
    the missing content at known positions: temporal super-resolution). latent: the content is autoencoder latents
    (about unit variance), so its predictions are not clipped to [-1, 1] like codes and pixels are.
    opts.callback(i, x, x0): called after every sampling step of the first sample with the state and predicted x0,
    {"code": (B, N, D), "content": (B, N, ...)} (GaussianDiffusion.sample; sample.py --animate draws them); it changes
    no result.
    """
    keep = ~batch["missing"]
    content = batch["content"] * keep.view(*keep.shape, *[1] * (batch["content"].dim() - 2))   # missing: zeros
    start = {"code": table[batch["true_pos"]] * given[..., None], "content": content}        # untold codes: zeros
    masks = {"code": ~given, "content": batch["missing"]}
    fn, b = model_fn(model, batch["missing"], given), len(content)
    cost, generated = 0, None
    for s in range(opts.samples):
        out = diffusion.sample(fn, start, masks, steps=opts.steps, sampler=opts.sampler, generator=opts.generator,
                               latent=("content",) if latent else (), callback=opts.callback if s == 0 else None)
        cost = cost + torch.cdist(out["code"].float(), table[None].float().expand(b, -1, -1))  # (B, N, positions)
        generated = out["content"] if generated is None else generated
    return cost / opts.samples, generated


def solve(model, diffusion, batch, table, opts, given, latent=False):
    """
    Returns (positions (B, N) int array: predicted position of each piece, content with missing pieces generated):
    code_costs, then a one-to-one assignment of pieces to positions (Hungarian, or the paper's greedy rule). With
    opts.samples = K, the K samples are assigned on their mean distance to each true code (a small ensemble).
    """
    cost, generated = code_costs(model, diffusion, batch, table=table, opts=opts, given=given, latent=latent)
    return assign_batch(cost, opts.assign), generated                                       # (B, N)
