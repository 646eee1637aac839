"""
How sure the solver is: each piece's probability of being in the right place, and the whole puzzle's.

Not in the paper. One network call at t = T - 1 gives every piece's posterior-mean code (Calibrated.mean_costs, a
method of jpdvt.Solver; an eps model's estimate is the x0 prediction at t = 444 of a DDIM-10 path instead): where the
model is sure, the mean sits on one cell's code; where two cells are plausible, it sits between them. A piece whose
assigned position (by the sampler) is much nearer the mean than the next best is probably right; one whose two best
positions are about as near is a coin toss. (The sampled codes themselves say little: a sample commits to one cell
even when it is wrong; on the shapes val split their margins separate right from wrong pieces with an AUROC of 0.55,
the mean's with 0.96: `python -m bench confidence-evidence`.) So:
- `margins`: per piece, the mean code's distance to the next-best position minus to the assigned one (in code
  units: neighbouring cells are 1.06 apart); per puzzle, its smallest piece margin.
- `fit`: a calibration table, fitted on the val split: margins cut into bins of equal count, each bin's smoothed
  accuracy (never 0 or 1), chance one neighbour distance below the first bin (see fit), made non-decreasing (a
  larger margin never means less likely right). Stored in the checkpoint with the settings it was fitted with (only
  those solves report it). The puzzle's table reads its smallest piece margin; `coherent` then raises each piece to
  at least its puzzle's probability, so that all pieces right is never likelier than the least sure one.
- `probability`: a margin -> its bin's accuracy, interpolated between bin centres.
- `reliability`: on another split (test), predicted against observed accuracy in bins, and the expected
  calibration error (ECE: the bins' |predicted - observed| weighted by their share of pieces).
- sample.py's use: `gather` (a solved batch's evidence), `calibrate` (--calibrate: fit and store the tables),
  `reliability_of` (a calibrated checkpoint on scored puzzles); `Calibrated`: the Solver's confidence methods.

    m = margins(cost, positions)                  # cost (B, N, P), positions (B, N) -> (B, N)
    table = fit(m.ravel(), correct.ravel())       # on val: {"margin": [...], "accuracy": [...]}
    p = probability(table, m)                     # (B, N) in [0, 1]
    rows, ece = reliability(p.ravel(), correct.ravel())

Is it one puzzle at all? The margins read the model, which can be sure of an arrangement of pieces cut from nine
different pictures. The pieces' own pixels say more: in a solved puzzle, the facing edges of neighbours match far
better than an edge matches the other pieces' edges; in a bag of unrelated pieces or of noise, no better.
- `seam_ratios`: per puzzle, the median over its seams of (edge distance to the placed neighbour) / (median edge
  distance to the other pieces); images: the right / left columns and bottom / top rows; videos: a piece's last
  frame against the next piece's first. About 0.1-0.4 for solved gapless puzzles (up to about 1 with 8 px gaps),
  about 1 for bags that are no puzzle; NaN (no evidence) with fewer than 3 given pieces or 2 seams.
- `not_a_puzzle`: from a batch of real puzzles, bags that are no puzzle: each piece from another puzzle, and noise.
- `fit_gate`: on val, the seam ratio above which 95% of each kind of bag lies; above it a bag is taken for no
  puzzle, and the solver caps its puzzle probability at what val shows there: real puzzles solved over everything
  above it, val's two bags per real puzzle included (so that prior sets it). Known weak spots: seams of flat or
  low-texture pictures match everything about equally (ratio near 1), and slow-moving video seams separate less;
  where more than 10% of the real val puzzles lie above it too (pieces cut with gaps), no gate is fitted.
"""
from dataclasses import replace

import numpy as np
import torch

from metrics import assign_batch
from plumbing.checkpoint import save_checkpoint
from plumbing.cli import UserError
from posenc import grid_table


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


def coherent(piece, puzzle, owner=None):
    """Each piece's probability raised to at least its puzzle's (owner: the puzzle of each piece; None: one puzzle):
    P(this piece right) >= P(every piece right), so a puzzle's confidence never exceeds its least sure piece's."""
    if piece is None or puzzle is None:
        return piece
    return np.maximum(piece, np.asarray(puzzle)[owner] if owner is not None else puzzle)


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


