"""
Solve puzzles with a trained JPDVT checkpoint: accuracy on fresh test puzzles, pictures, your own pieces, and
temporal super-resolution (of test clips or of your own clip).

Paper: "Predicted position encodings" (supplement) and "Metrics" (Sec. 4.2). Everything (model, puzzle settings)
is rebuilt from the checkpoint; the EMA weights are used. Image checkpoints report piece- and puzzle-level
accuracy over the pieces the model had to place; video checkpoints report the mean normalized Kendall distance
and the fraction of clips fully ordered, strict and with generated pieces compared as a set (REPORT's `counted` texts,
below, say what each counts). Your own data (--pieces, --frames, and --superres: the
supplement's temporal super-resolution, of test clips or of --video) is solved by solving/own.py; the confidence
of your own pieces is the agreement between samples (solving/bag.py).

    python sample.py --ckpt checkpoints/image-shapes-3x3.pt                 # metrics.json + examples.png
    python sample.py --ckpt out/run/ckpt.pt --missing 2 --sampler ddim --steps 25      # deterministic
    python sample.py --ckpt checkpoints/image-photos-3x3.pt --pieces my_pieces/      # solved.png, arrangement.json
    python sample.py --ckpt out/video/ckpt.pt --superres 1                 # 1 generated piece between given ones
"""
import argparse
import json
import os
import time
from dataclasses import replace

import numpy as np
import torch
from tqdm import tqdm

from diffusion import SAMPLERS
from jpdvt import SAMPLING, SampleOptions, Solver
from metrics import ASSIGNERS
from plumbing.checkpoint import load_checkpoint
from plumbing.cli import (
    PRECISIONS,
    UserError,
    check_puzzle,
    cpu_threads,
    grid,
    non_negative,
    positive,
    resolve_device,
    user_errors,
)
from puzzles import collate, puzzle_set
from solving.pictures import save_pictures
from sources.files import data_folder
from sources.images import DATASETS
from sources.videos import VIDEO_DATASETS

SCORED = {"test": "scored once, for the final figures", "val": "model selection"}
# What sample.py reports of each kind of puzzle: the puzzle settings copied into metrics.json, the test puzzles
# pictured, the metric of fully solved puzzles and what the scores count
REPORT = {"image": {"settings": ("grid", "piece_size", "gap", "anchor"), "pictured": 8, "solved": "puzzle_acc",
                    "counted": "piece_acc and puzzle_acc count the pieces with content that the model had to place, "
                               "not the anchored one (whose position the model is told); missing pieces are generated "
                               "and not scored"},
          "video": {"settings": ("pieces", "frames_per_piece", "size", "frame_stride"), "pictured": 4,
                    "solved": "exact",
                    "counted": "kendall and exact compare every piece's slot, generated pieces included, each against "
                               "the slot of the clip it replaced (strict); kendall_set and exact_set compare the slots "
                               "of generated pieces as a set (they start as interchangeable noise); the anchor (first "
                               "piece) counts in all four; kendall_rev is the authors' variant, the smaller of the "
                               "strict distances of the predicted order and of its reverse"}}
# the flags of your own data that each kind of checkpoint takes
INPUTS = {"image": ("pieces",), "video": ("frames", "superres", "video")}


def summary(kind, metrics):
    """One line of a kind's scores (jpdvt.Images.score or jpdvt.Videos.score)."""
    if kind == "image":
        return f"piece accuracy {metrics['piece_acc']:.4f}, puzzle accuracy {metrics['puzzle_acc']:.4f}"
    return (f"mean Kendall distance {metrics['kendall']:.4f} (generated pieces as a set "
            f"{metrics['kendall_set']:.4f}), exactly ordered {metrics['exact']:.4f} ({metrics['exact_set']:.4f})")


# ----------------------------------------------------------------------------
# Scoring fresh test puzzles (images and videos alike)
# ----------------------------------------------------------------------------


def warm_up(solver, puzzles, size):
    """Two sampling steps on a batch of `size` puzzles, with noise of their own, before the timed solves:
    sec_per_puzzle then counts the steady pace, not the first calls' start-up (kernels, allocations)."""
    batch = collate([puzzles[i] for i in range(min(size, len(puzzles)))])
    solver.solve_batch({k: v.to(solver.device) for k, v in batch.items()},
                       opts=replace(solver.opts, steps=2, samples=1,
                                    generator=torch.Generator(solver.device).manual_seed(0)))


