"""
How sure the solver is: each piece's probability of being in the right place, and the whole puzzle's.

Not in the paper. One network call at t = T - 1 gives every piece's posterior-mean code (Calibrated.mean_costs, a
method of the Solver; an eps model's estimate is the x0 prediction at t = 444 of a DDIM-10 path instead): where the
model is sure, the mean sits on one cell's code; where two cells are plausible, it sits between them. A piece whose
assigned position (by the sampler) is much nearer the mean than the next best is probably right; one whose two best
positions are about as near is a coin toss. (The sampled codes themselves say little: a sample commits to one cell
even when it is wrong; on the shapes val split their margins separate right from wrong pieces with an AUROC of 0.55,
the mean's with 0.96: `python -m bench confidence-evidence`.) So:
- `margins`: per piece, the mean code's distance to the next-best position minus to the assigned one (in code
  units: neighbouring cells are 1.06 apart); per puzzle, its smallest piece margin.
- `fit`: a calibration table, fitted on the val split: margins cut into bins of equal count, each bin's smoothed
  accuracy (never 0 or 1), chance one neighbour distance below the first bin (see fit), made non-decreasing (a
  larger margin never means less likely right). For each number of missing pieces a puzzle table (of its smallest
  piece margin) and a piece table, stored in the checkpoint with the sampling settings they were fitted with (only
  those solves report them). A piece's probability (`piece_probability`) is never below its puzzle's (all pieces
  right is never likelier than the least sure one), made one of two ways (WAYS): "unsolved", P(puzzle) + (1 -
  P(puzzle)) * table(margin), the table fitted on the pieces of unsolved val puzzles (with every cell taken, a wrong
  piece has a wrong partner, so a sure piece of an unsure puzzle is less likely right), or "raised", the table of
  every piece raised to P(puzzle). `choose` picks the way and the bins by cross-fitting within val (half the
  pictures fit, the other half score; a near tie keeps "raised"; python -m bench cross-fit shows the choices).
- `probability`: a margin -> its bin's accuracy, interpolated between bin centres.
- `reliability`: on another split (test), predicted against observed accuracy in bins, and the expected
  calibration error (ECE: the bins' |predicted - observed| weighted by their share of pieces).
- sample.py's use: `gather` (a solved batch's evidence), `calibrate` (--calibrate: fit and store the tables),
  `reliability_of` (a calibrated checkpoint on scored puzzles); `Calibrated`: the Solver's confidence methods.

    m = margins(cost, positions)                  # cost (B, N, P), positions (B, N) -> (B, N)
    table = fit(m.ravel(), correct.ravel())       # on val: {"margin": [...], "accuracy": [...]}
    p = probability(table, m)                     # (B, N) in [0, 1]
    rows, ece = reliability(p.ravel(), correct.ravel())

Is it one puzzle at all? solving/seams.py (seam ratios, ink spreads and the not-a-puzzle gate).
"""

import numpy as np
import torch

from plumbing.checkpoint import save_checkpoint
from plumbing.cli import UserError, arithmetic
from posenc import grid_table
from solving.seams import bag_evidence, fit_gate, held_back

# what calibrate chooses from, by cross-fitting within val (choose): how a piece's probability is made
# (piece_probability) and the bins of the piece and puzzle tables
WAYS = {"unsolved": "P(puzzle) + (1 - P(puzzle)) * table(margin), the table fitted on pieces of unsolved puzzles",
        "raised": "table(margin), the table fitted on every piece, raised to P(puzzle)"}
BINS = (5, 10)


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
    """Each piece's probability of being right from its margin and its puzzle's probability `puzzle` (owner: the
    puzzle of each piece; None: one puzzle), the way tables["way"] says (WAYS). Never below the puzzle's: a puzzle is
    never surer than its least sure piece."""
    whole = np.asarray(puzzle, dtype=np.float64)
    whole = whole[owner] if owner is not None else whole
    p = probability(tables["piece"], margin)
    return whole + (1 - whole) * p if tables["way"] == "unsolved" else np.maximum(p, whole)


def fit_tables(found, chance, way, piece_bins, puzzle_bins):
    """The piece and puzzle tables of evidence `found` (gather's parts) made `way` (WAYS), with these bins; "unsolved"
    with no unsolved puzzle to fit on is made "raised"."""
    unsolved = ~found[3][found[5]]
    way = way if unsolved.any() else "raised"
    piece = (found[0][unsolved], found[1][unsolved]) if way == "unsolved" else found[:2]
    return {"way": way, "piece": fit(*piece, bins=piece_bins, chance=chance),
            "puzzle": fit(found[2], found[3], bins=puzzle_bins)}


def capped(whole, evidence, gate):
    """Puzzle probabilities `whole`, capped by the not-a-puzzle gate (solving/seams.py: fit_gate; None: no gate) where
    it holds the bag back (held_back of its bag_evidence; never for NaN, no evidence)."""
    if gate is None or evidence is None:
        return whole
    return np.where(held_back(evidence, gate), np.minimum(whole, gate["accuracy"]), whole)


