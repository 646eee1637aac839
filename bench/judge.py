"""
The judge over samples (solving/judge.py, `sample.py --judge classic`; issues 78 and 83) on a checkpoint's puzzles:
they are solved ONCE with --samples K_max samples each (its stored sampler and steps, the noise of sample.py: pass r
seeded --seed + r), and from the same samples, for each K of --ks (the first K samples, exactly what a K-sample solve
draws), these rows are scored on the same candidates, the ensemble's arrangement (the assignment of the K samples'
mean cost) and each sample's own arrangement:
- the model alone: the ensemble's arrangement (the paper's method with K samples, jpdvt.arrange);
- the pick (rows `judge classic ENERGY`): of the candidates, the one of least energy (solving.borders.ENERGIES, each
  of --energies); for clips this is the judge, and rows `..., frames not blurred` score the cut energy before issue 83;
- pictures, the judge (rows `judge classic mgc + search, prior W`): solving.search from every candidate, the model's
  costs weighted by W (each of --weights; default the judge's own, solving.judge.PRIOR_WEIGHT), and the search from
  the pick alone (rows `... + search from the pick, prior W`, the alternative val did not choose);
- the best candidate: of the same candidates, the one nearest the true answer (what a perfect pick could reach; the
  search can pass it, since it reaches boards no sample proposed). Rows written before the judge's option was
  renamed call these `judge edges ENERGY` and `oracle`.
Image puzzles sit on the puzzles of the classic solvers' rows (`python -m bench baselines[-val]`: seeds 1..8, as
`--seed 1 --repeats 8`), whose MGC figures each row names; video rows add frame chaining on the same clips and the
kinds of the wrong orders (bench/clip_errors.py). The judge's own row carries its time as a share of the sampling time
of the same K. Rows: group "judge" in bench/results.json.

    python -m bench.judge --ckpt checkpoints/image-photos-3x3-missing.pt --split val --missing 1 --seed 1 --repeats 8 \\
        --data-dir ../shared/data/photos --samples 16 --ks 4 8 16 --weights 0 4          # choose on val
    python -m bench.judge ... --split test --ks 16 --energies mgc                       # then test once, that choice
"""
import argparse
import os
import sys
import time
from dataclasses import replace

import numpy as np
import torch

import jpdvt
import solving
from bench.baselines import chain_video
from bench.clip_errors import draw_failed, error_kinds
from bench.intervals import interval
from bench.report import load_results, save_result, this_command
from metrics import assign_batch, kendall_distance
from plumbing.cli import positive
from puzzles import collate, puzzle_set
from solving.borders import ENERGIES, ENERGY, cut_energy
from solving.judge import PRIOR_WEIGHT, judge, pick
from solving.search import search


def solve_once(solver, puzzle, args):
    """Each pass's per-sample costs (S, B, N, P), batch (content, true_pos, missing, pinned) and sampling seconds."""
    opts = replace(solver.opts, samples=args.samples)
    passes = []
    for r in range(args.repeats):
        test = puzzle_set(puzzle, args.split, args.seed + r)
        num = min(args.num_puzzles, len(test))
        solver.opts.generator.manual_seed(args.seed + r)           # sample.py's noise: its K-sample solve draws the
        costs, batches, seconds = [], [], 0.0                      # first K of these samples
        for start in range(0, num, args.batch_size):
            batch = collate([test[i] for i in range(start, min(start + args.batch_size, num))])
            given, pinned = solver.told(batch)           # codes told to the network, pieces kept on their cells
            t = time.time()
            c = solver.costs(batch, given, opts)[0].float().cpu()                        # (S, B, N, P)
            seconds += time.time() - t
            costs.append(c)
            batches.append({**batch, "pinned": jpdvt.pinned_cells(batch, pinned)})
            print(f"pass {r + 1}/{args.repeats}: {start + len(c[0])}/{num} puzzles, {seconds:.0f} s", flush=True)
        batch = {k: torch.cat([b[k] for b in batches]) for k in batches[0]}
        passes.append({"costs": torch.cat(costs, 1), "batch": batch, "seconds": seconds})
    return passes


def best_candidate(cands, batch, video):
    """(B, N): per puzzle, the candidate (K, B, N) nearest the truth: most counted pieces in place (images), least
    Kendall distance (videos). The candidates are the ensemble's arrangement and each sample's own."""
    true = batch["true_pos"].numpy()
    if video:
        bad = np.stack([kendall_distance(c, true) for c in cands])                                   # (K, B)
    else:
        counted = (~batch["missing"] & (batch["pinned"] < 0)).numpy()
        bad = -np.stack([((c == true) & counted).sum(1) for c in cands])
    return cands[bad.argmin(0), np.arange(cands.shape[1])]


