"""
The lent-GPU session in one script (the compute lever): run once on the device, its rows and
exported checkpoints come back under --out.

    python -m bench.gpu --photos .photos --out $OUT --runs /tmp/runs     # on the device: every part, about 9 minutes
    python -m bench.gpu --smoke --out /tmp/gpu --runs /tmp/gpu-runs       # here, on CPU: toy sizes, about a minute

Parts, in order (each one's output goes to OUT/gpu.log, its row to OUT/gpu-rows.json):
1. imagenet: the design card's command, `python train_image.py --dataset imagenet --grid 3` with the paper's
   settings (base DiT, batch 256, lr 1e-4, 300 epochs) and the script's CUDA defaults (bf16 autocast, TF32, fused
   AdamW) on a generated folder in ImageNet's layout (train|val/<wnid>/*.JPEG, 320 training pictures: 375 steps),
   then sample.py on its checkpoint.
2. photos: the shipped photo recipe's flags (bench/recipes.py MIXED: the shapes mix, 24 px pieces, tiny DiT) at ten
   times its batch (640), for as many steps as fit --photo-seconds (a short run first times the loader), trained on
   the training photos only (the val split held out), exported as OUT/image-photos-3x3-gpu.pt.
3. gap: its gap-8 fine-tune (recipes.gap_ft: up to 3 missing, lr 1e-3) at batch 640 for --gap-seconds, exported as
   OUT/image-photos-3x3-gap-gpu.pt.
4. throughput: bench/throughput.py rows of the base DiT at batch 256 and 64 (fp32, bf16, bf16 + compile). (The paper
   U-Net's row did not finish in 150 s on an H200 and is left out: `python -m bench throughput --device cuda`.)
Every run starts in an empty folder under --runs. The checkpoints are scored here, on the CPU: on the val photos
(python -m bench compute-val), then the test photos once; the rows go to bench/results.json (python -m bench
gpu-record, from a fetched gpu-rows.json).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
from PIL import Image

from bench.export import export_checkpoint
from bench.recipes import MIXED, PHOTO_3X3, PHOTOS, gap_ft, with_flag
from sources.files import HELD_OUT, hashed_split
from sources.synthetic import shapes_image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = "640"                                        # ten times the photo recipe's 64


def run(out, name, cmd, timeout):
    """Run `python cmd` from the repository root, its output appended to OUT/gpu.log; (ok, seconds)."""
    t = time.time()
    with open(os.path.join(out, "gpu.log"), "a") as log:
        log.write(f"\n$ python {' '.join(cmd)}\n")
        log.flush()
        try:
            ok = subprocess.run([sys.executable, *cmd], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                timeout=timeout).returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
    print(f"{name}: {'ok' if ok else 'FAILED'} in {time.time() - t:.0f} s", flush=True)
    return ok, time.time() - t


def without(flags, name):
    """A copy of the flag list `flags` without `name` and its value."""
    i = flags.index(name)
    return flags[:i] + flags[i + 2:]


def log_rows(path):
    """The (loss, steps/s) of every 'step N loss L ... steps/s R' line of a training log."""
    text = open(path).read() if os.path.isfile(path) else ""
    return [(float(a), float(b)) for a, b in re.findall(r"^step \d+ loss ([\d.]+) .* steps/s ([\d.]+)", text, re.M)]


def fresh(folder):
    """`folder`, emptied: a run never reads a log or checkpoint that an earlier run left there."""
    shutil.rmtree(folder, ignore_errors=True)
    return folder


def log_summary(path):
    """The first and last loss and the median steps/s (first interval left out: start-up) of a training log."""
    rows = log_rows(path)
    return {"loss_first": rows[0][0] if rows else None, "loss_last": rows[-1][0] if rows else None,
            "steps_per_s": float(np.median([r for _, r in rows[1:]])) if len(rows) > 1 else None}


def train_timed(out, runs, name, flags, seconds, smoke):
    """Time the loader and model with a short run of `flags`, then train for about `seconds`; (ckpt, row)."""
    probe = fresh(os.path.join(runs, f"{name}-probe"))
    short = ["--max-steps", "4" if smoke else "150", "--log-every", "2" if smoke else "50", "--eval-every", "0"]
    run(out, f"{name} probe", ["train_image.py", *flags, *short, "--out", probe], 600)
    rates = log_rows(os.path.join(probe, "log.txt"))
    rate = rates[-1][1] if rates else 1.0
    steps = max(4, int(rate * seconds))
    run_dir = fresh(os.path.join(runs, name))
    ok, took = run(out, name, ["train_image.py", *flags, "--max-steps", str(steps), "--eval-every",
                               str(max(steps // 4, 1)), "--out", run_dir], seconds * 1.5 + 60)
    ckpt = os.path.join(run_dir, "ckpt.pt")
    row = {"ok": ok, "steps": steps, "minutes": took / 60, "probe_steps_per_s": rate,
           **log_summary(os.path.join(run_dir, "log.txt")),
           "puzzles": steps * int(flags[flags.index("--batch-size") + 1])}
    return (ckpt if ok and os.path.isfile(ckpt) else None), row


def imagenet_folder(root, train, val, held_out):
    """A folder in ImageNet's layout (train|val/<wnid>/*.JPEG) of built-in pictures, 8 classes: `train` training
    pictures and `held_out` more that fall in the hashed band of training's held-out check, `val` test pictures."""
    rng = np.random.default_rng(0)
    names, kept, i = [], 0, 0
    while len(names) - kept < train or kept < held_out:       # by hash band, as sources.files.split_files reads them
        name = os.path.join(f"n{i % 8:08d}", f"train_{i:05d}.JPEG")
        band = hashed_split(os.path.join(root, "train", name), os.path.join(root, "train"), HELD_OUT["imagenet"])
        if band == "val" and kept < held_out or band != "val" and len(names) - kept < train:
            names.append(os.path.join("train", name))
            kept += band == "val"
        i += 1
    names += [os.path.join("val", f"n{i % 8:08d}", f"val_{i:05d}.JPEG") for i in range(val)]
    for name in names:
        os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
        img = (shapes_image(rng, 160, 200) * 255).round().astype(np.uint8)
        Image.fromarray(img).save(os.path.join(root, name), quality=90)
    return root


