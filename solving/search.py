"""
The judge's search over a picture (not in the paper): the model proposes, the border cue settles its doubts.

The model's samples propose arrangements (solving/judge.py's candidates: their mean's assignment and each sample's
own). From each, swap two pieces (two real ones, or a real one and a missing one, whose drawn content moves with it)
while a swap lowers the board's energy, the best swap first; then keep, of all the boards reached, the one of least
energy. The energy sums Gallagher's MGC over every border of two touching cells; a border of an empty cell (a missing
piece's) costs a low constant of the puzzle, near a good match's cost (the classic MGC solver's rule,
bench/baselines.py). Where gaps erode the borders, the model's own costs are added (solving/judge.py, PRIOR_WEIGHT).

A swap is scored by the change it makes (Swaps): only the borders of its two cells and their two prior terms change,
so each of the M = cells (cells - 1) / 2 swaps costs a few look-ups, not a whole board; after a swap only the swaps
near it are scored again (at 150 pieces, a few milliseconds a round: bench/search_time.py times it).

    positions = search(candidates, content, missing, pinned, grid, prior)       # (K, B, N) -> (B, N)
"""
import copy
import functools
import itertools

import torch

from solving.borders import border_costs

EMPTY_QUANTILE = 0.1   # an empty cell's border costs this quantile of the costs between real pieces (bench/baselines)
PAIRS_AT_ONCE = 2 ** 20   # search descends boards together up to this many (board, swap) pairs: about 250 bytes
# a pair (the float64 delta and the index and cost tensors that pair_deltas gathers for it), so about 250 MB


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
    samples' mean distance from piece i's code to cell c's (None: borders only). A board shows a missing piece as
    the empty index N of the cost tables."""

    def __init__(self, content, missing, grid, prior=None):
        lr, tb = border_costs(content)                                            # (B, N, N) each, in fp32
        u = unit(lr, tb, missing)                                                  # (B, 1, 1)
        lr, tb = with_empty(lr, missing) / u, with_empty(tb, missing) / u         # (B, N + 1, N + 1) each
        self.lr, self.tb, self.missing, self.grid, self.prior = lr, tb, missing, tuple(grid), prior

    def shown(self, boards):
        """(K, B, cells): the boards (K, B, cells) with each missing piece shown as the empty index N."""
        b = torch.arange(boards.shape[1], device=boards.device)[None, :, None]
        return torch.where(self.missing[b, boards], self.lr.shape[1] - 1, boards)

    def __call__(self, boards):
        shown = self.shown(boards).unflatten(2, self.grid)                       # (K, B, R, C)
        b = torch.arange(boards.shape[1], device=boards.device)[None, :, None, None]
        e = (self.lr[b, shown[..., :, :-1], shown[..., :, 1:]].sum((2, 3)) +
             self.tb[b, shown[..., :-1, :], shown[..., 1:, :]].sum((2, 3)))  # (K, B)
        if self.prior is not None:
            e = e + self.prior[b[..., 0], boards, torch.arange(boards.shape[2], device=boards.device)].sum(2)
        return e

    def double(self):
        """The same energy summed in float64, as Swaps sums its deltas: equal boards then tie exactly."""
        out = copy.copy(self)
        out.lr, out.tb = self.lr.double(), self.tb.double()
        out.prior = None if self.prior is None else self.prior.double()
        return out

    def puzzles(self, part):
        """The energy of the puzzles `part` (a slice of the batch) alone: the same tables, so the same sums."""
        out = copy.copy(self)
        out.lr, out.tb, out.missing = self.lr[part], self.tb[part], self.missing[part]
        out.prior = None if self.prior is None else self.prior[part]
        return out


@functools.lru_cache
def geometry(grid):
    """The geometry of a grid's swaps: pairs (M, 2), every two cells a < c in itertools.combinations order, M = cells
    (cells - 1) / 2; touch (M,): 1 where c is right of a, 2 where c is below a, else 0; of (cells, cells - 1): the
    pairs with a given cell; near (cells, 4): each cell's right, left, lower and upper neighbour, cells off the grid."""
    rows, cols = grid
    cells = rows * cols
    pairs = torch.tensor(list(itertools.combinations(range(cells), 2)), dtype=torch.long).reshape(-1, 2)
    a, c = pairs.T
    touch = ((c == a + 1) & (c % cols != 0)).long() + 2 * (c == a + cols).long()
    index = torch.zeros(cells, cells, dtype=torch.long)
    index[a, c] = index[c, a] = torch.arange(len(pairs))
    of = index[~torch.eye(cells, dtype=torch.bool)].reshape(cells, cells - 1)
    i, r, k = torch.arange(cells), torch.arange(cells) // cols, torch.arange(cells) % cols
    near = torch.stack([torch.where(k < cols - 1, i + 1, cells), torch.where(k > 0, i - 1, cells),
                        torch.where(r < rows - 1, i + cols, cells), torch.where(r > 0, i - cols, cells)], 1)
    return pairs, touch, of, near