def estimators(p, k, method, puzzle, energies, weights):
    """{name: positions (B, N)} of one pass p for the first k samples: the model alone (the ensemble's arrangement),
    the pick per energy (clips: frames blurred, and not, as before issue 83), for pictures the search from every
    candidate (solving/search.py) at each prior weight, and the best candidate, over the ensemble's arrangement and
    each sample's own."""
    costs, batch = p["costs"][:k], p["batch"]
    video, grid = puzzle.kind == "video", None if puzzle.kind == "video" else tuple(puzzle.grid)
    if "own" not in p:                                   # each sample assigned on its own, once for every K
        p["own"] = torch.from_numpy(np.stack([assign_batch(c, method, pinned=batch["pinned"]) for c in p["costs"]]))
    ensemble = torch.from_numpy(assign_batch(costs.mean(0), method, pinned=batch["pinned"]))
    cands = torch.cat([ensemble[None], p["own"][:k]])                                               # (1 + k, B, N)
    content, missing = batch["content"], batch["missing"]
    out = {"model alone": ensemble.numpy()}
    for e in energies:
        out[f"judge classic {e}"] = pick(cands, content, missing, grid, e)
        if video:                                        # the cut energy before issue 83: sharp frames
            sharp = cut_energy(content, cands, missing, e, sigma=0)
            out[f"judge classic {e}, frames not blurred"] = cands[sharp.argmin(0), torch.arange(len(sharp[0]))].numpy()
    for w in weights if ENERGY in energies and not video else ():
        prior = w * costs.mean(0) if w else None
        out[f"judge classic {ENERGY} + search, prior {w:g}"] = search(cands, content, missing, batch["pinned"], grid,
                                                             prior).numpy()
        start = torch.as_tensor(out[f"judge classic {ENERGY}"])[None]          # the alternative: one start, the pick
        out[f"judge classic {ENERGY} + search from the pick, prior {w:g}"] = search(start, content, missing,
                                                                           batch["pinned"], grid, prior).numpy()
    out["best candidate"] = best_candidate(cands.numpy(), batch, video)
    return out


def judge_share(p, k, method, puzzle, k_max):
    """The judge's whole call (solving.judge.judge: 1 + k assignments, then the cut energy or the search) on the
    pass's puzzles, over their sampling time for k samples (the measured K_max sampling scaled by k / K_max)."""
    b = p["batch"]
    t = time.time()
    judge(p["costs"][:k], b["content"], b["missing"], b["pinned"], method, puzzle)
    return (time.time() - t) / (p["seconds"] * k / k_max)


def intervals(scores, est):
    """95% intervals, resampling the puzzles' sources (photo or clip i gives puzzle i of each pass): of each score
    (KEY_95) and of its gain over the model alone and, for a search, over the judge's pick it starts from."""
    per = {key: np.stack([r[key] for r in scores[est]]) for key in scores[est][0]}            # (passes, puzzles)
    out = {f"{key}_95": list(interval(v, np.random.default_rng(0))[1:]) for key, v in per.items()}
    for base in ["model alone"] + [est.split(" + ")[0]] * ("search" in est):
        for key, v in per.items():
            gain = v - np.stack([r[key] for r in scores[base]])
            out[f"{key}_gain_over_{base.replace(' ', '_')}_95"] = list(interval(gain, np.random.default_rng(0)))
    return out


def baseline(ckpt, puzzle, args):
    """(row key, metrics) of the classic solver's row on the same image puzzles (MGC, `python -m bench baselines`), or
    None."""
    where = "val " if args.split == "val" else ""
    label = (f"{puzzle.dataset} {where}{puzzle.grid[0]}x{puzzle.grid[1]} {puzzle.piece_size}px" +
             (f" gap {puzzle.gap}" if puzzle.gap else "") + (f" missing {puzzle.missing}" if puzzle.missing else "") +
             (f", {args.repeats} passes" if args.repeats > 1 else ""))
    key = f"baseline image {label}: mgc"
    row = load_results().get(key)
    return (key, row["metrics"]) if row and args.seed == 1 else None


