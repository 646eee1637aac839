"""
The judge's search over a picture (not in the paper): the model proposes, the border cue settles its doubts.

The model's samples propose arrangements (solving/judge.py's candidates: their mean's assignment and each sample's
own). From each, swap two pieces (two real ones, or a real one and a missing one, whose drawn content moves with it)
while a swap lowers the board's energy, the best swap first; then keep, of all the boards reached, the one of least
energy. The energy sums Gallagher's MGC over every border of two touching cells; a border of an empty cell (a missing
piece's) costs a low constant of the puzzle, near a good match's cost (the classic MGC solver's rule,
bench/baselines.py). Where gaps erode the borders, the model's own costs are added (solving/judge.py, PRIOR_WEIGHT).

    positions = search(candidates, content, missing, pinned, grid, prior)       # (K, B, N) -> (B, N)
"""
import itertools

import torch

from solving.borders import border_costs

EMPTY_QUANTILE = 0.1   # an empty cell's border costs this quantile of the costs between real pieces (bench/baselines)


def real_pairs(missing):
    """(B, N, N) bool: the pairs of two distinct pieces with content."""
    eye = torch.eye(missing.shape[1], dtype=torch.bool, device=missing.device)
    return ~missing[:, :, None] & ~missing[:, None, :] & ~eye


def quantiles(cost, keep, q):
    """(B,): the q-quantile of each puzzle's costs (B, N, N) where keep (B, N, N) is true (0 where it never is)."""
    return torch.stack([torch.quantile(c[k], q) if k.any() else c.new_zeros(()) for c, k in zip(cost, keep)])


def with_empty(cost, missing):
    """(B, N, N) pair costs -> (B, N + 1, N + 1): index N stands for an empty cell, each of whose borders costs the
    EMPTY_QUANTILE of the costs between two distinct real pieces of the puzzle."""
    n, fill = cost.shape[1], quantiles(cost, real_pairs(missing), EMPTY_QUANTILE)                 # fill: (B,)
    out = fill[:, None, None].repeat(1, n + 1, n + 1)
    out[:, :n, :n] = cost
    return out


def unit(lr, tb, missing):
    """(B, 1, 1): a puzzle's unit of border cost: the EMPTY_QUANTILE of its positive costs between real pieces, the
    mean over both directions (positive: flat pieces match at cost 0, which would make the unit 0); 1 if none."""
    low = [quantiles(c, real_pairs(missing) & (c > 0), EMPTY_QUANTILE) for c in (lr, tb)]
    u = (low[0] + low[1]) / 2
    return torch.where(u > 0, u, torch.ones_like(u))[:, None, None]


class Energy:
    """The energy of boards (K, B, cells) (the piece in each cell): the border costs summed over every border, in the
    puzzle's unit (unit), plus the model's prior (B, N, cells), in the model's own distance: a weight times the
    samples' mean distance from piece i's code to cell c's (None: borders only)."""

    def __init__(self, content, missing, grid, prior=None):
        lr, tb = border_costs(content)                                            # (B, N, N) each, in fp32
        u = unit(lr, tb, missing)                                                  # (B, 1, 1)
        lr, tb = with_empty(lr, missing) / u, with_empty(tb, missing) / u         # (B, N + 1, N + 1) each
        self.lr, self.tb, self.missing, self.grid, self.prior = lr, tb, missing, tuple(grid), prior

    def __call__(self, boards):
        b = torch.arange(boards.shape[1], device=boards.device)[None, :, None]
        shown = torch.where(self.missing[b, boards], self.lr.shape[1] - 1, boards).unflatten(2, self.grid)
        b = b[..., None]                                                        # (1, B, 1, 1) against (K, B, R, C)
        e = (self.lr[b, shown[..., :, :-1], shown[..., :, 1:]].sum((2, 3)) +
             self.tb[b, shown[..., :-1, :], shown[..., 1:, :]].sum((2, 3)))  # (K, B)
        if self.prior is not None:
            e = e + self.prior[b[..., 0], boards, torch.arange(boards.shape[2], device=boards.device)].sum(2)
        return e


def descend(boards, energy, fixed):
    """(K, B, cells): each board (K, B, cells) after swaps of two cells, the one that lowers its energy the most each
    time, until no swap lowers it; cells fixed (B, cells) bool (a pinned piece's) never swap."""
    pairs = torch.tensor(list(itertools.combinations(range(boards.shape[2]), 2)), device=boards.device).reshape(-1, 2)
    if not len(pairs):                                                              # a single cell: nothing to swap
        return boards
    k, frozen = boards.shape[0], (fixed[:, pairs[:, 0]] | fixed[:, pairs[:, 1]]).T                 # (M, B)
    while True:
        swapped = boards[:, :, None].repeat(1, 1, len(pairs), 1)                   # (K, B, M, cells): each swap done
        swapped[..., torch.arange(len(pairs)), pairs[:, 0]] = boards[..., pairs[:, 1]]
        swapped[..., torch.arange(len(pairs)), pairs[:, 1]] = boards[..., pairs[:, 0]]
        flat = swapped.permute(0, 2, 1, 3).flatten(0, 1)                            # (K * M, B, cells)
        after = energy(flat).unflatten(0, (k, len(pairs)))                          # (K, M, B)
        after = after.masked_fill(frozen, torch.inf)
        best = after.min(1)                                                         # (K, B) each
        better = best.values < energy(boards) - 1e-6
        if not better.any():
            return boards
        chosen = swapped.gather(2, best.indices[:, :, None, None].expand(-1, -1, 1, boards.shape[2]))[:, :, 0]
        boards = torch.where(better[..., None], chosen, boards)


def search(candidates, content, missing, pinned, grid, prior=None):
    """(B, N) int64: of the candidates (K, B, N) (each piece's cell), each improved by descend, the one of least
    energy (ties: the first); image content (B, N, C, H, W), missing (B, N) bool, pinned (B, N) long (-1, or the cell
    a piece is kept on: it never moves), grid (rows, cols)."""
    candidates, missing, pinned = (torch.as_tensor(x).to(content.device) for x in (candidates, missing, pinned))
    energy = Energy(content, missing, grid, prior)
    fixed = torch.zeros(len(pinned), candidates.shape[2] + 1, dtype=torch.bool, device=content.device)
    fixed = fixed.scatter(1, torch.where(pinned < 0, candidates.shape[2], pinned), True)[:, :-1]   # (B, cells)
    boards = torch.stack([descend(c[None], energy, fixed)[0] for c in candidates.argsort(2)])   # (K, B, cells)
    best = energy(boards).argmin(0)                                             # (B,)
    return boards[best, torch.arange(len(best))].argsort(1)                     # back to each piece's cell
