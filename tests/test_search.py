"""solving/search.py: from the model's candidates, swaps of pieces while the border energy drops; the board of least
energy wins; pinned pieces stay, holes move with their drawn piece, and the model's prior can outweigh the borders."""
import torch

import solving.search
from solving.borders import border_costs
from solving.search import Energy, search, unit

GRID = (3, 3)


def smooth_pieces():
    """A 3x3 puzzle of 8 px pieces cut in raster order from a smooth two-colour ramp: (1, 9, 3, 8, 8)."""
    y, x = torch.meshgrid(torch.linspace(-1, 1, 24), torch.linspace(-1, 1, 24), indexing="ij")
    img = torch.stack([x, y, x * y])                                          # (3, 24, 24)
    return img.unflatten(1, (3, 8)).unflatten(3, (3, 8)).permute(1, 3, 0, 2, 4).reshape(1, 9, 3, 8, 8)


def swapped(*pairs):
    """(1, 9): the truth (piece i in cell i) with the cells of each pair of pieces exchanged."""
    pos = torch.arange(9)[None]
    for a, b in pairs:
        pos[0, [a, b]] = pos[0, [b, a]]
    return pos


NONE_MISSING, NONE_PINNED = torch.zeros(1, 9, dtype=torch.bool), torch.full((1, 9), -1)


def test_swaps_lead_a_wrong_start_back_to_the_picture():
    start = swapped((2, 6), (0, 4))
    out = search(start[None], smooth_pieces(), NONE_MISSING, NONE_PINNED, GRID)
    assert torch.equal(out, torch.arange(9)[None])


def test_the_board_of_least_energy_wins_among_the_starts(monkeypatch):
    content = smooth_pieces()
    energy = Energy(content, NONE_MISSING, GRID)
    right, wrong = torch.arange(9)[None], swapped((1, 5))
    assert energy(right.argsort(1)[None]) < energy(wrong.argsort(1)[None])
    monkeypatch.setattr(solving.search, "descend", lambda boards, energy, fixed: boards)     # no swaps: the pick alone
    for starts in ([wrong, right], [right, wrong]):
        assert torch.equal(search(torch.stack(starts), content, NONE_MISSING, NONE_PINNED, GRID), right)


def test_swaps_work_on_a_grid_that_is_not_square():
    content = smooth_pieces()[:, :6]                                          # the top two rows: a 2 x 3 picture
    start = torch.tensor([[5, 1, 2, 3, 4, 0]])                                # pieces 0 and 5 exchanged
    out = search(start[None], content, torch.zeros(1, 6, dtype=torch.bool), torch.full((1, 6), -1), (2, 3))
    assert torch.equal(out, torch.arange(6)[None])


def test_flat_pieces_do_not_collapse_the_unit_of_border_cost():
    content = smooth_pieces()
    flat = content.clone()
    flat[0, :4] = -1                                                          # four black pieces: their pairs cost 0
    units = [unit(*border_costs(c), NONE_MISSING).item() for c in (content, flat)]
    assert 0.1 < units[1] / units[0] < 10, units


def test_a_pinned_piece_never_moves():
    start = swapped((0, 8))                                                   # piece 0 told to stay in cell 8
    pinned = NONE_PINNED.clone()
    pinned[0, 0] = 8
    out = search(start[None], smooth_pieces(), NONE_MISSING, pinned, GRID)
    assert out[0, 0] == 8 and sorted(out[0].tolist()) == list(range(9))


def test_a_real_piece_and_a_hole_swap_and_the_hole_content_counts_for_nothing():
    content, missing = smooth_pieces(), NONE_MISSING.clone()
    missing[0, 4] = True                                                      # the centre piece is missing
    content[0, 4] = torch.randn(3, 8, 8) * 5                                  # its drawn content: noise
    start = swapped((4, 0))                                                   # the hole in the corner
    assert torch.equal(search(start[None], content, missing, NONE_PINNED, GRID), torch.arange(9)[None])


def test_a_heavy_prior_keeps_the_model_s_board():
    start = swapped((2, 6))
    prior = 1 - torch.eye(9)[start[0]][None]                      # (1, N, cells): the model wants exactly `start`
    assert torch.equal(search(start[None], smooth_pieces(), NONE_MISSING, NONE_PINNED, GRID, 1e6 * prior), start)
    assert torch.equal(search(start[None], smooth_pieces(), NONE_MISSING, NONE_PINNED, GRID, 1e-6 * prior),
                       torch.arange(9)[None])
