"""
Learning benchmark: train named recipes end to end on this machine, score them on fresh held-out puzzles, compare
with non-learned baselines, and write bench/BENCHMARKS.md (bench/report.py).

Every row records the exact command, the machine (CPU cores, or the GPU), wall minutes of training and the metrics
on test puzzles (or val, where the row says so) whose seeds are disjoint from training (each split has its own
stream id). Results accumulate in bench/results.json, so recipes can be run one at a time (their flags are listed in
bench/recipes.py). Run it from the repository root:

    python -m bench --list
    python -m bench image-3x3                 # train + score one recipe (minutes)
    python -m bench baselines sampler throughput loader
    python -m bench ensemble-readme           # only the README's row of the ensemble sweep
    python -m bench one-call one-call-val     # only the one-call rows (--steps 1), then the samplers on val
    python -m bench confidence                # fit the shipped checkpoints' confidence on val, score it on test
    python -m bench confidence --only image-photos-3x3      # the same for some checkpoints only
    python -m bench own-photos                # the photo model through jpdvt.load(...).solve: photos cut into files
    python -m bench paper-table               # the shipped Moving MNIST models on 1000 test clips (the paper's Table 5)
    python -m bench fresh-seed                # every shipped video model once, its own estimator, clips of a new seed
    python -m bench fresh-seed-baselines      # frame chaining on those clips
    python -m bench candidate-val             # trained Moving MNIST recipes on val, before one replaces a shipped model
    python -m bench candidate-val --clips 1000 --seed 2 --estimator "ddpm-50 x4"   # more clips, beside the shipped one
    python -m bench missing-curve             # docs/video-mmnist-8x4-missing.png (paper, Figure 4(b))
    python -m bench reliability-plot          # docs/reliability.png: the shipped confidence on test
    python -m bench lines                     # the lines of Python outside tests/ and bench/ at the last commit
    python -m bench                           # only rewrite bench/BENCHMARKS.md from bench/results.json
    python -m bench --score-only image-photos-3x3-mix   # score an earlier run's checkpoint again
    python -m bench --resume video-mmnist-10x2-batch32-lr5e-4-40k   # continue a run an earlier session left
    python -m bench --export runs/bench/image-3x3/ckpt.pt checkpoints/image-shapes-3x3.pt
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

from bench.baselines import image_baselines, video_baselines
from bench.calibration import CONFIDENCE_GROUPS, confidence_rows

# `python -m bench` from the repository root puts the root on sys.path: the root modules (puzzles, metrics, ...)
# are imported by their plain names
from bench.recipes import (
    ASSIGNMENTS,
    CANDIDATE_VAL,
    CANDIDATES,
    COMPUTE,
    CONFIDENCE,
    ENSEMBLE_CKPTS,
    ENSEMBLE_README,
    ESTIMATOR_VAL,
    FRESH,
    FRESH_SEED,
    IMAGE_BASELINES,
    IMAGE_VAL_BASELINES,
    MNIST,
    ONE_CALL,
    ONE_CALL_ENSEMBLES,
    ONE_CALL_TEST,
    ONE_CALL_VAL,
    PAPER_CLIPS,
    PAPER_TABLE,
    PHOTOS,
    RECIPES,
    REPEATS,
    SAMPLERS,
    SHIPPED,
    TEST_PUZZLES,
    TRANSFER,
    VAL_SAMPLERS,
    VIDEO_BASELINES,
)
from bench.report import RESULTS, ROOT, load_results, render, save_result
from plumbing.cli import positive

# what `python -m bench NAME` runs besides recipes
GROUPS = ["baselines", "baselines-val", "sampler", "assign", "ensemble", "ensemble-readme", "one-call",
          "one-call-val", "estimator-val", "candidate-val", *CONFIDENCE_GROUPS, "paper-table", "fresh-seed",
          "fresh-seed-baselines", "missing-curve", "reliability-plot", "compute-val", "compute-test", "gpu-record",
          "transfer", "throughput", "loader", "loader-quickstart", "loader-mmnist", "pace-mmnist", "loader-imagenet",
          "loader-prepared",
          "memory-estimate", "lines"]


def sh(cmd):
    print("$", " ".join(cmd), flush=True)
    subprocess.run([sys.executable] + cmd, cwd=ROOT, check=True)


def shown(cmd):
    """The command as a user would type it, with the thread setting it ran under."""
    threads = os.environ.get("OMP_NUM_THREADS")
    return (f"OMP_NUM_THREADS={threads} " if threads else "") + "python " + " ".join(cmd)


def recorded_minutes(name, cmd):
    """Training minutes of an earlier row of recipe `name` trained with the same flags (in any order), for
    --score-only."""
    def flags(tokens):
        i = tokens.index("--out")
        return sorted(tokens[:i] + tokens[i + 2:])
    for key, row in load_results().items():
        if row["group"] != "recipes" or "python " not in row["command"]:
            continue
        typed = row["command"].split("python ", 1)[1].split()
        if (key == name or key.startswith(name + "--")) and flags(typed) == flags(cmd):
            return row["train_minutes"]
    sys.exit(f"error: no recorded training of recipe {name} with its current flags in {RESULTS}; run "
             f"`python -m bench {name}` without --score-only")


def logged_minutes(log):
    """Training minutes of a run from its log.txt, over every session that trained it: the sum of each logged window
    (steps since the last line / its steps per second; a "resuming ... at step S" line starts the count at S)."""
    minutes, last = 0.0, 0
    with open(log) as f:
        for line in f:
            resumed = re.match(r"resuming .* at step (\d+)", line)
            window = re.match(r"step (\d+) .* steps/s ([\d.]+)", line)
            if resumed:
                last = int(resumed.group(1))
            elif window and float(window.group(2)) > 0:
                minutes += (int(window.group(1)) - last) / float(window.group(2)) / 60
                last = int(window.group(1))
    return minutes


def without_fixed(cmd):
    """A training command without the flags that shape a fresh run only (plumbing.flags.FIXED, and their values):
    a resumed run takes them from its checkpoint and refuses them on the command line."""
    from plumbing.flags import FIXED
    fixed = {"--" + name.replace("_", "-") for name in FIXED} | {"--no-paper"}
    out, skip = [], False
    for token in cmd:
        if token in fixed:
            skip = True
        elif skip and not token.startswith("--"):
            continue
        else:
            skip = False
            out.append(token)
    return out


def run_recipe(name, out_root, score_only=False, resume=False):
    """Train recipe `name` into out_root/name (or, with score_only, reuse its ckpt.pt; with resume, continue it) and
    score its evaluations."""
    script, flags, evals = RECIPES[name]
    out = os.path.join(out_root, name)
    cmd = [script] + flags + ["--out", out] + ([] if "--eval-every" in flags else ["--eval-every", "0"])
    if (score_only or resume) and not os.path.exists(os.path.join(out, "ckpt.pt")):
        sys.exit(f"error: --score-only and --resume need {os.path.join(out, 'ckpt.pt')}; run `python -m bench {name}` "
                 "first")
    if score_only:
        minutes = recorded_minutes(name, cmd)
    elif resume:                                     # a run longer than a session: its log counts every session
        sh(without_fixed(cmd) + ["--resume", os.path.join(out, "ckpt.pt")])
        minutes = logged_minutes(os.path.join(out, "log.txt"))
    else:
        t = time.time()
        sh(cmd)
        minutes = (time.time() - t) / 60
    for extra in evals:
        sout = os.path.join(out, "eval" + "".join(extra).replace("--", "-"))
        scmd = ["sample.py", "--ckpt", os.path.join(out, "ckpt.pt"), "--num-puzzles", TEST_PUZZLES, "--seed", "1",
                "--sampler", "ddim", "--out", sout] + extra
        sh(scmd)
        with open(os.path.join(sout, "metrics.json")) as f:
            m = json.load(f)
        save_result(f"{name}{' '.join(extra)}", {"group": "recipes", "command": shown(cmd),
                                                 "eval": shown(scmd), "train_minutes": minutes,
                                                 "metrics": m})


# ----------------------------------------------------------------------------
# Sampler comparison and throughput
# ----------------------------------------------------------------------------

def scored(group, key, cmd):
    """Run the sample.py command `cmd` (its last flag --out) and record its metrics as row `key` of `group`."""
    sh(cmd)
    with open(os.path.join(cmd[-1], "metrics.json")) as f:
        m = json.load(f)
    save_result(key, {"group": group, "command": shown(cmd), "train_minutes": 0.0, "metrics": m})


def sweep(group, ckpt, variants, out_root, puzzles=TEST_PUZZLES, seed=1):
    """Score one checkpoint with several sample.py settings on the same puzzles (of `seed`; test unless --split)."""
    for name, flags in variants.items():
        out = os.path.join(out_root, re.sub(r"[^\w.-]+", "-", f"{group}-{name}").strip("-"))   # no spaces, quotes
        scored(group, f"{group} {name}", ["sample.py", "--ckpt", ckpt, "--num-puzzles", str(puzzles), "--seed",
                                          str(seed), *flags, "--out", out])


def ensembles(settings, out_root):
    for kind, ckpt, counts, missing, (label, flags) in settings:
        sweep("ensemble", ckpt, {f"{kind} {label} x{k}" + (f" missing {m}" if m else ""):
                                 ["--sampler", "ddim", "--samples", str(k), "--missing", str(m), *REPEATS, *flags]
                                 for k in counts for m in missing}, out_root)


def ensemble_readme(out_root):
    """The README's figure of the shipped gap model: its sample.py command as typed there (sample.py's defaults,
    DDPM-50 and --seed 0), with an --out folder of its own."""
    name, ckpt, flags, folder = ENSEMBLE_README
    out = os.path.join(out_root, folder)
    scored("ensemble", f"ensemble {name}", ["sample.py", "--ckpt", ckpt, *flags, "--out", out])


def one_call(out_root):
    """The one-call rows beside the rows they compare with: the sampler sweep's, the one-sample ensemble
    rows' and the video recipe rows' (the same puzzles, passes and flags, --steps 1)."""
    sweep("sampler", SHIPPED["image-shapes-3x3"], {"steps-1": SAMPLERS["steps-1"]}, out_root)
    ensembles(ONE_CALL_ENSEMBLES, out_root)
    for name in ONE_CALL_TEST:
        sweep("one-call", SHIPPED[name], {f"{name} steps-1": ONE_CALL}, out_root)


def one_call_val(out_root):
    """sample.py's default chosen on val: one call, DDIM-50 and DDPM-50 on each shipped checkpoint's val split."""
    for name, flags, note in ONE_CALL_VAL:
        sweep("one-call val", SHIPPED[name], {f"{name} {s}{note}": ["--split", "val", *flags, *sflags]
                                              for s, sflags in VAL_SAMPLERS.items()}, out_root)


def compute(out_root, split):
    """The compute lever: photo models trained with a lent GPU's compute (recipes.COMPUTE) on `split`."""
    for name, (ckpt, flags) in COMPUTE.items():
        sweep("compute", ckpt, {f"{name} {split}": (["--split", "val"] if split == "val" else []) + flags}, out_root)


