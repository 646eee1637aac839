"""Core math: positional codes, the DDPM, assignment and metrics, against hand-computed values."""
import itertools
import math

import numpy as np
import pytest
import torch

from diffusion import GaussianDiffusion, extract, linear_betas
from metrics import assign, kendall_distance, kendall_reversible, piece_accuracy, puzzle_accuracy, relabel_generated
from posenc import encode_1d, encode_2d, grid_table, sequence_table

# ----------------------------------------------------------------------------- posenc

def test_encode_1d_formula():
    code = encode_1d(torch.tensor([3.0]), dim=16, base=1000.0)[0]
    for i in range(8):
        assert code[2 * i].item() == pytest.approx(math.sin(3 / 1000 ** (2 * i / 16)), abs=1e-6)
        assert code[2 * i + 1].item() == pytest.approx(math.cos(3 / 1000 ** (2 * i / 16)), abs=1e-6)
    assert encode_1d(0, dim=4).tolist() == [0.0, 1.0, 0.0, 1.0]
    assert encode_1d(torch.zeros(2, 5)).shape == (2, 5, 16)


def test_encode_2d_halves_and_tables():
    code = encode_2d(torch.tensor(2), torch.tensor(1))
    assert torch.allclose(code[:16], encode_1d(1, 16)) and torch.allclose(code[16:], encode_1d(2, 16))
    table = grid_table(2, 3)
    assert table.shape == (6, 32)
    assert torch.allclose(table[1 * 3 + 2], encode_2d(torch.tensor(1), torch.tensor(2)))
    assert torch.cdist(table, table).add(torch.eye(6) * 9).min() > 0.1      # all codes distinct
    assert torch.allclose(sequence_table(5), encode_1d(torch.arange(5), 16))
    with pytest.raises(ValueError):
        encode_1d(1, dim=7)


# ----------------------------------------------------------------------------- diffusion

def test_linear_schedule_and_extract():
    b = linear_betas()
    d = GaussianDiffusion(1000, "x0")
    assert torch.equal(d.betas, b) and b.shape == (1000,)
    assert d.alphas_cumprod[0].item() == pytest.approx(1 - 1e-4)
    assert d.alphas_cumprod[-1].item() == pytest.approx(np.prod(1 - np.linspace(1e-4, 0.02, 1000)), rel=1e-9)
    e = extract(d.alphas_cumprod, torch.tensor([0, 999]), (2, 3, 4))
    assert e.shape == (2, 1, 1) and e[0].item() == pytest.approx(1 - 1e-4)


def test_q_sample_statistics():
    d = GaussianDiffusion(1000, "x0")
    torch.manual_seed(0)
    x0 = torch.full((20000, 4), 0.5)
    for step in [10, 500, 999]:
        xt = d.q_sample(x0, torch.full((20000,), step))
        abar = d.alphas_cumprod[step].item()
        assert xt.mean().item() == pytest.approx(math.sqrt(abar) * 0.5, abs=0.01)
        assert xt.var().item() == pytest.approx(1 - abar, rel=0.03, abs=1e-4)


def _setup(prediction):
    torch.manual_seed(0)
    b, n = 3, 5
    target = {"code": sequence_table(n)[torch.stack([torch.randperm(n) for _ in range(b)])],
              "content": torch.rand(b, n, 1, 4, 4) * 2 - 1}
    missing = torch.zeros(b, n, dtype=torch.bool)
    missing[:, 1] = True
    masks = {"code": None, "content": missing}
    d = GaussianDiffusion(1000, prediction=prediction)

    def oracle(xt, t):  # returns exactly what a perfect network would
        if prediction == "x0":
            return target
        abar = {k: extract(d.alphas_cumprod, t, v.shape) for k, v in xt.items()}
        return {k: (xt[k] - abar[k].sqrt() * target[k]) / (1 - abar[k]).sqrt() for k in xt}

    given = {"code": torch.zeros_like(target["code"]), "content": torch.where(
        missing[..., None, None, None], torch.zeros_like(target["content"]), target["content"])}
    return d, oracle, target, given, masks


