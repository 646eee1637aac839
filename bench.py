"""
Learning benchmark: train named recipes end to end on this machine, score them on fresh test puzzles, compare
with non-learned baselines, and write BENCHMARKS.md.

Every row records the exact command, the machine (CPU cores), wall minutes of training and the metrics on
test puzzles whose seeds are disjoint from training (test streams use their own split id). Results accumulate
in bench/results.json, so recipes can be run one at a time:

    python bench.py --list
    python bench.py image-3x3                 # train + score one recipe (minutes)
    python bench.py baselines sampler throughput
    python bench.py                           # only rewrite BENCHMARKS.md from bench/results.json
    python bench.py --export runs/bench/image-3x3/ckpt.pt checkpoints/image-shapes-3x3.pt
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from tqdm import tqdm

from puzzles import ImagePuzzles

ROOT = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(ROOT, "bench", "results.json")
TEST_PUZZLES = "200"

# name -> (training script, training flags, evaluations: list of extra sample.py flags)
IMAGE_3X3 = ["--grid", "3", "--patch-size", "16", "--batch-size", "64", "--lr", "2e-3"]
SHORT = ["--max-steps", "1500"]      # comparison rows: ~7 minutes each on 2 cores
PHOTOS = "../shared/data/photos"     # real photographs (train/ and test/), read in place
MNIST = "../shared/data/mnist"       # the MNIST IDX files, Moving MNIST is generated from them
PHOTO_3X3 = ["--dataset", "folder", "--data-dir", PHOTOS, "--grid", "3", "--piece-size", "24", "--patch-size", "24",
             "--batch-size", "64", "--lr", "2e-3", "--schedule", "cosine", "--eval-puzzles", "39"]
GAP_FT = [("1e-3" if f == "2e-3" else f) for f in PHOTO_3X3] + [
    "--init", "checkpoints/image-photos-3x3.pt", "--gap", "8", "--missing", "3", "--eval-every", "1000", "--max-steps",
    "4000"]
PHOTO_GPU = ["--dataset", "folder", "--data-dir", PHOTOS, "--grid", "3", "--piece-size", "64", "--patch-size", "16",
             "--model", "small", "--batch-size", "64", "--lr", "1e-3", "--schedule", "cosine", "--eval-puzzles", "39",
             "--max-steps", "6000", "--workers", "12"]
P12 = PHOTO_3X3[:PHOTO_3X3.index("--patch-size")] + ["--patch-size", "12"] + PHOTO_3X3[PHOTO_3X3.index("--patch-size") + 2:]
MISSING_0_3 = [["--missing", str(k)] for k in range(4)]   # score a model trained with missing pieces at 0..3
MMNIST = ["--dataset", "movingmnist", "--data-dir", MNIST, "--size", "32", "--lr", "1e-3", "--schedule", "cosine",
          "--eval-every", "500", "--eval-puzzles", "32"]
MMNIST_5X4 = MMNIST + ["--pieces", "5", "--frames-per-piece", "4"]
RECIPES = {
    # the shipped checkpoints' recipes
    "image-photos-3x3": ("train_image.py", PHOTO_3X3 + ["--max-steps", "24000"], [[], ["--dataset", "shapes"]]),
    "image-photos-3x3-gap": ("train_image.py", PHOTO_3X3 + ["--gap", "8", "--max-steps", "16000"], [[]]),
    # gap 8 fine-tuned from the gapless photo model above (its 31 minutes + these 4000 steps), lr halved
    "image-photos-3x3-gap-ft": ("train_image.py", GAP_FT, MISSING_0_3),
    # misses (bench/notes.md): training pieces at their cells' centres as at test time (gaps exactly 8 px); views
    # of at least 60% of a photo's side; grown to 6 blocks (the 2 new ones start as the identity, adaLN-Zero)
    "image-photos-3x3-gap-ft-nojitter": ("train_image.py", GAP_FT + ["--no-jitter"], MISSING_0_3),
    "image-photos-3x3-gap-ft-scale0.6": ("train_image.py", GAP_FT + ["--crop-scale", "0.6", "1.0"], MISSING_0_3),
    "image-photos-3x3-gap-ft-depth6": ("train_image.py", GAP_FT + ["--depth", "6"], MISSING_0_3),
    # 4 tokens per piece (12 px patches): a gapless start, then the gap fine-tune from it (40 minutes in all)
    "image-photos-3x3-p12": ("train_image.py", P12 + ["--eval-every", "2000", "--max-steps", "10000"], [[]]),
    "image-photos-3x3-p12-gap-ft": ("train_image.py", [("1e-3" if f == "2e-3" else f) for f in P12] + [
        "--init", "runs/bench/image-photos-3x3-p12/ckpt.pt", "--gap", "8", "--missing", "3", "--eval-every", "1000",
        "--max-steps", "4000"], MISSING_0_3),
    "image-photos-3x3-gap-missing": ("train_image.py",
                                     PHOTO_3X3 + ["--gap", "8", "--missing", "3", "--max-steps", "16000"], MISSING_0_3),
    "image-3x3": ("train_image.py", IMAGE_3X3 + ["--schedule", "cosine", "--max-steps", "5000"], [[]]),
    "video-mmnist-10x2": ("train_video.py", MMNIST + ["--pieces", "10", "--frames-per-piece", "2", "--curriculum", "3",
                                                      "2000", "--max-steps", "5000"], [[]]),
    # the paper's other Moving MNIST settings (curriculum: 3 pieces at first, growing to all by the given step)
    "video-mmnist-20x1": ("train_video.py", MMNIST + ["--pieces", "20", "--frames-per-piece", "1", "--curriculum", "3",
                                                      "6000", "--max-steps", "12000"], [[]]),
    "video-mmnist-20x1-lr5e-4": ("train_video.py", [("5e-4" if f == "1e-3" else f) for f in MMNIST] + [
        "--pieces", "20", "--frames-per-piece", "1", "--curriculum", "3", "6000", "--max-steps", "12000"], [[]]),
    "video-mmnist-5x4": ("train_video.py", MMNIST_5X4 + ["--curriculum", "3", "2000", "--max-steps", "10000"], [[]]),
    # the same with more puzzles per step (batch 32: as many positional codes per step as 10 x 2 at batch 16)
    "video-mmnist-5x4-batch32": ("train_video.py", MMNIST_5X4 + ["--curriculum", "3", "2000", "--batch-size", "32",
                                                                 "--max-steps", "8000"], [[]]),
    # batch 32 at half the learning rate, longer: the 5 x 4 recipe that orders every test clip (bench/notes.md)
    "video-mmnist-5x4-batch32-lr5e-4": ("train_video.py", [("5e-4" if f == "1e-3" else f) for f in MMNIST_5X4] + [
        "--curriculum", "3", "2000", "--batch-size", "32", "--max-steps", "12000"], [[]]),
    "video-mmnist-5x4-batch64": ("train_video.py", MMNIST_5X4 + ["--curriculum", "3", "1000", "--batch-size", "64",
                                                                 "--max-steps", "4000"], [[]]),
    "video-mmnist-10x2-missing": ("train_video.py", MMNIST + ["--pieces", "10", "--frames-per-piece", "2", "--missing",
                                                              "2", "--curriculum", "3", "2000", "--max-steps", "4000"],
                                  [["--missing", str(k)] for k in range(3)]),
    "video-5x4": ("train_video.py", ["--pieces", "5", "--frames-per-piece", "4", "--lr", "1e-3",
                                     "--schedule", "cosine", "--max-steps", "3200"], [[]]),
    # shorter runs that show the effect of one option each
    "image-2x2": ("train_image.py", ["--grid", "2", "--patch-size", "16", "--batch-size", "64", "--lr", "2e-3",
                                     "--max-steps", "800"], [[]]),
    "image-3x3-short": ("train_image.py", IMAGE_3X3 + SHORT, [[]]),
    "image-3x3-short-eps": ("train_image.py", IMAGE_3X3 + SHORT + ["--prediction", "eps"], [[]]),
    "image-3x3-short-anchor": ("train_image.py", IMAGE_3X3 + SHORT + ["--anchor"], [[]]),
    "image-3x3-short-gap": ("train_image.py", IMAGE_3X3 + SHORT + ["--gap", "4"], [[]]),
    "image-3x3-gap": ("train_image.py", IMAGE_3X3 + ["--schedule", "cosine", "--max-steps", "5000", "--gap", "4"],
                      [[]]),
    "image-3x3-short-missing": ("train_image.py", IMAGE_3X3 + SHORT + ["--missing", "3"], MISSING_0_3),
    "image-3x3-short-missing-wc1": ("train_image.py", IMAGE_3X3 + SHORT + ["--missing", "3", "--weight-content", "1"],
                                    MISSING_0_3),
    "video-10x2": ("train_video.py", ["--pieces", "10", "--frames-per-piece", "2", "--lr", "1e-3",
                                      "--schedule", "cosine", "--max-steps", "3200"], [[]]),
    "video-10x2-short": ("train_video.py", ["--pieces", "10", "--frames-per-piece", "2", "--max-steps", "1500"], [[]]),
    "video-5x4-missing": ("train_video.py", ["--pieces", "5", "--frames-per-piece", "4", "--missing", "2",
                                             "--max-steps", "1500"], [["--missing", str(k)] for k in range(3)]),
    # one GPU (run on a lent machine): the same recipes, larger and longer, data loading on 12 processes
    "image-3x3-gpu": ("train_image.py", ["--grid", "3", "--patch-size", "16", "--model", "small", "--batch-size",
                                         "64", "--lr", "1e-3", "--schedule", "cosine", "--max-steps", "6000",
                                         "--workers", "12"], [[]]),
    "video-5x4-gpu": ("train_video.py", ["--pieces", "5", "--frames-per-piece", "4", "--batch-size", "64", "--lr",
                                         "1e-3", "--schedule", "cosine", "--max-steps", "4000", "--workers", "12"],
                      [[]]),
    "image-3x3-missing-gpu": ("train_image.py", ["--grid", "3", "--patch-size", "16", "--model", "small",
                                                 "--batch-size", "64", "--lr", "1e-3", "--schedule", "cosine",
                                                 "--max-steps", "3500", "--missing", "3", "--workers", "12"],
                              MISSING_0_3),
    # issue 12 item 6, for a session with a device (not yet run): the paper's photo protocol, 64 px pieces of
    # 16 tokens, in 85 px cells for gaps (21 px, 25% of the cell), small DiT
    "image-photos-3x3-gpu": ("train_image.py", PHOTO_GPU, [[]]),
    "image-photos-3x3-gap-gpu": ("train_image.py", PHOTO_GPU + ["--gap", "21", "--missing", "3"], MISSING_0_3),
    "video-5x4-missing-gpu": ("train_video.py", ["--pieces", "5", "--frames-per-piece", "4", "--batch-size", "64",
                                                 "--lr", "1e-3", "--schedule", "cosine", "--max-steps", "2500",
                                                 "--missing", "2", "--workers", "12"],
                              [["--missing", str(k)] for k in range(3)]),
}


def load_results():
    if os.path.exists(RESULTS):
        with open(RESULTS) as f:
            return json.load(f)
    return {}


def machine():
    """What a row ran on: the GPU when one is visible (training scripts pick it by default), else the CPU."""
    import torch
    cpu = f"{os.cpu_count()} CPU cores"
    return f"1 {torch.cuda.get_device_name()} + {cpu}" if torch.cuda.is_available() else cpu


def save_result(key, row):
    results = load_results()
    row["machine"] = machine()
    row["date"] = time.strftime("%Y-%m-%d")
    results[key] = row
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)


def sh(cmd):
    print("$", " ".join(cmd), flush=True)
    subprocess.run([sys.executable] + cmd, cwd=ROOT, check=True)


def shown(cmd):
    """The command as a user would type it, with the thread setting it ran under."""
    threads = os.environ.get("OMP_NUM_THREADS")
    return (f"OMP_NUM_THREADS={threads} " if threads else "") + "python " + " ".join(cmd)


def run_recipe(name, out_root):
    script, flags, evals = RECIPES[name]
    out = os.path.join(out_root, name)
    cmd = [script] + flags + ["--out", out] + ([] if "--eval-every" in flags else ["--eval-every", "0"])
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
# Non-learned baselines, on the very test puzzles the recipes are scored on (test split, seed 1)
# ----------------------------------------------------------------------------

# (dataset, data dir, grid, piece px, gap px, missing pieces)
IMAGE_BASELINES = [("shapes", None, (2, 2), 16, 0, 0), ("shapes", None, (3, 3), 16, 0, 0),
                   ("shapes", None, (3, 3), 16, 4, 0)]
IMAGE_BASELINES += [("shapes", None, (3, 3), 24, 0, 0)] + [("shapes", None, (3, 3), 24, 8, k) for k in range(4)]
IMAGE_BASELINES += [("folder", PHOTOS, (3, 3), 24, gap, k) for gap, k in [(0, 0), (8, 0), (8, 1), (8, 2), (8, 3)]]
IMAGE_BASELINES += [("folder", PHOTOS, (3, 3), 64, gap, k) for gap, k in [(0, 0), (21, 0), (21, 1), (21, 2), (21, 3)]]
# (dataset, data dir, pieces, frames per piece, frame size px)
VIDEO_BASELINES = [("digits", None, 5, 4, 32), ("digits", None, 10, 2, 32)]
VIDEO_BASELINES += [("movingmnist", MNIST, p, f, 32) for p, f in [(5, 4), (10, 2), (20, 1)]]


def image_baselines(dataset, data_dir, grid, piece, gap, missing, num):
    """Random order, edge dissimilarity and MGC (exhaustive placement up to 3x3) on the same test puzzles."""
    from baselines import IMAGE_SOLVERS, all_arrangements, random_positions, solve_image
    from metrics import piece_accuracy, puzzle_accuracy
    n = grid[0] * grid[1]
    test = ImagePuzzles(dataset, "test", grid, piece, gap, missing, seed=1, data_dir=data_dir)
    num = min(num, len(test))
    perms = all_arrangements(n) if n <= 9 else None
    rng = np.random.default_rng(0)
    preds, true, given = {name: [] for name in ["random", *IMAGE_SOLVERS]}, [], []
    for i in tqdm(range(num), desc=f"baselines {dataset} {grid[0]}x{grid[1]}"):
        it = test[i]
        pieces = ((it["content"].numpy() + 1) / 2).transpose(0, 2, 3, 1)         # (N, P, P, C) in [0, 1]
        g = ~it["missing"].numpy()
        preds["random"].append(np.where(g, random_positions(n, rng), -1))
        for name in IMAGE_SOLVERS:
            preds[name].append(solve_image(pieces, grid, name, perms, g))
        true.append(it["order"].numpy())
        given.append(g)
    label = (f"{dataset} {grid[0]}x{grid[1]} {piece}px" + (f" gap {gap}" if gap else "") +
             (f" missing {missing}" if missing else ""))
    placement = "exhaustive" if perms is not None else "greedy"
    for name, pred in preds.items():
        save_result(f"baseline image {label}: {name}", {
            "group": "baselines", "command": f"python bench.py baselines ({name}, {placement})",
            "train_minutes": 0.0, "metrics": {"piece_acc": piece_accuracy(pred, true, given),
                                              "puzzle_acc": puzzle_accuracy(pred, true, given), "num_puzzles": num}})


def video_baselines(dataset, data_dir, pieces, fpp, size, num):
    """Random order and nearest-neighbour frame chaining on the same test clips."""
    from baselines import chain_video, random_positions
    from metrics import kendall_distance
    from puzzles import VideoPuzzles
    test = VideoPuzzles(dataset, "test", pieces, fpp, size, seed=1, data_dir=data_dir)
    rng = np.random.default_rng(0)
    preds, true = {"random": [], "nearest-neighbour chaining": []}, []
    for i in tqdm(range(num), desc=f"baselines {dataset} {pieces}x{fpp}"):
        it = test[i]
        preds["nearest-neighbour chaining"].append(chain_video(it["content"].numpy()))
        preds["random"].append(random_positions(pieces, rng, anchor_first=True))
        true.append(it["order"].numpy())
    for name, pred in preds.items():
        pred = np.stack(pred)
        save_result(f"baseline video {dataset} {pieces}x{fpp} {size}px: {name}", {
            "group": "baselines", "command": f"python bench.py baselines ({name})", "train_minutes": 0.0,
            "metrics": {"kendall": float(np.mean(kendall_distance(pred, np.stack(true)))),
                        "exact": float(np.mean((pred == np.stack(true)).all(1))), "num_puzzles": num}})


# ----------------------------------------------------------------------------
# Sampler comparison and throughput
# ----------------------------------------------------------------------------

def sweep(group, ckpt, variants, out_root):
    """Score one checkpoint with several sample.py settings on the same test puzzles (seed 1)."""
    for name, flags in variants.items():
        out = os.path.join(out_root, f"{group}-{name}")
        cmd = ["sample.py", "--ckpt", ckpt, "--num-puzzles", TEST_PUZZLES, "--seed", "1", *flags, "--out", out]
        sh(cmd)
        with open(os.path.join(out, "metrics.json")) as f:
            m = json.load(f)
        save_result(f"{group} {name}", {"group": group, "command": shown(cmd), "train_minutes": 0.0, "metrics": m})


SAMPLERS = {f"{s}-{n}": ["--sampler", s, "--steps", str(n)]
            for s, n in [("ddim", 10), ("ddim", 25), ("ddim", 50), ("ddim", 100), ("ddpm", 50), ("ddpm", 100),
                         ("ddpm", 1000)]}
# the same sampled codes (same seed and sampler), assigned to positions two ways
ASSIGNMENTS = {f"{kind} {a}": (ckpt, ["--sampler", "ddim", "--assign", a])
               for kind, ckpt in [("image", "checkpoints/image-shapes-3x3.pt"),
                                  ("video", "checkpoints/video-digits-5x4.pt")]
               for a in ("hungarian", "greedy")}

# several independent samples of the codes per puzzle, assigned on their mean distance (sample.py --samples K)
ENSEMBLE_CKPTS = [("image-photos-3x3", "checkpoints/image-photos-3x3.pt", (1, 4, 8)),
                  ("image-photos-3x3-gap", "checkpoints/image-photos-3x3-gap.pt", (1, 4, 8))]


# the shipped gap model (photos, 24 px pieces, 8 px gaps) on the built-in shapes cut the same way
TRANSFER = {f"image-photos-3x3-gap on shapes, missing {k}": ["--dataset", "shapes", "--sampler", "ddim", "--missing",
                                                              str(k)] for k in range(4)}


def ensembles(out_root):
    for kind, ckpt, counts in ENSEMBLE_CKPTS:
        sweep("ensemble", ckpt, {f"{kind} ddim-50 x{k}": ["--sampler", "ddim", "--samples", str(k), "--missing", "0"]
                                 for k in counts}, out_root)


def throughput(device):
    """
    Training steps/s of the tiny and base DiT on one device (3x3 puzzles, one batch), in fp32 and bf16 autocast,
    eager and torch.compile'd, side by side in one run; and DDIM-50 solved puzzles/s (fp32, eager).
    """
    import torch
    from dataclasses import replace

    from diffusion import GaussianDiffusion
    from dit import CONFIGS, DiT
    from jpdvt import puzzle_loss, solve
    from posenc import grid_table
    from puzzles import collate
    from training import autocast
    gpu = device.type == "cuda"

    def timed(fn):
        t = time.time()
        fn()
        if gpu:
            torch.cuda.synchronize()
        return time.time() - t

    for name, piece, batch in [("tiny", 16, 64), ("base", 64, 64 if gpu else 8)]:
        data = ImagePuzzles("shapes", "train", (3, 3), piece)
        b = collate([data[i] for i in range(batch)])
        b = {k: v.to(device) for k, v in b.items()}
        table, diffusion = grid_table(3, 3).to(device), GaussianDiffusion(1000, "x0")
        for precision, compiled in [("fp32", False), ("bf16", False), ("fp32", True), ("bf16", True)]:
            torch.manual_seed(0)
            model = DiT(replace(CONFIGS[name], piece_size=piece, patch_size=16)).to(device)
            net, opt = torch.compile(model) if compiled else model, torch.optim.AdamW(model.parameters())

            def train_step():
                with autocast(device, precision):
                    loss = puzzle_loss(net, diffusion, b, table, False, None)["loss"]
                opt.zero_grad()
                loss.backward()
                opt.step()
            times = [timed(train_step) for _ in range(11 if gpu or name == "tiny" else 3)]   # first: warm-up
            metrics = {"steps_per_s": 1 / float(np.median(times[1:])), "batch": batch, "piece_px": piece,
                       "params_M": sum(p.numel() for p in model.parameters()) / 1e6}
            if precision == "fp32" and not compiled:
                metrics["puzzles_per_s_ddim50"] = batch / timed(lambda: solve(model.eval(), diffusion, b, table,
                                                                              False, steps=50))
            variant = "" if precision == "fp32" and not compiled else \
                f" {precision}{' compile' if compiled else ''}"
            save_result(f"throughput {name}{variant}{f' ({device.type})' if gpu else ''}", {
                "group": "throughput", "command": shown(["bench.py", "throughput", "--device", device.type]),
                "train_minutes": 0.0, "metrics": metrics})


# ----------------------------------------------------------------------------
# BENCHMARKS.md
# ----------------------------------------------------------------------------

def fmt(m):
    keys = ["piece_acc", "puzzle_acc", "kendall", "exact", "kendall_set", "exact_set", "sec_per_puzzle", "steps_per_s",
            "puzzles_per_s_ddim50", "batch", "params_M"]
    return ", ".join(f"{k} {m[k]:.4g}" for k in keys if k in m)


def render():
    results = load_results()
    lines = ["# Benchmarks", "", "Written by `python bench.py` from `bench/results.json`. Test puzzles: fresh "
             "seeds (test split, `--seed 1`), disjoint from the training stream. Wall minutes include the "
             "end-of-training accuracy check. Machines are noisy: one run each.", ""]
    titles = {"recipes": "Recipes (train + score)", "baselines": "Non-learned baselines (same test puzzles)",
              "sampler": "Sampler: DDIM steps against DDPM-1000 (image-3x3 checkpoint)",
              "assign": "Assignment: Hungarian (default) against the paper's greedy rule, same sampled codes",
              "ensemble": "Ensembles: K samples of the codes per puzzle, assigned on their mean distance",
              "transfer": "The shipped photo gap model on built-in shapes (24 px pieces in 32 px cells)",
              "throughput": "Throughput (DiT, 3x3 puzzles, batch as listed)"}
    for group, title in titles.items():
        rows = {k: v for k, v in results.items() if v["group"] == group}
        if not rows:
            continue
        lines += [f"## {title}", "", "| row | metrics | train min | machine | command |",
                  "| --- | --- | --- | --- | --- |"]
        for k, v in rows.items():
            cmd = f"`{v['command']}`" + (f"<br>`{v['eval']}`" if v.get("eval") else "")
            lines.append(f"| {k} | {fmt(v['metrics'])} (n={v['metrics'].get('num_puzzles', '-')}) | "
                         f"{v['train_minutes']:.1f} | {v['machine']} | {cmd} |")
        lines.append("")
    notes = os.path.join(ROOT, "bench", "notes.md")
    if os.path.exists(notes):
        lines += [open(notes).read()]
    with open(os.path.join(ROOT, "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(lines))


def export(src, dst):
    """A shippable checkpoint: config and EMA weights only (model and optimizer left empty)."""
    import torch

    from training import save_checkpoint
    ck = torch.load(src, map_location="cpu", weights_only=True)
    save_checkpoint(dst, {"config": ck["config"], "model": {}, "ema": ck["ema"], "opt": {}, "step": ck["step"]})
    print(f"wrote {dst} ({os.path.getsize(dst) / 2 ** 20:.1f} MiB, step {ck['step']})")


def main(args):
    if args.export:
        return export(*args.export)
    if args.list:
        print("\n".join(list(RECIPES) + ["baselines", "sampler", "assign", "ensemble", "transfer", "throughput"]))
        return
    for name in args.names:
        if name in RECIPES:
            run_recipe(name, args.out)
        elif name == "baselines":
            for setting in IMAGE_BASELINES:
                image_baselines(*setting, int(TEST_PUZZLES))
            for setting in VIDEO_BASELINES:
                video_baselines(*setting, int(TEST_PUZZLES))
        elif name == "sampler":
            sweep("sampler", os.path.join(args.out, "image-3x3", "ckpt.pt"), SAMPLERS, args.out)
        elif name == "assign":
            for key, (ckpt, flags) in ASSIGNMENTS.items():
                sweep("assign", ckpt, {key: flags}, args.out)
        elif name == "ensemble":
            ensembles(args.out)
        elif name == "transfer":
            sweep("transfer", "checkpoints/image-photos-3x3-gap.pt", TRANSFER, args.out)
        elif name == "throughput":
            from training import resolve_device
            throughput(resolve_device(args.device))
        else:
            sys.exit(f"error: unknown benchmark {name!r}; see python bench.py --list")
    render()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", help="recipes or groups to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the benchmark names")
    p.add_argument("--export", nargs=2, metavar=("SRC", "DST"), help="write SRC's EMA weights as a shippable DST")
    p.add_argument("--out", default="runs/bench", help="folder for the runs' checkpoints and samples")
    p.add_argument("--device", default="cpu", help="device of the throughput rows: cpu, cuda or cuda:N")
    main(p.parse_args())
