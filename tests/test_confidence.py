"""Is it one puzzle? The seam evidence on real photos cut into pieces (docs/photos), on pieces of different photos
and on noise, and the gate fitted from it (solving/seams.py)."""
import numpy as np
import pytest
import torch
from conftest import CHELSEA, COFFEE
from PIL import Image

from plumbing.cli import UserError
from solving.confidence import fit, probability
from solving.seams import fit_gate, held_back, ink_spread, not_a_puzzle, seam_ratios
from sources.files import fit_image


def cut(photo, grid=3, side=24):
    """A photo as (N, 3, side, side) pieces in raster order, in [-1, 1] (the model's layout)."""
    img = fit_image(Image.open(photo), grid * side, grid * side)
    tiles = [img[r * side:(r + 1) * side, c * side:(c + 1) * side] for r in range(grid) for c in range(grid)]
    return np.stack(tiles).transpose(0, 3, 1, 2) * 2 - 1


def test_seams_tell_a_solved_photo_from_pieces_of_other_pictures_and_from_noise():
    coffee, cat = cut(COFFEE), cut(CHELSEA)
    rng = np.random.default_rng(0)
    mixed = np.stack([coffee[i] if i % 2 else cat[rng.integers(9)] for i in range(9)])
    noise = rng.uniform(-1, 1, coffee.shape).astype(np.float32)
    raster, keep = np.arange(9)[None], np.ones((1, 9), bool)
    solved = [seam_ratios(p[None], raster, (3, 3), keep)[0] for p in (coffee, cat)]
    assert max(solved) < 0.5, solved                             # neighbours' edges match far better than others'
    assert seam_ratios(mixed[None], raster, (3, 3), keep)[0] > 0.7
    assert 0.85 < seam_ratios(noise[None], raster, (3, 3), keep)[0] < 1.15        # no better than any other edge
    shuffled = rng.permutation(9)[None]                         # the right pieces, in the wrong cells
    assert seam_ratios(coffee[None], shuffled, (3, 3), keep)[0] > max(solved)
    alone = np.zeros((1, 9), bool)
    alone[0, :2] = True                                         # fewer than three given pieces: no evidence
    assert np.isnan(seam_ratios(coffee[None], raster, (3, 3), alone)[0])


def test_video_seams_join_a_piece_last_frame_to_the_next_first():
    t = np.linspace(0, 1, 20)
    frames = np.stack([np.full((1, 8, 8), np.sin(6 * x)) for x in t]).astype(np.float32)     # (F, C, H, W)
    clip = frames.reshape(5, 4, 1, 8, 8)[None]                   # (B, N, F, C, H, W): 5 pieces of 4 frames
    keep = np.ones((1, 5), bool)
    assert seam_ratios(clip, np.arange(5)[None], (1, 5), keep)[0] < 0.5
    assert seam_ratios(clip, np.array([[0, 3, 1, 4, 2]]), (1, 5), keep)[0] > 0.5


def test_video_seams_weigh_a_seam_against_the_steps_inside_pieces():
    def clip(x0, y0, vx, vy):                             # a 3 x 3 dot moving a pixel a frame: 5 pieces of 4 frames
        frames = np.zeros((20, 1, 16, 16), np.float32)
        for t in range(20):
            x, y = (x0 + vx * t) % 13, (y0 + vy * t) % 13
            frames[t, 0, y:y + 3, x:x + 3] = 1
        return frames.reshape(5, 4, 1, 16, 16)
    clips = np.stack([clip(0, 1, 1, 1), clip(12, 3, -1, 1), clip(4, 12, 1, -1), clip(8, 6, 1, 0)])
    mixed = np.stack([clips[(b + np.arange(5)) % 4, np.arange(5)] for b in range(4)])    # piece k from clip b + k
    keep, order = np.ones((4, 5), bool), np.tile(np.arange(5), (4, 1))
    assert seam_ratios(clips, order, (1, 5), keep).max() < 0.6
    assert seam_ratios(mixed, order, (1, 5), keep).min() > 1.2      # seams far beyond a step within a piece
    twice = np.repeat(clips.reshape(4, 20, 1, 16, 16), 2, axis=1).reshape(4, 10, 4, 1, 16, 16)   # each frame twice
    assert seam_ratios(twice, np.tile(np.arange(10), (4, 1)), (1, 10), np.ones((4, 10), bool)).max() < 0.6
    single = clips.reshape(4, 20, 1, 1, 16, 16)[:, :8]               # one frame a piece: the edge ratio alone
    assert 0 < seam_ratios(single, np.tile(np.arange(8), (4, 1)), (1, 8), np.ones((4, 8), bool)).max() < 1


