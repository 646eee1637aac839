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
- `not_a_puzzle`: from a batch of real puzzles, bags that are no puzzle: each piece from another puzzle, and noise.
- `fit_gate`: on val, the seam ratio above which 99% of each kind of bag lies (at 95%, about 5% of test bags would
  pass by construction); above it a bag is taken for no puzzle, and the solver caps its puzzle probability at what
  val shows there: real puzzles solved over everything above it, val's two bags per real puzzle included (so that
  prior sets it). Known weak spots: seams of flat or low-texture pictures match everything about equally (ratio
  near 1), single-frame video pieces have no frame-to-frame distance to compare a seam with, and repeated frames
  that are not bit-equal (decoded from a lossy video) count as tiny steps, which can flag a real clip; where more
  than 10% of the real val puzzles lie above it too (pieces cut with gaps), no gate is fitted.

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


def fit_gate(real, real_ok, bags, share=0.99, most=0.1):
    """The seam ratio above which `share` of each kind of not-a-puzzle val bag lies (bags: {kind: ratios}), and the
    probability of a solved puzzle above it: (real puzzles solved there + 1) / (everything there + 2). None where
    more than `most` of the real puzzles lie above it too (0.1: ten times the share of bags it lets through): then it
    would hold back real puzzles, not bags that are no puzzle (pieces cut with gaps: the shipped gap model's val
    photos put 45% above the 5% quantile, more above the 1%); None too where no bag gave evidence (NaN). Also kept:
    `share`, and the val shares held back (at or above the gate; NaN never is): "real_above" and "bags_above" {kind:
    share}."""
    real, real_ok = np.asarray(real), np.asarray(real_ok, dtype=bool)
    bags = {k: np.asarray(r, dtype=float) for k, r in bags.items()}
    bags = {k: r for k, r in bags.items() if (~np.isnan(r)).any()}       # kinds with evidence
    if not bags:
        return None                                   # no bag gave evidence
    threshold = float(min(np.quantile(r[~np.isnan(r)], 1 - share) for r in bags.values()))
    above = real >= threshold
    if above.mean() > most:
        return None
    fakes = sum(int((r >= threshold).sum()) for r in bags.values())
    return {"threshold": threshold, "accuracy": float((real_ok[above].sum() + 1) / (above.sum() + fakes + 2)),
            "share": share, "real_above": float(above.mean()),
            "bags_above": {k: float(np.mean(r >= threshold)) for k, r in bags.items()}}


def bag_seams(solver, batch, grid, seed):
    """{kind: seam ratios} of bags that are no puzzle (not_a_puzzle, from this batch) solved as puzzles by `solver`
    (a jpdvt.Solver), with noise of their own (`seed`): the solver's own noise stays as it was (sample.py
    --calibrate). None for a batch of fewer puzzles than pieces (its bags would repeat pictures)."""
    if len(batch["content"]) < batch["content"].shape[1]:
        return None
    opts = replace(solver.opts, generator=torch.Generator(solver.device).manual_seed(seed))
    out = {}
    for name, bag in zip(("mixed", "noise"), not_a_puzzle(batch, torch.Generator().manual_seed(seed))):
        pos = assign_batch(solver.costs(bag, opts=opts)[0], solver.opts.assign)
        out[name] = seam_ratios(bag["content"].cpu().numpy(), pos, grid, (~bag["missing"]).cpu().numpy())
    return out
