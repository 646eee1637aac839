"""
The prediction target of the paper's text (eps) against ours (x0), everything else equal: the held-out checks of
their training logs (val puzzles, DDIM-20, every 1000 steps) as bench rows, and one picture, docs/eps-vs-x0.png.

    python -m bench.eps_curves runs/eps        # reads runs/eps/{shapes,photos,mmnist,digits}-{eps,x0}/log.txt
    python -m bench.eps_curves --tokens bench/gpu-logs/eps-tokens-1.txt bench/gpu-logs/eps-tokens-2.txt

The runs (bench/notes.md, "eps against x0"), OMP_NUM_THREADS=1 each:
    python train_image.py --prediction eps --max-steps 12000 --eval-every 1000 --eval-puzzles 200
        --out runs/eps/shapes-eps
    python train_image.py --prediction x0 --max-steps 10000 --eval-every 1000 --eval-puzzles 200
        --out runs/eps/shapes-x0
    python train_image.py --prediction P --dataset folder --data-dir PHOTOS --grid 3 --piece-size 24 --patch-size 24
        --batch-size 64 --lr 2e-3 --schedule cosine --mix-shapes 0.25 --max-steps 5000 --eval-every 1000
        --out runs/eps/photos-P
    python train_video.py --prediction P --dataset movingmnist --data-dir MNIST --pieces 5 --frames-per-piece 4
        --size 32 --paper --model tiny --max-steps 3000 --eval-every 1000 --out runs/eps/mmnist-P
    python train_video.py --prediction P --pieces 5 --frames-per-piece 4 --lr 1e-3 --schedule cosine --max-steps 3200
        --eval-every 800 --eval-puzzles 200 --out runs/eps/digits-P
"""
import argparse
import json
import os
import re
import sys

from PIL import Image, ImageDraw

from bench.report import save_result
from pictures import font

RUNS = {"shapes": "built-in shapes 3x3, tiny DiT (the Quickstart recipe)",
        "photos": "photos 3x3, 24 px pieces (the shipped photo recipe, 5000 steps)",
        "mmnist": "Moving MNIST 5 x 4, 32 px, the paper's video settings, tiny U-Net",
        "digits": "built-in digits 5 x 4, 32 px, tiny U-Net (the shipped digits recipe, 3200 steps)"}
# the metric each panel draws (kendall: lower is better)
METRIC = {"shapes": "piece_acc", "photos": "piece_acc", "mmnist": "kendall", "digits": "kendall"}
COLOURS = {"eps": (200, 40, 40), "x0": (40, 90, 200)}


def check(line):
    """(step, {metric: value}) of a training log's held-out check line (eval and final lines), else None."""
    m = re.match(r"(?:eval|final) step (\d+) (.*)", line)
    if m:
        words = m.group(2).split(" (")[0].split()              # the final line ends with what was held out
        return int(m.group(1)), {k: float(v) for k, v in zip(words[::2], words[1::2])}


def checks(log):
    """[(step, {metric: value})] of a training log's held-out checks."""
    return sorted(dict(filter(None, map(check, open(log)))).items())


def curves(root):
    """{run: {prediction: [(step, metrics)]}} of the logs that exist under root."""
    found = {}
    for run in RUNS:
        for p in COLOURS:
            log = os.path.join(root, f"{run}-{p}", "log.txt")
            points = checks(log) if os.path.exists(log) else []
            if points:                                        # a run not yet at its first check is left out
                found.setdefault(run, {})[p] = points
    return found


