"""
How sure the solver is: each piece's probability of being in the right place, and the whole puzzle's.

Not in the paper. One network call at t = T - 1 gives every piece's posterior-mean code (jpdvt.Solver.mean_costs):
where the model is sure, the mean sits on one cell's code; where two cells are plausible, it sits between them. A
piece whose assigned position (by the sampler) is much nearer the mean than the next best is probably right; one
whose two best positions are about as near is a coin toss. (The sampled codes themselves say little: a sample
commits to one cell even when it is wrong; on the shapes val split their margins separate right from wrong pieces
with an AUROC of 0.55, the mean's with 0.96: `python -m bench confidence-evidence`.) So:
- `margins`: per piece, the mean code's distance to the next-best position minus to the assigned one (in code
  units: neighbouring cells are 1.06 apart); per puzzle, its smallest piece margin.
- `fit`: a calibration table, fitted on the val split: margins cut into bins of equal count, each bin's smoothed
  accuracy (never 0 or 1), chance one neighbour distance below the first bin (see fit), made non-decreasing (a
  larger margin never means less likely right). Stored in the checkpoint with the settings it was fitted with (only
  those solves report it). The puzzle's table reads its smallest piece margin; the solver caps it by the piece
  table there (jpdvt.Solver.confidence), so that all pieces right is never likelier than the least sure one.
- `probability`: a margin -> its bin's accuracy, interpolated between bin centres.
- `reliability`: on another split (test), predicted against observed accuracy in bins, and the expected
  calibration error (ECE: the bins' |predicted - observed| weighted by their share of pieces).

    m = margins(cost, positions)                  # cost (B, N, P), positions (B, N) -> (B, N)
    table = fit(m.ravel(), correct.ravel())       # on val: {"margin": [...], "accuracy": [...]}
    p = probability(table, m)                     # (B, N) in [0, 1]
    rows, ece = reliability(p.ravel(), correct.ravel())
"""
import numpy as np


def margins(cost, positions):
    """(B, N): the distance of each piece's code to its next-best position minus to its assigned one (cost (B, N, P)
    mean distances, positions (B, N) the assignment); negative when the assignment gave a piece a farther position."""
    cost = np.asarray(cost, dtype=np.float64)
    positions = np.asarray(positions)
    assigned = np.take_along_axis(cost, positions[..., None], axis=-1)[..., 0]
    others = cost.copy()
    np.put_along_axis(others, positions[..., None], np.inf, axis=-1)
    return others.min(-1) - assigned


def evidence(cost, positions, true_pos, counted):
    """What calibration and its check read of a solved batch: (piece margins, piece correct) of the counted pieces
    (B, N) mask, and per puzzle (smallest counted margin, all counted pieces correct)."""
    m = margins(cost, positions)
    ok = np.asarray(positions) == np.asarray(true_pos)
    counted = np.asarray(counted, dtype=bool)
    smallest = np.where(counted, m, np.inf).min(-1)
    return m[counted], ok[counted], smallest, (ok | ~counted).all(-1)


def fit(margin, correct, bins=10, chance=0.0):
    """A calibration table from val: `bins` equal-count bins of the margins, each bin's centre (median margin) and
    accuracy, smoothed as (right + 1) / (count + 2) so that no bin claims certainty, with a point at `chance` (1 /
    positions for a piece) at the first bin's centre or 0, whichever is lower, minus one neighbour distance (1.06): a
    piece whose mean code prefers another cell is a guess. The accuracies are made non-decreasing (pooled adjacent
    violators)."""
    margin, correct = np.asarray(margin, dtype=np.float64), np.asarray(correct, dtype=np.float64)
    order = np.argsort(margin, kind="stable")
    groups = [g for g in np.array_split(order, min(bins, len(order))) if len(g)]
    centre = [min(float(np.median(margin[groups[0]])), 0.0) - 1.06] + [float(np.median(margin[g])) for g in groups]
    blocks = [[chance, 1]] + [[(correct[g].sum() + 1) / (len(g) + 2), len(g)] for g in groups]
    merged = []                                                     # pool adjacent bins while accuracy decreases
    for acc, n in blocks:
        merged.append([acc, n, 1])
        while len(merged) > 1 and merged[-2][0] > merged[-1][0]:
            (a1, n1, k1), (a2, n2, k2) = merged[-2], merged.pop()
            merged[-1] = [(a1 * n1 + a2 * n2) / (n1 + n2), n1 + n2, k1 + k2]
    accuracy = [acc for acc, _, k in merged for _ in range(k)]
    return {"margin": centre, "accuracy": [float(a) for a in accuracy], "pieces": int(len(margin))}


def probability(table, margin):
    """Margins -> probabilities of being right, by the table (linear between bin centres, flat beyond them)."""
    return np.interp(np.asarray(margin, dtype=np.float64), table["margin"], table["accuracy"])


def reliability(prob, correct, bins=10):
    """Predicted against observed accuracy in `bins` equal-width bins of the predicted probability: rows of
    (low, high, count, mean predicted, observed), and the expected calibration error."""
    prob, correct = np.asarray(prob, dtype=np.float64), np.asarray(correct, dtype=np.float64)
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.digitize(prob, edges[1:-1]), 0, bins - 1)
    rows, ece = [], 0.0
    for b in range(bins):
        sel = which == b
        if sel.any():
            rows.append((float(edges[b]), float(edges[b + 1]), int(sel.sum()), float(prob[sel].mean()),
                         float(correct[sel].mean())))
            ece += sel.mean() * abs(prob[sel].mean() - correct[sel].mean())
    return rows, float(ece)
