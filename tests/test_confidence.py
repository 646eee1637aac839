"""Is it one puzzle? The seam evidence on real photos cut into pieces (docs/photos), on pieces of different photos
and on noise, and the gate fitted from it (solving/confidence.py)."""
import numpy as np
import pytest
import torch
from conftest import CHELSEA, COFFEE
from PIL import Image

from solving.confidence import fit, fit_gate, not_a_puzzle, probability, seam_ratios
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


def test_not_a_puzzle_bags_take_each_piece_from_another_puzzle():
    content = torch.arange(4)[:, None, None].float().expand(4, 3, 5).clone()     # puzzle b's pieces all hold b
    batch = {"content": content, "missing": torch.zeros(4, 3, dtype=torch.bool), "true_pos": torch.zeros(4, 3)}
    mixed, noise = not_a_puzzle(batch, torch.Generator().manual_seed(0))
    assert [sorted(set(mixed["content"][b, :, 0].tolist())) for b in range(4)] == [sorted([b, (b + 1) % 4, (b + 2) % 4])
                                                                                   for b in range(4)]
    assert noise["content"].shape == content.shape and noise["content"].abs().max() <= 1
    assert mixed["missing"] is batch["missing"]


def test_gate_holds_back_95_percent_of_each_kind_of_bag():
    rng = np.random.default_rng(0)
    real, ok = rng.uniform(0.1, 0.5, 200), rng.random(200) < 0.9
    bags = {"mixed": rng.uniform(0.6, 1.0, 100), "noise": rng.uniform(0.9, 1.1, 100)}
    real[:10], ok[:10] = 1.0, [True] * 7 + [False] * 3              # ten real puzzles above it, seven solved
    real[10] = np.nan                                                # no evidence: never above
    gate = fit_gate(real, ok, bags)
    assert all(np.mean(v >= gate["threshold"]) >= 0.95 for v in bags.values())
    above = sum(int((v >= gate["threshold"]).sum()) for v in bags.values())
    assert gate["accuracy"] == pytest.approx((7 + 1) / (10 + above + 2))
    table = fit(rng.normal(1, 1, 500), rng.random(500) < 0.8)
    assert 0 <= probability(table, -5) <= probability(table, 5) <= 1


def test_no_gate_where_real_seams_match_no_better_than_bags():
    rng = np.random.default_rng(0)
    bags = {"mixed": rng.uniform(0.6, 1.0, 100), "noise": rng.uniform(0.9, 1.1, 100)}
    real = rng.uniform(0.8, 1.1, 100)                      # pieces cut with gaps: seams about as good as unrelated
    assert fit_gate(real, np.ones(100, bool), bags) is None
    real = rng.uniform(0.1, 0.5, 100)
    real[:15] = 1.0                                        # 15% of real puzzles above the bags: it cannot tell
    assert fit_gate(real, np.ones(100, bool), bags) is None and fit_gate(real, np.ones(100, bool), bags, most=0.2)
