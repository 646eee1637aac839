"""
How sure the solver is: each piece's probability of being in the right place, and the whole puzzle's.

Not in the paper. One network call at t = T - 1 gives every piece's posterior-mean code (Calibrated.mean_costs, a
method of the Solver; an eps model's estimate is the x0 prediction at t = 444 of a DDIM-10 path instead): where the
model is sure, the mean sits on one cell's code; where two cells are plausible, it sits between them. A piece whose
assigned position is much nearer the mean than the next best is probably right; one whose two best positions are
about as near is a coin toss. (The sampled codes themselves say little: a sample commits to one cell even when it is
wrong.) So:
- `margins`: per piece, the mean code's distance to the next-best position minus to the assigned one (in code
  units: neighbouring cells are 1.06 apart); per puzzle, its smallest piece margin.
- `fit`: a calibration table, fitted on the val split: margins cut into 10 bins of equal count, each bin's smoothed
  accuracy (never 0 or 1), made non-decreasing (a larger margin never means less likely right). For each number of
  missing pieces a puzzle table (of its smallest piece margin) and a piece table, stored in the checkpoint with the
  sampling settings they were fitted with. Those settings are the checkpoint's estimator: sample.py and jpdvt.load
  solve with them by default, and only solves with them report a confidence.
- `probability`: a margin -> its bin's accuracy, interpolated between bin centres.
- `piece_probability`: a piece's probability, never below its puzzle's: every piece right is never likelier than
  one of them right.
- `reliability`: on another split (test), predicted against observed accuracy in bins, and the expected
  calibration error (ECE: the bins' |predicted - observed| weighted by their share of pieces).
- sample.py's use: `gather` (a solved batch's evidence), `calibrate` (--calibrate: fit and store the tables),
  `reliability_of` (a calibrated checkpoint on scored puzzles); `Calibrated`: the Solver's confidence methods.

    m = margins(cost, positions)                  # cost (B, N, P), positions (B, N) -> (B, N)
    table = fit(m.ravel(), correct.ravel())       # on val: {"margin": [...], "accuracy": [...]}
    p = probability(table, m)                     # (B, N) in [0, 1]
    rows, ece = reliability(p.ravel(), correct.ravel())
"""

import numpy as np
import torch

from jpdvt import piece_codes
from plumbing.checkpoint import save_checkpoint
from plumbing.cli import UserError, arithmetic

# a table's settings that it may not record, with their value (the tables that do not record the precision were
# fitted on a CPU, in fp32)
TABLE_DEFAULTS = {"precision": "fp32"}
CALIBRATION_PUZZLES = 100       # --calibrate fits no table on fewer val puzzles (passes count: 20 pictures x 5 passes)


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


def piece_probability(tables, margin, puzzle, owner=None):
    """Each piece's probability of being right: its table's value of its margin, raised to its puzzle's probability
    `puzzle` (owner: the puzzle of each piece; None: one puzzle). A table that an earlier version fitted on the pieces
    of unsolved puzzles only (way "unsolved") gives P(puzzle) + (1 - P(puzzle)) * table(margin) instead."""
    whole = np.asarray(puzzle, dtype=np.float64)
    whole = whole[owner] if owner is not None else whole
    p = probability(tables["piece"], margin)
    return whole + (1 - whole) * p if tables.get("way") == "unsolved" else np.maximum(p, whole)


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


def gather(solver, batch, pos, counted, before):
    """The confidence's evidence of a solved test batch (one more network call, Solver.mean_costs): evidence()'s four
    parts and the puzzle of each counted piece (numbered after `before` puzzles). counted (B, N): the pieces
    scored."""
    counted = counted.cpu().numpy()
    owner = np.nonzero(counted)[0] + before
    return (*evidence(solver.mean_costs(batch).cpu().numpy(), pos, batch["true_pos"].cpu().numpy(), counted), owner)


def reliability_of(solver, found):
    """How a calibrated solver's confidence holds on scored puzzles (found: gather's parts, concatenated): per piece
    and per puzzle the reliability rows and ECE."""
    piece, whole = solver.confidence(found[0], found[2], owner=found[4])
    return {"confidence": {part: dict(zip(("rows", "ece"), reliability(p, ok)))
                           for part, p, ok in (("piece", piece, found[1]), ("puzzle", whole, found[3]))}}


def check_val_size(puzzles):
    """--calibrate's val set: at least CALIBRATION_PUZZLES puzzles (sample.py checks before it solves)."""
    if puzzles < CALIBRATION_PUZZLES:
        raise UserError(f"--calibrate needs at least {CALIBRATION_PUZZLES} puzzles to fit on, and would solve "
                        f"{puzzles}; raise --repeats (passes with fresh noise), or --num-puzzles where the val split "
                        "holds more")


