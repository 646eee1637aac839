"""
Gallagher's tree-based placement (A. Gallagher, "Jigsaw puzzles with pieces of unknown orientation", CVPR 2012),
for pieces of known orientation (ours are never rotated) in a known rows x cols frame: `place_tree(lr, tb, grid)`
places the k <= rows*cols pieces of any grid, from the same non-negative pair costs as bench/baselines.py's
exhaustive `place` (lr[i, j]: piece j right of i; tb[i, j]: j below i; MGC there) and returns positions in the same
format as place: (k,) int64, the raster cell of each piece. Three steps:

1. Ratios (`dissimilarity_ratios`): each border's cost over the second-best on that border, as Gallagher normalises
   MGC, taken from both pieces' side: D'(i, j) = D(i, j) / min(s_i, s_j), s_i the second-smallest D(i, m) over m != i
   (i's border), s_j the second-smallest D(m, j) over m != j (the touching border of j). So D'(i, j) < 1 exactly when
   j is i's unique best on that side and i is j's unique best on its side; D' is the worse of the two one-sided
   ratios. (The second-best turns into the best where a piece has a single partner, k = 2.)
2. Tree (`Clusters`, `grow`): every (i, j, direction) by increasing ratio (ties: by cost), Kruskal-style: join the
   two clusters (pieces with fixed relative offsets) the pair would put side by side, unless they are one cluster
   already, two pieces would share a cell, or the union's bounding box would not fit rows x cols (the frame as
   given, not turned). Until one cluster holds all k pieces or the pairs run out.
3. Trim and fill (`best_board`, `fill`): the largest cluster alone stays; in each position of it inside the frame,
   the frame's empty cells are filled greedily: the empty cell with the most placed neighbours (ties: the cell whose
   best piece costs least), there the unplaced piece of least summed plain cost (not the ratio: the pieces left are
   the ones whose best partners are placed already, so how much better than the second-best they are says little;
   the plain costs compare them on the same borders) against those neighbours. Until every piece is placed: with
   k < rows*cols, the rest stays empty. The position whose board costs least in all (a border of an empty cell
   costing EMPTY_QUANTILE of the pair costs, as `place` does) is the answer.

    positions = place_tree(*mgc_costs(pieces), (rows, cols))                          # (k,) raster cells
"""
import numpy as np

# A pair with an empty slot costs this quantile of the off-diagonal pair costs (with_empty): low, near a true match's
# cost, so that where the gap lies does not sway the placement much. On the 39 photo puzzles (3x3, 16 px, no gap, MGC,
# exhaustive placement) with 1 / 2 pieces missing, 0.1 solves 95 / 79% of puzzles, the median only 64 / 44%.
EMPTY_QUANTILE = 0.1
STEPS = ((0, 1), (1, 0))   # direction 0: j right of i (lr); 1: j below i (tb), as (row, col) offsets


# ----------------------------------------------------------------------------
# Ratios and the candidate pairs
# ----------------------------------------------------------------------------

def second_best(cost, axis):
    """Second-smallest of each row (axis 1) or column (axis 0) of the (k, k) cost, its diagonal left out; the
    smallest where only one other piece is left (k = 2). Returns (k,)."""
    k = len(cost)
    nth = min(1, k - 2)
    off = np.where(np.eye(k, dtype=bool), np.inf, cost)
    return np.partition(off, nth, axis=axis).take(nth, axis=axis)


def dissimilarity_ratios(cost):
    """(k, k) costs -> ratios D'(i, j) = D(i, j) / min(second-best of row i, second-best of column j), inf on the
    diagonal. A tiny eps on both sides keeps 0 / 0 (identical borders) at 1."""
    eps = 1e-9 * float(np.abs(cost).mean()) + 1e-300
    ratio = (cost + eps) / (np.minimum(second_best(cost, 1)[:, None], second_best(cost, 0)[None]) + eps)
    np.fill_diagonal(ratio, np.inf)
    return ratio