def record_gpu(path):
    """The rows of a lent-GPU session (bench/gpu.py's gpu-rows.json, fetched into `path`), each marked with its
    device and the command that made it."""
    with open(path) as f:
        rows = json.load(f)
    where = {"machine": f"1 {rows['device']} + 16 CPU cores (torch {rows['torch']})"}
    run = rows.get("command", "python -m bench.gpu --photos .photos --out $OUT --runs /tmp/runs --photo-seconds 200 "
                              "--gap-seconds 60")
    for part, what in (("imagenet", "python train_image.py --dataset imagenet --grid 3 --workers 14 on 320 generated "
                                    "pictures (the paper table, bf16), then sample.py"),
                       ("photos", "the photo recipe (MIXED) at batch 640, steps timed to --photo-seconds"),
                       ("gap", "its gap-8 fine-tune at batch 640, steps timed to --gap-seconds")):
        if part in rows:
            save_result(f"gpu {part} ({rows['device']})", {**where, "group": "gpu", "command": f"{run} ({what})",
                                                           "train_minutes": rows[part]["minutes"],
                                                           "metrics": rows[part]})
    for key, m in rows.get("throughput", {}).items():
        save_result(f"{key} ({rows['device']})", {**where, "group": "throughput", "command": f"{run} (throughput)",
                                                  "train_minutes": 0.0, "metrics": m})


