"""
How the confidence's tables are fitted, chosen within val (python -m bench cross-fit; solving/confidence.py): the
evidence of a shipped checkpoint's val puzzles (sample.py's solves: DDIM-50, pass r with seed 1 + r) split by picture
into halves; each candidate way of making a piece's probability (confidence.WAYS) and bin count is fitted on one
half and its ECE measured on the other, both ways round, as `sample.py --calibrate` chooses (confidence.choose). Rows
report every candidate, the choice, and for the photo model the same when only the first 8 or 16 of 32 val passes
are fitted on (how much more val evidence helps). The test split is not read, but by `bootstrap_ece`, which tells how
far a test split of so many pictures pins an ECE down.
"""
import numpy as np

import jpdvt
from jpdvt import given_codes
from metrics import assign_batch
from puzzles import collate, to_device
from solving.confidence import BINS, WAYS, choose, cross_fit, gather, reliability
from solving.solver import Solver

BATCH = 50


def collect(ckpt, split, passes, seed=1, num=200):
    """(the solver, the confidence's evidence of `passes` passes over the first `num` puzzles of `split` at 0 missing
    (gather's parts, concatenated), the picture of every puzzle (its index in the pass: the same photo in every pass
    of a folder, a fresh picture for generated puzzles), chance), solved as sample.py solves them with the settings
    of the checkpoint's confidence tables (its README settings)."""
    solver = Solver.load(ckpt, device="cpu")
    if solver.calibration is None:
        raise SystemExit(f"{ckpt} has no confidence tables to take the settings from: python -m bench confidence")
    puzzle = solver.config.puzzle
    puzzle.missing = 0
    kind, grid = jpdvt.kind_of(puzzle), (puzzle.grid if puzzle.kind == "image" else (1, puzzle.pieces))
    found, picture = [], []
    for r in range(passes):
        test = kind.puzzles(split, seed + r)
        solver.opts.generator.manual_seed(seed + r)
        for start in range(0, min(num, len(test)), BATCH):
            batch = to_device(collate([test[i] for i in range(start, min(start + BATCH, num, len(test)))]),
                              solver.device)
            pos = assign_batch(solver.costs(batch)[0], solver.opts.assign)
            counted = ~given_codes(batch, kind.anchored) & (~batch["missing"] if puzzle.kind == "image" else True)
            found.append(gather(solver, batch, pos, counted, grid, before=sum(len(f[2]) for f in found)))
            picture += list(range(start, start + len(pos)))
    return solver, [np.concatenate(part) for part in zip(*found)], np.array(picture), 1 / len(solver.table)


def cross_fit_row(ckpt, passes):
    """The row's metrics: val accuracy, every candidate's mean held-out (piece, puzzle) ECE, the choice (as
    calibrate makes it, with the checkpoint's gate) and, with more than 8 passes, the same fitted on the first 8 and
    16 passes only (scored on all)."""
    solver, found, picture, chance = collect(ckpt, "val", passes)
    gate = solver.confidence_tables()["gate"]
    candidates = [(w, p, z) for w in WAYS for p in BINS for z in BINS]
    chosen = choose(found, picture, chance, gate)
    out = {"val_puzzles": int(len(found[2])), "val_piece_acc": float(found[1].mean()),
           "val_puzzle_acc": float(found[3].mean()), "chosen": list(chosen)}
    per_pass = len(np.unique(picture))
    for k in sorted({passes, *[k for k in (8, 16) if k < passes]}):
        usable = np.arange(len(picture)) < k * per_pass
        for c, ece in cross_fit(found, picture, chance, candidates, gate, usable=usable).items():
            out[f"{c[0]}, {c[1]} / {c[2]} bins, {k} passes"] = [float(e) for e in ece.mean(0)]
    return out | {"chosen_ece": out[f"{chosen[0]}, {chosen[1]} / {chosen[2]} bins, {passes} passes"]}


def bootstrap_ece(piece, whole, found, picture, draws=1000, seed=0):
    """{"piece": (2.5%, 50%, 97.5%), "puzzle": ...} of the ECE of probabilities (piece, whole) on evidence `found`
    when the pictures are drawn again with replacement: how far a split of this many pictures pins the ECE down."""
    rng, pictures = np.random.default_rng(seed), np.unique(picture)
    out, rows = {"piece": [], "puzzle": []}, {p: np.flatnonzero(picture == p) for p in pictures}
    owned = {g: np.flatnonzero(found[5] == g) for g in range(len(found[2]))}
    for _ in range(draws):
        take = np.concatenate([rows[p] for p in rng.choice(pictures, len(pictures))])
        mine = np.concatenate([owned[g] for g in take])
        out["piece"].append(reliability(piece[mine], found[1][mine])[1])
        out["puzzle"].append(reliability(whole[take], found[3][take])[1])
    return {k: [float(q) for q in np.percentile(v, [2.5, 50, 97.5])] for k, v in out.items()}