def chaining(passes):
    """Frame chaining (bench.baselines.chain_video) on the same clips: Kendall distance and exact order, pass mean."""
    kendall, exact = [], []
    for p in passes:
        true = p["batch"]["true_pos"].numpy()
        pred = np.stack([chain_video(c.numpy()) for c in p["batch"]["content"]])
        kendall.append(float(kendall_distance(pred, true).mean()))
        exact.append(float((pred == true).all(1).mean()))
    return {"kendall": float(np.mean(kendall)), "exact": float(np.mean(exact))}


# issue 78's targets: (checkpoint, missing) -> (what, met(metrics, MGC metrics))
TARGETS = {
    ("image-photos-3x3", 0): ("at least MGC's puzzle accuracy", lambda m, b: m["puzzle_acc"] >= b["puzzle_acc"]),
    ("image-photos-3x3-missing", 0): ("at least MGC's puzzle accuracy",
                                      lambda m, b: m["puzzle_acc"] >= b["puzzle_acc"]),
    ("image-photos-3x3-missing", 1): ("at least MGC's piece accuracy", lambda m, b: m["piece_acc"] >= b["piece_acc"]),
    ("image-photos-3x3-missing", 2): ("at least MGC's piece accuracy", lambda m, b: m["piece_acc"] >= b["piece_acc"]),
    ("image-photos-3x3-gap", 0): ("at least 1.2 x MGC's piece accuracy",
                                  lambda m, b: m["piece_acc"] >= 1.2 * b["piece_acc"]),
    ("video-mmnist-20x1", 0): ("Kendall distance at most 1.5e-3 (aim: the paper's 0.7e-3)",
                               lambda m, b: m["kendall"] <= 1.5e-3),
}


def main(args):
    if args.split == "test" and (len(args.ks) != 1 or len(args.energies) != 1):
        sys.exit("error: --split test scores the one setting chosen on val: give a single --ks and --energies")
    if max(args.ks) > args.samples:
        sys.exit(f"error: --ks {max(args.ks)} is more than --samples {args.samples}; raise --samples")
    solver = solving.load(args.ckpt, device="cpu")
    puzzle, video = solver.config.puzzle, solver.config.puzzle.kind == "video"
    changes = {"data_dir": args.data_dir or puzzle.data_dir}
    if args.missing is not None:
        changes["missing"] = args.missing
    puzzle = replace(puzzle, **changes)
    name, stored = os.path.basename(args.ckpt)[:-3], solver.opts.samples
    method = solver.opts.assign
    weights = args.weights if args.weights is not None else [] if video else [PRIOR_WEIGHT[puzzle.gap > 0]]
    shipped = (f"judge classic {ENERGY}" if video else         # the row of what `--judge classic` does
               f"judge classic {ENERGY} + search, prior {PRIOR_WEIGHT[puzzle.gap > 0]:g}")
    if args.cache and os.path.exists(args.cache):          # the samples drawn before, for other energies
        passes = torch.load(args.cache)
    else:
        passes = solve_once(solver, puzzle, args)
        if args.cache:
            torch.save(passes, args.cache)
    num = passes[0]["costs"].shape[1]
    ks = sorted(set(args.ks) | ({stored} if args.split == "test" and stored <= args.samples else set()))
    setting = (f"missing {puzzle.missing}, " if not video else "") + (
        f"{args.repeats} passes" if args.repeats > 1 else f"seed {args.seed}") + f" ({num} puzzles)"
    classic = None if video else baseline(args.ckpt, puzzle, args)
    chain = chaining(passes) if video else None
    target = TARGETS.get((name, puzzle.missing))
    command = this_command("bench.judge")
    for k in ks:
        scores, picks = {}, {}
        for p in passes:
            for est, pos in estimators(p, k, method, puzzle, args.energies if k in args.ks else [],
                                       weights).items():
                scores.setdefault(est, []).append(jpdvt.score(puzzle, pos, p["batch"]))   # per puzzle
                picks.setdefault(est, []).append(pos)
        if video and args.picture and k == args.ks[0]:
            draw(args.picture, passes[0]["batch"], {e: v[0] for e, v in picks.items()})
        sampling = sum(p["seconds"] for p in passes) * k / args.samples / (num * args.repeats)
        for est, runs in scores.items():
            m = {key: float(np.mean([r[key] for r in runs])) for key in runs[0]}
            m.update(intervals(scores, est))
            m.update(num_puzzles=num, repeats=args.repeats, seed=args.seed, split=args.split, missing=puzzle.missing,
                     samples=k, sampler=solver.opts.sampler, steps=solver.opts.steps, assign=method,
                     sec_per_puzzle=sampling, stored_samples=stored)
            if est.startswith("judge"):
                m["energy"] = est.split()[2].strip(",")
            if est == shipped:                           # the judge's own call, timed
                share = [judge_share(p, k, method, puzzle, args.samples) for p in passes[:2]]
                m["judge_share"] = float(np.mean(share))
            if classic:
                m["mgc"] = {"row": classic[0], "piece_acc": classic[1]["piece_acc"],
                            "puzzle_acc": classic[1]["puzzle_acc"]}
            if chain:
                m["chaining"] = chain
                m["errors"] = error_kinds(np.concatenate(picks[est]),
                                          np.concatenate([p["batch"]["true_pos"].numpy() for p in passes]))
            if target and (classic or video):
                m["target"], m["target_met"] = target[0], bool(target[1](m, classic[1] if classic else None))
            key = f"judge {name} {args.split} {setting}: K {k}, {est}"
            shown = {a: round(b, 5) for a, b in m.items() if a in ("piece_acc", "puzzle_acc", "kendall", "exact",
                                                                  "judge_share", "target_met")}
            gains = {a: [round(x, 4) for x in b] for a, b in m.items() if "gain" in a and "puzzle_acc" not in a}
            print(key, shown, gains, flush=True)
            save_result(key, {"group": "judge", "command": command, "train_minutes": 0.0, "metrics": m,
                              "note": args.note or ""})
    if video and args.split == "test":           # frame chaining on the same clips, named as fresh-seed-baselines
        p = puzzle
        save_result(f"baseline video {p.dataset} {p.pieces}x{p.frames_per_piece} {p.size}px seed {args.seed} ({num} "
                    "clips): nearest-neighbour chaining",
                    {"group": "fresh-seed", "train_minutes": 0.0, "command": command + " (chaining)",
                     "metrics": {**chain, "num_puzzles": num}})