def test_not_a_puzzle_bags_take_each_piece_from_another_puzzle():
    content = torch.arange(4)[:, None, None].float().expand(4, 3, 5).clone()     # puzzle b's pieces all hold b
    batch = {"content": content, "missing": torch.zeros(4, 3, dtype=torch.bool), "true_pos": torch.zeros(4, 3)}
    mixed, noise = not_a_puzzle(batch, torch.Generator().manual_seed(0))
    assert [sorted(set(mixed["content"][b, :, 0].tolist())) for b in range(4)] == [sorted([b, (b + 1) % 4, (b + 2) % 4])
                                                                                   for b in range(4)]
    assert noise["content"].shape == content.shape and noise["content"].abs().max() <= 1
    assert mixed["missing"] is batch["missing"]


def seams_only(seam):
    """bag_evidence rows of pictures: a seam ratio and no ink spread (NaN)."""
    return np.stack([seam, np.full(len(seam), np.nan)], -1)


def test_gate_holds_back_99_percent_of_each_kind_of_bag():
    rng = np.random.default_rng(0)
    real, ok = rng.uniform(0.1, 0.5, 200), rng.random(200) < 0.9
    bags = {"mixed": rng.uniform(0.6, 1.0, 100), "noise": rng.uniform(0.9, 1.1, 100)}
    real[:10], ok[:10] = 1.0, [True] * 7 + [False] * 3              # ten real puzzles above it, seven solved
    real[10] = np.nan                                                # no evidence: never above
    gate = fit_gate(seams_only(real), ok, {k: seams_only(v) for k, v in bags.items()})
    assert gate["ink"] is None and all(np.mean(v >= gate["threshold"]) >= 0.99 for v in bags.values())
    above = sum(int((v >= gate["threshold"]).sum()) for v in bags.values())
    assert gate["accuracy"] == pytest.approx((7 + 1) / (10 + above + 2))
    assert gate["real_above"] == pytest.approx(10 / 200) and min(gate["bags_above"].values()) >= 0.99
    bags["mixed"][:3], bags["noise"][:3] = np.inf, np.nan            # inf: far from any puzzle; NaN: no evidence
    again = fit_gate(seams_only(real), ok, {k: seams_only(v) for k, v in bags.items()})
    assert again["bags_above"]["mixed"] == pytest.approx(np.mean(bags["mixed"] >= again["threshold"]))
    assert again["bags_above"]["noise"] == pytest.approx(np.mean(bags["noise"][3:] >= again["threshold"]) * 97 / 100)
    table = fit(rng.normal(1, 1, 500), rng.random(500) < 0.8)
    assert 0 <= probability(table, -5) <= probability(table, 5) <= 1
    bags["mixed"][:99] = np.inf                              # the 1% quantile lies between a finite ratio and an inf
    edge = fit_gate(seams_only(real), ok, {k: seams_only(v) for k, v in bags.items()})
    assert not np.isnan(edge["threshold"]) and edge["bags_above"]["mixed"] >= 0.99
    bags["mixed"][:] = np.inf                                        # only infs: the quantile among them
    assert not np.isnan(fit_gate(seams_only(real), ok, {k: seams_only(v) for k, v in bags.items()})["threshold"])


