"""The classic solvers in bench/baselines.py on puzzles easy enough that they must be solved exactly."""
import itertools

import numpy as np
import pytest

from bench.baselines import (
    IMAGE_SOLVERS,
    all_arrangements,
    chain_video,
    edge_costs,
    mgc_costs,
    place,
    solve_image,
)


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
