"""
Is it one puzzle at all? The margins read the model, which can be sure of an arrangement of pieces cut from nine
different pictures. The pieces' own pixels say more: in a solved puzzle, the facing edges of neighbours match far
better than an edge matches the other pieces' edges; in a bag of unrelated pieces or of noise, no better.
- `seam_ratios`: per puzzle, the median over its seams of (edge distance to the placed neighbour) / (median edge
  distance to the other pieces); images: the right / left columns and bottom / top rows; videos: a piece's last
  frame against the next piece's first. Videos of 2+ frames a piece also say how far one frame is from the next:
  their ratio is multiplied by (median seam distance) / (median frame-to-frame distance within the pieces, repeated
  frames left out), about 1 for a clip and above it for frames of different clips (noise: about 1, left to the
  first factor). About 0.1-0.4 for solved gapless images (up to about 1 with 8 px gaps), 0.4-0.9 for Moving MNIST
  val clips, about 1 for bags that are no puzzle; NaN (no evidence) with fewer than 3 given pieces or 2 seams.
- `ink_spread` (clips): how far apart the pieces' histograms (sorted values) lie over the bag's contrast: frames of
  one clip show the same things, wherever they moved; frames of different clips do not; noise is even (its spread is
  below a clip's), left to the seams (thresholds fitted on val: bench/README.md).
  `bag_evidence`: both, (B, 2).
- `not_a_puzzle`: from a batch of real puzzles, bags that are no puzzle: each piece from another puzzle, and noise.
- `fit_gate`: on val, thresholds on the ink spread and the seam ratio (`held_back`: either at or above its own) that
  hold back 99% of each kind of bag (at 95%, about 5% of test bags would pass by construction); there the solver caps
  the puzzle probability at what val shows: real puzzles solved over everything held back, val's two bags per real
  puzzle included (so that prior sets it). Known weak spots: seams of flat or low-texture pictures match everything
  about equally (ratio near 1); repeated frames that are not bit-equal (decoded from a lossy video) count as tiny
  steps, and a clip whose frames change what they show (a cut, a fade) has a high ink spread: either can flag a real
  clip; where more than 10% of the real val puzzles are held back too (pieces cut with gaps), no gate is fitted.

Not in the paper; solving/confidence.py uses the gate (Calibrated.confidence), sample.py --calibrate fits it.
"""
from dataclasses import replace

import numpy as np
import torch

from metrics import assign_batch


def edges(content, video):
    """[(row step, column step, outgoing edges (B, N, ...), incoming edges (B, N, ...))] of pieces `content`: images
    (B, N, C, S, S) have a right / left and a bottom / top seam; videos (B, N, F, C, H, W), in one row of time slots,
    have a last-frame / first-frame seam."""
    if video:
        return [(0, 1, content[:, :, -1], content[:, :, 0])]
    return [(0, 1, content[..., -1], content[..., 0]), (1, 0, content[..., -1, :], content[..., 0, :])]


def seam_ratios(content, cells, grid, keep):
    """(B,) not-a-puzzle evidence of solved puzzles (the module's docstring: the edge ratio, for clips of 2+ frames a
    piece times the seam-to-step ratio): content (B, N, ...) in the model's layout, cells (B, N) the assigned cells
    (videos: slots), grid (rows, cols) (videos: (1, N)), keep (B, N) the pieces with content (not generated). NaN (no
    evidence) where a puzzle has fewer than three given pieces or two seams between them."""
    content = np.asarray(content, dtype=np.float32)
    video = content.ndim == 6
    out = np.full(len(content), np.nan)
    for b in range(len(content)):
        given = np.flatnonzero(keep[b])
        at = {int(cells[b, i]): i for i in given}
        ratios, seams = [], []
        for dr, dc, outgoing, incoming in edges(content[b:b + 1], video=video):
            o = outgoing[0, given].reshape(len(given), -1)
            d = np.abs(o[:, None] - incoming[0, given].reshape(len(given), -1)[None]).mean(-1)   # (G, G)
            for a, i in enumerate(given):
                r, c = divmod(int(cells[b, i]), grid[1])
                j = at.get((r + dr) * grid[1] + c + dc) if r + dr < grid[0] and c + dc < grid[1] else None
                if j is None or len(given) < 3:
                    continue
                k = int(np.flatnonzero(given == j)[0])
                others = np.delete(d[a], [a, k])
                ratios.append(d[a, k] / (np.median(others) + 1e-6))
                seams.append(d[a, k])
        if len(ratios) >= 2:
            out[b] = float(np.median(ratios))
            if video and content.shape[2] > 1:                 # (F, ...) frames a piece: one frame to the next
                x = content[b, given].reshape(len(given), content.shape[2], -1)
                step = np.abs(x[:, 1:] - x[:, :-1]).mean(-1)    # (G, F - 1)
                moved = step[step > 1e-6]                        # a repeated frame is no step
                if len(moved):
                    out[b] *= float(np.median(seams) / np.median(moved))
    return out