def edges(content, video):
    """[(row step, column step, outgoing edges (B, N, ...), incoming edges (B, N, ...))] of pieces `content`: images
    (B, N, C, S, S) have a right / left and a bottom / top seam; videos (B, N, F, C, H, W), in one row of time slots,
    have a last-frame / first-frame seam."""
    if video:
        return [(0, 1, content[:, :, -1], content[:, :, 0])]
    return [(0, 1, content[..., -1], content[..., 0]), (1, 0, content[..., -1, :], content[..., 0, :])]


def seam_ratios(content, cells, grid, keep):
    """(B,) not-a-puzzle evidence of solved puzzles: content (B, N, ...) in the model's layout, cells (B, N) the
    assigned cells (videos: slots), grid (rows, cols) (videos: (1, N)), keep (B, N) the pieces with content (not
    generated). NaN (no evidence) where a puzzle has fewer than three given pieces or two seams between them."""
    content = np.asarray(content, dtype=np.float32)
    out = np.full(len(content), np.nan)
    for b in range(len(content)):
        given = np.flatnonzero(keep[b])
        at = {int(cells[b, i]): i for i in given}
        ratios = []
        for dr, dc, outgoing, incoming in edges(content[b:b + 1], video=content.ndim == 6):
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
        if len(ratios) >= 2:
            out[b] = float(np.median(ratios))
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


def fit_gate(real, real_ok, bags, share=0.95, most=0.1):
    """The seam ratio above which `share` of each kind of not-a-puzzle val bag lies (bags: {kind: ratios}), and the
    probability of a solved puzzle above it: (real puzzles solved there + 1) / (everything there + 2). None where
    more than `most` of the real puzzles lie above it too (0.1: twice the share of bags it lets through): then it
    would hold back real puzzles, not bags that are no puzzle (pieces cut with gaps: the shipped gap model's val
    photos put 45% there)."""
    real, real_ok = np.asarray(real), np.asarray(real_ok, dtype=bool)
    threshold = min(float(np.nanquantile(r, 1 - share)) for r in bags.values())
    above = real >= threshold
    if above.mean() > most:
        return None
    fakes = sum(int((np.asarray(r) >= threshold).sum()) for r in bags.values())
    return {"threshold": threshold, "accuracy": float((real_ok[above].sum() + 1) / (above.sum() + fakes + 2))}


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


def gather(solver, batch, pos, counted, grid, before):
    """The confidence's evidence of a solved test batch (one more network call, Solver.mean_costs): evidence()'s four
    parts, the puzzles' seam ratios and the puzzle of each counted piece (numbered after `before` puzzles). counted
    (B, N): the pieces scored; grid: (rows, cols), videos (1, pieces)."""
    keep, counted = (~batch["missing"]).cpu().numpy(), counted.cpu().numpy()
    owner = np.nonzero(counted)[0] + before
    return (*evidence(solver.mean_costs(batch).cpu().numpy(), pos, batch["true_pos"].cpu().numpy(), counted),
            seam_ratios(batch["content"].cpu().numpy(), pos, grid, keep), owner)


def reliability_of(solver, found):
    """How a calibrated solver's confidence holds on scored puzzles (found: gather's parts, concatenated): per piece
    and per puzzle the reliability rows and ECE, and the share of the puzzles taken for no puzzle (gated)."""
    whole = solver.confidence(found[2], "puzzle", seam=found[4])
    sure = {"piece": coherent(solver.confidence(found[0]), whole, owner=found[5]), "puzzle": whole}
    return {"confidence": {part: dict(zip(("rows", "ece"), reliability(sure[part], ok)))
                           for part, ok in (("piece", found[1]), ("puzzle", found[3]))},
            "real_gated": float(solver.no_puzzle(found[4]).mean())}


def calibrate(path, split, solver, found, bags):
    """sample.py --calibrate: fit the confidence tables (fit) and the not-a-puzzle gate (fit_gate) on these val
    puzzles' evidence (gather's parts; bags: each batch's bag_seams) and store them in checkpoint `path` (atomic
    rewrite); sample.py and solve(pieces) then report probabilities of being right."""
    if not any(bags):
        raise UserError(f"--calibrate makes bags that are no puzzle from batches of at least as many puzzles as pieces "
                        f"({solver.table.shape[0]}); raise --batch-size and --num-puzzles to at least that")
    bags = {k: np.concatenate([b[k] for b in bags if b]) for k in ("mixed", "noise")}
    table = {"piece": fit(*found[:2], chance=1 / len(solver.table)), "puzzle": fit(*found[2:4], bins=5),
             "gate": fit_gate(found[4], found[3], bags), "split": split, "settings": solver.settings()}
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    save_checkpoint(path, {**ckpt, "calibration": table})
    gate = table["gate"]
    print(f"wrote the confidence tables into {path} (from {len(found[0])} pieces of {len(found[2])} val puzzles); "
          + ("no not-a-puzzle gate: most real puzzles' seams match no better than unrelated pieces'" if not gate else
             f"not a puzzle: seam ratio >= {gate['threshold']:.3f} (" + ", ".join(
                 f"{k} bags {np.mean(v >= gate['threshold']):.0%}" for k, v in bags.items())
             + f", real puzzles {np.mean(found[4] >= gate['threshold']):.0%}), then P(solved) {gate['accuracy']:.3f}"))
    return table


