"""
The masked Moving MNIST model in a picture (the paper's Fig. 7 and its supplement's drawn clips): the Kendall distance
against the number of missing pieces, strict and as a set, beside frame chaining, from the rows of the test runs; and
a few test clips with 2 of 8 pieces missing, solved, the drawn frames outlined in red, above their truth.

    python -m bench.masked_clips checkpoints/video-mmnist-8x4-missing.pt --out docs/video-mmnist-8x4-missing.png

The curve reads the rows `interval video-mmnist-8x4-missing test missing K clips seed 20261213 x1` and `baseline video
movingmnist 8x4 32px missing K seed 20261213 (1000 clips): nearest-neighbour chaining` (python -m bench.intervals on
sample.py's folders; python -m bench masked-clips-baselines).
"""
import argparse

import numpy as np
import torch
from PIL import Image, ImageDraw

import solving
from bench.recipes import MASKED_SEED
from bench.report import load_results
from pictures import RED, font, outline, stack, to_uint8, video_row
from puzzles import collate, puzzle_set

SERIES = {"model, strict": ("model", "kendall", (200, 40, 40)), "model, as a set": ("model", "kendall_set",
                                                                                   (40, 90, 200)),
          "frame chaining": ("chaining", "kendall", (120, 120, 120))}
CLIPS = 3                                    # test clips drawn


def points(results, name):
    """{source: {missing: metrics}} of the model's interval rows and chaining's rows at 0, 1 and 2 missing."""
    out = {"model": {}, "chaining": {}}
    for k in range(3):
        model = results.get(f"interval {name} test missing {k} clips seed {MASKED_SEED} x1")
        chain = results.get(f"baseline video movingmnist 8x4 32px missing {k} seed {MASKED_SEED} (1000 clips): "
                            "nearest-neighbour chaining")
        if model:
            out["model"][k] = model["metrics"]
        if chain:
            out["chaining"][k] = chain["metrics"]
    return out


def curve(data, size=(420, 300)):
    """The Kendall distance x 1e-3 (log-free, 0 to the largest) against the missing pieces, one line a series."""
    img = Image.new("RGB", size, (255, 255, 255))
    draw, f = ImageDraw.Draw(img), font(13)
    x0, y0, x1, y1 = 60, 40, size[0] - 20, size[1] - 50
    draw.text((x0, 10), "Kendall distance x 1e-3 (lower is better)", fill=(0, 0, 0), font=f)
    draw.line([(x0, y1), (x1, y1)], fill=(0, 0, 0))
    draw.line([(x0, y0), (x0, y1)], fill=(0, 0, 0))
    values = [m[key] * 1000 for src, key, _ in SERIES.values() for m in data[src].values()]
    top = max(values + [1e-9]) * 1.1
    sx = lambda k: x0 + 20 + (x1 - x0 - 40) * k / 2                      # noqa: E731
    sy = lambda v: y1 - (y1 - y0) * v / top                              # noqa: E731
    for k in range(3):
        draw.text((sx(k) - 4, y1 + 6), str(k), fill=(0, 0, 0), font=f)
    for frac in (0, 0.5, 1):
        draw.text((x0 - 50, sy(top * frac / 1.1) - 7), f"{top * frac / 1.1:.3g}", fill=(0, 0, 0), font=f)
    for i, (label, (src, key, colour)) in enumerate(SERIES.items()):
        pts = [(sx(k), sy(m[key] * 1000)) for k, m in sorted(data[src].items())]
        if len(pts) > 1:
            draw.line(pts, fill=colour, width=2)
        for x, y in pts:
            draw.ellipse([x - 3, y - 3, x + 3, y + 3], fill=colour)
        draw.text((x0 + 10, y0 + 4 + 16 * i), label, fill=colour, font=f)
    draw.text(((x0 + x1) // 2 - 50, y1 + 24), "missing pieces (of 8)", fill=(0, 0, 0), font=f)
    return np.asarray(img, np.float32) / 255


def strip(frames, marks=None):
    """One clip (L, H, W, C) in [0, 1] as a row of frames, those marked outlined in red."""
    frames = np.repeat(frames, 3, -1) if frames.shape[-1] == 1 else frames
    frames = frames.copy()
    for i in np.flatnonzero(marks if marks is not None else []):
        outline(frames[i], 0, 0, frames.shape[1], 1, RED)
    return np.concatenate(list(frames), axis=1)


def clips(ckpt, missing=2, seed=MASKED_SEED):
    """CLIPS test clips with `missing` pieces missing, solved (drawn frames outlined) above their truth."""
    solver = solving.load(ckpt, device="cpu")
    puzzle = solver.config.puzzle
    test = puzzle_set(type(puzzle)(**{**puzzle.__dict__, "missing": missing}), "test", seed)
    batch = collate([test[i] for i in range(CLIPS)])
    solver.opts.generator.manual_seed(seed)
    with torch.no_grad():
        positions, generated = solver.solve_batch(batch)
    rows = []
    for k in range(CLIPS):
        (_, solved, truth), (_, marks, _) = video_row(batch, positions, generated, k)
        rows += [strip(solved, marks), strip(truth)]
    return stack([np.asarray(r) for r in rows], axis=0, gap=4)


def widened(img, width):
    """img (H, W, 3) padded with white on the right to `width`."""
    return np.concatenate([img, np.ones((img.shape[0], width - img.shape[1], 3), np.float32)], axis=1)


def main(args):
    data = points(load_results(), args.name)
    drawn, top = clips(args.ckpt), curve(data)
    width = max(drawn.shape[1], top.shape[1])
    Image.fromarray(to_uint8(stack([widened(top, width), widened(drawn, width)], axis=0, gap=10))).save(args.out)
    for src, by_k in data.items():
        print(src, {k: round(m["kendall"], 5) for k, m in by_k.items()})
    print(f"wrote {args.out}")


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ckpt", help="the masked Moving MNIST checkpoint")
    p.add_argument("--name", default="video-mmnist-8x4-missing", help="its name in the interval rows")
    p.add_argument("--out", default="docs/video-mmnist-8x4-missing.png", help="the picture to write")
    return p


if __name__ == "__main__":
    main(get_parser().parse_args())