def not_a_puzzle(batch, generator):
    """Two batches shaped like `batch` that are no puzzle: piece k of bag b taken from puzzle b + k (a random piece
    with content, so B >= N gives N different pictures), and pieces of uniform noise in [-1, 1]."""
    content, keep = batch["content"], ~batch["missing"]
    count, pieces = keep.shape
    mixed = content.clone()
    for b in range(count):
        for k in range(pieces):
            src = (b + k) % count
            choices = torch.nonzero(keep[src]).flatten()
            pick = choices[torch.randint(len(choices), (1,), generator=generator)].item()
            mixed[b, k] = content[src, pick]
    noise = torch.rand(content.shape, generator=generator) * 2 - 1
    return {**batch, "content": mixed}, {**batch, "content": noise.to(content.device)}


def ink_spread(content, keep):
    """(B,) a second not-a-puzzle evidence of clips (B, N, F, C, H, W), blind to where things are: the median over
    pairs of given pieces of the mean distance between their sorted values (a piece's histogram, whatever moved
    where), over the bag's contrast (the pieces' mean distance from the bag's median value). The frames of one clip
    show the same things; those of different clips do not. NaN for images and where fewer than three pieces are
    given."""
    content = np.asarray(content, dtype=np.float32)
    out = np.full(len(content), np.nan)
    if content.ndim != 6:
        return out
    for b in range(len(content)):
        x = content[b, np.flatnonzero(keep[b])].reshape(int(keep[b].sum()), -1)
        if len(x) < 3:
            continue
        ranked = np.sort(x, axis=1)
        pairs = np.triu_indices(len(x), 1)
        d = np.array([np.abs(ranked[i] - ranked[j]).mean() for i, j in zip(*pairs)])   # pair by pair: small memory
        out[b] = float(np.median(d) / (np.abs(x - np.median(x)).mean() + 1e-6))
    return out


def bag_evidence(content, cells, grid, keep):
    """(B, 2): each solved bag's seam ratio (seam_ratios) and ink spread (ink_spread); NaN where there is none."""
    return np.stack([seam_ratios(content, cells, grid, keep), ink_spread(content, keep)], axis=-1)


def held_back(evidence, gate):
    """Which bags a gate (fit_gate) takes for no puzzle: evidence (..., 2) (bag_evidence) at or above the seam
    threshold, or at or above the ink threshold where it has one; never for NaN (no evidence). All False without a
    gate."""
    evidence = np.asarray(evidence, dtype=float)
    if gate is None:
        return np.zeros(evidence.shape[:-1], bool)
    out = evidence[..., 0] >= gate["threshold"]
    return out | (evidence[..., 1] >= gate["ink"]) if gate.get("ink") is not None else out


def quantile(x, q):
    """np.quantile (interpolated) of evidence x, +inf (far from any puzzle) taken as the largest float, so that a
    quantile next to it is a finite number (at most that float), not the NaN of inf - inf."""
    return float(np.quantile(np.minimum(x, np.finfo(float).max), q))


def ink_threshold(real, bags, share, most):
    """The ink spread above which a bag is taken for no puzzle, or None: of each kind of val bag, its (1 - share)
    quantile, moved halfway down to the real puzzles' `share` quantile where that lies below it (the middle of the gap
    between them: the bags' lower tail is steep, and a test bag just below the val quantile should not pass); the
    smallest of those that leaves at most `most` of the real puzzles at or above it (pieces of different clips: their
    histograms differ; noise: it does not catch)."""
    ink = real[~np.isnan(real[:, 1]), 1]
    top = quantile(ink, share) if len(ink) else -np.inf
    fits = [quantile(r[~np.isnan(r)], 1 - share) for r in (b[:, 1] for b in bags.values())
            if (~np.isnan(r)).any()]
    fits = [(t + top) / 2 if top < t else t for t in fits]
    fits = [t for t in fits if np.mean(real[:, 1] >= t) <= most]
    return min(fits) if fits else None


