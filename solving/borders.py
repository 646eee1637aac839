"""
The classic cue of the judge (not in the paper): how well two pieces fit across the border they share (images) or the
cut between them (clips), from their touching pixel lines. Images use Gallagher's Mahalanobis gradient compatibility
(MGC, chosen on val, bench/judge.py); clip frames are blurred first, so that the cost keeps growing with how far the
digits moved instead of saturating once two sharp strokes no longer overlap.

    lr, tb = border_costs(content)                                   # (B, N, N) each: j right of i, j below i
    energy = edge_energy(content, positions, missing, grid)          # (K, B): K arrangements of each puzzle
    energy = cut_energy(content, positions, missing)                 # clips: K orders
"""
import torch
import torch.nn.functional as F

ENERGIES = ("l1", "l2", "predict", "mgc")   # the pair cost across a border (pair_costs)
ENERGY = "mgc"                               # chosen on val (bench/judge.py)
CLIP_BLUR = 1.0                              # px: the Gaussian blur of clip frames before a cut is scored (val)


def lines(x):
    """(B, N, C, ...) -> (B, N, L, C): one pixel line of each piece (an image column or row, a video frame)."""
    return x.flatten(3).transpose(2, 3)


def pair_costs(a, a_in, b, b_in, energy):
    """(B, N, N): the cost of piece j's first and second lines b, b_in following piece i's last and next-to-last
    lines a, a_in, each (B, N, L, C): l1/l2 of the touching lines; predict: L1 of each side's linear prediction of
    the other's line; mgc: Gallagher's Mahalanobis gradient compatibility, both ways."""
    if energy == "mgc":
        return mahalanobis(a, a_in, b) + mahalanobis(b, b_in, a).transpose(1, 2)
    a, a_in, b, b_in = a[:, :, None], a_in[:, :, None], b[:, None], b_in[:, None]     # i along dim 1, j along dim 2
    if energy == "predict":
        return ((2 * a - a_in - b).abs() + (2 * b - b_in - a).abs()).mean((3, 4))
    return (a - b).abs().mean((3, 4)) if energy == "l1" else ((a - b) ** 2).mean((3, 4))


def mahalanobis(edge, inner, other, eps=1e-4):
    """(B, N, N): how unlikely the step edge_i -> other_j is under the gradients inner_i -> edge_i of piece i (its
    mean and covariance over the line; eps keeps the covariance invertible), summed over the line."""
    grad = edge - inner                                                         # (B, N, L, C)
    mu, centred = grad.mean(2), grad - grad.mean(2, keepdim=True)
    cov = centred.transpose(2, 3) @ centred / max(grad.shape[2] - 1, 1)         # (B, N, C, C)
    inv = torch.linalg.inv(cov + eps * torch.eye(grad.shape[3], device=grad.device))
    d = other[:, None] - edge[:, :, None] - mu[:, :, None, None]                # (B, N, N, L, C)
    return ((d @ inv[:, :, None]) * d).sum((3, 4))


def board_energy(lr, tb, boards):
    """(K, B): the mean pair cost over the touching cells of boards (K, B, R, C) (the piece in each cell, -1 where none
    counts), lr[b, i, j]: j right of i, tb: j below i (None for a single row)."""
    b = torch.arange(boards.shape[1], device=boards.device)[None, :, None, None]
    total, count = 0.0, 0
    rows, cols = (boards[..., :, :-1], boards[..., :, 1:]), (boards[..., :-1, :], boards[..., 1:, :])
    for cost, (one, two) in ((lr, rows), (tb, cols)):
        if cost is not None and one.numel():
            both = (one >= 0) & (two >= 0)
            total = total + (cost[b, one.clamp(min=0), two.clamp(min=0)] * both).sum((2, 3))
            count = count + both.sum((2, 3))
    return total / torch.clamp(torch.as_tensor(count), min=1)


def boards_of(positions, missing, cells):
    """positions (K, B, N) -> (K, B, cells): the piece in each cell, -1 for an empty cell or a missing piece's."""
    piece = torch.where(missing, -1, torch.arange(missing.shape[1], device=missing.device))    # (B, N)
    return torch.full((*positions.shape[:2], cells), -1, device=missing.device).scatter_(
        2, positions, piece.expand_as(positions).contiguous())


def border_costs(content, energy=ENERGY):
    """Images (B, N, C, H, W): (lr, tb), each (B, N, N): the cost of piece j right of piece i (the right column
    against the left) and below it (the bottom row against the top)."""
    x = content.float()
    lr = pair_costs(lines(x[..., -1]), lines(x[..., -2]), lines(x[..., 0]), lines(x[..., 1]), energy)
    return lr, pair_costs(*(lines(x[..., i, :]) for i in (-1, -2, 0, 1)), energy)


def edge_energy(content, positions, missing, grid, energy=ENERGY):
    """Images (B, N, C, H, W): (K, B) the energy of K arrangements (K, B, N) over every shared border of two placed
    pieces."""
    lr, tb = border_costs(content, energy)
    return board_energy(lr, tb, boards_of(positions, missing, grid[0] * grid[1]).unflatten(2, tuple(grid)))


def clip_cuts(content, energy=ENERGY, sigma=CLIP_BLUR):
    """Videos (B, N, F, C, H, W): (B, N, N) the cost of piece j right after piece i (the last frame of i against the
    first of j), the frames blurred by sigma px (0: not blurred)."""
    x, f = content.float(), content.shape[2]    # one-frame pieces: the inner frame is the edge frame itself
    frames = [x[:, :, i] for i in (-1, max(-2, -f), 0, min(1, f - 1))]          # (B, N, C, H, W) each
    return pair_costs(*(lines(blur(y, sigma) if sigma else y) for y in frames), energy)


def cut_energy(content, positions, missing, energy=ENERGY, sigma=CLIP_BLUR):
    """Videos (B, N, F, C, H, W): (K, B) the energy of K orders (K, B, N) over each cut between consecutive placed
    pieces (clip_cuts)."""
    cut = clip_cuts(content, energy, sigma)
    return board_energy(cut, None, boards_of(positions, missing, missing.shape[1])[:, :, None])


def blur(frames, sigma=CLIP_BLUR):
    """(..., H, W) -> the same, each frame blurred by a Gaussian of sigma px (edges repeated)."""
    r = max(int(3 * sigma), 1)
    k = torch.exp(-torch.arange(-r, r + 1, dtype=frames.dtype, device=frames.device) ** 2 / (2 * sigma ** 2))
    k = k / k.sum()
    x = frames.reshape(-1, 1, *frames.shape[-2:])                               # (frames, 1, H, W)
    x = F.conv2d(F.pad(x, (r, r, 0, 0), mode="replicate"), k.view(1, 1, 1, -1))
    x = F.conv2d(F.pad(x, (0, 0, r, r), mode="replicate"), k.view(1, 1, -1, 1))
    return x.reshape(frames.shape)
