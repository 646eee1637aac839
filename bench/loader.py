"""
Data-loading throughput of the ImageNet protocol (decode a JPEG, resize it to cover the puzzle, random crop and flip,
cut 3x3 pieces of 64 px) on a photo folder: training images per second with 0 (in the main process), 1 and N
DataLoader workers; and the decode alone with and without Pillow's reduced-scale JPEG decoding
(sources.files.fit_image).

    python -m bench loader                         # ../shared/data/photos, workers 0, 1 and all cores
    OMP_NUM_THREADS=1 python -m bench loader-quickstart   # the Quickstart's pace: its data worker against its model
    python -m bench loader-mmnist                  # Moving MNIST 10 x 2 at 32 and 64 px: clips against the U-Net step
    python -m bench pace-mmnist                    # its training loop with the data in a worker or in the main process

The Quickstart's pace: one process making batches of 64 built-in 3x3 puzzles (16 px pieces), one picture per puzzle
against one training step of its tiny DiT on one thread (puzzle_loss, backward, AdamW).
"""
import os
import re
import time
from dataclasses import replace

import numpy as np
import torch
from PIL import Image

import jpdvt
from bench.throughput import timed, train_step_of
from dit import CONFIGS
from puzzles import ImageConfig, ImagePuzzles, VideoConfig, VideoPuzzles, collate
from sources.files import fit_image
from unet3d import CONFIGS as UNET_CONFIGS


def images_per_second(puzzle, workers, images, batch_size=32):
    """Training puzzles made per second through a DataLoader with `workers` processes (first batch excluded)."""
    data = ImagePuzzles(puzzle, "train", seed=0)
    sampler = torch.utils.data.BatchSampler(range(images + batch_size), batch_size, drop_last=True)
    loader = iter(torch.utils.data.DataLoader(data, batch_sampler=sampler, num_workers=workers))
    next(loader)                                                   # start-up: process spawn, first files
    t = time.time()
    n = sum(len(batch["true_pos"]) for batch in loader)
    return n / (time.time() - t)


def decodes_per_second(files, side, draft):
    """fit_image of each file to side x side in one process; draft=False decodes every JPEG in full first."""
    rng = np.random.default_rng(0)
    t = time.time()
    for path in files:
        with Image.open(path) as im:
            if not draft:
                im.load()                                          # a loaded image is never draft-decoded
            fit_image(im, side, side, rng, hflip=True)
    return len(files) / (time.time() - t)


def measure(data_dir, images=256):
    """Rows {name: metrics} for the loader with 0, 1 and os.cpu_count() workers and the decode with/without draft."""
    puzzle = ImageConfig(dataset="imagenet", data_dir=data_dir, grid=(3, 3), piece_size=64)
    rows = {}
    for workers in sorted({0, 1, os.cpu_count()}):
        rows[f"loader imagenet protocol 3x3 64px, {workers} workers"] = {
            "images_per_s": images_per_second(puzzle, workers, images), "workers": workers}
    files = ImagePuzzles(puzzle, "train").files[:images]
    for draft in (True, False):
        rows[f"decode + fit 192px, 1 process, {'draft' if draft else 'full JPEG decode'}"] = {
            "images_per_s": decodes_per_second(files, 192, draft), "workers": 0}
    return rows


def imagenet_sized(photos, dst, count=256, side=500):
    """An ImageNet-layout folder (train/<class>/*.JPEG, val/<class>/*.JPEG) of `count` training JPEGs the size of a
    typical ImageNet picture (longer side `side`, quality 90, 4:3 photos about 500 x 375) made from the photos."""
    files = sorted(os.path.join(photos, "train", f) for f in os.listdir(os.path.join(photos, "train")))
    for split, n in (("train", count), ("val", 8)):
        os.makedirs(os.path.join(dst, split, "n00000000"), exist_ok=True)
        for i in range(n):
            with Image.open(files[i % len(files)]) as im:
                im = im.convert("RGB")
                k = side / max(im.size)
                im = im.resize((round(im.width * k), round(im.height * k)), Image.BICUBIC)
                if i >= len(files):
                    im = im.transpose(Image.FLIP_LEFT_RIGHT)           # a second pass: other pixels, same size
                im.save(os.path.join(dst, split, "n00000000", f"{i:05d}.JPEG"), quality=90)
    return dst


def imagenet_pace(photos, tmp, images=512):
    """Rows: training pictures per second of the paper's ImageNet protocol (255 px, 3x3 cells of 85 px, 64 px pieces
    cropped at random inside them, flips) on ImageNet-sized JPEGs, in the main process and in one worker: the
    pictures one CPU core makes a second, and so how many cores feed a GPU."""
    folder = imagenet_sized(photos, os.path.join(tmp, "imagenet-sized"))
    puzzle = ImageConfig(dataset="imagenet", data_dir=folder, grid=(3, 3), piece_size=64, gap=21)
    rows = {}
    for workers in (0, 1):
        rate = images_per_second(puzzle, workers, images)
        rows[f"loader imagenet-sized 500px JPEG, paper protocol 3x3 64px gap 21, {workers} workers"] = {
            "images_per_s": rate, "workers": workers, "cores_for_4500_per_s": 4500 / rate}
    return rows


