"""
How long the judge's search (solving/search.py) takes on a checkpoint's puzzles. The candidates are the judge's own
(solving.judge.candidates: the assignment of the samples' mean cost, then each sample's), drawn once with --samples
samples of sample.py's noise (--seed), the prior weighted as the judge weighs it (PRIOR_WEIGHT); then search is timed
on each puzzle alone (sec_per_puzzle) and on all of them in one call as bench/judge.py makes it
(batched_sec_per_puzzle), with the process's peak memory during the searches (peak_rss_mib; search_rss_mib: above
what it held before them, Linux). Row `search time NAME SPLIT missing M (N puzzles): K C`, group "search-time".

    OMP_NUM_THREADS=1 python -m bench.search_time --ckpt checkpoints/image-photos-3x3.pt \\
        --data-dir ../shared/data/photos --num-puzzles 20

Without --ckpt, --grid R C times synthetic candidates (random orders, --candidates of them, no prior) on photos of
--data-dir cut into that grid of --piece-size px pieces, for grids no checkpoint solves yet; it prints, saves no row:

    OMP_NUM_THREADS=1 python -m bench.search_time --grid 10 15 --data-dir ../shared/data/photos --num-puzzles 2
"""
import argparse
import resource
import sys
import time
from dataclasses import replace

import torch

import jpdvt
import solving
from bench.report import ckpt_name, save_result, this_command
from plumbing.cli import positive
from puzzles import ImageConfig, collate, puzzle_set
from solving.judge import candidates, search_prior
from solving.search import search


def rss_mib(field="VmHWM"):
    """The process's resident memory in MiB (VmRSS: now; VmHWM: its peak), from /proc; the peak from getrusage where
    there is no /proc."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak():
    """Start the peak (VmHWM) again from the memory held now (Linux 4.0 on; elsewhere the peak stays the process's)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def model_candidates(args):
    """(puzzle config, batch with "pinned" cells, candidates (K, B, N), prior or None) from the checkpoint's samples."""
    solver = solving.load(args.ckpt, device="cpu")
    puzzle = replace(solver.config.puzzle, data_dir=args.data_dir or solver.config.puzzle.data_dir,
                     **({} if args.missing is None else {"missing": args.missing}))
    test = puzzle_set(puzzle, args.split, args.seed)
    batch = collate([test[i] for i in range(min(args.num_puzzles, len(test)))])
    given, pinned = solver.told(batch)
    solver.opts.generator.manual_seed(args.seed)
    costs = solver.costs(batch, given, replace(solver.opts, samples=args.samples or solver.opts.samples))[0]
    costs, cells = costs.float().cpu(), jpdvt.pinned_cells(batch, pinned)                      # (S, B, N, P)
    return puzzle, {**batch, "pinned": cells}, candidates(costs, cells, solver.opts.assign), search_prior(costs, puzzle)


def synthetic_candidates(args):
    """The same for a grid no checkpoint solves: photos cut into --grid, random orders as candidates, no prior."""
    puzzle = ImageConfig(dataset="folder", data_dir=args.data_dir, grid=tuple(args.grid), piece_size=args.piece_size,
                         missing=args.missing or 0)
    test = puzzle_set(puzzle, args.split, args.seed)
    batch = collate([test[i % len(test)] for i in range(args.num_puzzles)])
    g, (b, n) = torch.Generator().manual_seed(args.seed), batch["missing"].shape
    cands = torch.stack([torch.stack([torch.randperm(n, generator=g) for _ in range(b)])
                         for _ in range(args.candidates)])                                    # (K, B, N)
    return puzzle, {**batch, "pinned": torch.full((b, n), -1)}, cands, None


def time_search(puzzle, batch, cands, prior):
    """{metric: value}: the search's seconds a puzzle, alone and batched, and the peak memory during them."""
    grid, content, missing, pinned = tuple(puzzle.grid), batch["content"], batch["missing"], batch["pinned"]
    num = len(content)
    reset_peak()
    before, seconds = rss_mib("VmRSS"), []
    for i in range(num):
        t = time.perf_counter()
        search(cands[:, i:i + 1], content[i:i + 1], missing[i:i + 1], pinned[i:i + 1], grid,
               None if prior is None else prior[i:i + 1])
        seconds.append(time.perf_counter() - t)
    t = time.perf_counter()
    search(cands, content, missing, pinned, grid, prior)
    batched = (time.perf_counter() - t) / num
    peak = rss_mib()
    return {"sec_per_puzzle": sum(seconds) / num, "max_sec_per_puzzle": max(seconds),
            "batched_sec_per_puzzle": batched, "pieces": grid[0] * grid[1], "grid": f"{grid[0]}x{grid[1]}",
            "candidates": len(cands), "num_puzzles": num, "missing": puzzle.missing, "prior": prior is not None,
            "threads": torch.get_num_threads(), "peak_rss_mib": round(peak), "search_rss_mib": round(peak - before)}


def main(args):
    if (args.ckpt is None) == (args.grid is None):
        sys.exit("error: give --ckpt (a checkpoint's candidates) or --grid R C (synthetic ones), not both")
    if args.grid and not args.data_dir:
        sys.exit("error: --grid needs --data-dir, a folder of photos to cut")
    puzzle, batch, cands, prior = (model_candidates if args.ckpt else synthetic_candidates)(args)
    m = time_search(puzzle, batch, cands, prior)
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in m.items()}, flush=True)
    if args.ckpt:
        name = ckpt_name(args.ckpt)
        command = this_command("bench.search_time")
        key = f"search time {name} {args.split} missing {puzzle.missing} ({m['num_puzzles']} puzzles): K {len(cands)}"
        save_result(key, {"group": "search-time", "command": command, "train_minutes": 0.0,
                          "metrics": {**m, "seed": args.seed, "split": args.split}, "note": args.note or ""})
        print(f"saved row {key!r}")


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", default=None, help="an image checkpoint: the candidates are its samples' (as the judge's)")
    p.add_argument("--grid", type=positive, nargs=2, default=None, metavar=("ROWS", "COLS"),
                   help="without --ckpt: synthetic candidates on this grid (printed, no row saved)")
    p.add_argument("--data-dir", default=None, help="the photos' folder (default: the checkpoint's own)")
    p.add_argument("--split", default="test", choices=("val", "test"), help="the puzzles' split")
    p.add_argument("--missing", type=int, default=None, help="missing pieces per puzzle (default: the checkpoint's)")
    p.add_argument("--num-puzzles", type=positive, default=20, help="puzzles timed (at most the split's)")
    p.add_argument("--seed", type=int, default=1, help="the puzzles' and the samples' noise seed (sample.py's)")
    p.add_argument("--samples", type=positive, default=None,
                   help="samples per puzzle: 1 + samples candidates (default: the checkpoint's stored samples)")
    p.add_argument("--candidates", type=positive, default=17, help="--grid: random candidates per puzzle")
    p.add_argument("--piece-size", type=positive, default=24, help="--grid: the pieces' side in px")
    p.add_argument("--note", default=None, help="a note for the row")
    return p


if __name__ == "__main__":
    main(get_parser().parse_args())