def candidate_pairs(lr, tb):
    """Every (i, j, direction), i != j, by increasing ratio, ties by increasing cost: three lists of 2k(k-1)."""
    k = len(lr)
    cost = np.stack([lr, tb])                                        # (2, k, k)
    ratio = np.stack([dissimilarity_ratios(lr), dissimilarity_ratios(tb)])
    d, i, j = np.nonzero(np.broadcast_to(~np.eye(k, dtype=bool), cost.shape))
    order = np.lexsort((cost[d, i, j], ratio[d, i, j]))
    return i[order].tolist(), j[order].tolist(), d[order].tolist()


# ----------------------------------------------------------------------------
# The tree: clusters joined Kruskal-style inside the frame
# ----------------------------------------------------------------------------

class Clusters:
    """Groups of pieces with fixed relative offsets: owner[p] is p's cluster, at[p] its (row, col) in it; each
    cluster's members, set of cells and bounding box (top, bottom, left, right) are kept with it."""

    def __init__(self, k, grid):
        self.rows, self.cols = grid
        self.owner, self.at = list(range(k)), [(0, 0)] * k
        self.members = {p: [p] for p in range(k)}
        self.cells = {p: {(0, 0)} for p in range(k)}
        self.box = {p: (0, 0, 0, 0) for p in range(k)}

    def join(self, i, j, step):
        """Put piece j at `step` (row, col) from piece i by moving j's cluster (or i's one the other way, whichever
        is smaller). False, nothing changed, where i and j are one cluster already, two pieces would share a cell or
        the union would not fit the frame."""
        a, b = self.owner[i], self.owner[j]
        if a == b:
            return False
        dr, dc = (self.at[i][0] + step[0] - self.at[j][0], self.at[i][1] + step[1] - self.at[j][1])
        if len(self.members[b]) > len(self.members[a]):                 # move the smaller cluster
            a, b, dr, dc = b, a, -dr, -dc
        (t0, b0, l0, r0), (t1, b1, l1, r1) = self.box[a], self.box[b]
        top, bottom, left, right = min(t0, t1 + dr), max(b0, b1 + dr), min(l0, l1 + dc), max(r0, r1 + dc)
        if bottom - top >= self.rows or right - left >= self.cols:
            return False
        moved = {(r + dr, c + dc) for r, c in self.cells[b]}
        if moved & self.cells[a]:
            return False
        for p in self.members[b]:
            self.owner[p], self.at[p] = a, (self.at[p][0] + dr, self.at[p][1] + dc)
        self.members[a] += self.members.pop(b)
        self.cells[a] |= moved
        del self.cells[b]
        self.box[a] = (top, bottom, left, right)
        del self.box[b]
        return True

    def largest(self):
        """The pieces of the largest cluster and their (row, col) from its box's top-left cell: two lists. Of equal
        ones, max takes the first in the dict's order: the cluster whose key (the piece index it is named by) is
        lowest, as the keys 0..k-1 keep their order and joins only remove keys."""
        a = max(self.members, key=lambda c: len(self.members[c]))
        top, _, left, _ = self.box[a]
        return self.members[a], [(self.at[p][0] - top, self.at[p][1] - left) for p in self.members[a]]


def grow(lr, tb, grid):
    """The clusters after joining the candidate pairs in order until one holds all pieces or the pairs run out."""
    k = len(lr)
    clusters = Clusters(k, grid)
    for i, j, d in zip(*candidate_pairs(lr, tb)):
        if clusters.join(i, j, STEPS[d]) and len(clusters.members) == 1:
            break
    return clusters


# ----------------------------------------------------------------------------
# Trim and fill
# ----------------------------------------------------------------------------

def padded(cost, fill):
    """(k, k) -> (k + 1, k + 1): index k stands for 'no piece', its pairs cost `fill`."""
    k = len(cost)
    out = np.full((k + 1, k + 1), float(fill))
    out[:k, :k] = cost
    return out