def seam_threshold(bags, ink, share):
    """The seam ratio at or above which, with the ink threshold (None: none), about `share` of each kind of val bag
    with a seam ratio is held back: per kind, the quantile of the bags the ink lets through that leaves (1 - share)
    of the kind below it (np.quantile, interpolated; inf where the ink alone holds back `share`); the smallest over
    kinds, None without any."""
    fits = []
    for b in bags.values():
        seam = ~np.isnan(b[:, 0])
        if not seam.any():
            continue
        caught = b[:, 1] >= ink if ink is not None else np.zeros(len(b), bool)
        left = b[seam & ~caught, 0]
        level = (1 - share) * seam.sum() / len(left) if 0 < len(left) < seam.sum() else 1 - share
        fits.append(quantile(left, level) if len(left) and level < 1 else np.inf)
    return min(fits) if fits else None


def fit_gate(real, real_ok, bags, share=0.99, most=0.1):
    """The not-a-puzzle gate, fitted on val: real (n, 2) and bags {kind: (m, 2)} are bag_evidence rows. A bag is held
    back (held_back) at or above an ink threshold (ink_threshold) or a seam threshold (seam_threshold), each at a
    (1 - share) quantile (interpolated: about `share` of each kind of bag held back); the probability of a solved
    puzzle there is (real puzzles solved there + 1) / (everything there + 2). Of the gates with and without the ink
    threshold that hold back at most `most` of the real puzzles, the one that holds back fewer; None where neither
    does (0.1: ten times the share of bags it lets through: it would hold back real puzzles, not bags that are no
    puzzle; pieces cut with gaps: the shipped gap model's val photos put 45% above the 5% quantile) or where no bag
    gave evidence (NaN). Also kept: `share`, and the val shares held back: "real_above"
    and "bags_above" {kind: share}."""
    real, real_ok = np.asarray(real, dtype=float), np.asarray(real_ok, dtype=bool)
    bags = {k: np.asarray(r, dtype=float) for k, r in bags.items()}
    bags = {k: b for k, b in bags.items() if (~np.isnan(b)).any()}                   # kinds with evidence
    fits = []                                         # (share of real puzzles held back, gate)
    for ink in dict.fromkeys([ink_threshold(real, bags, share, most), None]):
        threshold = seam_threshold(bags, ink, share)
        if threshold is None or (ink is None and threshold == np.inf):
            continue                                  # nothing to gate on
        gate = {"threshold": threshold, "ink": ink}
        share_held = held_back(real, gate).mean()
        if share_held <= most:
            fits.append((share_held, gate))
    if not fits:
        return None
    gate = min(fits, key=lambda fit: fit[0])[1]       # the one that holds back fewer real puzzles (ink on a tie)
    above, held = held_back(real, gate), {k: held_back(b, gate) for k, b in bags.items()}
    fakes = sum(int(h.sum()) for h in held.values())
    return {**gate, "accuracy": float((real_ok[above].sum() + 1) / (above.sum() + fakes + 2)), "share": share,
            "real_above": float(above.mean()), "bags_above": {k: float(h.mean()) for k, h in held.items()}}


def bag_seams(solver, batch, grid, seed):
    """{kind: bag_evidence rows (m, 2)} of bags that are no puzzle (not_a_puzzle, from this batch) solved as puzzles
    by `solver` (a Solver), with noise of their own (`seed`): the solver's own noise stays as it was (sample.py
    --calibrate). None for a batch of fewer puzzles than pieces (its bags would repeat pictures)."""
    if len(batch["content"]) < batch["content"].shape[1]:
        return None
    opts = replace(solver.opts, generator=torch.Generator(solver.device).manual_seed(seed))
    out = {}
    for name, bag in zip(("mixed", "noise"), not_a_puzzle(batch, torch.Generator().manual_seed(seed))):
        pos = assign_batch(solver.costs(bag, opts=opts)[0], solver.opts.assign)
        out[name] = bag_evidence(bag["content"].cpu().numpy(), pos, grid, (~bag["missing"]).cpu().numpy())
    return out