class Swaps:
    """Every swap of two cells of boards (K, B, cells) scored by the change it makes to the energy (delta (K, B, M),
    float64, in which sums of a few fp32 costs are exact unless their magnitudes differ by about 2^25 or more, so
    equally good swaps tie exactly), kept up to date as swaps are made.

    A swap changes only the borders of its two cells, and the prior's terms of the two. cost (K, B, cells, N + 1)
    holds what the borders of cell x would cost if it showed piece s, its neighbours as they are; a swap of a and c
    changes the energy by cost[a, c's piece] - cost[a, a's piece] + cost[c, a's piece] - cost[c, c's piece], except
    where a and c touch: that sum saw their shared border with one piece moved (twice), so it is replaced by the
    border with both moved. After a swap of i and j, only the costs of the cells beside them change, and only the
    deltas of the pairs with a cell among i, j and those: make recomputes just these."""

    def __init__(self, energy, boards):
        pairs, touch, of, near = (x.to(boards.device) for x in geometry(energy.grid))
        self.energy, self.pairs, self.touch, self.of, self.near = energy, pairs, touch, of, near
        exact = energy.double()
        lr, tb = exact.lr, exact.tb                                                  # (B, N + 1, N + 1): [left, right]
        # facing (B, 4, N + 2, N + 1): [b, d, q, s] the cost of piece s beside its d neighbour q (right, left, below,
        # above); q = N + 1, off the grid, costs 0
        self.facing = torch.nn.functional.pad(torch.stack([lr.mT, lr, tb.mT, tb], 1), (0, 0, 0, 1))
        self.between = torch.stack([torch.zeros_like(lr), lr, tb], 1)                # (B, 3, N + 1, N + 1): by touch
        self.prior = exact.prior                                                     # (B, N, cells) or None
        self.b = torch.arange(boards.shape[1], device=boards.device)[None, :, None]   # (1, B, 1)
        self.boards, self.shown = boards, energy.shown(boards)                        # (K, B, cells) each
        (k, b, cells), n, m = boards.shape, lr.shape[1], len(pairs)
        self.every = (torch.arange(cells, device=boards.device).expand(k, b, cells),
                      torch.arange(m, device=boards.device).expand(k, b, m))           # (K, B, cells), (K, B, M)
        self.cost = torch.zeros(k, b, cells, n, dtype=torch.float64, device=boards.device)
        self.delta = torch.zeros(k, b, m, dtype=torch.float64, device=boards.device)
        self.rescore(*self.every)

    def cell_costs(self, cells):
        """(K, B, A, N + 1) float64: what the borders of cells (K, B, A) would cost showing each piece s."""
        k, b, a = cells.shape
        shown = torch.cat([self.shown, self.shown.new_full((k, b, 1), self.facing.shape[2] - 1)], 2)   # off the grid
        q = shown.gather(2, self.near[cells].flatten(2)).unflatten(2, (a, 4))       # (K, B, A, 4): the neighbours
        f = self.facing
        return (f[self.b, 0, q[..., 0]] + f[self.b, 1, q[..., 1]] + f[self.b, 2, q[..., 2]] +
                f[self.b, 3, q[..., 3]])

    def pair_deltas(self, index):
        """(K, B, P): the change of energy of the swaps index (K, B, P) (into pairs)."""
        a, c = self.pairs[index].unbind(3)                                          # (K, B, P) each
        sa, sc = self.shown.gather(2, a), self.shown.gather(2, c)
        cost, n = self.cost.flatten(2), self.cost.shape[3]                          # (K, B, cells * (N + 1))
        delta = ((cost.gather(2, a * n + sc) - cost.gather(2, a * n + sa)) +
                 (cost.gather(2, c * n + sa) - cost.gather(2, c * n + sc)))
        t, b, d = self.between, self.b, self.touch[index]                            # d: 0 (a zero table) apart
        delta += (t[b, d, sc, sa] - t[b, d, sc, sc]) + (t[b, d, sa, sc] - t[b, d, sa, sa])
        if self.prior is not None:
            p, pa, pc = self.prior, self.boards.gather(2, a), self.boards.gather(2, c)    # the pieces themselves
            delta += (p[b, pc, a] - p[b, pa, a]) + (p[b, pa, c] - p[b, pc, c])
        return delta

    def make(self, index, do):
        """Swap the cells of the pairs index (K, B) on the boards where do (K, B), and update cost and delta."""
        ij = self.pairs[index]                                                      # (K, B, 2): the two cells
        swapped = self.boards.scatter(2, ij, self.boards.gather(2, ij.flip(2)))
        self.boards = torch.where(do[..., None], swapped, self.boards)
        self.shown = self.energy.shown(self.boards)
        cells = len(self.near)
        if 10 * (cells - 1) >= len(self.pairs):              # at most 20 cells: scoring every pair again is cheaper
            return self.rescore(*self.every)
        touched = torch.cat([ij, self.near[ij].flatten(2)], 2)                      # (K, B, 10): the two, their
        touched = torch.where(touched < cells, touched, ij[..., :1])                # neighbours (off the grid: i)
        self.rescore(touched, self.of[touched].flatten(2))                          # pairs: (K, B, 10 (cells - 1))

    def rescore(self, cells, pairs):
        """Recompute the costs of cells (K, B, A), then the deltas of pairs (K, B, P)."""
        self.cost.scatter_(2, cells[..., None].expand(-1, -1, -1, self.cost.shape[3]), self.cell_costs(cells))
        self.delta.scatter_(2, pairs, self.pair_deltas(pairs))