def with_empty(cost):
    """(k, k) -> (k + 1, k + 1): index k stands for an empty slot, its pairs cost the EMPTY_QUANTILE of the pair costs
    (0 with a single piece)."""
    k = len(cost)
    return padded(cost, np.quantile(cost[~np.eye(k, dtype=bool)], EMPTY_QUANTILE) if k > 1 else 0.0)


def neighbours(board, k):
    """The piece left of, right of, above and below each cell of the (R, C) board (-1 empty): four (R, C) arrays,
    k where there is none."""
    pad = np.full((board.shape[0] + 2, board.shape[1] + 2), k)
    pad[1:-1, 1:-1] = np.where(board >= 0, board, k)
    return pad[1:-1, :-2], pad[1:-1, 2:], pad[:-2, 1:-1], pad[2:, 1:-1]


def fill(board, lr, tb):
    """Fill the (R, C) board (-1 empty, changed in place) greedily until all k pieces are placed: the empty cell with
    the most placed neighbours (ties: the one whose best piece costs least), there the unplaced piece of least summed
    cost against them."""
    k = len(lr)
    lr0, tb0 = padded(lr, 0), padded(tb, 0)                          # no neighbour: no cost
    free = np.setdiff1d(np.arange(k), board[board >= 0])
    while len(free):
        left, right, up, down = neighbours(board, k)
        count = (left < k).astype(int) + (right < k) + (up < k) + (down < k)
        count[board >= 0] = -1
        rs, cs = np.nonzero(count == count.max())                    # the cells of most placed neighbours: (M,)
        cost = (lr0[left[rs, cs][:, None], free] + lr0[free, right[rs, cs][:, None]] +
                tb0[up[rs, cs][:, None], free] + tb0[free, down[rs, cs][:, None]])          # (M, F)
        cell, piece = np.unravel_index(int(np.argmin(cost)), cost.shape)
        board[rs[cell], cs[cell]] = free[piece]
        free = np.delete(free, piece)
    return board


def board_cost(board, lr_empty, tb_empty):
    """Summed pair cost of every two touching cells of the (R, C) board (-1 empty), with costs padded for empty."""
    k = len(lr_empty) - 1
    b = np.where(board >= 0, board, k)
    return float(lr_empty[b[:, :-1], b[:, 1:]].sum() + tb_empty[b[:-1], b[1:]].sum())


def best_board(pieces, cells, lr, tb, grid):
    """The largest cluster's pieces at their (row, col) `cells` shifted to every position inside the frame, each
    board filled: the one of least board_cost (the first of equal ones). Returns the (R, C) board."""
    rows, cols = grid
    lr_e, tb_e = with_empty(lr), with_empty(tb)
    r, c = np.array(cells).T
    best, best_cost = None, np.inf
    for dr in range(rows - r.max()):
        for dc in range(cols - c.max()):
            board = np.full(grid, -1, dtype=np.int64)
            board[r + dr, c + dc] = pieces
            board = fill(board, lr, tb)
            cost = board_cost(board, lr_e, tb_e)
            if cost < best_cost:
                best, best_cost = board, cost
    return best


# ----------------------------------------------------------------------------
# Placement
# ----------------------------------------------------------------------------

def place_tree(lr, tb, grid):
    """Gallagher's tree-based placement of the k <= rows*cols pieces of the (k, k) non-negative costs `lr`, `tb` in
    the rows x cols frame `grid` (see the module's docstring). Returns positions (k,) int64: the raster cell of each
    piece."""
    lr, tb = np.asarray(lr, dtype=np.float64), np.asarray(tb, dtype=np.float64)
    rows, cols = grid
    k = len(lr)
    assert lr.shape == tb.shape == (k, k) and k <= rows * cols, f"{k} pieces do not fit a {rows}x{cols} frame"
    if k < 2:
        return np.arange(k, dtype=np.int64)
    board = best_board(*grow(lr, tb, grid).largest(), lr, tb, grid)                # (R, C), -1 empty
    positions = np.empty(k, dtype=np.int64)
    placed = board.ravel() >= 0
    positions[board.ravel()[placed]] = np.flatnonzero(placed)
    return positions