@pytest.mark.parametrize("prediction", ["x0", "eps"])
@pytest.mark.parametrize("sampler,steps", [("ddim", 50), ("ddim", 1000), ("ddpm", 1000), ("ddpm", 20), ("ddim", 1),
                                           ("ddpm", 1)])
def test_samplers_recover_target_with_oracle(prediction, sampler, steps):
    d, oracle, target, given, masks = _setup(prediction)
    out = d.sample(oracle, given, masks, steps=steps, sampler=sampler, generator=torch.Generator().manual_seed(1))
    for k in target:
        assert torch.allclose(out[k], target[k], atol=1e-4), k
    # the given content is passed through untouched
    assert torch.equal(out["content"][:, 0], given["content"][:, 0])


def test_timesteps_one_call_starts_at_pure_noise():
    d = GaussianDiffusion(1000, "x0")
    assert d.timesteps(1) == [999]                  # one call at t = T - 1, never t = 0 on pure noise
    assert d.timesteps(2) == [999, 0]
    assert d.timesteps(5000) == list(range(999, -1, -1))
    ts = d.timesteps(50)
    assert len(ts) == 50 and ts[0] == 999 and ts[-1] == 0 and ts == sorted(ts, reverse=True)


def test_one_step_is_the_x0_prediction_for_both_samplers():
    """With one step both samplers return the network's clipped x0 prediction: the posterior-mean estimate."""
    d, _, target, given, masks = _setup("x0")
    guess = {"code": target["code"] * 0.5, "content": target["content"] * 0.5}
    outs = [d.sample(lambda xt, t: guess, given, masks, steps=1, sampler=s, generator=torch.Generator().manual_seed(1))
            for s in ("ddpm", "ddim")]
    for k in guess:
        assert torch.allclose(outs[0][k], outs[1][k])
    assert torch.allclose(outs[0]["code"], guess["code"])


@pytest.mark.parametrize("prediction", ["x0", "eps"])
def test_training_loss_masks_and_weights(prediction):
    d, oracle, target, given, masks = _setup(prediction)
    t = torch.randint(0, 1000, (3,))
    assert d.training_losses(oracle, target, masks, t=t)["loss"].item() < 1e-8
    seen = {}

    def zero(xt, t):
        seen.update(xt)
        return {k: torch.zeros_like(v) for k, v in xt.items()}

    losses = d.training_losses(zero, target, masks, weights={"code": 0.2, "content": 0.8}, t=t)
    assert losses["loss"].item() == pytest.approx(0.2 * losses["code"].item() + 0.8 * losses["content"].item())
    if prediction == "x0":  # loss only over the missing content entries
        assert losses["content"].item() == pytest.approx((target["content"][:, 1] ** 2).mean().item(), rel=1e-5)
    # given content goes in clean, missing content noised
    assert torch.equal(seen["content"][:, 0], target["content"][:, 0])
    assert not torch.equal(seen["content"][:, 1], target["content"][:, 1])


# ----------------------------------------------------------------------------- assignment

def brute_force(c):
    n, m = c.shape
    return min(c[range(n), list(p)].sum() for p in itertools.permutations(range(m), n))


@pytest.mark.parametrize("n,m", [(1, 1), (2, 2), (3, 3), (4, 6), (5, 5), (6, 6), (7, 7), (3, 7)])
def test_hungarian_matches_brute_force(n, m):
    rng = np.random.default_rng(n * 10 + m)
    for trial in range(6):
        c = rng.random((n, m)) if trial % 2 else rng.integers(0, 3, (n, m)).astype(float)  # ties
        p = assign(c)
        assert len(set(p.tolist())) == n and p.min() >= 0 and p.max() < m
        assert c[range(n), p].sum() == pytest.approx(brute_force(c))


