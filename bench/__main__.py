"""
The benchmark: train the recipes of bench/recipes.py and score them on fresh held-out puzzles, score the shipped
checkpoints and the classic solvers on the README's puzzles, and rewrite bench/BENCHMARKS.md (bench/report.py) from
the rows in bench/results.json (each with its command, machine, date, training minutes and metrics). From the
repository root: `python -m bench --list`, `python -m bench NAME ...` (a recipe or a group), `python -m bench` (only
the log), `--score-only RECIPE` (score an earlier run again), `--resume RECIPE` (continue it), `--export SRC DST`.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

from bench import recipes as R
from bench.baselines import image_baselines, masked_video_baselines, tree_check, video_baselines
from bench.report import RESULTS, ROOT, load_results, render, save_result, with_threads
from plumbing.cli import positive

# what `python -m bench NAME` runs besides recipes
GROUPS = ["baselines", "baselines-val", "fresh-seed", "fresh-seed-baselines", "masked-clips-baselines", "ensemble",
          "assign", "one-call-val", "candidate-val", "throughput", "memory-estimate", "gpu-record", "loader-imagenet",
          "loader-prepared", "tree-check", "superres"]
# the flags a resumed run may take (every other setting comes from its checkpoint)
RESUMABLE = ("--max-steps", "--eval-every", "--ckpt-every", "--workers", "--out")   # flags --resume accepts


def sh(cmd):
    print("$", " ".join(cmd), flush=True)
    subprocess.run([sys.executable] + cmd, cwd=ROOT, check=True)


def shown(cmd):
    """The command as a user would type it, with the thread setting it ran under."""
    return with_threads("python " + " ".join(cmd))


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
    (steps since the last line / its steps per second; a "resuming at step S" line starts the count at S)."""
    minutes, last = 0.0, 0
    with open(log) as f:
        for line in f:
            resumed = re.match(r"resuming\b.* at step (\d+)", line)
            window = re.match(r"step (\d+) .* steps/s ([\d.]+)", line)
            if resumed:
                last = int(resumed.group(1))
            elif window and float(window.group(2)) > 0:
                minutes += (int(window.group(1)) - last) / float(window.group(2)) / 60
                last = int(window.group(1))
    return minutes


def run_recipe(name, out_root, score_only=False, resume=False):
    """Train recipe `name` into out_root/name (or, with score_only, reuse its ckpt.pt; with resume, continue it) and
    score its evaluations."""
    script, flags, evals = R.RECIPES[name]
    out = os.path.join(out_root, name)
    cmd = [script] + flags + ["--out", out] + ([] if "--eval-every" in flags else ["--eval-every", "0"])
    if (score_only or resume) and not os.path.exists(os.path.join(out, "ckpt.pt")):
        sys.exit(f"error: --score-only and --resume need {os.path.join(out, 'ckpt.pt')}; run `python -m bench {name}` "
                 "first")
    if score_only:
        minutes = recorded_minutes(name, cmd)
    elif resume:                                     # a run longer than a session: its log counts every session
        kept = [t for i, t in enumerate(cmd) if i == 0 or t in RESUMABLE or cmd[i - 1] in RESUMABLE]
        sh(kept + ["--resume", os.path.join(out, "ckpt.pt")])
        minutes = logged_minutes(os.path.join(out, "log.txt"))
    else:
        t = time.time()
        sh(cmd)
        minutes = (time.time() - t) / 60
    for extra in evals:
        scmd = ["sample.py", "--ckpt", os.path.join(out, "ckpt.pt"), "--num-puzzles", R.TEST_PUZZLES, "--seed", "1",
                "--sampler", "ddim", "--out", os.path.join(out, "eval" + "".join(extra).replace("--", "-"))] + extra
        scored("recipes", f"{name}{' '.join(extra)}", scmd, command=shown(cmd), eval=shown(scmd), train_minutes=minutes)


def scored(group, key, cmd, **row):
    """Run the sample.py command `cmd` (with --out) and record its metrics as row `key` of `group` (`row`: the row's
    command and training minutes where they are not `cmd` and 0)."""
    sh(cmd)
    with open(os.path.join(cmd[cmd.index("--out") + 1], "metrics.json")) as f:
        m = json.load(f)
    save_result(key, {"group": group, "command": shown(cmd), "train_minutes": 0.0, "metrics": m, **row})