def score_test_set(args, solver):
    """
    Solve --num-puzzles puzzles of --split (test, or val for model selection), --repeats times (pass r: shuffles,
    missing pieces and sampling noise of seed --seed + r, so pass 0 is a run with --repeats 1); write metrics.json
    (the mean over passes, which weigh the same, and each pass's figures) and examples.png (images) or examples.gif
    (videos) of the first pass.
    """
    puzzle, kind = solver.config.puzzle, solver.kind
    report = REPORT[puzzle.kind]
    passes, rows, seconds = [], [], 0.0
    warm_up(solver, puzzle_set(puzzle, args.split, args.seed), min(args.batch_size, args.num_puzzles))
    for r in range(args.repeats):
        test = puzzle_set(puzzle, args.split, args.seed + r)
        num = min(args.num_puzzles, len(test))
        if r == 0 and num < args.num_puzzles:
            print(f"note: the {args.split} split holds only {len(test)} puzzles; solving {num}")
        solver.opts.generator.manual_seed(args.seed + r)
        positions, truth = [], []
        for start in tqdm(range(0, num, args.batch_size), unit="batch",
                          desc="solving" + (f" (pass {r + 1}/{args.repeats})" if args.repeats > 1 else "")):
            batch = collate([test[i] for i in range(start, min(start + args.batch_size, num))])
            batch = {k: v.to(solver.device) for k, v in batch.items()}
            t = time.time()
            pos, content = solver.solve_batch(batch)   # jpdvt.solve: the codes, then the assignment
            seconds += time.time() - t
            positions.append(pos)
            truth.append({k: batch[k].cpu() for k in ("true_pos", "missing")})
            shown = min(report["pictured"] - len(rows), len(pos))
            rows += [(batch, pos, content, k) for k in range(max(shown, 0))]
        truth = {k: torch.cat([t[k] for t in truth]) for k in ("true_pos", "missing")}
        passes.append(kind.score(np.concatenate(positions), truth))
    metrics = {**{k: float(np.mean([p[k] for p in passes])) for k in passes[0]},
               "counted": report["counted"], "num_puzzles": num, "sec_per_puzzle": seconds / (num * args.repeats),
               "dataset": puzzle.dataset, "split": args.split, "missing": puzzle.missing, "sampler": args.sampler,
               "steps": args.steps, "samples": args.samples, "assign": args.assign, "seed": args.seed,
               "precision": args.precision, "repeats": args.repeats, "ckpt": args.ckpt, "train_step": solver.step}
    if args.repeats > 1:
        metrics["passes"] = passes
    metrics.update({k: getattr(puzzle, k) for k in report["settings"]})
    if puzzle.kind == "image":                   # the paper's text anchors a piece; the authors' released code does not
        metrics["protocol"] = ("one piece's cell told (anchor, the paper's text), that piece not counted"
                               if puzzle.anchor else "no piece's cell told (the authors' released code): every piece "
                                                     "with content counted")
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    path, shown = save_pictures(kind, args.out, rows)
    line = summary(puzzle.kind, metrics)
    if args.repeats > 1:
        line += f" (mean of {args.repeats} passes; {report['solved']} of each: " + \
            " ".join(f"{p[report['solved']]:.3f}" for p in passes) + ")"
    ensemble = f" x{args.samples} samples" if args.samples > 1 else ""
    print(f"{num} puzzles ({args.sampler}-{args.steps}{ensemble}, {args.assign}): {line}, "
          f"{metrics['sec_per_puzzle']:.3f} s/puzzle")
    print(f"wrote {os.path.join(args.out, 'metrics.json')} and {path} ({shown})")
    return metrics


# ----------------------------------------------------------------------------
# Which puzzles, and how
# ----------------------------------------------------------------------------