def descend(boards, energy, fixed):
    """(K, B, cells): each board (K, B, cells) after swaps of two cells, the one that lowers its energy the most each
    time (ties: the first pair in itertools.combinations order), until none lowers it by more than 1e-6; cells fixed
    (B, cells) bool (a pinned piece's) never swap."""
    if boards.shape[2] < 2:                                                         # a single cell: nothing to swap
        return boards
    table = Swaps(energy, boards)
    a, c = table.pairs.T                                                            # (M,) each
    frozen = fixed[:, a] | fixed[:, c]                                              # (B, M)
    while True:
        best = table.delta.masked_fill(frozen, torch.inf).min(2)                    # (K, B) each: the first least
        better = best.values < -1e-6
        if not better.any():
            return table.boards
        table.make(best.indices, better)


def search(candidates, content, missing, pinned, grid, prior=None):
    """(B, N) int64: of the candidates (K, B, N) (each piece's cell), each improved by descend, the one of least
    energy, summed in float64 as the descent's deltas are (ties: the first); image content (B, N, C, H, W), missing
    (B, N) bool, pinned (B, N) long (-1, or the cell a piece is kept on: it never moves), grid (rows, cols). Boards
    descend in parts of at most PAIRS_AT_ONCE (board, swap) pairs, split over puzzles and then over candidates: each
    board descends on its own, so the parts change no result."""
    candidates, missing, pinned = (torch.as_tensor(x).to(content.device) for x in (candidates, missing, pinned))
    energy = Energy(content, missing, grid, prior)
    fixed = torch.zeros(len(pinned), candidates.shape[2] + 1, dtype=torch.bool, device=content.device)
    fixed = fixed.scatter(1, torch.where(pinned < 0, candidates.shape[2], pinned), True)[:, :-1]   # (B, cells)
    cells = candidates.shape[2]
    swaps = cells * (cells - 1) // 2 or 1                                       # (board, swap) pairs a board
    puzzles = max(1, PAIRS_AT_ONCE // swaps)                                    # puzzles descending together
    boards = torch.cat([descend_part(candidates[:, p], energy.puzzles(p), fixed[p], swaps)
                        for p in (slice(s, s + puzzles) for s in range(0, len(pinned), puzzles))], 1)   # (K, B, cells)
    best = energy.double()(boards).argmin(0)                                    # (B,)
    return boards[best, torch.arange(len(best))].argsort(1)                     # back to each piece's cell


def descend_part(candidates, energy, fixed, swaps):
    """(K, b, cells): the boards of candidates (K, b, N) of a part of the puzzles, descended (descend) a few
    candidates at a time, at most PAIRS_AT_ONCE (board, swap) pairs (swaps: a board's) together."""
    at_once = max(1, PAIRS_AT_ONCE // (candidates.shape[1] * swaps))           # candidates descending together
    return torch.cat([descend(c, energy, fixed) for c in candidates.argsort(2).split(at_once)])