def test_assign_torch_greedy_and_errors():
    c = torch.tensor([[0.0, 1.0], [0.1, 5.0]])
    assert assign(c, "greedy").tolist() == [0, 1]                 # piece 0 takes its closest first
    assert assign(c, "hungarian").tolist() == [1, 0]              # optimal: 1.0 + 0.1 < 0.0 + 5.0
    c = torch.tensor([[0.1, 0.2], [0.05, 5.0]])                   # the paper's text, not the authors' image code:
    assert assign(c, "greedy").tolist() == [0, 1]                 # piece 0 picks first; position 0 first: [1, 0]
    assert sorted(assign(torch.zeros(4, 4)).tolist()) == [0, 1, 2, 3]          # all ties: still a permutation
    with pytest.raises(ValueError, match="NaN"):
        assign(np.array([[np.nan, 1.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="n <= m"):
        assign(np.zeros((3, 2)))
    with pytest.raises(ValueError):
        assign(np.zeros((2, 2)), "nearest")


# ----------------------------------------------------------------------------- metrics

def test_accuracies():
    pred = np.array([[0, 1, 2], [0, 2, 1]])
    true = np.array([[0, 1, 2], [0, 1, 2]])
    assert piece_accuracy(pred, true) == pytest.approx(4 / 6)
    assert puzzle_accuracy(pred, true) == pytest.approx(0.5)
    mask = np.array([[1, 1, 1], [1, 0, 0]], bool)   # only given pieces count
    assert piece_accuracy(pred, true, mask) == 1.0 and puzzle_accuracy(pred, true, mask) == 1.0


def test_kendall():
    a = np.arange(6)
    assert kendall_distance(a, a) == 0.0
    assert kendall_distance(a, a[::-1]) == 1.0
    assert kendall_distance([0, 1, 2, 3], [1, 0, 2, 3]) == pytest.approx(1 / 6)
    assert kendall_distance(np.array([[0, 1, 2], [2, 1, 0]]), np.array([[0, 1, 2], [0, 1, 2]])).tolist() == [0, 1]
    assert kendall_reversible([3, 2, 1, 0], [0, 1, 2, 3]) == 0.0                 # a reversed clip counts as ordered
    assert kendall_reversible([1, 0, 2, 3], [0, 1, 2, 3]) == pytest.approx(1 / 6)


def test_relabel_generated_compares_generated_pieces_as_a_set():
    pred = np.array([[0, 3, 1, 2]])                           # pieces 1 and 3 are generated, placed at 3 and 2
    true = np.array([[0, 2, 1, 3]])
    as_set = relabel_generated(pred, true, np.array([[False, True, False, True]]))
    assert as_set.tolist() == [[0, 3, 1, 2]]                  # their true slots {2, 3}, in the order they were placed
    assert true.tolist() == [[0, 2, 1, 3]]                    # the input is not changed




def test_follow_cells_shows_each_drawing_in_the_cell_it_was_drawn_for():
    """With several samples the cells come from the mean cost and the drawings from the first sample: two missing
    pieces whose first-sample codes point at each other's assigned cells swap drawings; given pieces keep theirs."""
    import numpy as np

    from jpdvt import arrange, follow_cells, pinned_cells
    n = 4
    batch = {"missing": torch.tensor([[False, False, True, True]]), "true_pos": torch.arange(n)[None]}
    given = torch.zeros(1, n, dtype=bool)
    cost = torch.full((1, n, n), 5.0)
    cost[0, torch.arange(n), torch.arange(n)] = 0.0             # the mean: piece i at cell i
    first = torch.full((1, n, n), 5.0)
    first[0, [0, 1, 2, 3], [0, 1, 3, 2]] = 0.0                  # the first sample: piece 2 drew cell 3, piece 3 cell 2
    generated = torch.arange(n, dtype=torch.float32).view(1, n, 1, 1, 1).expand(1, n, 3, 2, 2).clone()
    costs = torch.stack([first, cost, cost, cost])             # (S, B, N, P): the mean still puts piece i at cell i
    positions = arrange(costs, pinned_cells(batch, given), "hungarian")  # (B, N): the answer, from the mean cost
    assert positions.tolist() == [[0, 1, 2, 3]]
    out = follow_cells(generated, costs, positions, batch)
    assert out[0, :, 0, 0, 0].tolist() == [0.0, 1.0, 3.0, 2.0]
    same = torch.stack([cost, cost])
    assert np.array_equal(follow_cells(generated, same, arrange(same, pinned_cells(batch, given), "hungarian"), batch),
                          generated)                            # drawings already in their cells stay
