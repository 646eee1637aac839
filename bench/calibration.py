"""
The confidence's rows (solving/confidence.py), for the shipped checkpoints of CONFIDENCE:

    python -m bench confidence          # fit the tables on val (sample.py --calibrate), score them on test
    python -m bench own-photos          # the photo model through jpdvt.load(...).solve on photos cut into files
    python -m bench confidence-evidence # which margin tells right from wrong pieces (val)
"""
import os

from bench.recipes import CONFIDENCE, CONFIDENCE_MISSING, PHOTO_PASSES, SHIPPED, TEST_PUZZLES, VAL_PASSES
from bench.report import save_result

# the rows of groups "cross-fit", "ece-bootstrap" and "not-a-puzzle" measured the removed cross-fitting of the tables
# and the removed not-a-puzzle gate; they stay in results.json, marked "removed"
CONFIDENCE_GROUPS = ("confidence", "own-photos", "confidence-evidence")


def without(flags, name):
    """flags without `name` and its value."""
    i = flags.index(name) if name in flags else len(flags)
    return flags[:i] + flags[i + 2:]


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


def confidence_rows(group, only, out_root, sweep):
    """Run one of CONFIDENCE_GROUPS for the checkpoints `only` (default: every one of CONFIDENCE it applies to);
    sweep: bench's sample.py runner."""
    def row(key, metrics, *args):
        save_result(key, {"group": "confidence", "train_minutes": 0.0, "metrics": metrics,
                          "command": " ".join([*threads, "python -m bench", group, *args])})
    threads = [f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}"] if os.environ.get("OMP_NUM_THREADS") else []
    if group == "confidence":
        confidence(out_root, only, sweep)
    elif group == "own-photos":
        from bench.own_photos import own_photos
        for split in ("val", "test"):
            row(f"own-photos image-photos-3x3 {split}", own_photos(SHIPPED["image-photos-3x3"], split))
    elif group == "confidence-evidence":
        from bench.evidence import auroc_of_margins
        for name, passes in (("image-shapes-3x3", 1), ("image-photos-3x3-gap", PHOTO_PASSES)):
            row(f"confidence evidence {name} val", auroc_of_margins(SHIPPED[name], "val", passes, int(TEST_PUZZLES)))
