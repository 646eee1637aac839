"""
Turning predicted positional codes into positions, and the paper's accuracy metrics.

Paper: "Predicted position encodings" (supplement) and "Metrics" (Sec. 4.2).
- assign(cost): each piece gets a distinct position. The method needs only that one-to-one match; which rule makes it
  is a choice of the solver. "hungarian" (the default) is the optimal assignment (minimum total cost), written from
  scratch. "greedy" is the rule of the paper's text: piece by piece (in input order), the closest free position by L2
  distance, a used position removed. The authors' released code (github.com/JinyangMarkLiu/JPDVT, find_permutation)
  differs: it uses L1 (Manhattan) distance, and its image sampler (image_model/sample.py) goes position by position,
  each taking the closest free piece (its video sampler goes piece by piece, as here).
- piece_accuracy / puzzle_accuracy: fraction of pieces in place / of puzzles with every piece in place.
- kendall_distance: discordant pairs / (n(n-1)/2), the normalized Kendall (bubble-sort) distance for videos;
  kendall_reversible: the authors' variant, the smaller of the distances of the predicted order and its reverse.
- psnr / in_slots: temporal super-resolution (the supplement's downstream task, which reports no figure): the PSNR of
  the generated pieces' frames against the truth, each piece's content put at the slot the solver gave it.

    cost = torch.cdist(pred_codes, table)   # (N, positions) L2 distances
    positions = assign(cost)                # piece i goes to positions[i]
"""
import numpy as np
import torch

ASSIGNERS = {"hungarian": "optimal assignment (min total L2 distance)",
             "greedy": "paper's text: piece by piece, the closest free position by L2 (the authors' code: L1)"}


def _as_cost(cost):
    c = cost.detach().cpu().double().numpy() if isinstance(cost, torch.Tensor) else np.asarray(cost, dtype=np.float64)
    if c.ndim != 2:
        raise ValueError(f"cost must be a 2D matrix (pieces x positions), got shape {c.shape}")
    n, m = c.shape
    if n > m:
        raise ValueError(f"cannot assign {n} pieces to only {m} positions: cost needs n <= m")
    if not np.isfinite(c).all():
        raise ValueError("cost contains NaN or infinite values; check the model's predictions")
    return c


def hungarian(c):
    """Minimum-cost assignment of rows to distinct columns, O(n^2 m), via shortest augmenting paths with potentials."""
    n, m = c.shape
    u = np.zeros(n + 1)                 # row potentials (1-based; index 0 is a virtual row)
    v = np.zeros(m + 1)                 # column potentials
    match = np.zeros(m + 1, dtype=np.int64)  # match[j] = row (1-based) assigned to column j, 0 = free
    for i in range(1, n + 1):
        match[0] = i
        j0 = 0
        minv = np.full(m + 1, np.inf)
        way = np.zeros(m + 1, dtype=np.int64)
        used = np.zeros(m + 1, dtype=bool)
        while True:                      # grow an alternating tree until a free column is reached
            used[j0] = True
            i0 = match[j0]
            free = ~used[1:]
            reduced = c[i0 - 1] - u[i0] - v[1:]
            better = free & (reduced < minv[1:])
            minv[1:][better] = reduced[better]
            way[1:][better] = j0
            cand = np.where(free, minv[1:], np.inf)
            j1 = int(np.argmin(cand)) + 1
            delta = cand[j1 - 1]
            u[match[used]] += delta
            v[used] -= delta
            minv[1:][free] -= delta
            j0 = j1
            if match[j0] == 0:
                break
        while j0:                        # flip the augmenting path
            j1 = way[j0]
            match[j0] = match[j1]
            j0 = j1
    out = np.empty(n, dtype=np.int64)
    for j in range(1, m + 1):
        if match[j]:
            out[match[j] - 1] = j - 1
    return out


def greedy(c):
    """The paper's text: piece by piece, take the closest position not used yet (the authors' released code uses
    L1 distance, and goes position by position for images; see the module docstring)."""
    n, m = c.shape
    free = np.ones(m, dtype=bool)
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        j = int(np.argmin(np.where(free, c[i], np.inf)))
        out[i] = j
        free[j] = False
    return out


def assign(cost, method="hungarian"):
    """cost[i, j] = cost of piece i at position j (n <= m). Returns a length-n int array: each piece's position."""
    if method not in ASSIGNERS:
        raise ValueError(f"assignment method must be one of {sorted(ASSIGNERS)}, got {method!r}")
    c = _as_cost(cost)
    return hungarian(c) if method == "hungarian" else greedy(c)