def test_the_ink_spread_holds_back_what_the_seams_cannot():
    """One frame a piece: some real clips' seams match no better than unrelated frames, but their frames show the same
    things (low ink spread) and those of different clips do not; noise is even, and left to the seams."""
    rng = np.random.default_rng(0)
    real = np.stack([rng.uniform(0.3, 0.8, 200), rng.uniform(0.02, 0.12, 200)], -1)
    real[:15, 0] = rng.uniform(0.8, 0.95, 15)                        # 7.5% of real clips with poor seams
    bags = {"mixed": np.stack([rng.uniform(0.8, 1.0, 200), rng.uniform(0.19, 0.32, 200)], -1),
            "noise": np.stack([rng.uniform(0.97, 1.1, 200), rng.uniform(0.02, 0.03, 200)], -1)}
    gate = fit_gate(real, np.ones(200, bool), bags)
    middle = (np.quantile(bags["mixed"][:, 1], 0.01) + np.quantile(real[:, 1], 0.99)) / 2   # the gap's middle
    assert gate["ink"] == pytest.approx(middle)
    assert gate["threshold"] == pytest.approx(np.quantile(bags["noise"][:, 0], 0.01))
    assert gate["real_above"] == 0 and min(gate["bags_above"].values()) >= 0.99
    assert list(held_back([[0.9, 0.05], [0.9, 0.25], [1.05, 0.02], [np.nan, np.nan]], gate)) == [False, True, True,
                                                                                               False]
    seams = fit_gate(seams_only(real[:, 0]), np.ones(200, bool), {k: seams_only(b[:, 0]) for k, b in bags.items()})
    assert seams["real_above"] > 0.05 and seams["ink"] is None            # the seams alone hold back real clips


def test_the_gate_takes_the_evidence_that_holds_back_fewer_real_puzzles():
    rng = np.random.default_rng(1)
    real = np.stack([rng.uniform(0.3, 0.6, 200), rng.uniform(0.02, 0.12, 200)], -1)
    real[:18, 1] = 0.4                                               # 9% of real clips with a cut: high ink spread
    bags = {"mixed": np.stack([rng.uniform(0.7, 1.0, 200), rng.uniform(0.19, 0.5, 200)], -1),
            "noise": np.stack([rng.uniform(0.97, 1.1, 200), rng.uniform(0.02, 0.03, 200)], -1)}
    gate = fit_gate(real, np.ones(200, bool), bags)
    assert gate["ink"] is None and gate["real_above"] == 0                # the seams alone hold back none
    real[:18, 1] = 0.05
    bags["noise"][:, 1] = rng.uniform(0.1, 0.3, 200)                # the ink catches about half the noise bags
    gate = fit_gate(real, np.ones(200, bool), bags)
    caught = bags["noise"][:, 1] >= gate["ink"]
    assert gate["ink"] == pytest.approx((np.quantile(bags["mixed"][:, 1], 0.01) + np.quantile(real[:, 1], 0.99)) / 2)
    assert 0.3 < caught.mean() < 0.9                                 # partly
    assert gate["threshold"] == pytest.approx(np.quantile(bags["noise"][~caught, 0], 0.01 * 200 / (~caught).sum()))
    assert min(gate["bags_above"].values()) >= 0.985 and gate["real_above"] == 0


def test_ink_spread_tells_frames_of_one_clip_from_frames_of_many():
    def clip(x0, y0, size):                                  # a square moving a pixel a frame: 6 one-frame pieces
        frames = np.full((6, 1, 1, 16, 16), -1, np.float32)
        for t in range(6):
            frames[t, 0, 0, y0:y0 + size, x0 + t:x0 + t + size] = 1
        return frames
    clips = np.stack([clip(1, 2, 3), clip(0, 8, 5), clip(2, 5, 7), clip(4, 0, 4), clip(3, 9, 2), clip(0, 1, 6)])
    mixed = np.stack([clips[(b + np.arange(6)) % 6, np.arange(6)] for b in range(6)])   # piece k from clip b + k
    keep = np.ones((6, 6), bool)
    assert ink_spread(clips, keep).max() < 0.01 < 0.3 < ink_spread(mixed, keep).min()
    assert np.isnan(ink_spread(clips[:, :, 0], keep)).all()                       # pictures: none
    two = keep.copy()
    two[:, 2:] = False
    assert np.isnan(ink_spread(clips, two)).all()                                  # fewer than three pieces: none