def finished(recipe, out_root):
    """Has recipe's run under out_root reached the --max-steps its checkpoint was trained to (a resume may change it)?
    A stopped or running one has a ckpt.pt too."""
    from plumbing.checkpoint import load_checkpoint
    path = os.path.join(out_root, recipe, "ckpt.pt")
    if not os.path.exists(path):
        return False
    ckpt = load_checkpoint(path)
    return ckpt["step"] >= ckpt["config"].train["max_steps"]


def export(src, dst):
    """A shippable checkpoint: config and EMA weights only (bench/export.py)."""
    from bench.export import export_checkpoint
    mib = export_checkpoint(src, dst)
    print(f"wrote {dst} ({mib:.1f} MiB)")


def main(args):
    if args.seed != 1 and (args.names != ["candidate-val"] or not args.clips):
        sys.exit("error: --seed: only `candidate-val --clips N` reads it; run that on its own")
    if args.export:
        return export(*args.export)
    if args.list:
        print("\n".join(list(RECIPES) + GROUPS))
        return
    for name in args.names:
        if name in CONFIDENCE_GROUPS:                   # the confidence's rows: bench/calibration.py
            confidence_rows(name, args.only, args.out, sweep)
        elif name in RECIPES:
            run_recipe(name, args.out, args.score_only, args.resume)
        elif name in ("compute-val", "compute-test"):
            compute(args.out, name.split("-")[1])
        elif name == "gpu-record":
            record_gpu(os.path.join(ROOT, "runs", "gpu", "gpu-rows.json"))
        elif name == "baselines-val":                     # the photo goal is chosen against MGC on val
            for setting in IMAGE_VAL_BASELINES:
                image_baselines(*setting, split="val")
        elif name == "baselines":
            for setting in IMAGE_BASELINES:
                image_baselines(*setting)
            for setting in VIDEO_BASELINES:
                video_baselines(*setting, int(TEST_PUZZLES))
        elif name == "sampler":
            sweep("sampler", SHIPPED["image-shapes-3x3"], SAMPLERS, args.out)
        elif name == "assign":
            for key, (ckpt, flags) in ASSIGNMENTS.items():
                sweep("assign", ckpt, {key: flags}, args.out)
        elif name == "ensemble":
            ensembles(ENSEMBLE_CKPTS + ONE_CALL_ENSEMBLES, args.out)
            ensemble_readme(args.out)
        elif name == "paper-table":
            for row, (ckpt, flags) in PAPER_TABLE.items():
                if args.only and ckpt not in args.only:
                    continue
                out = os.path.join(args.out, "paper-table-" + row.replace(" ", "-"))
                scored("paper-table", f"paper-table {row} test", [
                    "sample.py", "--ckpt", SHIPPED[ckpt], "--num-puzzles", PAPER_CLIPS, "--seed", "1", *flags,
                    "--out", out])
        elif name == "fresh-seed-baselines":        # the classic solver on the same fresh clips
            for dataset, data_dir, pieces, fpp, size in VIDEO_BASELINES:
                name = f"video-{'digits' if dataset == 'digits' else 'mmnist'}-{pieces}x{fpp}"
                if name in FRESH_SEED:
                    video_baselines(dataset, data_dir, pieces, fpp, size, FRESH_SEED[name], seed=FRESH)
        elif name == "fresh-seed":                  # the README's video figures: clips no choice has seen
            for ckpt, clips in FRESH_SEED.items():
                scored("fresh-seed", f"fresh-seed {ckpt} test seed {FRESH} ({clips} clips)", [
                    "sample.py", "--ckpt", SHIPPED[ckpt], "--num-puzzles", str(clips), "--seed", str(FRESH),
                    "--out", os.path.join(args.out, f"fresh-seed-{ckpt}")])
        elif name == "missing-curve":               # the paper's Figure 4(b): a picture of the 8 x 4 rows
            from bench.plots import missing_curve
            path = os.path.join(ROOT, "docs", "video-mmnist-8x4-missing.png")
            for k, m in missing_curve(load_results(), path):
                print(f"missing {k}: kendall {m['kendall']:.4f} (set {m['kendall_set']:.4f}), in order "
                      f"{m['exact']:.1%} (set {m['exact_set']:.1%})")
            print(f"wrote {path}")
        elif name == "reliability-plot":            # docs/reliability.png: the confidence rows on test
            from bench.plots import reliability_plot
            path = os.path.join(ROOT, "docs", "reliability.png")
            for ckpt, parts in reliability_plot(load_results(), [n for n, _ in CONFIDENCE], path):
                print(f"{ckpt}: test ECE piece {parts['piece'][1]:.3f}, puzzle {parts['puzzle'][1]:.3f}")
            print(f"wrote {path}")
        elif name == "ensemble-readme":             # only the README row of the ensemble sweep
            ensemble_readme(args.out)
        elif name == "one-call":                    # only the one-call rows of the sweeps above and the video rows
            one_call(args.out)
        elif name == "one-call-val":
            one_call_val(args.out)
        elif name == "estimator-val":
            sweep("estimator-val", SHIPPED["video-mmnist-10x2"], ESTIMATOR_VAL, args.out)
        elif name == "candidate-val":               # each finished candidate's ckpt.pt on val, before it may ship
            done = [r for r in CANDIDATES if finished(r, args.out) and (not args.only or r in args.only)]
            if not done:
                sys.exit(f"error: candidate-val found no finished run of {CANDIDATES} under {args.out}; train one with "
                         "`python -m bench RECIPE` (or continue it with --resume) first")
            chosen = {v: f for v, f in CANDIDATE_VAL.items() if v in (args.estimator or CANDIDATE_VAL)}
            more = f" ({args.clips} clips" + (f", seed {args.seed})" if args.seed != 1 else ")") if args.clips else ""
            for recipe in done:
                sweep("candidate-val", os.path.join(args.out, recipe, "ckpt.pt"),
                      {f"{recipe} {v}{more}": f for v, f in chosen.items()}, args.out, args.clips or TEST_PUZZLES,
                      args.seed)
                ship = max((s for s in SHIPPED if recipe.startswith(s)), key=len, default=None)
                if args.clips and ship:                 # beside the shipped model it would replace, on the same clips
                    sweep("candidate-val", SHIPPED[ship], {f"{ship} (shipped) {v}{more}": f for v, f in chosen.items()},
                          args.out, args.clips, args.seed)
        elif name == "transfer":
            sweep("transfer", "checkpoints/image-photos-3x3-gap.pt", TRANSFER, args.out)
        elif name == "lines":                       # the Python a reader faces, at the last commit
            from bench.lines import count
            commit, parts = count()
            save_result(f"lines: Python outside tests/ and bench/ at {commit}",
                        {"group": "lines", "train_minutes": 0.0, "metrics": parts,
                         "command": shown(["-m", "bench", "lines"])})
        elif name == "memory-estimate":
            from bench.throughput import memory_estimate
            for key, metrics in memory_estimate().items():
                save_result(key, {"group": "throughput", "train_minutes": 0.0, "metrics": metrics,
                                  "command": shown(["-m", "bench", "memory-estimate"])})
        elif name == "throughput":
            from bench.throughput import measure
            from plumbing.cli import resolve_device
            for key, metrics in measure(resolve_device(args.device)).items():
                save_result(key, {"group": "throughput", "train_minutes": 0.0, "metrics": metrics,
                                  "command": shown(["-m", "bench", "throughput", "--device", args.device])})
        elif name in ("loader", "loader-quickstart", "loader-mmnist", "pace-mmnist", "loader-imagenet",
                      "loader-prepared"):
            from bench.loader import imagenet_pace, measure, mmnist_pace, mmnist_workers, prepared_pace, quickstart_pace
            rows = {"loader": lambda: measure(PHOTOS), "loader-quickstart": quickstart_pace,
                    "loader-imagenet": lambda: imagenet_pace(PHOTOS, args.out),
                    "loader-prepared": lambda: prepared_pace(PHOTOS, args.out),
                    "loader-mmnist": lambda: mmnist_pace(MNIST),
                    "pace-mmnist": lambda: mmnist_workers(MNIST, args.out)}[name]()
            for key, metrics in rows.items():
                save_result(key, {"group": "loader", "train_minutes": 0.0, "metrics": metrics,
                                  "command": shown(["-m", "bench", name])})
        else:
            sys.exit(f"error: unknown benchmark {name!r}; see python -m bench --list")
    render()


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", help="recipes or groups to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the benchmark names")
    p.add_argument("--only", nargs="+", metavar="CKPT", choices=[*SHIPPED, *CANDIDATES], help="the confidence groups "
                   "and paper-table: only these shipped checkpoints (as in checkpoints/); candidate-val: these recipes")
    p.add_argument("--clips", type=positive, help="candidate-val: score on this many val clips (default 200), each "
                   "candidate beside the shipped model of its name")
    p.add_argument("--seed", type=positive, default=1, help="candidate-val with --clips: the val clips' seed (default "
                   "1; other seeds give other clips, rows of their own; seeds used so far: bench/README.md)")
    p.add_argument("--estimator", nargs="+", choices=CANDIDATE_VAL, help="candidate-val: only these estimators")
    p.add_argument("--export", nargs=2, metavar=("SRC", "DST"), help="write SRC's EMA weights as a shippable DST")
    p.add_argument("--out", default="runs/bench", help="folder for the runs' checkpoints and samples")
    p.add_argument("--score-only", action="store_true", help="recipes: score the checkpoint an earlier run left in "
                   "--out again (after an evaluation change) instead of training; the row keeps its training minutes")
    p.add_argument("--resume", action="store_true",
                   help="recipes: continue the run an earlier session left in --out (its ckpt.pt) to the recipe's "
                        "--max-steps; the row's training minutes are summed from its log.txt over every session")
    p.add_argument("--device", default="cpu", help="device of the throughput rows: cpu, cuda or cuda:N")
    main(p.parse_args())