def subset(found, keep):
    """The evidence of the puzzles `keep` (bool per puzzle), the pieces' puzzles renumbered."""
    index, mine = np.cumsum(keep) - 1, keep[found[5]]
    return [found[0][mine], found[1][mine], found[2][keep], found[3][keep], found[4][keep], index[found[5][mine]]]


def cross_fit(found, picture, chance, candidates, gate=None, splits=5, usable=None):
    """{(way, piece bins, puzzle bins): (2 * splits, 2) array of held-out (piece ECE, puzzle ECE)}: the pictures
    (`picture`: each puzzle's) split into halves `splits` times, each candidate fitted on one half (its `usable`
    puzzles, default all) and scored on the other, both ways round, with `gate` applied as a solve applies it."""
    rng, pictures = np.random.default_rng(0), np.unique(picture)
    ece, usable = {c: [] for c in candidates}, np.ones(len(picture), bool) if usable is None else usable
    for _ in range(splits):
        half = np.isin(picture, rng.permutation(pictures)[:len(pictures) // 2])
        for fold in (half, ~half):
            train, held = subset(found, fold & usable), subset(found, ~fold)
            for c in candidates:
                tables = fit_tables(train, chance, *c)
                whole = capped(probability(tables["puzzle"], held[2]), held[4], gate)
                piece = piece_probability(tables, held[0], whole, held[5])
                ece[c].append((reliability(piece, held[1])[1], reliability(whole, held[3])[1]))
    return {c: np.array(v) for c, v in ece.items()}


def choose(found, picture, chance, gate=None):
    """(way, piece bins, puzzle bins) by cross_fit within val: the puzzle bins of the lowest mean held-out puzzle
    ECE; with them, each way's piece bins of the lowest piece ECE; "unsolved" only where its piece ECE is below
    "raised"'s by more than one standard error of their paired difference over the held-out halves, the variance
    corrected for halves that overlap (Nadeau and Bengio: times 1/J + held-out/fitted = 1/J + 1 for J halves), so
    that a near tie keeps the simpler way. The gate is fitted once on all of val (the halves share it)."""
    scores = cross_fit(found, picture, chance, [(w, p, z) for w in WAYS for p in BINS for z in BINS], gate)
    puzzle = min(BINS, key=lambda z: min(s[:, 1].mean() for c, s in scores.items() if c[2] == z))
    best = {w: min((c for c in scores if c[0] == w and c[2] == puzzle), key=lambda c: scores[c][:, 0].mean())
            for w in WAYS}
    gain = scores[best["raised"]][:, 0] - scores[best["unsolved"]][:, 0]
    return best["unsolved"] if gain.mean() > gain.std(ddof=1) * np.sqrt(1 / len(gain) + 1) else best["raised"]


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


def gather(solver, batch, pos, counted, grid, before):
    """The confidence's evidence of a solved test batch (one more network call, Solver.mean_costs): evidence()'s four
    parts, the puzzles' not-a-puzzle evidence (bag_evidence, (B, 2)) and the puzzle of each counted piece (numbered
    after `before` puzzles). counted (B, N): the pieces scored; grid: (rows, cols), videos (1, pieces)."""
    keep, counted = (~batch["missing"]).cpu().numpy(), counted.cpu().numpy()
    owner = np.nonzero(counted)[0] + before
    return (*evidence(solver.mean_costs(batch).cpu().numpy(), pos, batch["true_pos"].cpu().numpy(), counted),
            bag_evidence(batch["content"].cpu().numpy(), pos, grid, keep), owner)


def reliability_of(solver, found):
    """How a calibrated solver's confidence holds on scored puzzles (found: gather's parts, concatenated): per piece
    and per puzzle the reliability rows and ECE, and the share of the puzzles taken for no puzzle (gated)."""
    piece, whole = solver.confidence(found[0], found[2], evidence=found[4], owner=found[5])
    return {"confidence": {part: dict(zip(("rows", "ece"), reliability(p, ok)))
                           for part, p, ok in (("piece", piece, found[1]), ("puzzle", whole, found[3]))},
            "real_gated": float(solver.no_puzzle(found[4]).mean())}


# a table's settings that it may not record, with their value (the tables that do not record the precision were
# fitted on a CPU, in fp32)
TABLE_DEFAULTS = {"precision": "fp32"}
CALIBRATION_PUZZLES = 100       # --calibrate fits no table on fewer val puzzles (passes count: 20 pictures x 5 passes)


def check_val_size(per_pass, passes=None):
    """--calibrate's val set (per_pass puzzles a pass, `passes` passes): at least CALIBRATION_PUZZLES puzzles, and at
    least four pictures, as calibrate cross-fits on halves of them (sample.py checks before it solves)."""
    if passes is not None and per_pass * passes < CALIBRATION_PUZZLES:
        raise UserError(f"--calibrate needs at least {CALIBRATION_PUZZLES} puzzles to fit on, and would solve "
                        f"{per_pass * passes}; raise --num-puzzles or --repeats (passes with fresh noise)")
    if per_pass < 4:
        raise UserError(f"--calibrate chooses how to fit by cross-fitting on halves of the val pictures, and "
                        f"{per_pass} are too few; raise --num-puzzles to at least 4")


def calibrate(path, split, solver, found, bags, per_pass):
    """sample.py --calibrate: fit the confidence tables (fit) and the not-a-puzzle gate (fit_gate) on these val
    puzzles' evidence (gather's parts; bags: each batch's bag_seams; per_pass: puzzles per pass: puzzle g is item
    g % per_pass of the split, the same picture in every pass for a folder of photos, a fresh one for generated
    puzzles, which then group by index only), made the way and with the bins `choose` finds, for the solve's number
    of missing pieces, and store them in checkpoint `path` (atomic rewrite) beside the tables of other numbers of
    missing pieces fitted with the same sampling settings; sample.py and solve(pieces) then report probabilities."""
    if not any(bags):
        raise UserError(f"--calibrate makes bags that are no puzzle from batches of at least as many puzzles as pieces "
                        f"({solver.table.shape[0]}); raise --batch-size and --num-puzzles to at least that")
    bags = {k: np.concatenate([b[k] for b in bags if b]) for k in ("mixed", "noise")}
    check_val_size(per_pass)
    chance, gate = 1 / len(solver.table), fit_gate(found[4], found[3], bags)
    how = choose(found, np.arange(len(found[2])) % per_pass, chance, gate)
    tables = {**fit_tables(found, chance, *how), "gate": gate}
    sampling = solver.settings()
    missing = sampling.pop("missing")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    old = ckpt.get("calibration") or {}                  # as it is now: another run may have added a table
    same = fitted_with(old.get("settings") or {}) == sampling and old.get("split") == split
    kept = old.get("tables", {}) if same else {}
    calibration = {"split": split, "settings": sampling, "tables": {**kept, missing: tables}}
    save_checkpoint(path, {**ckpt, "calibration": calibration})
    gate = tables["gate"]
    print(f"wrote the confidence tables for {missing} missing pieces into {path} (from {len(found[0])} pieces of "
          f"{len(found[2])} val puzzles; chosen by cross-fitting: {how[0]}, {how[1]} / {how[2]} bins; tables of "
          f"{sorted(calibration['tables'])} missing now); "
          + ("no not-a-puzzle gate: most real puzzles' seams match no better than unrelated pieces'" if not gate else
             f"not a puzzle: seam ratio >= {gate['threshold']:.3f}"
             + (f" or ink spread >= {gate['ink']:.3f}" if gate.get("ink") is not None else "") + " (" + ", ".join(
                 f"{k} bags {v:.0%}" for k, v in gate["bags_above"].items())
             + f", real puzzles {gate['real_above']:.0%}), then P(solved) {gate['accuracy']:.3f}"))
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
    "settings": the sampling settings, "tables": {number of missing pieces: {"way", "piece", "puzzle", "gate"}}}, or
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
        table = self.table if grid is None else grid_table(*grid).to(self.device)
        code = halfway["code"].float()
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
        """The confidence tables fitted with these settings (default: the solver's): {"piece", "puzzle", "gate"}, or
        None (a table fitted with other sampling options or another number of missing pieces does not describe this
        solve)."""
        if self.calibration is None or self.differs(settings):
            return None
        return self.calibration["tables"][(settings or self.settings())["missing"]]

    def calibrated(self, settings=None):
        """Is there a confidence table fitted with these settings (default: the solver's)?"""
        return self.confidence_tables(settings) is not None

    def confidence(self, margin, smallest, evidence=None, owner=None, settings=None):
        """(piece, puzzle) probabilities of being right, or (None, None) without tables fitted with these settings:
        the puzzle's from its smallest piece margin, capped by the gate fitted on val where its not-a-puzzle
        evidence (solving/seams.py: bag_evidence) says it is no puzzle (capped); each piece's by piece_probability
        from that (owner: the puzzle of each piece), so a gated puzzle's pieces are not capped: "raised" keeps their
        own table's value."""
        tables = self.confidence_tables(settings)
        if tables is None:
            return None, None
        whole = capped(probability(tables["puzzle"], smallest), evidence, tables["gate"])
        return piece_probability(tables, margin, whole, owner), whole

    def no_puzzle(self, evidence, settings=None):
        """Does this evidence (bag_evidence, (..., 2)) say "not one puzzle" (held back by the gate fitted on val)?
        False without a gate and for NaN (no evidence)."""
        return held_back(evidence, (self.confidence_tables(settings) or {}).get("gate"))