def imagenet(out, runs, smoke):
    data = imagenet_folder(fresh(os.path.join(runs, "imagenet")), 24 if smoke else 320, 8 if smoke else 40,
                           2 if smoke else 16)
    run_dir = fresh(os.path.join(runs, "imagenet-3x3"))
    flags = ["--model", "tiny", "--batch-size", "8", "--max-steps", "4", "--log-every", "2"] if smoke else \
        ["--workers", "14", "--log-every", "25"]
    ok, took = run(out, "imagenet train", ["train_image.py", "--dataset", "imagenet", "--grid", "3", "--data-dir", data,
                                           *flags, "--out", run_dir], 300)
    row = {"ok": ok, "minutes": took / 60, **log_summary(os.path.join(run_dir, "log.txt"))}
    ok, _ = run(out, "imagenet sample", ["sample.py", "--ckpt", os.path.join(run_dir, "ckpt.pt"), "--num-puzzles",
                                         "4" if smoke else "64", "--out", os.path.join(run_dir, "samples")], 300)
    metrics = os.path.join(run_dir, "samples", "metrics.json")
    row["sample_ok"] = ok
    row["sample"] = json.load(open(metrics)) if os.path.isfile(metrics) else None
    return row


def photos(out, runs, data, seconds, gap_seconds, smoke):
    batch, workers = ("16", "1") if smoke else (BATCH, "15")
    flags = with_flag(with_flag(MIXED, "--data-dir", data), "--batch-size", batch) + ["--workers", workers]
    ckpt, row = train_timed(out, runs, "image-photos-3x3-gpu", flags, seconds, smoke)
    rows = {"photos": row}
    if ckpt:
        row["export_mib"] = export_checkpoint(ckpt, os.path.join(out, "image-photos-3x3-gpu.pt"))
        gap = with_flag(with_flag(gap_ft(PHOTO_3X3, ckpt), "--data-dir", data), "--batch-size", batch)
        gap = without(without(gap, "--max-steps"), "--eval-every") + ["--workers", workers]
        gap_ckpt, rows["gap"] = train_timed(out, runs, "image-photos-3x3-gap-gpu", gap, gap_seconds, smoke)
        if gap_ckpt:
            rows["gap"]["export_mib"] = export_checkpoint(gap_ckpt, os.path.join(out, "image-photos-3x3-gap-gpu.pt"))
    return rows


def throughput(out, rows, smoke):
    """bench/throughput.py rows, one setting at a time, each saved as soon as it is measured."""
    import torch

    from bench.throughput import measure
    device = torch.device("cpu" if smoke else "cuda")
    rows["throughput"] = {}
    for name in ["dit-tiny b64"] if smoke else ["dit-base b256", "dit-base b64"]:
        rows["throughput"].update(measure(device, steps=2 if smoke else 10, only=[name]))
        save(out, rows)


def save(out, rows):
    with open(os.path.join(out, "gpu-rows.json"), "w") as f:
        json.dump(rows, f, indent=1)


def main(args):
    import torch
    os.makedirs(args.out, exist_ok=True)
    rows = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu", "torch": torch.__version__,
            "command": "python -m bench.gpu " + " ".join(sys.argv[1:])}
    seconds = [s or (toy if args.smoke else full) for s, toy, full in ((args.photo_seconds, 3, 200),
                                                                      (args.gap_seconds, 2, 60))]
    print(rows, flush=True)
    for part in args.parts.split(","):
        t = time.time()
        if part == "imagenet":
            rows["imagenet"] = imagenet(args.out, args.runs, args.smoke)
        elif part == "photos":
            rows.update(photos(args.out, args.runs, args.photos, *seconds, args.smoke))
        elif part == "throughput":
            throughput(args.out, rows, args.smoke)
        save(args.out, rows)
        print(f"part {part}: {time.time() - t:.0f} s", flush=True)
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for gpu.log, gpu-rows.json and the exported checkpoints")
    p.add_argument("--runs", default="runs/gpu-runs", help="folder for the training runs (each emptied first)")
    p.add_argument("--photos", default=PHOTOS, help="the photo folder (train/ and test/; on the device a copy)")
    p.add_argument("--parts", default="imagenet,photos,throughput", help="comma-separated parts to run, in order")
    p.add_argument("--photo-seconds", type=float, help="training time of the gapless photo model (200; smoke: 3)")
    p.add_argument("--gap-seconds", type=float, help="training time of its gap fine-tune (60; smoke: 2)")
    p.add_argument("--smoke", action="store_true", help="toy sizes on the CPU: check the script's path here")
    main(p.parse_args())
