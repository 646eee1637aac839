"""solving/search.py: from the model's candidates, swaps of pieces while the border energy drops; the board of least
energy wins; pinned pieces stay, holes move with their drawn piece, and the model's prior can outweigh the borders."""
import itertools

import pytest
import torch

import solving.search
from solving.borders import border_costs
from solving.search import Energy, Swaps, descend, search, unit

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


def reference_descend(boards, energy, fixed):
    """The search before it scored swaps by their change: every swapped board (K, B, M, cells) built and its whole
    energy summed; the best swap each time (ties: the first pair), while it lowers the energy by more than 1e-6."""
    pairs = torch.tensor(list(itertools.combinations(range(boards.shape[2]), 2)), device=boards.device).reshape(-1, 2)
    if not len(pairs):                                                              # a single cell: nothing to swap
        return boards
    k, frozen = boards.shape[0], (fixed[:, pairs[:, 0]] | fixed[:, pairs[:, 1]]).T                 # (M, B)
    while True:
        swapped = boards[:, :, None].repeat(1, 1, len(pairs), 1)                   # (K, B, M, cells): each swap done
        swapped[..., torch.arange(len(pairs)), pairs[:, 0]] = boards[..., pairs[:, 1]]
        swapped[..., torch.arange(len(pairs)), pairs[:, 1]] = boards[..., pairs[:, 0]]
        flat = swapped.permute(0, 2, 1, 3).flatten(0, 1)                            # (K * M, B, cells)
        after = energy(flat).unflatten(0, (k, len(pairs)))                          # (K, M, B)
        after = after.masked_fill(frozen, torch.inf)
        best = after.min(1)                                                         # (K, B) each
        better = best.values < energy(boards) - 1e-6
        if not better.any():
            return boards
        chosen = swapped.gather(2, best.indices[:, :, None, None].expand(-1, -1, 1, boards.shape[2]))[:, :, 0]
        boards = torch.where(better[..., None], chosen, boards)


def exact(energy):
    """The same energy summed in float64 (Energy.double), where sums of its fp32 costs are exact (of magnitudes
    within about 2^25 of each other, as here): whole boards summed in fp32 can order two equally good swaps (mirror
    images, say) by their last bit, and the search's tie rule is the first. (Against the fp32 reference, 8 of 20,000
    random 3x3 boards differ: 3 exact ties, 1 near tie of 1e-7.)"""
    return energy.double()


def random_puzzles(seed, b, grid, starts=2, px=6):
    """b puzzles of random content (half of them smooth ramps plus a little noise, where good borders exist), half
    with up to 80% of the pieces missing, half with cells pinned, half with a prior: (content, missing, fixed, prior,
    starts (K, B, cells))."""
    g = torch.Generator().manual_seed(seed)
    n = grid[0] * grid[1]
    half = lambda *shape: torch.rand(b, *shape, generator=g) < 0.5                    # noqa: E731
    ramp = torch.linspace(-1, 1, px)[:, None] * torch.rand(b, n, 3, 1, 1, generator=g)
    content = torch.rand(b, n, 3, px, px, generator=g) * 2 - 1
    content = torch.where(half(1, 1, 1, 1), ramp + 0.1 * content, content)
    missing = (torch.rand(b, n, generator=g) < 0.8 * torch.rand(b, 1, generator=g)) & half(1)
    fixed = (torch.rand(b, n, generator=g) < 0.15) & half(1)
    prior = 4 * torch.rand(b, n, n, generator=g) * half(1, 1)
    boards = torch.stack([torch.stack([torch.randperm(n, generator=g) for _ in range(b)]) for _ in range(starts)])
    return content, missing, fixed, prior, boards


@pytest.mark.parametrize("grid", [(3, 3), (4, 6)])
def test_a_swap_s_delta_is_the_change_of_the_board_s_energy(grid):
    content, missing, _, prior, boards = random_puzzles(1, 4, grid)
    energy = exact(Energy(content, missing, grid, prior))
    pairs = torch.tensor(list(itertools.combinations(range(boards.shape[2]), 2)))
    swapped = boards[:, :, None].repeat(1, 1, len(pairs), 1)                   # (K, B, M, cells)
    swapped[..., torch.arange(len(pairs)), pairs[:, 0]] = boards[..., pairs[:, 1]]
    swapped[..., torch.arange(len(pairs)), pairs[:, 1]] = boards[..., pairs[:, 0]]
    change = energy(swapped.permute(2, 0, 1, 3).flatten(0, 1)).unflatten(0, (len(pairs), -1)).permute(1, 2, 0)
    assert torch.allclose(Swaps(energy, boards).delta, change - energy(boards)[..., None], atol=1e-9)


@pytest.mark.parametrize("grid, puzzles", [((3, 3), 600), ((4, 5), 12), ((5, 5), 6)])
def test_descend_reaches_the_boards_of_the_reference(grid, puzzles):
    """Random puzzles (missing pieces, pinned cells, a prior) from random starts: the boards of the old search, to the
    bit. 4 x 5 scores every swap again after each swap; 5 x 5 only those near the swapped cells."""
    content, missing, fixed, prior, boards = random_puzzles(0, puzzles, grid)
    for p in (None, prior):
        energy = Energy(content, missing, grid, p)
        assert torch.equal(descend(boards, energy, fixed), reference_descend(boards, exact(energy), fixed))


def test_equally_good_swaps_tie_exactly_and_the_first_wins():
    """Two real pieces among empty cells: each board has its mirror image, so the best swap has an equal."""
    content, missing = torch.rand(1, 9, 3, 6, 6, generator=torch.Generator().manual_seed(0)), ~NONE_MISSING
    missing[0, [3, 4]] = False
    boards = torch.tensor([6, 4, 2, 0, 5, 7, 1, 8, 3])[None, None]            # 4 in cell 1, 3 in cell 8 (a corner)
    energy = Energy(content, missing, GRID)
    delta = Swaps(energy, boards).delta[0, 0]
    assert (delta == delta.min()).sum() >= 2
    fixed = torch.zeros(1, 9, dtype=torch.bool)
    assert torch.equal(descend(boards, energy, fixed), reference_descend(boards, exact(energy), fixed))


def test_boards_descend_in_parts_over_puzzles_and_candidates_with_the_same_result(monkeypatch):
    """At 150 pieces even one candidate of a large batch exceeds PAIRS_AT_ONCE: the search splits over puzzles too,
    and parts down to one board each find the boards that all at once find."""
    content, missing, fixed, prior, boards = random_puzzles(2, 7, GRID, starts=3)
    pinned = torch.where(fixed, torch.arange(9), -1)
    whole = search(boards, content, missing, pinned, GRID, prior)
    for pairs in (36 * 3, 36):                                # 3 puzzles a part; 1 puzzle, 1 candidate a part
        monkeypatch.setattr(solving.search, "PAIRS_AT_ONCE", pairs)
        assert torch.equal(search(boards, content, missing, pinned, GRID, prior), whole)
