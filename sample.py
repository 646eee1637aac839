"""
Score a trained JPDVT checkpoint on fresh test puzzles: solve them (jpdvt.solve through the checkpoint's Solver), then
count the pieces placed right. Paper: "Predicted position encodings" (supplement) and "Metrics" (Sec. 4.2).

Everything is rebuilt from the checkpoint, with its EMA weights. Image puzzles report piece and puzzle accuracy over
the pieces the model had to place; clips report the Kendall distance of their order and the share fully ordered
(metrics.json's "counted" says what each figure counts). The first line printed names the sampling used and where
each setting came from. Your own pieces, and temporal super-resolution: python -m solving.own (solving/own.py).

    python sample.py --ckpt checkpoints/image-shapes-3x3.pt            # samples/image-shapes-3x3-test/metrics.json
    python sample.py --ckpt out/run/ckpt.pt --missing 2 --no-anchor --judge edges
"""
import argparse
import json
import os
import time

import numpy as np
import torch
from tqdm import tqdm

from plumbing.cli import positive, user_errors
from puzzles import collate, puzzle_set
from solving.pictures import save_pictures
from solving.solver import REPORT, add_solver_flags, open_solver, summary


def score_test_set(args, solver):
    """Solve --num-puzzles puzzles of --split, --repeats times (pass r: the shuffles, missing pieces and noise of
    --seed + r); write metrics.json (the mean over passes, and each pass) and the first pass's pictures."""
    puzzle, kind, report = solver.config.puzzle, solver.kind, REPORT[solver.config.puzzle.kind]
    passes, rows, seconds = [], [], 0.0
    for r in range(args.repeats):
        test = puzzle_set(puzzle, args.split, args.seed + r)
        num = min(args.num_puzzles, len(test))
        solver.opts.generator.manual_seed(args.seed + r)
        positions, truth = [], []
        for start in tqdm(range(0, num, args.batch_size), unit="batch", desc=f"solving (pass {r + 1}/{args.repeats})"):
            batch = collate([test[i] for i in range(start, min(start + args.batch_size, num))])
            batch = {k: v.to(solver.device) for k, v in batch.items()}
            t = time.time()
            pos, content = solver.solve_batch(batch)   # jpdvt.solve: sample the codes, then arrange the pieces
            seconds += time.time() - t
            positions.append(pos)
            truth.append({k: batch[k].cpu() for k in ("true_pos", "missing")})
            rows += [(batch, pos, content, k) for k in range(max(min(report["pictured"] - len(rows), len(pos)), 0))]
        truth = {k: torch.cat([t[k] for t in truth]) for k in ("true_pos", "missing")}
        passes.append(kind.score(np.concatenate(positions), truth))   # jpdvt.Images.score / Videos.score
    metrics = {**{k: float(np.mean([p[k] for p in passes])) for k in passes[0]}, "counted": report["counted"],
               "num_puzzles": num, "sec_per_puzzle": seconds / (num * args.repeats), "split": args.split,
               "seed": args.seed, "repeats": args.repeats, "passes": passes, **solver.described}
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    path, shown = save_pictures(kind, args.out, rows)
    print(f"{num} {args.split} puzzles x {args.repeats} pass(es): {summary(puzzle.kind, metrics)}, "
          f"{metrics['sec_per_puzzle']:.3f} s/puzzle")
    print(f"wrote {os.path.join(args.out, 'metrics.json')} and {path} ({shown})")
    return metrics


def main(args):
    if args.out is None:                       # one folder per checkpoint and mode: no run overwrites another's
        stem = os.path.splitext(os.path.basename(args.ckpt))[0]
        mode = [args.split] + [f"{k}-{v}" for k, v in (("missing", args.missing), ("judge", args.judge),
                                                         ("anchor", args.anchor)) if v is not None]
        args.out = os.path.join(os.path.dirname(os.path.abspath(args.ckpt)), "samples", "-".join([stem, *mode]))
    solver = open_solver(args)                 # the checkpoint's network, its test puzzles and the sampling line
    os.makedirs(args.out, exist_ok=True)
    return score_test_set(args, solver)


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_solver_flags(p)
    p.add_argument("--num-puzzles", type=positive, default=200, help="puzzles to solve and score (default 200)")
    p.add_argument("--split", default="test", choices=("test", "val"),
                   help="test (score it once, for the final figures; the default) or val (choose recipes, sample "
                        "counts and thresholds on it)")
    p.add_argument("--repeats", type=positive, default=1,
                   help="solve the puzzles this many times, pass r with the shuffles and noise of --seed + r, and "
                        "report the mean (for small test folders; default 1)")
    p.add_argument("--missing", type=int, default=None,
                   help="missing pieces per puzzle, generated by the model (default: the checkpoint's)")
    p.add_argument("--anchor", action=argparse.BooleanOptionalAction, default=None,
                   help="image puzzles, the scoring protocol: --anchor tells the model one piece's cell and does not "
                        "count it (the paper's text, Sec. 3.2); --no-anchor tells none and counts every piece (the "
                        "authors' released code). Default: as the checkpoint trained")
    p.add_argument("--dataset", default=None, help="score on another dataset of the checkpoint's kind")
    p.add_argument("--data-dir", default=None,
                   help="the data folder: images, the MNIST IDX folder or mnist_test_seq.npy, videos (default: the "
                        "training run's, found from here or next to the checkpoint)")
    p.add_argument("--frame-stride", type=int, default=None,
                   help="video checkpoints: keep every N-th frame (default: the checkpoint's)")
    p.add_argument("--out", default=None,
                   help="output folder (default: samples/CKPT-SPLIT[-flags]/ next to the checkpoint)")
    p.add_argument("--batch-size", type=positive, default=50, help="puzzles solved at once (default 50)")
    return p


if __name__ == "__main__":
    with user_errors():
        main(get_parser().parse_args())