def calibrate(path, split, solver, found):
    """sample.py --calibrate: fit the piece and puzzle tables on these val puzzles' evidence (gather's parts), for the
    solve's number of missing pieces, and store them in checkpoint `path` (atomic rewrite) beside the tables of other
    numbers of missing pieces fitted with the same sampling settings; sample.py and solve(pieces) then solve with
    those settings by default and report probabilities."""
    tables = {"piece": fit(found[0], found[1], chance=1 / len(solver.table)), "puzzle": fit(found[2], found[3])}
    sampling = solver.settings()
    missing = sampling.pop("missing")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    old = ckpt.get("calibration") or {}                  # as it is now: another run may have added a table
    same = fitted_with(old.get("settings") or {}) == sampling and old.get("split") == split
    kept = old.get("tables", {}) if same else {}
    calibration = {"split": split, "settings": sampling, "tables": {**kept, missing: tables}}
    save_checkpoint(path, {**ckpt, "calibration": calibration})
    print(f"wrote the confidence tables for {missing} missing pieces into {path} (from {len(found[0])} pieces of "
          f"{len(found[2])} val puzzles; tables of {sorted(calibration['tables'])} missing now)")
    return calibration


def fitted_with(settings):
    """A table's sampling settings, those it does not record at TABLE_DEFAULTS; symmetries 1 (no mirrors, the only
    solve there is) is the same as no entry."""
    return {**TABLE_DEFAULTS, **{k: v for k, v in settings.items() if not (k == "symmetries" and v == 1)}}


class Halfway(Exception):
    """Stops an eps model's DDIM-10 path once its evidence (the x0 prediction at t = 444) is in (mean_costs)."""


class Calibrated:
    """The confidence's part of the Solver (its base class): the evidence (mean_costs), whether the checkpoint's
    tables describe a solve, and the probabilities they give. Reads the solver's opts (a jpdvt.SampleOptions),
    config, device, precision, table, costs() and calibration (what sample.py --calibrate fitted: {"split",
    "settings": the sampling settings, "tables": {number of missing pieces: {"piece", "puzzle"}}}, or
    None)."""

    def mean_costs(self, batch, given=None, grid=None):
        """The costs of the posterior-mean estimate of the codes, with its own noise (the solve's stays as it was): the
        evidence of the confidence (solving/confidence.py). An x0 model gives it in one call at t = T-1. An eps model's
        x0 there divides its error by sqrt(alphabar) (about 0.0064), so its estimate is the x0 prediction halfway down
        a DDIM-10 path (t = 444, sqrt(alphabar) about 0.36), the path stopped there."""
        noise = torch.Generator(self.device).manual_seed(0)
        if self.config.prediction == "x0":
            opts = type(self.opts)(steps=1, sampler="ddim", generator=noise)     # a jpdvt.SampleOptions
            return self.costs(batch, given=given, grid=grid, opts=opts)[0]
        halfway = {}                                          # step 5 of 10: the call at t = 444

        def stop(i, x, x0):
            if i == 5:
                halfway.update(code=x0["code"])
                raise Halfway
        try:
            self.costs(batch, given=given, callback=stop, grid=grid,
                       opts=type(self.opts)(steps=10, sampler="ddim", generator=noise))
        except Halfway:
            pass
        table = self.table if grid is None else self.kind.table(grid).to(self.device)
        code, table = piece_codes(halfway["code"].float(), table)
        return torch.cdist(code, table[None].float().expand(len(code), -1, -1))

    def settings(self):
        """What a confidence table depends on: the sampling options, the arithmetic (fp32, or bf16 / fp16 autocast)
        and the number of missing pieces."""
        o = self.opts
        return {"steps": o.steps, "sampler": o.sampler, "samples": o.samples, "assign": o.assign,
                "precision": arithmetic(self.device, self.precision), "missing": self.config.puzzle.missing}

    def differs(self, settings=None):
        """{name: (fitted, now)} of the settings (default: the solver's) that no table of the checkpoint was fitted
        with (missing: the numbers of missing pieces with a table)."""
        now, cal = settings or self.settings(), self.calibration
        fitted = {**fitted_with(cal["settings"]), "missing": sorted(cal["tables"])}
        keys = (set(now) | set(fitted)) - {"missing"}                # a setting only the table has differs too
        out = {k: (fitted.get(k), now.get(k)) for k in sorted(keys) if fitted.get(k) != now.get(k)}
        return out | ({} if now["missing"] in cal["tables"] else {"missing": (fitted["missing"], now["missing"])})

    def mismatch(self, settings=None):
        """The settings (default: the solver's) that differ from its confidence tables', as 'name: tables -> now'."""
        return ", ".join(f"{k}: {fitted} -> {now}" for k, (fitted, now) in self.differs(settings).items())

    def confidence_tables(self, settings=None):
        """The confidence tables fitted with these settings (default: the solver's): {"piece", "puzzle"}, or
        None (a table fitted with other sampling options or another number of missing pieces does not describe this
        solve)."""
        if self.calibration is None or self.differs(settings):
            return None
        return self.calibration["tables"][(settings or self.settings())["missing"]]

    def calibrated(self, settings=None):
        """Is there a confidence table fitted with these settings (default: the solver's)?"""
        return self.confidence_tables(settings) is not None

    def confidence(self, margin, smallest, owner=None, settings=None):
        """(piece, puzzle) probabilities of being right, or (None, None) without tables fitted with these settings:
        the puzzle's from its smallest piece margin, each piece's by piece_probability (owner: the puzzle of each
        piece)."""
        tables = self.confidence_tables(settings)
        if tables is None:
            return None, None
        whole = probability(tables["puzzle"], smallest)
        return piece_probability(tables, margin, whole, owner), whole
