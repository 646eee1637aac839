"""
95% intervals of sample.py's figures, by resampling what the puzzles came from: a photo (puzzle i of every pass is
cut from test photo i) or a clip, never single puzzles, since one photo gives several puzzles. Reads the per-puzzle
scores of sample.py's metrics.json (its "per_puzzle": passes x puzzles) and writes one row a run to results.json.

    python -m bench.intervals runs/table/photos runs/table/gap ...      # each a sample.py --out folder
    python -m bench.intervals --minus runs/val/k1 runs/val/k8          # the gain of K 8 over K 1, paired
"""
import argparse
import json
import os

import numpy as np

from bench.report import ckpt_name, save_result

DRAWS = 2000                                 # bootstrap resamples
KEYS = {"image": ("piece_acc", "puzzle_acc"), "video": ("kendall", "exact", "kendall_set", "exact_set")}


def interval(per_puzzle, rng):
    """(mean, low, high): the mean over passes and puzzles of a (passes, puzzles) array, and the 2.5 and 97.5
    percentiles of that mean over resamples of the puzzles' sources (columns) with replacement."""
    per_source = np.asarray(per_puzzle, float).mean(0)                 # (sources,): each photo's or clip's mean
    draws = per_source[rng.integers(0, len(per_source), (DRAWS, len(per_source)))].mean(1)
    return float(per_source.mean()), float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def paired(a, b):
    """A row of the gain of sample.py run `a` over run `b` on the same puzzles (the same seed, split and passes): each
    figure's per-puzzle difference, its mean and 95% interval over the photos or clips (a gain clears its interval
    when the low end is above 0)."""
    (ma, mb), rng = [json.load(open(os.path.join(f, "metrics.json"))) for f in (a, b)], np.random.default_rng(0)
    kind = "image" if "piece_acc" in ma else "video"
    row = {k: interval(np.subtract(ma["per_puzzle"][k], mb["per_puzzle"][k]), rng) for k in KEYS[kind]}
    key = f"paired {ckpt_name(ma['ckpt'])} {ma['split']} x{ma['repeats']}: {setting(ma)} minus {setting(mb)}"
    print(key, " ".join(f"{k} {v:+.4f} [{lo:+.4f}, {hi:+.4f}]" for k, (v, lo, hi) in row.items()))
    save_result(key, {"command": f"python -m bench.intervals --minus {b} {a}", "group": "intervals",
                      "metrics": {**{k: v for k, (v, _, _) in row.items()},
                                  **{f"{k}_95": [lo, hi] for k, (_, lo, hi) in row.items()}}})


def setting(m):
    """'K 8, judge classic': the sampling a run varied."""
    return f"K {m['samples']}" + (f", judge {m['judge']}" if m.get("judge", "none") != "none" else "")


def main(args):
    if args.minus:
        for folder in args.folders:
            paired(folder, args.minus)
        return
    for folder in args.folders:
        rng = np.random.default_rng(0)       # each folder's draws alike, whatever else is listed
        with open(os.path.join(folder, "metrics.json")) as f:
            m = json.load(f)
        kind = "image" if "piece_acc" in m else "video"
        puzzle = m.get("puzzle", m)          # the puzzle settings (older metrics.json: beside the figures)
        row = {k: interval(m["per_puzzle"][k], rng) for k in KEYS[kind]}
        name = ckpt_name(m["ckpt"])
        protocol = ("anchored" if puzzle["anchor"] else "all pieces") if kind == "image" else "clips"
        key = f"interval {name} {m['split']} missing {puzzle['missing']} {protocol} seed {m['seed']} x{m['repeats']}"
        if m.get("sampling_from", {}).get("samples") == "flag":    # K set by a flag, not the checkpoint's: its own row
            key += f" samples {m['samples']}"
        if m.get("judge", "none") != "none":
            key += f" judge {m['judge']}"
        print(key, " ".join(f"{k} {v:.4f} [{lo:.4f}, {hi:.4f}]" for k, (v, lo, hi) in row.items()))
        save_result(key, {"command": f"python -m bench.intervals {folder}", "group": "intervals",
                          "metrics": {**{k: v for k, (v, _, _) in row.items()},
                                      **{f"{k}_95": [lo, hi] for k, (_, lo, hi) in row.items()},
                                      "sources": len(m["per_puzzle"][KEYS[kind][0]][0]), "passes": m["repeats"],
                                      "samples": m["samples"], "sampler": m["sampler"], "judge": m["judge"],
                                      "sec_per_puzzle": m["sec_per_puzzle"], "sampled_by": m.get("ckpt")},
                          "sampled_with": m.get("command")})


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="+", help="sample.py output folders (each holds a metrics.json)")
    p.add_argument("--minus", metavar="FOLDER", help="instead: the paired gain of each folder's run over this run's, "
                   "on the same puzzles")
    return p


if __name__ == "__main__":
    main(get_parser().parse_args())
