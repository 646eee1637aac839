"""The classic solvers in bench/baselines.py on puzzles easy enough that they must be solved exactly."""
import itertools

import numpy as np
import pytest

from bench import baselines, tree_solver
from bench.baselines import (
    IMAGE_SOLVERS,
    all_arrangements,
    chain_video,
    edge_costs,
    image_solvers,
    mgc_costs,
    place,
    solve_image,
)
from bench.tree_solver import Clusters, best_board, candidate_pairs, dissimilarity_ratios, fill, place_tree


def smooth_image(height, width, seed, channels=3):
    """A sum of a few low-frequency sinusoids per channel, scaled into [0, 1]."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width] / max(height, width)
    img = np.zeros((height, width, channels))
    for c in range(channels):
        for _ in range(3):
            fy, fx = rng.uniform(0.3, 1.5, 2) * rng.choice([-1, 1], 2)
            img[..., c] += np.sin(2 * np.pi * (fy * y + fx * x) + rng.uniform(0, 2 * np.pi))
    img -= img.min()
    return img / img.max()


def cut(img, grid, piece):
    rows, cols = grid
    return np.stack([img[r * piece:(r + 1) * piece, c * piece:(c + 1) * piece]
                     for r in range(rows) for c in range(cols)])


def shuffled_puzzle(seed, grid=(3, 3), piece=16):
    """Pieces in shuffled order and the truth: order[i] = raster slot of shuffled piece i."""
    pieces = cut(smooth_image(grid[0] * piece, grid[1] * piece, seed), grid, piece)
    order = np.random.default_rng(seed).permutation(len(pieces))
    return pieces[order], order


@pytest.mark.parametrize("method", sorted(IMAGE_SOLVERS))
def test_solvers_recover_smooth_3x3(method):
    for seed in range(3):
        pieces, order = shuffled_puzzle(seed)
        np.testing.assert_array_equal(solve_image(pieces, (3, 3), method), order)


def test_all_arrangements():
    perms = all_arrangements(4)
    assert perms.shape == (24, 4) and perms.dtype == np.int64
    assert len({tuple(p) for p in perms}) == 24 and (np.sort(perms, 1) == np.arange(4)).all()
    assert all_arrangements(4) is perms and not perms.flags.writeable                  # cached, shared safely


@pytest.mark.parametrize("costs", [edge_costs, mgc_costs])
def test_exhaustive_2x2_is_brute_force(costs):
    rng = np.random.default_rng(0)
    lr, tb = costs(rng.random((4, 8, 8, 3)))                         # random pieces: a non-trivial optimum
    best, best_cost = None, np.inf
    for slots in itertools.permutations(range(4)):                   # slots: 0 1 / 2 3
        s = slots
        cost = lr[s[0], s[1]] + lr[s[2], s[3]] + tb[s[0], s[2]] + tb[s[1], s[3]]
        if cost < best_cost:
            best, best_cost = s, cost
    expected = np.empty(4, dtype=np.int64)
    expected[list(best)] = np.arange(4)
    np.testing.assert_array_equal(place(lr, tb, (2, 2)), expected)


def test_mgc_costs_shapes_and_true_neighbour_is_cheapest():
    img = smooth_image(48, 48, seed=5)
    pieces = cut(img, (3, 3), 16)
    lr, tb = mgc_costs(pieces)
    assert lr.shape == tb.shape == (9, 9) and np.isfinite(lr).all() and (lr >= 0).all()
    off = ~np.eye(9, dtype=bool)
    for i in range(9):
        r, c = divmod(i, 3)
        if c < 2:
            assert np.argmin(np.where(off[i], lr[i], np.inf)) == i + 1
        if r < 2:
            assert np.argmin(np.where(off[i], tb[i], np.inf)) == i + 3
    # also for grey pieces and rectangular borders
    lr1, tb1 = mgc_costs(pieces[:4, :10, :, :1])
    assert lr1.shape == tb1.shape == (4, 4) and np.isfinite(lr1).all()


@pytest.mark.parametrize("method", sorted(IMAGE_SOLVERS))
@pytest.mark.parametrize("missing", [[4], [0], [2, 7]])
def test_missing_pieces(method, missing):
    pieces, order = shuffled_puzzle(1)
    given = np.ones(9, dtype=bool)
    given[missing] = False
    pieces = np.where(given[:, None, None, None], pieces, 0.0)         # missing pieces carry no content
    expected = np.where(given, order, -1)
    np.testing.assert_array_equal(solve_image(pieces, (3, 3), method, given=given), expected)


def test_place_refuses_grids_beyond_exhaustive_search():
    with pytest.raises(AssertionError, match="at most 9 cells"):
        place(np.zeros((10, 10)), np.zeros((10, 10)), (2, 5))


# ----------------------------------------------------------------------------
# Gallagher's tree-based placement (bench/tree_solver.py)
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("grid", [(3, 3), (4, 5), (5, 4), (2, 6)])
def test_tree_recovers_smooth_boards(grid):
    for seed in range(3):
        pieces, order = shuffled_puzzle(seed, grid)
        np.testing.assert_array_equal(place_tree(*mgc_costs(pieces), grid), order)


@pytest.mark.parametrize("grid, missing", [((3, 3), [4]), ((3, 3), [0, 8]), ((4, 5), [7]), ((4, 5), [0, 13])])
def test_tree_places_the_given_pieces_with_some_missing(grid, missing):
    pieces, order = shuffled_puzzle(2, grid)
    given = np.ones(len(pieces), dtype=bool)
    given[missing] = False
    expected = np.where(given, order, -1)
    np.testing.assert_array_equal(solve_image(pieces, grid, "mgc-tree", given=given), expected)


def pair_cost(lr, tb, positions, grid):
    """Summed cost of a full board's touching pairs (positions: the raster cell of each piece)."""
    board = np.empty(grid[0] * grid[1], dtype=np.int64)
    board[positions] = np.arange(len(positions))
    board = board.reshape(grid)
    return lr[board[:, :-1], board[:, 1:]].sum() + tb[board[:-1], board[1:]].sum()


