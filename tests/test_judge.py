"""The judge over samples (solving/judge.py, solving/borders.py): a solved picture or clip has a lower energy than a
shuffled one, and the pick returns the candidate that fits, with missing pieces left out and told pieces kept on their
cells."""
import numpy as np
import pytest
import torch

from puzzles import ImageConfig, VideoConfig
from solving.borders import ENERGIES, cut_energy, edge_energy
from solving.judge import candidates, judge

GRID, PIECE = (3, 3), 8
IMAGES, CLIPS = ImageConfig(grid=GRID), VideoConfig()


def smooth_picture(seed, height=GRID[0] * PIECE, width=GRID[1] * PIECE):
    """(3, H, W) in [-1, 1]: a few low-frequency sinusoids per channel."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width] / max(height, width)
    img = sum(np.sin(2 * np.pi * (rng.uniform(0.3, 1.2) * y + rng.uniform(-1.2, 1.2) * x) + rng.uniform(0, 6))
              for _ in range(3))
    img = np.stack([img * s for s in (1.0, -0.7, 0.4)]) + rng.normal(0, 0.01, (3, height, width))
    return torch.from_numpy(img / np.abs(img).max()).float()


def image_puzzle(seed):
    """content (1, N, 3, P, P) in shuffled order and the truth (1, N): the raster cell of each shuffled piece."""
    img = smooth_picture(seed)
    pieces = img.unfold(1, PIECE, PIECE).unfold(2, PIECE, PIECE).permute(1, 2, 0, 3, 4).flatten(0, 1)   # (N, 3, P, P)
    order = torch.from_numpy(np.random.default_rng(seed).permutation(len(pieces)))
    return pieces[order][None], order[None]


def clip_puzzle(seed, pieces=6, frames=2, size=12):
    """content (1, N, F, 1, S, S): a bright square gliding across the frames, piece 0 first; truth (1, N)."""
    t = np.arange(pieces * frames)[:, None, None]
    y, x = np.mgrid[0:size, 0:size]
    clip = np.exp(-((x - 1 - 0.7 * t) ** 2 + (y - 2 - 0.5 * t) ** 2) / 6.0) * 2 - 1                  # (T, S, S)
    chunks = torch.from_numpy(clip).float().reshape(pieces, frames, 1, size, size)
    order = torch.from_numpy(np.concatenate([[0], 1 + np.random.default_rng(seed).permutation(pieces - 1)]))
    return chunks[order][None], order[None]


def one_hot_costs(*arrangements, n):
    """(S, 1, N, N): sample s puts piece i at arrangements[s][i] (distance 0 there, 1 elsewhere)."""
    return torch.stack([1 - torch.eye(n)[torch.as_tensor(a)] for a in arrangements])[:, None]


def wrong(truth, k=1):
    """The truth with the cells of pieces k and k + 1 swapped (the anchor, piece 0, stays)."""
    w = truth.clone()
    w[k], w[k + 1] = truth[k + 1], truth[k]
    return w


@pytest.mark.parametrize("energy", ENERGIES)
def test_solved_picture_fits_better_than_shuffled(energy):
    content, truth = image_puzzle(1)
    missing = torch.zeros(1, 9, dtype=torch.bool)
    shuffled = torch.stack([truth[0], wrong(truth[0], 3), truth[0].roll(1)])[:, None]   # (K, 1, N)
    e = edge_energy(content, shuffled, missing, GRID, energy)[:, 0]
    assert e[0] < e[1] and e[0] < e[2], e


@pytest.mark.parametrize("energy", ENERGIES)
def test_ordered_clip_fits_better_than_shuffled(energy):
    content, truth = clip_puzzle(2)
    missing = torch.zeros(1, 6, dtype=torch.bool)
    e = cut_energy(content, torch.stack([truth[0], wrong(truth[0], 2)])[:, None], missing, energy)[:, 0]
    assert e[0] < e[1], e


def test_the_one_right_sample_beats_a_wrong_ensemble():
    content, truth = image_puzzle(3)
    bad = wrong(truth[0], 4)
    costs = one_hot_costs(bad, truth[0], bad, n=9)           # two samples agree on a wrong answer: so does their mean
    missing, pinned = torch.zeros(1, 9, dtype=torch.bool), torch.full((1, 9), -1)
    assert (candidates(costs, pinned, "hungarian")[0, 0] == bad).all()
    assert (judge(costs, content, missing, pinned, "hungarian", IMAGES) == truth.numpy()).all()


def test_the_right_clip_order_is_picked():
    content, truth = clip_puzzle(4)
    bad = wrong(truth[0], 1)
    costs = one_hot_costs(bad, truth[0], bad, wrong(bad, 3), n=6)
    missing, pinned = torch.zeros(1, 6, dtype=torch.bool), torch.tensor([[0, -1, -1, -1, -1, -1]])
    assert (candidates(costs, pinned, "greedy")[0, 0] == bad).all()
    assert (judge(costs, content, missing, pinned, "greedy", CLIPS) == truth.numpy()).all()


def test_missing_pieces_are_left_out_of_the_energy():
    content, truth = image_puzzle(5)
    missing = torch.zeros(1, 9, dtype=torch.bool)
    missing[0, 2] = True
    arrangements = torch.stack([truth[0], wrong(truth[0], 5), truth[0].roll(2)])[:, None]
    before = edge_energy(content, arrangements, missing, GRID)
    noisy = content.clone()
    noisy[0, 2] = torch.randn(3, PIECE, PIECE) * 5           # a missing piece's content counts for nothing
    assert torch.allclose(before, edge_energy(noisy, arrangements, missing, GRID))
    costs = one_hot_costs(wrong(truth[0], 5), truth[0], wrong(truth[0], 5), n=9)
    assert (judge(costs, noisy, missing, torch.full((1, 9), -1), "hungarian", IMAGES) == truth.numpy()).all()


def test_a_told_piece_keeps_its_cell_in_every_candidate():
    content, truth = image_puzzle(6)
    away = truth[0].roll(1)                                   # every sample puts piece 0 elsewhere
    costs = one_hot_costs(away, away.roll(1), away.roll(2), n=9)
    pinned = torch.full((1, 9), -1)
    pinned[0, 0] = truth[0, 0]
    assert (candidates(costs, pinned, "hungarian")[:, 0, 0] == truth[0, 0]).all()
    out = judge(costs, content, torch.zeros(1, 9, dtype=torch.bool), pinned, "hungarian", IMAGES)
    assert out[0, 0] == truth[0, 0] and sorted(out[0]) == list(range(9))


def test_ties_keep_the_ensemble():
    flat = torch.zeros(1, 9, 3, PIECE, PIECE)                 # every arrangement of a flat picture fits as well
    truth = torch.arange(9)
    costs = one_hot_costs(truth, truth, truth.roll(1), n=9)
    out = judge(costs, flat, torch.zeros(1, 9, dtype=torch.bool), torch.full((1, 9), -1), "hungarian", IMAGES)
    assert (out == truth.numpy()).all()


def test_the_model_s_costs_weigh_in_only_where_gaps_erode_the_borders(monkeypatch):
    import solving.judge
    seen = []
    monkeypatch.setattr(solving.judge, "search", lambda *a: seen.append(a[-1]) or torch.as_tensor(a[0][0]))
    content, truth = image_puzzle(7)
    costs = one_hot_costs(truth[0], wrong(truth[0], 2), n=9)
    missing, pinned = torch.zeros(1, 9, dtype=torch.bool), torch.full((1, 9), -1)
    judge(costs, content, missing, pinned, "hungarian", IMAGES)
    judge(costs, content, missing, pinned, "hungarian", ImageConfig(grid=GRID, gap=8))
    assert seen[0] is None
    weight = solving.judge.PRIOR_WEIGHT[True]
    assert weight > 0 and torch.allclose(seen[1], weight * costs.mean(0))


def test_the_judge_leaves_autocast_and_works_in_fp32(monkeypatch):
    """sample.py --precision bf16/fp16 runs the judge inside autocast: its energies must not round (bf16) or overflow
    (fp16), so the judge turns autocast off and scores fp32 content."""
    import solving.judge
    seen = []
    monkeypatch.setattr(solving.judge, "pick", lambda cands, content, missing: seen.append(
        (torch.is_autocast_enabled("cpu"), content.dtype)) or cands[0].numpy())
    content, truth = clip_puzzle(4)
    costs = one_hot_costs(truth[0], wrong(truth[0], 1), n=6)
    missing, pinned = torch.zeros(1, 6, dtype=torch.bool), torch.tensor([[0, -1, -1, -1, -1, -1]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        judge(costs.bfloat16(), content.bfloat16(), missing, pinned, "hungarian", CLIPS)
    assert seen == [(False, torch.float32)]