def sweep(group, ckpt, variants, out_root, puzzles=R.TEST_PUZZLES, seed=1):
    """Score one checkpoint with several sample.py settings on the same puzzles (of `seed`; test unless --split)."""
    for name, flags in variants.items():
        out = os.path.join(out_root, re.sub(r"[^\w.-]+", "-", f"{group}-{name}").strip("-"))   # no spaces, quotes
        scored(group, f"{group} {name}", ["sample.py", "--ckpt", ckpt, "--num-puzzles", str(puzzles), "--seed",
                                          str(seed), *flags, "--out", out])


def candidate_val(args):
    """Each finished candidate's ckpt.pt on val, before it may ship; with --clips, beside the shipped model of its
    name on the same clips."""
    done = [r for r in R.CANDIDATES if finished(r, args.out) and (not args.only or r in args.only)]
    if not done:
        sys.exit(f"error: candidate-val found no finished run of {R.CANDIDATES} under {args.out}; train one with "
                 "`python -m bench RECIPE` (or continue it with --resume) first")
    chosen = {v: f for v, f in R.CANDIDATE_VAL.items() if v in (args.estimator or R.CANDIDATE_VAL)}
    more = f" ({args.clips} clips" + (f", seed {args.seed})" if args.seed != 1 else ")") if args.clips else ""
    for recipe in done:
        sweep("candidate-val", os.path.join(args.out, recipe, "ckpt.pt"), {f"{recipe} {v}{more}": f
                                                                          for v, f in chosen.items()},
              args.out, args.clips or R.TEST_PUZZLES, args.seed)
        ship = max((s for s in R.SHIPPED if recipe.startswith(s)), key=len, default=None)
        if args.clips and ship:
            sweep("candidate-val", R.SHIPPED[ship], {f"{ship} (shipped) {v}{more}": f for v, f in chosen.items()},
                  args.out, args.clips, args.seed)


def finished(recipe, out_root):
    """Has recipe's run under out_root reached the --max-steps its checkpoint was trained to (a resume may change it)?
    A stopped or running one has a ckpt.pt too."""
    from config import load_checkpoint
    path = os.path.join(out_root, recipe, "ckpt.pt")
    if not os.path.exists(path):
        return False
    ckpt = load_checkpoint(path)
    return ckpt["step"] >= ckpt["config"].train.max_steps


def record_gpu(path):
    """The rows of bench/gpu.py's gpu-rows.json (fetched from a lent GPU into `path`), marked with the device."""
    with open(path) as f:
        rows = json.load(f)
    where = {"machine": f"1 {rows['device']} + 16 CPU cores (torch {rows['torch']})"}
    for key, m in rows["throughput"].items():
        save_result(f"{key} ({rows['device']})", {**where, "group": "throughput", "command": rows["command"],
                                                  "train_minutes": 0.0, "metrics": m})


def measured(group, name, rows):
    for key, metrics in rows.items():
        save_result(key, {"group": group, "train_minutes": 0.0, "metrics": metrics,
                          "command": shown(["-m", "bench", *name.split()])})