def mutual_best(cost):
    """The pairs (i, j) where j is i's unique best partner (row i) and i is j's unique best (column j)."""
    off = np.where(np.eye(len(cost), dtype=bool), np.inf, cost)
    two_row, two_col = np.sort(off, 1)[:, :2], np.sort(off, 0)[:2]
    return {(i, j) for i, j in zip(*np.nonzero(off < np.inf))
            if off[i, j] < two_row[i, 1] and off[i, j] < two_col[1, j]}


def test_tree_against_exhaustive_on_noisy_3x3():
    """The tree is greedy: it need not find the board of least cost (with the stronger noise it often does not).
    What holds: its board is a board (a cell each) and costs no less than the exhaustive one; and where the
    mutual-best pairs (ratio < 1: joined first, before any other) all touch in the exhaustive board and link all 9
    pieces, the tree builds exactly that board."""
    settled = 0
    for seed in range(10):
        pieces, _ = shuffled_puzzle(seed)
        pieces = pieces + np.random.default_rng(seed).normal(0, 0.01 if seed < 5 else 0.2, pieces.shape)
        lr, tb = mgc_costs(pieces)
        tree, best = place_tree(lr, tb, (3, 3)), place(lr, tb, (3, 3))
        assert sorted(tree) == list(range(9))
        assert pair_cost(lr, tb, tree, (3, 3)) >= pair_cost(lr, tb, best, (3, 3)) - 1e-9
        cell = {p: divmod(int(best[p]), 3) for p in range(9)}
        sure = [(i, j, 0) for i, j in mutual_best(lr)] + [(i, j, 1) for i, j in mutual_best(tb)]
        touch = all(cell[j] == (cell[i][0] + d, cell[i][1] + 1 - d) for i, j, d in sure)
        linked = Clusters(9, (3, 3))
        for i, j, d in sure:
            linked.join(i, j, tree_solver.STEPS[d])
        if touch and len(linked.members) == 1:
            settled += 1
            np.testing.assert_array_equal(tree, best)
    assert settled >= 2                                              # the claim was put to the test


def test_ratios_are_below_one_exactly_for_mutual_best_pairs():
    lr = np.random.default_rng(0).random((6, 6))
    ratio = dissimilarity_ratios(lr)
    assert np.isinf(np.diag(ratio)).all()
    assert {(i, j) for i, j in zip(*np.nonzero(ratio < 1))} == mutual_best(lr) != set()


def test_pairs_come_by_ratio_not_by_cost():
    lr = np.array([[0, 1, 9], [0.55, 0, 0.5], [9, 9, 0]])           # 1 -> 2 the cheapest, but 1 -> 0 nearly as cheap
    tb = np.full((3, 3), 9.0)
    i, j, d = candidate_pairs(lr, tb)
    assert (i[0], j[0], d[0]) == (0, 1, 0) and (i[1], j[1], d[1]) == (1, 2, 0)       # 0 -> 1: 1 against 9 both sides
    assert dissimilarity_ratios(lr)[[0, 1], [1, 2]] == pytest.approx([1 / 9, 0.5 / 0.55])


