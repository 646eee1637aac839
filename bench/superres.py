"""
Temporal super-resolution (the supplement's downstream task) measured: the PSNR of the generated pieces' frames
against the truth, beside the obvious baseline, a blend of the two given frames around each missing one (linear in
time). Clips of a split and seed, every (K+1)-th piece given (the checkpoint's --superres K), solved as
`python -m solving.own --superres K` solves them; one row a run (bench/results.json), each figure with its 95%
interval over clips.

    python -m bench.superres --ckpt checkpoints/video-mmnist-7x4-superres.pt --split test --seed 20261214 --clips 100
"""
import argparse
from dataclasses import replace

import numpy as np
import torch
from tqdm import tqdm

from bench.intervals import interval
from bench.report import ckpt_name, save_result
from metrics import in_slots, psnr
from plumbing.cli import UserError, positive, user_errors
from puzzles import VideoPuzzles, superres_given
from solving.own import low_rate_batch
from solving.solver import load_solver

BATCH = 10


def blend(content, keep):
    """(B, N, F, ...): each missing piece's frames as the linear blend, in time, of the last frame of the given piece
    before it and the first frame of the given piece after it (given pieces: as they are). content (B, N, F, ...) in
    time order, keep (N,) bool (the last piece is given)."""
    out, f = content.clone(), content.shape[2]
    given = np.flatnonzero(keep)
    for a, b in zip(given[:-1], given[1:]):
        before, after = content[:, a, -1], content[:, b, 0]                 # (B, ...) the frames around the gap
        span = (b - a - 1) * f + 1                                           # frame steps from `before` to `after`
        for s in range(a + 1, b):
            for j in range(f):
                w = ((s - a - 1) * f + j + 1) / span
                out[:, s, j] = (1 - w) * before + w * after
    return out


def main(args):
    solver = load_solver(args.ckpt, "cpu")
    if args.sampler:
        solver.opts = replace(solver.opts, sampler=args.sampler)
    puzzle = solver.config.puzzle
    k = getattr(puzzle, "superres", 0)
    if not k:
        raise UserError(f"--ckpt {args.ckpt} was not trained for super-resolution, so there is no pattern of given "
                        "pieces to measure; pass a video checkpoint trained with train_video.py --superres K")
    keep = superres_given(np.arange(puzzle.pieces), k)
    data_dir = args.data_dir or puzzle.data_dir
    test = VideoPuzzles(replace(puzzle, missing=0, superres=0, data_dir=data_dir), args.split, args.seed)
    clips = min(args.clips, len(test))                                  # a small split: all of its clips
    solver.opts.generator.manual_seed(args.seed)
    scores = {"psnr": [], "blend_psnr": []}
    for start in tqdm(range(0, clips, BATCH), desc="super-resolution"):
        items = [test[i] for i in range(start, min(start + BATCH, clips))]
        content = torch.stack([it["content"][torch.argsort(it["true_pos"])] for it in items])   # (B, N, F, C, H, W)
        batch = low_rate_batch(content, keep)
        positions, generated = solver.solve_batch(batch, pinned=~batch["missing"])     # given pieces pinned
        scores["psnr"].append(psnr(in_slots(generated.cpu().clamp(-1, 1), positions), content, keep))
        scores["blend_psnr"].append(psnr(blend(content, keep), content, keep))
    per_clip = {name: torch.cat(v).numpy() for name, v in scores.items()}
    per_clip["gain"] = per_clip["psnr"] - per_clip["blend_psnr"]
    rng, metrics = np.random.default_rng(0), {"num_puzzles": clips, "superres": k, "sampler": solver.opts.sampler,
                                              "steps": solver.opts.steps}
    for name, v in per_clip.items():
        metrics[name], *metrics[f"{name}_95"] = interval(v[None], rng)
    print(" ".join(f"{n} {metrics[n]:.2f} [{metrics[n + '_95'][0]:.2f}, {metrics[n + '_95'][1]:.2f}]"
                   for n in per_clip))
    save_result(f"superres {ckpt_name(args.ckpt)} {args.split} seed {args.seed} ({clips} clips) {solver.opts.sampler}-"
                f"{solver.opts.steps}", {"group": "superres", "train_minutes": None, "metrics": metrics,
                                        "command": "python -m bench.superres " + " ".join(args.argv)})


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True, help="a video checkpoint trained with --superres K")
    p.add_argument("--split", default="val", choices=("val", "test"), help="the clips' split (default val)")
    p.add_argument("--seed", type=int, default=1, help="the clips' seed (default 1)")
    p.add_argument("--clips", type=positive, default=100,
                   help="clips scored (default 100; at most the split's clips)")
    p.add_argument("--data-dir", default=None, help="the clips' data folder (default: the checkpoint's)")
    p.add_argument("--sampler", choices=("ddpm", "ddim"), default=None,
                   help="the sampler (default: the checkpoint's stored one, else DDPM)")
    return p


if __name__ == "__main__":
    import sys
    args = get_parser().parse_args()
    args.argv = sys.argv[1:]
    with user_errors():
        main(args)
