"""
The JPDVT method, for images and videos alike: the model, the training objective, solving, and scoring.

Paper: "Masked Jigsaw Transformer Diffusion" (Sec. 3.1), the supplement's "Predicted position encodings", and
"Metrics" (Sec. 4). Read this file after posenc.py and diffusion.py; the networks are in dit.py and unet3d.py.

- A puzzle batch is {content (B, N, ...) pieces in shuffled order, order (B, N) true position of each piece,
  missing (B, N) bool}. Its diffusion state has two parts: "pos", the positional code of every piece (the
  table row of its true position), and "content", the pixels (or latents) of the pieces.
- puzzle_loss (training): the codes of every piece are generated (except an anchored one, whose code is given),
  the content of missing pieces is generated, given content stays clean; per-part weighted MSE.
- solve (inference): sample the codes (and missing content), then give each piece the true position whose code
  is nearest to its predicted one (a one-to-one assignment: Hungarian, or the paper's greedy rule).
- score: images: piece and puzzle accuracy over the pieces the model had to place (given, not anchored);
  videos: normalized Kendall distance and exact order, strict (every piece must sit in its own slot) and with
  generated pieces compared as a set (they start as interchangeable noise).

    model, diffusion = build_model(config)                       # config: a checkpoint's "config" dict
    losses = puzzle_loss(model, diffusion, batch, position_table(config), config["anchor"], weights)
    positions, content, metrics = evaluate(model, diffusion, batch, config, steps=50, sampler="ddpm")
"""
import numpy as np
import torch

from diffusion import GaussianDiffusion
from dit import DiT, DiTConfig
from metrics import assign, kendall_distance, piece_accuracy, puzzle_accuracy, relabel_generated
from posenc import grid_table, sequence_table
from unet3d import UNet3D, UNetConfig


# ----------------------------------------------------------------------------
# Model and codes
# ----------------------------------------------------------------------------

def build_model(config):
    """The network (DiT for images, pseudo-3D U-Net for videos) and the diffusion (T = 1000) of a config dict."""
    model = DiT(DiTConfig(**config["model"])) if config["kind"] == "image" else UNet3D(UNetConfig(**config["model"]))
    return model, GaussianDiffusion(1000, prediction=config["prediction"])


def position_table(config):
    """(num_positions, D): the true code of every position: 2D 32-d for an image grid, 1D 16-d for a video."""
    return grid_table(*config["grid"]) if config["kind"] == "image" else sequence_table(config["pieces"])


# ----------------------------------------------------------------------------
# Objective and solver
# ----------------------------------------------------------------------------

def anchor_mask(batch, anchored):
    """(B, N) bool: pieces whose true positional code is given to the model (piece 0 when anchored)."""
    a = torch.zeros_like(batch["missing"])
    if anchored:
        a[:, 0] = True
    return a


def model_fn(model, missing, anchor):
    """Adapt model(pos, content, t, missing, anchor) -> (pos, content) to the diffusion's dict interface."""
    def fn(xt, t):
        pos, content = model(xt["pos"], xt["content"], t, missing, anchor)
        return {"pos": pos, "content": content}
    return fn


def puzzle_loss(model, diffusion, batch, table, anchored, weights):
    """Diffusion loss of one batch; table (num_positions, D) holds the true code of every position."""
    anchor = anchor_mask(batch, anchored)
    x0 = {"pos": table[batch["order"]], "content": batch["content"]}
    masks = {"pos": ~anchor, "content": batch["missing"]}
    return diffusion.training_losses(model_fn(model, batch["missing"], anchor), x0, masks, weights)


@torch.no_grad()
def solve(model, diffusion, batch, table, anchored, steps=50, sampler="ddim", method="hungarian",
          generator=None, progress=False, known=None, latents=False, samples=1):
    """
    Returns (positions (B, N) int array: predicted position of each piece, content with missing generated).
    known: (B, N) bool of pieces whose true code is given (default: the anchor); all True generates only the
    missing content at known positions (temporal super-resolution). latents: the content is autoencoder latents
    (about unit variance), so its predictions are not clipped to [-1, 1] like codes and pixels are.
    samples: draw that many independent samples of the codes and assign on their mean distance to each true
    code (a small ensemble; the content returned is the first sample's).
    """
    anchor = anchor_mask(batch, anchored) if known is None else known
    keep = ~batch["missing"]
    content = batch["content"] * keep.view(*keep.shape, *[1] * (batch["content"].dim() - 2))
    given = {"pos": table[batch["order"]] * anchor[..., None], "content": content}
    masks = {"pos": ~anchor, "content": batch["missing"]}
    cost, content = 0, None
    for _ in range(samples):
        out = diffusion.sample(model_fn(model, batch["missing"], anchor), given, masks, steps, sampler,
                               generator=generator, progress=progress, unclipped=("content",) if latents else ())
        cost = cost + torch.cdist(out["pos"].float(), table[None].float().expand(out["pos"].shape[0], -1, -1))
        content = out["content"] if content is None else content
    positions = np.stack([assign(c, method) for c in cost.cpu()])   # (B, N, positions) summed distances
    return positions, content


# ----------------------------------------------------------------------------
# Scoring
# ----------------------------------------------------------------------------

# what each metric counts, written into metrics.json beside the numbers
COUNTED = {
    "image": "piece_acc and puzzle_acc count the pieces the model had to place: given pieces, not the anchored one "
             "(whose position the model is told); missing pieces are generated and not scored",
    "video": "kendall and exact compare every piece's slot, generated pieces included, each against the slot of the "
             "clip it replaced (strict); kendall_set and exact_set compare the slots of generated pieces as a set "
             "(they start as interchangeable noise); the anchor (first piece) counts in all four",
}


def score(positions, batch, config):
    """Metrics of predicted positions (B, N) against a batch's truth; see COUNTED."""
    order, missing = batch["order"].cpu().numpy(), batch["missing"].cpu().numpy()
    if config["kind"] == "image":
        placed = ~missing & ~anchor_mask(batch, config["anchor"]).cpu().numpy()
        return {"piece_acc": piece_accuracy(positions, order, placed),
                "puzzle_acc": puzzle_accuracy(positions, order, placed)}
    as_set = relabel_generated(positions, order, missing)
    return {"kendall": float(np.mean(kendall_distance(positions, order))),
            "exact": puzzle_accuracy(positions, order),
            "kendall_set": float(np.mean(kendall_distance(positions, as_set))),
            "exact_set": puzzle_accuracy(positions, as_set)}


def evaluate(model, diffusion, batch, config, steps, sampler="ddim", method="hungarian", generator=None,
             progress=False, samples=1):
    """Solve a batch (its content already latents for a --vae model) and score it: (positions, content, metrics)."""
    table = position_table(config).to(batch["content"].device)
    positions, content = solve(model, diffusion, batch, table, config["anchor"], steps, sampler, method, generator,
                               progress, latents=bool(config.get("vae")), samples=samples)
    return positions, content, score(positions, batch, config)