def main(args):
    refuse_conflicts(args)
    ckpt = load_checkpoint(args.ckpt)
    config = ckpt["config"]
    for name, value in {**SAMPLING, **ckpt.get("sampling", {})}.items():    # the checkpoint's sampling, chosen on val
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.out is None:                                       # a folder of pieces: its answer next to it
        folder = args.pieces or args.frames
        args.out = (os.path.normpath(folder) + "_solved" if folder else
                    os.path.join(os.path.dirname(os.path.abspath(args.ckpt)), "samples"))
    kind = config.puzzle.kind
    inputs = INPUTS[kind]
    for flag in (*INPUTS["image"], *INPUTS["video"]):
        if getattr(args, flag) and flag not in inputs:
            its = f"its input is --{inputs[0]}" if len(inputs) == 1 else \
                f"its inputs are {', '.join('--' + f for f in inputs[:-1])} and --{inputs[-1]}"
            raise UserError(f"--{flag} does not apply to {args.ckpt}, which holds the {kind} model; {its}")
    if args.video and not args.superres:
        raise UserError("--video names a clip to raise the frame rate of: add --superres K (to order pieces of your "
                        "own, put them in a folder and pass --frames DIR)")
    config = replace(config, puzzle=test_settings(args, config.puzzle))     # ckpt["config"] stays the trained one
    device = resolve_device(args.device)
    opts = SampleOptions(steps=args.steps, sampler=args.sampler, assign=args.assign, samples=args.samples,
                         generator=torch.Generator(device).manual_seed(args.seed))
    cpu_threads(device, world=1, workers=1)    # on a CPU a core left free, as beside a data worker: on a machine
    # busy with other work, a thread per core makes the solve's threads wait on each other
    solver = Solver(ckpt, config, device, opts, precision=args.precision)
    os.makedirs(args.out, exist_ok=True)
    if args.pieces or args.frames or args.superres:
        from solving.own import solve_pieces, superres  # your own data: solving/
        return superres(args, solver) if args.superres else solve_pieces(args, solver)
    return score_test_set(args, solver)


# ----------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------

def test_settings(args, puzzle):
    """The checkpoint's puzzle settings with the flags that change them: --dataset, --data-dir (default: the training
    run's, for its own dataset), --missing (default: the checkpoint's; 0 for your own data), --frame-stride
    (videos)."""
    dataset = args.dataset or puzzle.dataset
    datasets = DATASETS if puzzle.kind == "image" else VIDEO_DATASETS
    if dataset not in datasets:
        raise UserError(f"--dataset {dataset} does not fit this {puzzle.kind} checkpoint; use one of "
                        f"{', '.join(datasets)}")
    own_dir = None
    if dataset == puzzle.dataset and puzzle.data_dir and not args.data_dir:
        own_dir = data_folder(puzzle.data_dir, args.ckpt)
        if own_dir is None and not own_data(args):
            raise UserError(f"{args.ckpt} was trained on {puzzle.data_dir}, which is found neither from here nor "
                            "next to the checkpoint; pass --data-dir with that folder")
    if getattr(puzzle, "vae", None):                           # a latent video model: its autoencoder folder
        vae = args.vae or data_folder(puzzle.vae, args.ckpt)
        if vae is None:
            raise UserError(f"{args.ckpt} diffuses latents of the autoencoder {puzzle.vae}, which is found neither "
                            "from here nor next to the checkpoint; pass --vae with that folder")
        puzzle = replace(puzzle, vae=vae)
    changes = {"dataset": dataset, "data_dir": args.data_dir or own_dir,
               "missing": args.missing if args.missing is not None else (0 if own_data(args) else puzzle.missing)}
    if args.frame_stride is not None and hasattr(puzzle, "frame_stride"):
        changes["frame_stride"] = args.frame_stride
    puzzle = replace(puzzle, **changes)
    check_puzzle(puzzle)
    return puzzle


def own_data(args):
    """The flag of the user's own data, if any (--video, --pieces, --frames)."""
    return args.video or args.pieces or args.frames


