"""
The judge's search over a picture (not in the paper): the model proposes, the border cue settles its doubts.

Start from the judge's pick (solving/judge.py). A piece is in doubt when fewer than a share `trust` of the model's
samples put it in the cell the pick gives it. Swap two pieces in doubt (two real pieces, or a real piece and a missing
one, whose drawn content then moves) whenever the swap lowers the board's border energy the most, until no swap lowers
it. Pieces the samples agree on never move, so the search stays near what the samples support.

    positions = search(positions, own, content, missing, grid, trust)       # (B, N) -> (B, N)
"""
import itertools

import torch

from solving.judge import board_energy, border_costs


def agreement(own, positions):
    """(B, N): the share of the samples' own arrangements own (S, B, N) that put each piece in positions' (B, N)
    cell."""
    return (own == positions[None]).float().mean(0)


def search(positions, own, content, missing, grid, trust):
    """(B, N) int64: positions (B, N) improved by swaps of two pieces whose agreement with the samples' own arrangements
    own (S, B, N) is below trust; image content (B, N, C, H, W), missing (B, N) bool, grid (rows, cols)."""
    positions, own, missing = (torch.as_tensor(x, device=content.device) for x in (positions, own, missing))
    lr, tb = border_costs(content)                                            # (B, N, N) each
    doubt = agreement(own, positions) < trust                                 # (B, N)
    board = positions.argsort(1)                                              # (B, cells): the piece in each cell
    pairs = torch.tensor(list(itertools.combinations(range(board.shape[1]), 2)), device=board.device)   # (M, 2)
    rows = torch.arange(board.shape[0], device=board.device)[:, None]
    while True:
        swapped = board[:, None].repeat(1, len(pairs), 1)                     # (B, M, cells): each swap applied
        swapped[:, torch.arange(len(pairs)), pairs[:, 0]] = board[:, pairs[:, 1]]
        swapped[:, torch.arange(len(pairs)), pairs[:, 1]] = board[:, pairs[:, 0]]
        shown = torch.where(missing[rows[..., None], swapped], -1, swapped)   # missing pieces add no border
        energy = board_energy(lr, tb, shown.transpose(0, 1).unflatten(2, tuple(grid)))            # (M, B)
        now = board_energy(lr, tb, torch.where(missing[rows, board], -1, board)[None].unflatten(2, tuple(grid)))[0]
        allowed = doubt[rows, board[:, pairs[:, 0]]] & doubt[rows, board[:, pairs[:, 1]]]         # (B, M)
        energy = torch.where(allowed.T, energy, torch.inf)
        best = energy.argmin(0)                                               # (B,)
        better = energy[best, rows[:, 0]] < now - 1e-9
        if not better.any():
            break
        board = torch.where(better[:, None], swapped[rows[:, 0], best], board)
    return board.argsort(1)                                                   # back to each piece's cell
