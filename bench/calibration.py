"""
The confidence's rows (solving/confidence.py, solving/seams.py), for the shipped checkpoints of CONFIDENCE:

    python -m bench confidence          # fit the tables on val (sample.py --calibrate), score them on test
    python -m bench cross-fit           # every candidate way and bin count, held out within val (what calibrate chose)
    python -m bench ece-bootstrap       # the test ECE's spread when the test pictures are drawn again
    python -m bench not-a-puzzle        # the gate on test: bags of unrelated pieces, noise
    python -m bench own-photos          # the photo model through jpdvt.load(...).solve on photos cut into files
    python -m bench confidence-evidence # which margin tells right from wrong pieces (val)
"""
import os

import numpy as np

from bench.recipes import CONFIDENCE, CONFIDENCE_MISSING, PHOTO_PASSES, SHIPPED, TEST_PUZZLES, VAL_PASSES
from bench.report import save_result
from solving.confidence import reliability

CONFIDENCE_GROUPS = ("confidence", "cross-fit", "ece-bootstrap", "not-a-puzzle", "own-photos", "confidence-evidence")


def without(flags, name):
    """flags without `name` and its value."""
    i = flags.index(name) if name in flags else len(flags)
    return flags[:i] + flags[i + 2:]


def passes_of(flags):
    """The --repeats of sample.py flags (1 without)."""
    return int(flags[flags.index("--repeats") + 1]) if "--repeats" in flags else 1


def confidence(out_root, only, sweep):
    """Fit each shipped checkpoint's confidence on val (its README command's settings, --calibrate writes the tables
    into the checkpoint; VAL_PASSES: more passes), then score the test split with the same settings: reliability and
    ECE; CONFIDENCE_MISSING: the same at more numbers of missing pieces."""
    for name, flags in CONFIDENCE:
        if only and name not in only:
            continue
        for k in [0, *CONFIDENCE_MISSING.get(name, [])]:
            at = flags if not k else [*without(flags, "--missing"), "--missing", str(k)]
            suffix = f" missing {k}" if k else ""
            val = [*without(at, "--repeats"), *VAL_PASSES[name]] if name in VAL_PASSES else at
            sweep("confidence", SHIPPED[name], {f"{name}{suffix} val (calibrate)": [*val, "--split", "val",
                                                                                     "--calibrate"]}, out_root)
            sweep("confidence", SHIPPED[name], {f"{name}{suffix} test": at}, out_root)


def ece_bootstrap(name, flags):
    """The shipped checkpoint's test ECE (piece, puzzle) at 0 missing and its 2.5 / 50 / 97.5% bootstrap percentiles
    over the test pictures."""
    from bench.crossfit import bootstrap_ece, collect
    solver, found, picture, _ = collect(SHIPPED[name], "test", passes_of(flags))
    piece, whole = solver.confidence(found[0], found[2], evidence=found[4], owner=found[5])
    return {"pictures": int(len(np.unique(picture))), "puzzles": int(len(found[2])),
            "ece": {"piece": reliability(piece, found[1])[1], "puzzle": reliability(whole, found[3])[1]},
            "bootstrap": bootstrap_ece(piece, whole, found, picture)}


def confidence_rows(group, only, out_root, sweep):
    """Run one of CONFIDENCE_GROUPS for the checkpoints `only` (default: every one of CONFIDENCE it applies to);
    sweep: bench's sample.py runner."""
    def row(key, metrics, *args):
        save_result(key, {"group": "confidence", "train_minutes": 0.0, "metrics": metrics,
                          "command": " ".join([*threads, "python -m bench", group, *args])})
    threads = [f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}"] if os.environ.get("OMP_NUM_THREADS") else []
    chosen = [(n, f) for n, f in CONFIDENCE if not only or n in only]
    if group == "confidence":
        confidence(out_root, only, sweep)
    elif group == "cross-fit":                     # how calibrate fits the confidence tables, chosen within val
        from bench.crossfit import cross_fit_row
        for name, flags in chosen:
            row(f"cross-fit {name} val", cross_fit_row(SHIPPED[name], passes_of(VAL_PASSES.get(name, flags))),
                "--only", name)
    elif group == "ece-bootstrap":
        for name, flags in [(n, f) for n, f in chosen if "photos" in n] if not only else chosen:
            row(f"ece-bootstrap {name} test", ece_bootstrap(name, flags), "--only", name)
    elif group == "not-a-puzzle":
        from bench.not_a_puzzle import gate_on_test
        for name, _ in chosen:
            metrics = gate_on_test(SHIPPED[name], PHOTO_PASSES if "photos" in name else 1, int(TEST_PUZZLES))
            if metrics:
                row(f"not-a-puzzle {name} test", metrics)
    elif group == "own-photos":
        from bench.own_photos import own_photos
        for split in ("val", "test"):
            row(f"own-photos image-photos-3x3 {split}", own_photos(SHIPPED["image-photos-3x3"], split))
    elif group == "confidence-evidence":
        from bench.evidence import auroc_of_margins
        for name, passes in (("image-shapes-3x3", 1), ("image-photos-3x3-gap", PHOTO_PASSES)):
            row(f"confidence evidence {name} val", auroc_of_margins(SHIPPED[name], "val", passes, int(TEST_PUZZLES)))
