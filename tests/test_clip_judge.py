"""bench/clip_judge.py, the 20 x 1 judge study: its moves are the run reversals and run moves that keep the anchor, a
descent by them mends a run played backwards, and the near-tie rule keeps, within its tolerance, the least cue."""
import numpy as np
import torch

from bench.clip_judge import descend, energy, moves, near_tie
from solving.borders import clip_cuts, cut_energy


def gliding(pieces=12, size=16):
    """content (1, N, 1, 1, S, S): one-frame pieces of a blob gliding diagonally, in time order."""
    t = np.arange(pieces)[:, None, None]
    y, x = np.mgrid[0:size, 0:size]
    clip = np.exp(-((x - 1 - 1.1 * t) ** 2 + (y - 2 - 0.9 * t) ** 2) / 4.0) * 2 - 1
    return torch.from_numpy(clip).float()[None, :, None, None]


def test_the_moves_reverse_or_move_a_run_and_keep_the_anchor():
    sigma = moves(5, 1)
    assert (sigma.sort(1).values == torch.arange(5)).all() and (sigma[:, 0] == 0).all()
    assert len({tuple(s) for s in sigma.tolist()}) == len(sigma)                    # no move twice
    assert [0, 3, 2, 1, 4] in sigma.tolist() and [0, 3, 1, 2, 4] in sigma.tolist()   # 1..3 reversed; 1 behind 3


def test_a_descent_mends_a_run_played_backwards():
    content = gliding()
    order = torch.arange(12)
    order[3:9] = order[3:9].flip(0)
    cut = clip_cuts(content)
    out = descend(order[None, None], cut, 1)
    assert (out[0, 0] == torch.arange(12)).all(), out
    assert energy(cut, out)[0, 0] < energy(cut, order[None, None])[0, 0]


def test_the_near_tie_rule_keeps_the_least_cue_within_the_tolerance():
    e = torch.tensor([[1.0], [1.04], [1.2]])                      # (K, B): candidate 1 is within 5% of the least
    cue = torch.tensor([[3.0], [1.0], [0.0]])
    assert near_tie(e, cue, 0.05).item() == 1 and near_tie(e, cue, 0.01).item() == 0 and near_tie(e, cue, 0.5) == 2


def test_the_study_s_energy_is_the_judge_s():
    content = gliding()
    rng = np.random.default_rng(1)
    orders = torch.stack([torch.from_numpy(rng.permutation(12)) for _ in range(4)])[:, None]        # (K, 1, N)
    judged = cut_energy(content, orders, torch.zeros(1, 12, dtype=torch.bool))
    assert torch.allclose(energy(clip_cuts(content), orders), judged)
