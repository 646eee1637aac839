"""
The judge (not in the paper): of the arrangements the model samples, keep the one whose pieces fit best, by a classic
cue. `sample.py --judge classic`, `python -m solving.own --judge classic` and `solver.solve(pieces, judge="classic")`
ask for it; without it, the paper's assignment decides (jpdvt.solve).

The candidates come from the model only: the assignment of the samples' mean cost (the ensemble, jpdvt.arrange, which
wins ties) and each sample assigned on its own. Each candidate is assembled and scored by an energy across the borders
of neighbouring pieces (images: Gallagher's Mahalanobis gradient compatibility, MGC, chosen on val) or across the cuts
between consecutive pieces (clips: the last frame of one against the first of the next). Pieces without content
(missing) are left out of the energy. bench/judge.py measures it (docs/judge.md).

    costs, content = jpdvt.code_costs(model, diffusion, batch, table, opts, given)     # (S, B, N, P), S samples
    positions = judge(costs, batch["content"], batch["missing"], jpdvt.pinned_cells(batch, given), "hungarian", grid)
"""
import numpy as np
import torch

from metrics import assign_batch

JUDGES = {"none": "the samples' mean distance decides the assignment (the paper's method)",
          "classic": "of the samples' arrangements (each sample's and their mean's), keep the one whose pieces fit "
                     "best across their borders (images: Gallagher's MGC) or cuts (clips); not in the paper"}
ENERGIES = ("l1", "l2", "predict", "mgc")   # the pair cost across a border (pair_costs)
ENERGY = "mgc"                               # chosen on val (bench/judge.py)


def lines(x):
    """(B, N, C, ...) -> (B, N, L, C): one pixel line of each piece (an image column or row, a video frame)."""
    return x.flatten(3).transpose(2, 3)


def pair_costs(a, a_in, b, b_in, energy):
    """(B, N, N): the cost of piece j's first and second lines b, b_in following piece i's last and next-to-last
    lines a, a_in, each (B, N, L, C): l1/l2 of the touching lines; predict: L1 of each side's linear prediction of
    the other's line; mgc: Gallagher's Mahalanobis gradient compatibility, both ways."""
    if energy == "mgc":
        return mahalanobis(a, a_in, b) + mahalanobis(b, b_in, a).transpose(1, 2)
    a, a_in, b, b_in = a[:, :, None], a_in[:, :, None], b[:, None], b_in[:, None]     # i along dim 1, j along dim 2
    if energy == "predict":
        return ((2 * a - a_in - b).abs() + (2 * b - b_in - a).abs()).mean((3, 4))
    return (a - b).abs().mean((3, 4)) if energy == "l1" else ((a - b) ** 2).mean((3, 4))


def mahalanobis(edge, inner, other, eps=1e-4):
    """(B, N, N): how unlikely the step edge_i -> other_j is under the gradients inner_i -> edge_i of piece i (its
    mean and covariance over the line; eps keeps the covariance invertible), summed over the line."""
    grad = edge - inner                                                         # (B, N, L, C)
    mu, centred = grad.mean(2), grad - grad.mean(2, keepdim=True)
    cov = centred.transpose(2, 3) @ centred / max(grad.shape[2] - 1, 1)         # (B, N, C, C)
    inv = torch.linalg.inv(cov + eps * torch.eye(grad.shape[3], device=grad.device))
    d = other[:, None] - edge[:, :, None] - mu[:, :, None, None]                # (B, N, N, L, C)
    return ((d @ inv[:, :, None]) * d).sum((3, 4))


def board_energy(lr, tb, boards):
    """(K, B): the mean pair cost over the touching cells of boards (K, B, R, C) (the piece in each cell, -1 where none
    counts), lr[b, i, j]: j right of i, tb: j below i (None for a single row)."""
    b = torch.arange(boards.shape[1], device=boards.device)[None, :, None, None]
    total, count = 0.0, 0
    rows, cols = (boards[..., :, :-1], boards[..., :, 1:]), (boards[..., :-1, :], boards[..., 1:, :])
    for cost, (one, two) in ((lr, rows), (tb, cols)):
        if cost is not None and one.numel():
            both = (one >= 0) & (two >= 0)
            total = total + (cost[b, one.clamp(min=0), two.clamp(min=0)] * both).sum((2, 3))
            count = count + both.sum((2, 3))
    return total / torch.clamp(torch.as_tensor(count), min=1)