def main(args):
    if args.seed != 1 and (args.names != ["candidate-val"] or not args.clips):
        sys.exit("error: --seed: only `candidate-val --clips N` reads it; run that on its own")
    if args.export:
        from bench.export import export_checkpoint
        print(f"wrote {args.export[1]} ({export_checkpoint(*args.export):.1f} MiB)")
        return
    if args.list:
        print("\n".join(list(R.RECIPES) + GROUPS))
        return
    for name in args.names:
        if name in R.RECIPES:
            run_recipe(name, args.out, args.score_only, args.resume)
        elif name in ("baselines", "baselines-val"):
            for setting in R.IMAGE_BASELINES if name == "baselines" else R.IMAGE_VAL_BASELINES:
                image_baselines(*setting, split="test" if name == "baselines" else "val")
        elif name == "fresh-seed":                  # the README's video figures: clips no choice has seen
            for ckpt, clips in R.FRESH_SEED.items():
                scored("fresh-seed", f"fresh-seed {ckpt} test seed {R.FRESH} ({clips} clips)", [
                    "sample.py", "--ckpt", R.SHIPPED[ckpt], "--num-puzzles", str(clips), "--seed", str(R.FRESH),
                    "--out", os.path.join(args.out, f"fresh-seed-{ckpt}")])
        elif name == "tree-check":                  # tree against exhaustive placement, MGC, photos 3x3 (test)
            tree_check("folder", R.PHOTOS, (3, 3), 24, 0, 0, R.PHOTO_PASSES)
        elif name == "superres":                    # the generated frames' PSNR, on test clips of a fresh seed
            sh(["-m", "bench.superres", "--ckpt", R.SHIPPED["video-mmnist-7x4-superres"], "--split", "test",
                "--seed", str(R.SUPERRES_SEED), "--clips", "100", "--data-dir", R.MNIST])
        elif name == "masked-clips-baselines":      # frame chaining on the masked model's test clips
            for k in range(3):
                masked_video_baselines(*R.MASKED_CLIPS, seed=R.MASKED_SEED, missing=k)
        elif name == "fresh-seed-baselines":        # frame chaining on the same clips
            for ckpt, clips in R.FRESH_SEED.items():
                video_baselines(*R.FRESH_CLIPS[ckpt], clips, seed=R.FRESH)
        elif name == "ensemble":
            sweep("ensemble", R.SHIPPED["image-photos-3x3-gap"], R.ENSEMBLE, args.out)
        elif name == "assign":
            sweep("assign", R.SHIPPED["image-shapes-3x3"], R.ASSIGN, args.out)
        elif name == "one-call-val":                # the sampler chosen on val
            for ckpt, flags in R.ONE_CALL_VAL:
                sweep("one-call val", R.SHIPPED[ckpt], {f"{ckpt} {s}": ["--split", "val", *flags, *sflags]
                                                      for s, sflags in R.VAL_SAMPLERS.items()}, args.out)
        elif name == "candidate-val":
            candidate_val(args)
        elif name == "gpu-record":
            record_gpu(os.path.join(ROOT, "runs", "gpu", "gpu-rows.json"))
        elif name == "memory-estimate":
            from bench.throughput import memory_estimate
            measured("throughput", name, memory_estimate())
        elif name == "throughput":
            from bench.throughput import measure
            from plumbing.cli import resolve_device
            measured("throughput", f"throughput --device {args.device}", measure(resolve_device(args.device)))
        elif name in ("loader-imagenet", "loader-prepared"):
            from bench.loader import imagenet_pace
            measured("loader", name, imagenet_pace(R.PHOTOS, args.out, prepared=name == "loader-prepared"))
        else:
            sys.exit(f"error: unknown benchmark {name!r}; see python -m bench --list")
    render()


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", help="recipes or groups to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the benchmark names")
    p.add_argument("--only", nargs="+", metavar="RECIPE", choices=R.CANDIDATES, help="candidate-val: these only")
    p.add_argument("--clips", type=positive, help="candidate-val: score on this many val clips (default 200), each "
                   "candidate beside the shipped model of its name")
    p.add_argument("--seed", type=positive, default=1, help="candidate-val with --clips: the val clips' seed (default "
                   "1; other seeds give other clips, rows of their own)")
    p.add_argument("--estimator", nargs="+", choices=R.CANDIDATE_VAL, help="candidate-val: only these estimators")
    p.add_argument("--export", nargs=2, metavar=("SRC", "DST"), help="write SRC's EMA weights as a shippable DST")
    p.add_argument("--out", default="runs/bench", help="folder for the runs' checkpoints and samples")
    p.add_argument("--score-only", action="store_true", help="recipes: score the checkpoint an earlier run left in "
                   "--out again (after an evaluation change) instead of training; the row keeps its training minutes")
    p.add_argument("--resume", action="store_true",
                   help="recipes: continue the run an earlier session left in --out (its ckpt.pt) to the recipe's "
                        "--max-steps; the row's training minutes are summed from its log.txt over every session")
    p.add_argument("--device", default="cpu", help="device of the throughput rows: cpu, cuda or cuda:N")
    main(p.parse_args())