def draw(found, path):
    """One panel per run: the held-out metric against the training step, eps in red, x0 in blue."""
    img = Image.new("RGB", (40 + 330 * len(found), 300), (255, 255, 255))
    d, f = ImageDraw.Draw(img), font(13)
    for i, (run, series) in enumerate(found.items()):
        x0, y0, x1, y1 = 70 + 330 * i, 40, 340 + 330 * i, 240
        last = max(s for points in series.values() for s, _ in points)
        lower = " (lower is better)" if METRIC[run] == "kendall" else ""
        d.text((x0, y0 - 24), f"{run}: {METRIC[run].replace('_', ' ')} (val){lower}", fill=(0, 0, 0), font=f)
        d.line([(x0, y1), (x1, y1)], fill=(0, 0, 0))
        d.line([(x0, y0), (x0, y1)], fill=(0, 0, 0))
        for v in (0, 0.5, 1):
            d.text((x0 - 34, y1 - (y1 - y0) * v - 7), f"{v:.1f}", fill=(0, 0, 0), font=f)
        for s in (0, last // 2, last):
            d.text((x0 + (x1 - x0) * s / last - 12, y1 + 6), str(s), fill=(0, 0, 0), font=f)
        d.text(((x0 + x1) // 2 - 30, y1 + 24), "training step", fill=(0, 0, 0), font=f)
        for k, (p, points) in enumerate(series.items()):
            pts = [(x0 + (x1 - x0) * s / last, y1 - (y1 - y0) * m[METRIC[run]]) for s, m in points]
            d.line(pts, fill=COLOURS[p], width=2)
            for x, y in pts:
                d.ellipse([x - 3, y - 3, x + 3, y + 3], fill=COLOURS[p])
            d.text((x1 - 40, y0 + 90 + 16 * k), p, fill=COLOURS[p], font=f)
    img.save(path)


# the authors' interface (--codes token) on the built-in shapes, 4 tokens per piece (--patch-size 8), run on a lent
# H200 by bench/gpu-eps.sh (fp32; eight runs side by side, then the two eps-token8 runs again with more data workers,
# which reached further: the second log wins where both have a check); colour and label of each run
TOKEN_RUNS = {"x0-piece": ((40, 90, 200), "x0, a code per piece"),
              "eps-piece": ((200, 40, 40), "eps, a code per piece"),
              "x0-token8": ((0, 150, 200), "x0, per token, 8-d"), "x0-token32": ((90, 60, 200), "x0, per token, 32-d"),
              "eps-token8": ((230, 120, 0), "eps, per token, 8-d"),
              "eps-token32": ((150, 20, 90), "eps, per token, 32-d"),
              "eps-token8-lr1e-3": ((200, 160, 0), "eps, per token, 8-d, lr/2"),
              "eps-token8-lr5e-4": ((120, 90, 30), "eps, per token, 8-d, lr/4")}
TOKEN_FLAGS = {"x0-piece": "--prediction x0", "eps-piece": "--prediction eps",
               "x0-token8": "--prediction x0 --codes token --code-dim 8",
               "x0-token32": "--prediction x0 --codes token --code-dim 32",
               "eps-token8": "--prediction eps --codes token --code-dim 8",
               "eps-token32": "--prediction eps --codes token --code-dim 32",
               "eps-token8-lr1e-3": "--prediction eps --codes token --code-dim 8 --lr 1e-3",
               "eps-token8-lr5e-4": "--prediction eps --codes token --code-dim 8 --lr 5e-4"}


def token_checks(paths):
    """{run: [(step, metrics)]} of the device logs (each run's log.txt after a '=== .../RUN/log.txt' line)."""
    found = {}
    for path in paths:
        run = None
        for line in open(path):
            head = re.match(r"=== .*/([^/]+)/log.txt", line)
            run = head.group(1) if head else None if line.startswith("===") else run
            if run and check(line):
                found.setdefault(run, {}).update([check(line)])
    return {run: sorted(points.items()) for run, points in found.items()}


def tokens(paths):
    """Rows `eps-vs-x0 tokens RUN step S` and a panel under docs/eps-vs-x0.png's (val pieces against steps)."""
    found = token_checks(paths)
    for run, points in found.items():
        for step, metrics in points:
            save_result(f"eps-vs-x0 tokens {run} step {step}", {
                "group": "eps-vs-x0", "train_minutes": 0.0, "machine": "NVIDIA H200 (lent), fp32",
                "metrics": {**metrics, "split": "val", "step": step},
                "command": f"python train_image.py --patch-size 8 --max-steps 10000 --eval-every 1000 --eval-puzzles "
                           f"200 --precision fp32 {TOKEN_FLAGS[run]} (bench/gpu-eps.sh)",
                "note": f"built-in shapes 3x3, tiny DiT, 4 tokens per piece: {TOKEN_RUNS[run][1]}"})
    last = max(s for pts in found.values() for s, _ in pts)
    panel = Image.new("RGB", (760, 300), (255, 255, 255))
    d, f = ImageDraw.Draw(panel), font(13)
    x0, y0, x1, y1 = 70, 40, 480, 240
    d.text((x0, y0 - 24), "shapes, 4 tokens per piece: piece acc (val)", fill=(0, 0, 0), font=f)
    d.line([(x0, y1), (x1, y1), (x1, y1)], fill=(0, 0, 0))
    d.line([(x0, y0), (x0, y1)], fill=(0, 0, 0))
    for v in (0, 0.5, 1):
        d.text((x0 - 34, y1 - (y1 - y0) * v - 7), f"{v:.1f}", fill=(0, 0, 0), font=f)
    for s in (0, last // 2, last):
        d.text((x0 + (x1 - x0) * s / last - 12, y1 + 6), str(s), fill=(0, 0, 0), font=f)
    for k, (run, points) in enumerate(found.items()):
        colour, label = TOKEN_RUNS[run]
        pts = [(x0 + (x1 - x0) * s / last, y1 - (y1 - y0) * m["piece_acc"]) for s, m in points]
        d.line(pts, fill=colour, width=2)
        d.text((x1 + 20, y0 + 16 * k), label, fill=colour, font=f)
    old = Image.open(os.path.join("docs", "eps-vs-x0.png"))
    out = Image.new("RGB", (max(old.width, panel.width), old.height + panel.height), (255, 255, 255))
    out.paste(old.crop((0, 0, old.width, 300)), (0, 0))
    out.paste(panel, (0, 300))
    out.save(os.path.join("docs", "eps-vs-x0.png"))


def main(root):
    found = curves(root)
    missing = [f"{run}-{p}" for run in RUNS for p in COLOURS if p not in found.get(run, {})]
    if missing:                                               # a partial set would overwrite the picture's panels
        sys.exit(f"{root} lacks the logs of {', '.join(missing)} (the runs of this file's docstring); nothing written")
    for run, series in found.items():
        for p, points in series.items():
            for step, metrics in points:
                save_result(f"eps-vs-x0 {run} {p} step {step}", {
                    "group": "eps-vs-x0", "train_minutes": 0.0, "metrics": {**metrics, "split": "val", "step": step},
                    "command": f"python -m bench.eps_curves {root}", "note": f"{RUNS[run]}, --prediction {p}"})
    draw(found, os.path.join("docs", "eps-vs-x0.png"))
    print(json.dumps({run: {p: [(s, m[METRIC[run]]) for s, m in pts] for p, pts in s_.items()}
                      for run, s_ in found.items()}))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", nargs="?", default="runs/eps", help="the folder of the runs' logs (default runs/eps)")
    p.add_argument("--tokens", nargs="+", metavar="LOG", help="instead: the tokens rows and panel from these logs")
    a = p.parse_args()
    if a.tokens:
        tokens(a.tokens)
    else:
        main(a.root)