def boards_of(positions, missing, cells):
    """positions (K, B, N) -> (K, B, cells): the piece in each cell, -1 for an empty cell or a missing piece's."""
    piece = torch.where(missing, -1, torch.arange(missing.shape[1], device=missing.device))    # (B, N)
    return torch.full((*positions.shape[:2], cells), -1, device=missing.device).scatter_(
        2, positions, piece.expand_as(positions).contiguous())


def border_costs(content, energy=ENERGY):
    """Images (B, N, C, H, W): (lr, tb), each (B, N, N): the cost of piece j right of piece i (the right column
    against the left) and below it (the bottom row against the top)."""
    x = content.float()
    lr = pair_costs(lines(x[..., -1]), lines(x[..., -2]), lines(x[..., 0]), lines(x[..., 1]), energy)
    return lr, pair_costs(*(lines(x[..., i, :]) for i in (-1, -2, 0, 1)), energy)


def edge_energy(content, positions, missing, grid, energy=ENERGY):
    """Images (B, N, C, H, W): (K, B) the energy of K arrangements (K, B, N) over every shared border of two placed
    pieces."""
    lr, tb = border_costs(content, energy)
    return board_energy(lr, tb, boards_of(positions, missing, grid[0] * grid[1]).unflatten(2, tuple(grid)))


def cut_energy(content, positions, missing, energy=ENERGY):
    """Videos (B, N, F, C, H, W): (K, B) the energy of K orders (K, B, N) over each cut between consecutive placed
    pieces (the last frame of one against the first of the next)."""
    x = content.float()
    f = x.shape[2]                             # one-frame pieces: the inner frame is the edge frame itself
    cut = pair_costs(*(lines(x[:, :, i]) for i in (-1, max(-2, -f), 0, min(1, f - 1))), energy)
    return board_energy(cut, None, boards_of(positions, missing, missing.shape[1])[:, :, None])


def candidates(costs, pinned, method):
    """(1 + S, B, N) int64: the assignment of the mean cost of costs (S, B, N, P), then each sample's own."""
    own = [assign_batch(costs.mean(0), method, pinned=pinned)] + [assign_batch(c, method, pinned=pinned) for c in costs]
    return torch.from_numpy(np.stack(own))


def check_grid(content, grid):
    """Image pieces (B, N, C, H, W) are judged across the borders of their grid (rows, cols); clips (B, N, F, C, H, W)
    across their cuts, with no grid. Refuse the two mixed up (image content read as clips would compare colour
    channels as frames)."""
    if (grid is None) != (content.dim() == 6):
        raise ValueError(f"the judge needs the grid (rows, cols) of image pieces, and none for clips; got content of "
                         f"shape {tuple(content.shape)} with grid {grid}")


def pick(cands, content, missing, grid=None, energy=ENERGY):
    """(B, N) int64 numpy: of the candidates (K, B, N), each puzzle's lowest-energy one (ties: the first). Image
    content (B, N, C, H, W) needs its grid; clips (B, N, F, C, H, W) have none."""
    check_grid(content, grid)
    cands, missing = cands.to(content.device), missing.to(content.device)
    e = edge_energy(content, cands, missing, grid, energy) if grid else cut_energy(content, cands, missing, energy)
    return cands.gather(0, e.argmin(0)[None, :, None].expand(1, *cands.shape[1:]))[0].cpu().numpy()


def judge(costs, content, missing, pinned, method, grid=None, energy=ENERGY):
    """The judge over samples: positions (B, N) int64 of the arrangement of least energy among the ensemble's and each
    sample's (costs (S, B, N, P), content (B, N, ...), missing (B, N) bool, pinned (B, N) long: -1 or a told cell;
    method: metrics.assign_batch's; grid (rows, cols) for images, None for videos)."""
    check_grid(content, grid)
    if len(costs) == 1:
        return candidates(costs, pinned, method)[0].numpy()
    return pick(candidates(costs, pinned, method), content, missing, grid, energy)