def assign_batch(cost, method="hungarian", pinned=None):
    """cost (B, N, positions) -> (B, N) int array: assign() for every puzzle of a batch. pinned (B, N): the cell of
    each piece whose position is known (an anchor), -1 for the others; such a piece keeps its cell."""
    if pinned is None:
        return np.stack([assign(c, method) for c in cost])
    pinned = pinned.cpu().numpy() if isinstance(pinned, torch.Tensor) else np.asarray(pinned)
    return np.stack([assign(pin(_as_cost(c), p), method) for c, p in zip(cost, pinned)])


def pin(c, cells):
    """A cost matrix in which each piece i with cells[i] >= 0 costs nothing at its cell and more than any assignment
    elsewhere, and its cell costs every other piece as much: any optimal (or greedy) assignment keeps it there."""
    c, big = c.copy(), float(np.abs(c).sum()) + 1.0
    for i, j in enumerate(cells):
        if j >= 0:
            c[i, :], c[:, j] = big, big
            c[i, j] = 0.0
    return c


def _pair(pred, true, mask):
    pred = np.asarray(pred.cpu() if isinstance(pred, torch.Tensor) else pred)
    true = np.asarray(true.cpu() if isinstance(true, torch.Tensor) else true)
    if pred.shape != true.shape:
        raise ValueError(f"pred and true must have the same shape, got {pred.shape} and {true.shape}")
    pred, true = np.atleast_2d(pred), np.atleast_2d(true)
    mask = np.ones(pred.shape, bool) if mask is None else np.atleast_2d(np.asarray(mask, dtype=bool))
    return pred == true, mask


def piece_accuracy(pred, true, mask=None):
    """Fraction of counted pieces in their true position; pred, true: [B, N]; mask: [B, N], True = counted."""
    ok, mask = _pair(pred, true, mask)
    return float((ok & mask).sum() / max(mask.sum(), 1))


def puzzle_accuracy(pred, true, mask=None):
    """Fraction of puzzles whose counted pieces are all in place."""
    ok, mask = _pair(pred, true, mask)
    return float((ok | ~mask).all(axis=1).mean())


def kendall_distance(a, b):
    """Discordant pairs of two orderings a, b ([N] or [B, N]) over n(n-1)/2: 0 in order, 1 reversed; float or [B]."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"orderings must have the same shape, got {a.shape} and {b.shape}")
    single = a.ndim == 1
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    n = a.shape[1]
    da = np.sign(a[:, :, None] - a[:, None, :])
    db = np.sign(b[:, :, None] - b[:, None, :])
    d = (da * db < 0).sum(axis=(1, 2)) / 2 / max(n * (n - 1) / 2, 1)
    return float(d[0]) if single else d


def kendall_reversible(pred, true):
    """
    The authors' video evaluation: the Kendall distance of the predicted order or of its reverse, whichever is
    smaller, so a clip ordered exactly backwards scores 0. Here the anchor is pinned to the first slot, so an order
    can never be exactly backwards. pred, true: slots [N] or [B, N]. Reported as `kendall_rev`.
    """
    pred = np.asarray(pred)
    return np.minimum(kendall_distance(pred, true), kendall_distance(pred.max(-1, keepdims=True) - pred, true))


def relabel_generated(pred, true, generated):
    """
    Generated pieces start as interchangeable noise, so which of them fills which missing slot is arbitrary. Give
    them the true slots of the missing pieces in the order the prediction placed them (the authors' evaluation
    sorts them): the truth against which the missing slots are compared as a set. pred, true, generated: [B, N].
    """
    pred, true = np.atleast_2d(np.asarray(pred)), np.atleast_2d(np.asarray(true)).copy()
    for b, m in enumerate(np.atleast_2d(np.asarray(generated, dtype=bool))):
        idx = np.flatnonzero(m)
        true[b, idx[np.argsort(pred[b, idx], kind="stable")]] = np.sort(true[b, idx])
    return true


def in_slots(content, positions):
    """(B, N, ...): the content (B, N, ...) in time order, each piece's at the slot the solver gave it (positions (B, N)
    numpy)."""
    order = torch.from_numpy(np.argsort(positions, 1)).to(content.device)          # slot -> piece
    return content.gather(1, order.view(*order.shape, *[1] * (content.dim() - 2)).expand_as(content))


def psnr(pred, true, keep):
    """(B,): each clip's PSNR (dB) over the frames of its missing pieces (keep (N,) bool numpy: the given slots), clips
    (B, N, F, C, H, W) in time order, pixels in [-1, 1] read as [0, 1]; a perfect match scores 100 (an error floor)."""
    err = ((pred[:, ~keep] - true[:, ~keep]) / 2) ** 2                       # (B, M, F, C, H, W)
    return 10 * torch.log10(1 / err.flatten(1).mean(1).clamp(min=1e-10))