def prepared_pace(photos, tmp, images=512):
    """Rows: training pictures per second of the paper's ImageNet protocol in one worker, on ImageNet-sized JPEGs
    (about 500 x 375) as they come and after `python -m sources.prepare` (shorter side 255 px), and the cores that
    feed one H200 at its bf16 pace (about 2,950 pictures a second: bench/README.md)."""
    from sources.prepare import get_parser, main
    raw = imagenet_sized(photos, os.path.join(tmp, "imagenet-sized"))
    prepared = os.path.join(tmp, "imagenet-sized-255")
    main(get_parser().parse_args(["--data-dir", raw, "--out", prepared, "--workers", "1"]))
    rows = {}
    for name, folder in (("raw 500px JPEG", raw), ("prepared 255px JPEG", prepared)):
        puzzle = ImageConfig(dataset="imagenet", data_dir=folder, grid=(3, 3), piece_size=64, gap=21)
        rate = images_per_second(puzzle, 1, images)
        rows[f"loader imagenet-sized {name}, paper protocol 3x3 64px gap 21, 1 worker"] = {
            "images_per_s": rate, "workers": 1, "cores_for_2950_per_s": 2950 / rate}
    return rows


def quickstart_pace(batches=10, steps=20):
    """Rows: ms per batch of 64 built-in training puzzles in one process (one picture each), and ms per
    training step of the tiny DiT on such a batch (loss, backward, AdamW; no EMA update; median of `steps`, after 5
    warm-up steps)."""
    data = ImagePuzzles(ImageConfig(), "train", seed=0)
    t = time.time()
    for i in range(64, 64 * (batches + 1)):
        data[i]
    rows = {"loader quickstart built-in 3x3 16px, 1 process, one picture each": {
        "ms_per_batch64": (time.time() - t) / batches * 1000, "workers": 0}}
    cpu = torch.device("cpu")
    train_step, _ = train_step_of(jpdvt.kind_of(ImageConfig()), replace(CONFIGS["tiny"], piece_size=16, patch_size=16),
                                  collate([data[i] for i in range(64)]), cpu)
    times = [timed(train_step, cpu) for _ in range(steps + 5)]
    threads = torch.get_num_threads()
    rows[f"model step tiny DiT, batch 64, {threads} thread{'s' if threads > 1 else ''}"] = {
        "ms_per_step": float(np.median(times[5:])) * 1000, "threads": threads}
    return rows


def mmnist_pace(data_dir, batches=4, steps=10):
    """Rows: ms per batch of 32 Moving MNIST training puzzles of 10 pieces x 2 frames (all pieces) in one process, and
    ms per training step of the tiny U-Net on such a batch (median of `steps` after 3 warm-up steps), at 32 and 64 px
    (how the loader and the frame size set the pace of the 10 x 2 recipes)."""
    rows, cpu = {}, torch.device("cpu")
    for size in (32, 64):
        puzzle = VideoConfig(dataset="movingmnist", data_dir=data_dir, pieces=10, frames_per_piece=2, size=size)
        data = VideoPuzzles(puzzle, "train", seed=0)
        data[32 * batches]                                         # start-up: reading the MNIST files
        t = time.time()
        items = [data[i] for i in range(32 * batches)]
        rows[f"loader movingmnist 10x2 {size}px, 1 process"] = {
            "ms_per_batch32": (time.time() - t) / batches * 1000, "workers": 0}
        train_step, _ = train_step_of(jpdvt.kind_of(puzzle), replace(UNET_CONFIGS["tiny"], frames_per_piece=2),
                                      collate(items[:32]), cpu)
        times = [timed(train_step, cpu) for _ in range(steps + 3)]
        threads = torch.get_num_threads()
        rows[f"model step tiny U-Net 10x2 {size}px, batch 32, {threads} thread{'s' if threads > 1 else ''}"] = {
            "ms_per_step": float(np.median(times[3:])) * 1000, "threads": threads}
    return rows


def mmnist_workers(data_dir, out_root, steps=100):
    """Rows: a 10 x 2 training loop (train_video.py, batch 32, lr 5e-4, all 10 pieces from the start) for `steps`
    steps with its batches made by one data worker beside one compute thread (--workers 1, the default) and in the
    main process between steps on every core (--workers 0): the same batches, so the same losses. Steps per second of
    the last log line (the last 50 steps)."""
    import shutil
    import subprocess
    import sys
    rows = {}
    for workers in (1, 0):
        out = os.path.join(out_root, f"pace-mmnist-workers{workers}")
        shutil.rmtree(out, ignore_errors=True)                      # log.txt appends: start from an empty folder
        run = subprocess.run([sys.executable, "train_video.py", "--dataset", "movingmnist", "--data-dir", data_dir,
                              "--size", "32", "--pieces", "10", "--frames-per-piece", "2", "--batch-size", "32", "--lr",
                              "5e-4", "--max-steps", str(steps), "--eval-every", "0", "--workers", str(workers),
                              "--out", out], capture_output=True, text=True)
        if run.returncode:
            sys.exit(f"error: the --workers {workers} run failed:\n{run.stderr}")
        with open(os.path.join(out, "log.txt")) as f:
            lines = f.read().splitlines()
        last = [line.split() for line in lines if line.startswith("step ")][-1]
        threads = int(re.findall(r"(\d+) thread", "\n".join(lines))[-1])
        rows[f"train_video.py 10x2 32px, batch 32, --workers {workers}"] = {
            "steps_per_s": float(last[last.index("steps/s") + 1]), "loss_last": float(last[3]), "workers": workers,
            "threads": threads}
    return rows
