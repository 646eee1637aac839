"""
Is the confidence of your own pieces worth reading? It is the agreement between samples (solving/bag.py): a puzzle
it is more sure of should be right more often. Measured on val photos (never test), as Solver.solve computes it.

    python -m bench.agreement            # row "confidence agreement image-photos-3x3 val"
"""
import argparse
from dataclasses import replace

import numpy as np
import torch

import solving
from bench.recipes import PHOTO_PASSES, PHOTOS
from bench.report import save_result
from metrics import assign, pin
from puzzles import collate, puzzle_set
from solving.bag import CONFIDENCE_SAMPLES, agreement


def main(args):
    solver = solving.load(args.ckpt, device="cpu")
    puzzle = replace(solver.config.puzzle, data_dir=PHOTOS)
    opts = replace(solver.opts, samples=max(solver.opts.samples, CONFIDENCE_SAMPLES))
    sure, right, piece_sure, piece_right = [], [], [], []
    for seed in range(1, PHOTO_PASSES + 1):                         # the passes of the photo rows: seeds 1-8
        val = puzzle_set(puzzle, "val", seed)
        batch = collate([val[i] for i in range(len(val))])
        opts.generator.manual_seed(seed)
        given, _ = solver.told(batch)                               # codes told: the anchor's, if trained so
        costs = solver.costs(batch, given, opts)[0].float().numpy()  # (S, B, N, P)
        for b in range(costs.shape[1]):
            given = np.full(costs.shape[2], -1)
            pos = assign(pin(costs[:, b].mean(0), given), opts.assign)
            conf, whole = agreement(costs[:, b], pos, given, opts.assign, costs.shape[2])
            ok = pos == batch["true_pos"][b].numpy()
            sure.append(whole)
            right.append(ok.all())
            piece_sure += list(conf)
            piece_right += list(ok)
    sure, right, piece_sure, piece_right = map(np.array, (sure, right, piece_sure, piece_right))
    row = {"ckpt": args.ckpt, "split": "val", "puzzles": len(sure), "samples": opts.samples, "sampler": opts.sampler,
           "steps": opts.steps, "puzzle_acc": float(right.mean()), "piece_acc": float(piece_right.mean())}
    for name, conf, ok in (("puzzle", sure, right), ("piece", piece_sure, piece_right)):
        for low, high in ((1.0, 1.01), (0.5, 1.0), (0.0, 0.5)):
            inside = (conf >= low) & (conf < high)
            acc = float(ok[inside].mean()) if inside.any() else None
            row[f"{name}s at confidence {low:g}-{min(high, 1):g}"] = [int(inside.sum()), acc]   # [count, accuracy]
    for k, v in row.items():
        print(f"{k}: {v}")
    save_result(f"confidence agreement {args.ckpt.split('/')[-1][:-3]} val",
                {"group": "confidence", "command": "python -m bench.agreement --ckpt " + args.ckpt,
                 "train_minutes": 0.0, "metrics": row})


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", default="checkpoints/image-photos-3x3.pt", help="an image checkpoint trained on photos")
    args = p.parse_args()
    torch.set_num_threads(1)
    main(args)