def refuse_conflicts(args):
    """Refuse, in one sentence each, flags that cannot go together."""
    if args.steps is not None and args.steps > 1000:
        raise UserError(f"--steps {args.steps} is more than the model's 1000 diffusion steps; use at most 1000 (50 is "
                        "the usual)")
    if (args.pin or args.grid) and not (args.pieces or args.frames):
        raise UserError("--pin and --grid apply to a folder of pieces; add --pieces DIR (or --frames DIR)")


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True, help="ckpt.pt written by train_image.py or train_video.py")
    p.add_argument("--num-puzzles", type=positive, default=200, help="test puzzles to solve and score")
    p.add_argument("--split", default="test", choices=SCORED,
                   help="the split to score: test (score it once, for the final figures) or val (choose recipes, "
                        "sample counts and thresholds on it; training's held-out check reads it too)")
    p.add_argument("--seed", type=non_negative, default=0, help="seed of the test puzzles (shuffles, crops) and noise")
    p.add_argument("--repeats", type=positive, default=1,
                   help="solve the test puzzles this many times, pass r with the shuffles and noise of --seed + r, and "
                        "report the mean (for small test folders, whose single pass is a noisy estimate)")
    p.add_argument("--steps", type=positive, help="sampling steps (respaced out of T = 1000). --steps, --sampler, "
                   "--samples and --assign default to the sampling the checkpoint recommends (chosen on val; as "
                   "jpdvt.load does), else to 50, ddpm, 1, hungarian")
    p.add_argument("--sampler", choices=SAMPLERS,
                   help="ddpm (ancestral: fresh noise at every respaced step) or ddim (deterministic, eta = 0: only "
                        "the starting noise is random)")
    p.add_argument("--samples", type=positive,
                   help="independent samples of the codes per puzzle; positions are assigned on their mean distance "
                        "to the true codes (K times the sampling time)")
    p.add_argument("--assign", choices=ASSIGNERS,
                   help="codes -> positions: hungarian (optimal, min total L2 distance) or greedy (the paper's text: "
                        "piece by piece, the closest free position by L2)")
    p.add_argument("--missing", type=int, default=None,
                   help="missing pieces per puzzle, generated by the model (default: the checkpoint's)")
    p.add_argument("--out", default=None, help="output folder (default: samples/ next to the checkpoint; --pieces "
                                               "and --frames: DIR_solved next to the folder)")
    p.add_argument("--dataset", default=None, choices=[*DATASETS, *VIDEO_DATASETS],
                   help="evaluate on another dataset than trained on (of the checkpoint's kind)")
    p.add_argument("--data-dir", default=None,
                   help="image folder for folder/imagenet/jpwleg3, the MNIST IDX folder or mnist_test_seq.npy for "
                        "movingmnist, video folder for videos (default: the training run's)")
    p.add_argument("--video", default=None,
                   help="video checkpoints, with --superres: your own clip (a file or a frame folder) to raise the "
                        "frame rate of")
    p.add_argument("--pieces", default=None,
                   help="image checkpoints: solve a folder of piece images in any order and with any names (resized to "
                        "the model's piece size; cells beyond them are missing and generated); writes solved.png and "
                        "arrangement.json, each piece with its confidence (the share of at least 8 samples that put "
                        "it there)")
    p.add_argument("--frames", default=None,
                   help="video checkpoints: order a folder of pieces (an image per frame for 1-frame pieces, else a "
                        "clip or frame folder per piece); writes order.json")
    p.add_argument("--grid", type=grid, default=None,
                   help="--pieces: the grid, e.g. 3 or 2x4 (default: the checkpoint's)")
    p.add_argument("--pin", action="append", default=[], metavar="FILE=ROW,COL",
                   help="--pieces/--frames: a piece whose place you know (repeatable), for models trained with "
                        "--anchor; video models: FILE=0 names the first piece")
    p.add_argument("--superres", type=non_negative, default=0,
                   help="video checkpoints: generate K pieces between each pair of given pieces (K frames with "
                        "1-frame pieces), of test clips or of --video")
    p.add_argument("--frame-stride", type=int, default=None,
                   help="video checkpoints: keep every N-th frame (default: the checkpoint's)")
    p.add_argument("--batch-size", type=positive, default=50, help="puzzles solved at once")
    p.add_argument("--device", default="auto",
                   help="auto (a CUDA GPU, else a Mac's GPU, mps, else the CPU), cpu, cuda, cuda:N or mps")
    p.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help="arithmetic: auto (bf16 autocast on CUDA, fp32 on CPU and mps, as in training)")
    p.add_argument("--vae", default=None, help="latent video checkpoints: the autoencoder folder, if it moved since "
                                               "training (default: the training run's)")
    return p


if __name__ == "__main__":
    with user_errors():
        main(get_parser().parse_args())