class Calibrated:
    """The confidence's part of jpdvt.Solver (its base class): the evidence (mean_costs), whether the checkpoint's
    tables describe a solve, and the probabilities they give. Reads the solver's opts (a jpdvt.SampleOptions),
    symmetries, config, device, table, costs() and calibration (the tables sample.py --calibrate fitted: {"piece",
    "puzzle", "gate", "split", "settings"}, or None)."""

    def mean_costs(self, batch, given=None, grid=None):
        """The costs of the posterior-mean estimate of the codes, with its own noise (the solve's stays as it was): the
        evidence of the confidence (solving/confidence.py). An x0 model gives it in one call at t = T-1. An eps model's
        x0 there divides its error by sqrt(alphabar) (about 0.0064), so its estimate is the x0 prediction halfway down
        a DDIM-10 path (t = 444, sqrt(alphabar) about 0.36)."""
        noise = torch.Generator(self.device).manual_seed(0)
        if self.config.prediction == "x0":
            opts = type(self.opts)(steps=1, sampler="ddim", generator=noise)     # a jpdvt.SampleOptions
            return self.costs(batch, given=given, grid=grid, opts=opts, symmetries=1)[0]
        halfway = {}                                          # step 5 of 10: the call at t = 444
        self.costs(batch, given=given, callback=lambda i, x, x0: halfway.update(code=x0["code"]) if i == 5 else None,
                   grid=grid, opts=type(self.opts)(steps=10, sampler="ddim", generator=noise), symmetries=1)
        table = self.table if grid is None else grid_table(*grid).to(self.device)
        code = halfway["code"].float()
        return torch.cdist(code, table[None].float().expand(len(code), -1, -1))

    def settings(self):
        """What a confidence table depends on: the sampling options and the number of missing pieces."""
        o = self.opts
        return {"steps": o.steps, "sampler": o.sampler, "samples": o.samples, "assign": o.assign,
                "missing": self.config.puzzle.missing, "symmetries": self.symmetries}

    def differs(self, settings=None):
        """{name: (fitted, now)} of the settings (default: the solver's) that differ from its confidence table's."""
        fitted = self.calibration["settings"]
        return {k: (fitted.get(k), v) for k, v in (settings or self.settings()).items() if fitted.get(k) != v}

    def mismatch(self):
        """The settings of the solver that differ from its confidence table's, as 'name: table -> solver' text."""
        return ", ".join(f"{k}: {fitted} -> {now}" for k, (fitted, now) in self.differs().items())

    def calibrated(self, settings=None):
        """Is there a confidence table fitted with these settings (default: the solver's)? A table fitted with
        other sampling options or another number of missing pieces does not describe this solve."""
        return self.calibration is not None and not self.differs(settings)

    def confidence(self, margin, part="piece", settings=None, seam=None):
        """Probabilities of being right for margins (solving.confidence.probability), or None without a table fitted
        with these settings (calibrated). part "puzzle" takes the puzzle's smallest piece margin and, where its seam
        ratio (solving.confidence.seam_ratios) says it is no puzzle, is capped by the gate fitted on val. Callers then
        raise pieces to their puzzle's probability (solving.confidence.coherent)."""
        if not self.calibrated(settings):
            return None
        p = probability(self.calibration[part], margin)
        if part != "puzzle":
            return p
        gate = self.calibration.get("gate")
        return p if gate is None or seam is None else np.where(self.no_puzzle(seam), np.minimum(p, gate["accuracy"]), p)

    def no_puzzle(self, seam):
        """Do these seam ratios say "not one puzzle" (at or above the gate fitted on val)? False without a gate and
        for NaN (no evidence)."""
        gate = (self.calibration or {}).get("gate")
        return np.asarray(seam) >= gate["threshold"] if gate else np.zeros(np.shape(seam), bool)