def draw(path, batch, picks):
    """The picture of a few clips that the judge before issue 83 (sharp frames) orders wrongly: the truth, the model
    alone, that judge and the judge now (clip_errors.draw_failed)."""
    old, new = f"judge classic {ENERGY}, frames not blurred", f"judge classic {ENERGY}"
    if old in picks:
        rows = {"truth": batch["true_pos"].numpy(), "model alone": picks["model alone"], "judge, sharp frames":
                picks[old], "judge, blurred frames": picks[new]}
        print(f"{path}: clips {draw_failed(path, batch, rows, 'judge, sharp frames')}")


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True, help="a trained checkpoint (its stored sampler and steps are kept)")
    p.add_argument("--split", required=True, choices=("val", "test"),
                   help="val: choose K and the energy; test: score the chosen setting once")
    p.add_argument("--data-dir", default=None, help="the data folder (default: the checkpoint's own)")
    p.add_argument("--missing", type=int, default=None, help="missing pieces per puzzle (default: the checkpoint's)")
    p.add_argument("--num-puzzles", type=positive, default=200, help="puzzles per pass (at most the split's)")
    p.add_argument("--seed", type=int, default=1, help="seed of pass 0's puzzles and noise (as sample.py's --seed)")
    p.add_argument("--repeats", type=positive, default=1, help="passes, pass r of seed --seed + r (sample.py's)")
    p.add_argument("--samples", type=positive, default=16, help="K_max: samples drawn once per puzzle")
    p.add_argument("--ks", type=positive, nargs="+", default=[4, 8, 16], help="the K to score (first K samples)")
    p.add_argument("--energies", nargs="+", default=list(ENERGIES), choices=ENERGIES,
                   help="the judge's energies to score (solving/judge.py; default: all)")
    p.add_argument("--batch-size", type=positive, default=50, help="puzzles sampled at once (sample.py's default)")
    p.add_argument("--weights", type=float, nargs="*", default=None,
                   help="images: the search's prior weights to score (default: the judge's, PRIOR_WEIGHT for the "
                        "puzzles' gap)")
    p.add_argument("--cache", default=None,
                   help="a file keeping the drawn samples: written on the first run, read (not drawn again) after")
    p.add_argument("--note", default=None, help="a note for the rows (e.g. why fewer clips)")
    p.add_argument("--picture", default=None,
                   help="clips: a PNG of a few clips the judge with sharp frames orders wrongly (first K of --ks)")
    return p


if __name__ == "__main__":
    main(get_parser().parse_args())
