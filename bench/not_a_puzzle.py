"""
Is it one puzzle, on test (python -m bench not-a-puzzle): each shipped checkpoint whose confidence is calibrated
(sample.py --split val --calibrate; a gate where val's seams could fit one) solves its test puzzles and, from the
same puzzles, as many bags that are no puzzle of each kind (solving/seams.py: not_a_puzzle: each piece from
another puzzle; noise), with its table's settings. Rows: the share of each kind of bag whose puzzle confidence is at
most 0.05, the share of real puzzles the gate holds back, the mean puzzle confidence of each, and the AUROC of real
puzzles against bags by puzzle confidence, by the seam ratio alone and by the ink spread alone (clips).
"""
import numpy as np
import torch
from tqdm import tqdm

import jpdvt
from jpdvt import given_codes
from metrics import assign_batch
from puzzles import collate, to_device
from solving.confidence import gather
from solving.seams import not_a_puzzle


def auroc(high, low):
    """P(a score of `high` > a score of `low`), ties counted half."""
    high, low = np.asarray(high, float)[:, None], np.asarray(low, float)[None]
    return float((high > low).mean() + 0.5 * (high == low).mean())


def gate_on_test(ckpt, passes, puzzles, batch_size=50):
    """The rows' metrics for checkpoint `ckpt` on `passes` passes over at most `puzzles` test puzzles (None for a
    checkpoint without a gate)."""
    solver = jpdvt.load(ckpt, device="cpu")
    if not solver.calibration or 0 not in solver.calibration["tables"]:
        return None                                        # not calibrated: python -m bench confidence
    solver.config.puzzle.missing = 0
    table = solver.confidence_tables()
    kind = jpdvt.kind_of(solver.config)
    puzzle = solver.config.puzzle
    grid = puzzle.grid if puzzle.kind == "image" else (1, puzzle.pieces)
    conf, evidence = {"real": [], "mixed": [], "noise": []}, {"real": [], "mixed": [], "noise": []}
    for r in range(passes):
        test = kind.puzzles("test", 1 + r)
        solver.opts.generator.manual_seed(1 + r)
        num = min(puzzles, len(test))
        for start in tqdm(range(0, num, batch_size), desc=f"not-a-puzzle pass {r + 1}/{passes}"):
            batch = to_device(collate([test[i] for i in range(start, min(start + batch_size, num))]), solver.device)
            bags = not_a_puzzle(batch, torch.Generator().manual_seed(1000 * r + start))
            for name, b in zip(("real", "mixed", "noise"), (batch, *bags)):
                pos = assign_batch(solver.costs(b)[0], solver.opts.assign)
                found = gather(solver, b, pos, ~given_codes(b, kind.anchored) & ~b["missing"], grid, 0)
                conf[name] += list(solver.confidence(found[0], found[2], evidence=found[4], owner=found[5])[1])
                evidence[name] += list(found[4])
    real, evidence = np.array(conf["real"]), {k: np.array(v) for k, v in evidence.items()}
    return {"threshold": (table["gate"] or {}).get("threshold"), "ink": (table["gate"] or {}).get("ink"),
            "puzzles": len(real),
            "real_gated": float(solver.no_puzzle(evidence["real"]).mean()), "real_mean_confidence": float(real.mean()),
            **{f"{k}_at_most_0.05": float(np.mean(np.array(conf[k]) <= 0.05)) for k in ("mixed", "noise")},
            **{f"{k}_mean_confidence": float(np.mean(conf[k])) for k in ("mixed", "noise")},
            **{f"auroc_{k}": auroc(real, conf[k]) for k in ("mixed", "noise")},
            **{f"auroc_seam_{k}": auroc(-evidence["real"][:, 0], -evidence[k][:, 0]) for k in ("mixed", "noise")},
            **{f"auroc_ink_{k}": auroc(-evidence["real"][:, 1], -evidence[k][:, 1]) for k in ("mixed", "noise")
               if not np.isnan(evidence["real"][:, 1]).all()}}                   # clips only