def test_fill_and_the_clusters_place_in_the_frame_restore_a_board():
    pieces, order = shuffled_puzzle(0)
    lr, tb = mgc_costs(pieces)
    truth = np.empty(9, dtype=np.int64)
    truth[order] = np.arange(9)
    truth = truth.reshape(3, 3)                                      # the piece at each cell
    board = truth.copy()
    board[[0, 1, 1, 2], [1, 1, 2, 0]] = -1
    np.testing.assert_array_equal(fill(board, lr, tb), truth)
    right = truth[:, 1:]                                             # a cluster of the two right columns: it belongs
    cells = [(r, c) for r in range(3) for c in range(2)]             # one column right, the left column filled in
    np.testing.assert_array_equal(best_board(right.ravel(), cells, lr, tb, (3, 3)), truth)


def test_clusters_keep_to_the_frame_as_given_and_to_one_piece_a_cell():
    c = Clusters(4, (3, 2))                                          # 3 rows, 2 columns
    assert c.join(0, 1, (0, 1)) and not c.join(1, 2, (0, 1))         # a third column: refused, not turned
    assert c.join(0, 2, (1, 0)) and c.join(2, 3, (0, 1))             # 0 1 / 2 3
    assert not c.join(1, 3, (1, 0)) and len(c.members) == 1          # one cluster already
    assert c.largest() == ([0, 1, 2, 3], [(0, 0), (0, 1), (1, 0), (1, 1)])
    d = Clusters(4, (3, 3))
    assert d.join(0, 1, (0, 1)) and d.join(2, 3, (0, 1))             # 0 1 and 2 3
    assert not d.join(0, 3, (0, 1))                                  # 3 right of 0: 2 on 0's cell, 3 on 1's
    assert not d.join(1, 2, (0, 1))                                  # 0 1 2 3: four columns
    assert d.join(3, 0, (1, 0))                                      # 0 below 3: 2 3 / . 0 1
    assert d.largest() == ([2, 3, 0, 1], [(0, 0), (0, 1), (1, 1), (1, 2)])


def test_tree_fills_a_frame_larger_than_its_tree():
    """Pieces of no border cue at all (equal costs): the board is still one piece a cell, missing cells left empty."""
    for grid, k in (((3, 4), 12), ((3, 4), 10), ((1, 5), 5)):
        positions = place_tree(np.ones((k, k)), np.ones((k, k)), grid)
        assert positions.dtype == np.int64 and len(set(positions.tolist())) == k
        assert positions.min() >= 0 and positions.max() < grid[0] * grid[1]


def test_image_solvers_by_grid():
    assert image_solvers((3, 3)) == list(IMAGE_SOLVERS) and image_solvers((4, 5)) == ["mgc-tree"]
    assert tree_solver.EMPTY_QUANTILE == baselines.EMPTY_QUANTILE    # one rule for an empty cell's borders


def test_chain_video_orders_a_moving_dot():
    y, x = np.mgrid[0:16, 0:24]
    frames = np.stack([np.exp(-((y - 4 - 0.5 * t) ** 2 + (x - 2 - t) ** 2) / 4) for t in range(16)])
    clips = frames.reshape(8, 2, 16, 24)                               # a blob moving linearly: 8 pieces of 2
    order = np.concatenate([[0], 1 + np.random.default_rng(0).permutation(7)])     # the first piece stays first
    np.testing.assert_array_equal(chain_video(clips[order]), order)    # shuffled piece i is true piece order[i]


def test_chain_video_chains_the_given_pieces_and_leaves_the_last_slots_to_the_missing():
    y, x = np.mgrid[0:16, 0:24]
    frames = np.stack([np.exp(-((y - 4 - 0.5 * t) ** 2 + (x - 2 - t) ** 2) / 4) for t in range(10)])
    clips = frames.reshape(5, 2, 16, 24)
    missing = np.array([False, False, True, False, False])             # true piece 2 has no frames
    clips[2] = 0
    np.testing.assert_array_equal(chain_video(clips, missing), [0, 1, 4, 2, 3])    # 0, 1, 3, 4 chained; 2 last


def test_unknown_solver():
    with pytest.raises(ValueError, match="unknown solver"):
        solve_image(np.zeros((4, 4, 4, 3)), (2, 2), "nope")