def test_no_gate_where_real_seams_match_no_better_than_bags():
    rng = np.random.default_rng(0)
    bags = {"mixed": seams_only(rng.uniform(0.6, 1.0, 100)), "noise": seams_only(rng.uniform(0.9, 1.1, 100))}
    real = rng.uniform(0.8, 1.1, 100)                      # pieces cut with gaps: seams about as good as unrelated
    assert fit_gate(seams_only(real), np.ones(100, bool), bags) is None
    real = rng.uniform(0.1, 0.5, 100)
    real[:15] = 1.0                                        # 15% of real puzzles above the bags: it cannot tell
    assert fit_gate(seams_only(real), np.ones(100, bool), bags) is None
    assert fit_gate(seams_only(real), np.ones(100, bool), bags, most=0.2)
    nan = {"noise": seams_only(np.full(100, np.nan)), "mixed": bags["mixed"]}   # a kind without evidence does not count
    assert fit_gate(seams_only(real), np.ones(100, bool), nan, most=0.2)["threshold"] == pytest.approx(
        np.quantile(bags["mixed"][:, 0], 0.01))
    assert fit_gate(seams_only(real), np.ones(100, bool), {"noise": seams_only(np.full(100, np.nan))}) is None


def test_calibrate_chooses_by_cross_fitting_within_val():
    """A puzzle that is not solved has a swapped pair its model is sure of and one piece it is not sure of: a sure
    piece of an unsure puzzle is then right far less often than a sure piece of a sure one. Held out, the 'unsolved'
    way (a table of unsolved puzzles' pieces) is better calibrated than every piece's table raised to the puzzle's,
    and choose() picks it."""
    from solving.confidence import BINS, WAYS, choose, cross_fit
    rng = np.random.default_rng(0)
    solved = rng.random(600) < 0.6
    right = np.where(solved[:, None], True, np.array([False, False, True, True])[None])      # (600, 4)
    margin = rng.uniform(0.5, 1.5, (600, 4))
    margin[~solved, 2] = rng.uniform(0.0, 0.3, (~solved).sum())        # the unsure piece of an unsolved puzzle
    found = [margin.ravel(), right.ravel(), margin.min(1), solved, np.full(600, np.nan), np.repeat(np.arange(600), 4)]
    picture = np.arange(600) % 100
    scores = cross_fit(found, picture, 0.25, [(w, 10, 5) for w in WAYS])             # (halves, (piece, puzzle))
    assert scores[("unsolved", 10, 5)][:, 0].mean() < scores[("raised", 10, 5)][:, 0].mean() - 0.05, scores
    way, piece_bins, puzzle_bins = choose(found, picture, 0.25)
    assert way == "unsolved" and piece_bins in BINS and puzzle_bins in BINS


def test_a_near_tie_keeps_the_raised_way_and_too_few_pictures_are_refused():
    """Where the pieces of unsolved puzzles behave like every other piece, 'unsolved' gains nothing held out: the
    simpler 'raised' way is kept. calibrate cross-fits on halves of the pictures and refuses fewer than four."""
    from solving.confidence import calibrate, choose
    rng = np.random.default_rng(1)
    margin = rng.uniform(0, 1.5, (600, 4))
    right = rng.random((600, 4)) < 0.3 + 0.45 * margin                   # right by margin alone, not by puzzle
    found = [margin.ravel(), right.ravel(), margin.min(1), right.all(1), np.full(600, np.nan),
             np.repeat(np.arange(600), 4)]
    assert choose(found, np.arange(600) % 100, 0.25)[0] == "raised"
    bags = [{"mixed": np.ones(3), "noise": np.ones(3)}]
    with pytest.raises(UserError, match=r"^--calibrate chooses how to fit by cross-fitting on halves of the val "
                                        r"pictures, and 3 are too few; raise --num-puzzles to at least 4$"):
        calibrate("unused.pt", "val", None, found, bags, per_pass=3)
