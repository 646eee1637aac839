"""
Solving your own data with a trained checkpoint: a folder of pieces nobody has solved (--pieces, --frames) and
temporal super-resolution of test clips or of your own clip (--superres, --video). The loaded checkpoint is a
solving.solver.Solver; the bag itself (solving/bag.py) is what Solver.solve runs. Paper: the supplement's "Downstream
Task: Temporal Super-resolution" (--superres); the rest is not in the paper (pieces of your own, pins, confidence).

    python -m solving.own --ckpt checkpoints/image-photos-3x3.pt --pieces my_pieces/    # solved.png, arrangement.json
    python -m solving.own --ckpt checkpoints/video-mmnist-10x2.pt --frames my_clips/    # order.json
    python -m solving.own --ckpt checkpoints/video-mmnist-7x4-superres.pt --superres 1    # 1 piece between given ones
    result = solving.load("checkpoints/image-photos-3x3.pt").solve(pieces)            # a Result
"""
import argparse
import json
import os
from dataclasses import replace

import numpy as np
import torch
from PIL import Image

from config import load_checkpoint
from pictures import video_row, write_rows
from plumbing.cli import UserError, non_negative, positive, resolve_device, user_errors
from puzzles import VideoPuzzles, superres_given, video_tensor
from sample import add_sampling_flags, sampling
from solving.bag import CONFIDENCE_SAMPLES
from solving.solver import Solver
from sources.files import data_folder, find_data, fit_channels, read_video

SUPERRES_CLIPS = 4          # test clips --superres pictures
INPUTS = {"image": ("pieces",), "video": ("frames", "superres", "video")}   # the inputs each kind of checkpoint takes
# the shipped photo model trained with missing pieces (0 to 3 of 9): the one to use for a bag with holes
MASKED_MODEL = "checkpoints/image-photos-3x3-missing.pt"

# ----------------------------------------------------------------------------
# Temporal super-resolution (supplement, "Downstream Task: Temporal Super-resolution")
# ----------------------------------------------------------------------------

def read_clip(args, puzzle, num_frames):
    """The centre num_frames frames of --video, at the checkpoint's size and channels: (L, H, W, C) in [0, 1]."""
    clip = fit_channels(read_video(args.video, puzzle.frame_stride, puzzle.size), puzzle.channels)
    if len(clip) < num_frames:
        fpp = puzzle.frames_per_piece
        raise UserError(f"--video {args.video} has {len(clip)} frames at --frame-stride {puzzle.frame_stride}, fewer "
                        f"than the {num_frames} ({num_frames // fpp} pieces x {fpp} frames) needed; pass a longer clip "
                        "or a smaller --frame-stride")
    start = (len(clip) - num_frames) // 2
    return clip[start:start + num_frames]


def stem(path):
    """clip.mp4 or frames/ -> "clip" or "frames": the name output files are derived from."""
    return os.path.splitext(os.path.basename(os.path.normpath(path)))[0]


def check_pattern(ckpt, trained, k, generated):
    """Refuse a pattern the checkpoint never trained on: a super-resolution model knows its own K alone; a model
    trained with up to M pieces missing at random, patterns of at most M generated pieces."""
    if trained.superres and k != trained.superres:
        raise UserError(f"--superres {k}: {ckpt} trained super-resolution with K = {trained.superres} only; pass "
                        f"--superres {trained.superres}")
    if not trained.superres and generated > trained.missing:
        raise UserError(f"--superres {k} generates {generated} of the {trained.pieces} pieces, and {ckpt} trained "
                        f"with at most {trained.missing} missing; use a model trained with --superres {k} (such as "
                        "checkpoints/video-mmnist-7x4-superres.pt) or with --missing of at least that many")


def low_rate_batch(content, keep):
    """The puzzle batch of clips in time order, content (B, N, F, C, H, W), whose pieces at slots keep (N,) bool are
    given and the others missing (their frames are not shown to the network)."""
    b, n = content.shape[:2]
    return {"content": content, "true_pos": torch.arange(n, device=content.device).expand(b, -1),
            "missing": torch.from_numpy(~keep).to(content.device).expand(b, -1)}


def superres(args, solver):
    """
    The pieces at positions 0, K+1, 2(K+1), ... are given, the K pieces between each pair are missing content
    generated: the given pieces keep their slots in the assignment, the missing ones take the slots left free. The
    network is told what its training told it (jpdvt.told_and_pinned): a super-resolution model (trained with
    --superres K) every given piece's code, any other masked model the anchor's alone. Input: the clip
    of --video (its frames are the low-rate video), else test clips of the dataset (every (K+1)-th piece kept, the
    ground truth shown next to the result).
    """
    puzzle, device = solver.config.puzzle, solver.device
    pieces, fpp, k = puzzle.pieces, puzzle.frames_per_piece, args.superres
    if not solver.generates:                                   # its content head never trained: blank frames
        raise UserError(f"--superres generates pieces, and {args.ckpt} trained without missing pieces (--missing 0), "
                        "so it cannot; use a video model trained with --superres K or --missing K")
    valid = [j for j in range(1, pieces - 1) if (pieces - 1) % (j + 1) == 0]
    if k not in valid:
        raise UserError(f"--superres {k} does not fit this {pieces}-piece checkpoint (given pieces at 0, K+1, ... "
                        f"up to {pieces - 1}); use {' or '.join(map(str, valid)) or 'a checkpoint with more pieces'}")
    keep = superres_given(np.arange(pieces), k)               # time slots of the given (low-rate) pieces
    check_pattern(args.ckpt, solver.trained, k, int((~keep).sum()))
    if args.video:
        low = read_clip(args, puzzle, int(keep.sum()) * fpp)
        low = low.reshape(-1, fpp, *low.shape[1:])           # (m f) h w c -> m f h w c
        full = np.zeros((pieces, *low.shape[1:]), np.float32)
        full[keep] = low
        content = video_tensor(full)[None]
    else:                                                      # test clips in time order: (B, N, F, C, H, W)
        test = VideoPuzzles(replace(puzzle, missing=0, superres=0), "test", args.seed)
        items = [test[i] for i in range(min(args.num_puzzles, SUPERRES_CLIPS, len(test)))]
        content = torch.stack([it["content"][torch.argsort(it["true_pos"])] for it in items])
    batch = low_rate_batch(content.to(device), keep)
    positions, generated = solver.solve_batch(batch, pinned=~batch["missing"])   # given pieces pinned; in pixels
    rows = [video_row(batch, positions, generated, k=i) for i in range(len(content))]
    if args.video:                                             # no ground truth for the user's clip
        rows = [(clips[:2], marks[:2]) for clips, marks in rows]
    name = f"{stem(args.video)}_superres.gif" if args.video else "superres.gif"
    os.makedirs(args.out, exist_ok=True)                 # only now: a failed run leaves no folder behind
    gif = write_rows(os.path.join(args.out, name), rows, ["input", "super-resolved", "ground truth"][:len(rows[0][0])])
    print(f"wrote {gif}: {int(keep.sum())} given pieces of {fpp} frames, {k} generated piece(s) between each pair "
          "(in red)")
    return gif


# ----------------------------------------------------------------------------
# A folder of pieces nobody has solved (--pieces, --frames)
# ----------------------------------------------------------------------------

def read_pieces(folder, video, puzzle):
    """The pieces of --pieces/--frames: (names, pieces) in name order; every entry must be a piece (an image; for a
    video model with several frames per piece, a clip file or a frame folder)."""
    flag = "--frames" if video else "--pieces"
    if not os.path.isdir(folder):
        raise UserError(f"{flag} {folder} is not a folder; pass a folder of piece files")
    names = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    if not names:
        raise UserError(f"{flag} {folder} is empty; put the piece files in it")
    pieces = []
    for name in names:
        path = os.path.join(folder, name)
        if video and puzzle.frames_per_piece > 1:
            pieces.append(read_video(path, puzzle.frame_stride))
            continue
        try:
            with Image.open(path) as im:
                pieces.append(im.convert("RGB"))
        except (OSError, ValueError, Image.DecompressionBombError):
            raise UserError(f"{flag}: {name} in {folder} is not an image; leave only piece images there") from None
    if video and puzzle.frames_per_piece == 1:
        pieces = [np.asarray(p)[None] for p in pieces]                  # a 1-frame clip per image
    return names, pieces


def parse_pins(args, names, video):
    """--pin FILE=ROW,COL (video: FILE=0) -> {piece index: (row, col) or slot}; one sentence for a bad one."""
    pins = {}
    for text in args.pin:
        name, _, where = text.partition("=")
        if name not in names:
            raise UserError(f"--pin {text} names no file of {args.pieces or args.frames}; use FILE=ROW,COL with a "
                            "file name from that folder")
        try:
            values = [int(v) for v in where.split(",")]
        except ValueError:
            values = []
        if len(values) != (1 if video else 2):
            raise UserError(f"--pin {text} must be FILE={'0' if video else 'ROW,COL'}")
        pins[names.index(name)] = values[0] if video else tuple(values)
    return pins


def solve_pieces(args, solver):
    """--pieces / --frames: solve the folder's pieces (Solver.solve); write solved.png and arrangement.json
    (images) or order.json (videos). Everything is checked before anything is
    written."""
    video = solver.config.puzzle.kind == "video"
    names, pieces = read_pieces(args.pieces or args.frames, video, solver.config.puzzle)
    result = solver.solve(dict(zip(names, pieces)), pins=parse_pins(args, names, video), seed=args.seed,
                          judge=args.judge)
    conf = result.confidence
    cells = len(result.cells)
    if not video and len(names) < cells and not solver.generates:
        print(f"note: {cells - len(names)} empty cell(s), and this model never trained with missing pieces, so it "
              f"cannot draw them (they stay grey); for photo pieces of a 3x3 grid with holes use {MASKED_MODEL}")
    if video:
        order = [names[i] for i in np.argsort(result.positions)]
        report = {"pieces": {n: {"slot": int(s), "confidence": float(c)}
                             for n, s, c in zip(names, result.positions, conf)}, "order": order}
        path = os.path.join(args.out, "order.json")
    else:
        report = {"pieces": {n: {"row": int(r), "col": int(c), "confidence": float(p)}
                             for n, (r, c), p in zip(names, result.positions, conf)},
                  "grid": list(solver.config.puzzle.grid), "generated_cells": result.generated.tolist()}
        path = os.path.join(args.out, "arrangement.json")
    os.makedirs(args.out, exist_ok=True)                 # only now: a failed run leaves no folder behind
    if not video:
        result.image.save(os.path.join(args.out, "solved.png"))
    opts = solver.opts
    samples = max(opts.samples, CONFIDENCE_SAMPLES)
    report.update(puzzle_confidence=result.puzzle_confidence, ckpt=args.ckpt, steps=opts.steps, sampler=opts.sampler,
                  samples=samples, judge=args.judge, judge_moved=result.moved, precision=solver.precision)
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
    picture = "" if video else f" and {os.path.join(args.out, 'solved.png')}"
    print(f"{len(names)} pieces solved{confidence_words(result, samples)}; wrote {path}{picture}")
    return report


def confidence_words(result, samples):
    """What the puzzle's confidence measures, in words: the samples' agreement with the model's answer, or under the
    judge with the judge's board, after how many pieces the judge moved from the model's answer."""
    if result.moved is None:
        return f", {result.puzzle_confidence:.0%} of the {samples} samples agree on all of it"
    return (f" by the judge, which moved {result.moved} of them from the model's own answer; "
            f"{result.puzzle_confidence:.0%} of the {samples} samples agree with the judge's board on all of it")


# ----------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------

def main(args):
    resolve_device(args.device)                  # a wrong --device is named before anything else
    inputs = [flag for flag in ("pieces", "frames", "superres", "video") if getattr(args, flag)]
    if not inputs:
        raise UserError("give your data: --pieces DIR (image checkpoints), --frames DIR or --superres K (video "
                        "checkpoints); to score test puzzles, run sample.py")
    if args.video and not args.superres:
        raise UserError("--video names a clip to raise the frame rate of: add --superres K (to order pieces of your "
                        "own, put them in a folder and pass --frames DIR)")
    kind = load_checkpoint(args.ckpt)["config"].puzzle.kind
    wrong = [flag for flag in inputs if flag not in INPUTS[kind]]
    if wrong:
        raise UserError(f"--{wrong[0]} does not apply to {args.ckpt}, which holds the {kind} model; its input is "
                        f"{' or '.join('--' + f for f in INPUTS[kind][:2])}")
    folder = args.pieces or args.frames
    args.out = args.out or (os.path.normpath(folder) + "_solved" if folder else os.path.join(
        os.path.dirname(os.path.abspath(args.ckpt)), "samples", os.path.splitext(os.path.basename(args.ckpt))[0] +
        "-superres"))
    check_out(args)
    solver = open_solver(args)
    return superres(args, solver) if args.superres else solve_pieces(args, solver)


def check_out(args):
    """Refuse an --out that is the input folder or inside it: the next run would read what this one wrote as pieces."""
    for flag in ("pieces", "frames", "video"):
        folder = getattr(args, flag)
        if folder and os.path.isdir(folder) and inside(args.out, folder):
            raise UserError(f"--out {args.out} is inside --{flag} {folder}, where the next run would read what this "
                            "one writes as input; pass an output folder outside it")


def inside(path, folder):
    """Whether path is folder or lies inside it (links followed)."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([path, folder]) == folder


def open_solver(args):
    """The Solver of --ckpt for your own data: its puzzle settings with --data-dir (--superres of test clips; default
    the training run's) and --vae (a latent model's autoencoder, if it moved), and the sampling of the flags over the
    checkpoint's (sample.sampling prints it)."""
    ckpt = load_checkpoint(args.ckpt)
    opts, device, _ = sampling(args, ckpt)
    puzzle, changes = ckpt["config"].puzzle, {}
    if args.superres and not args.video:
        changes["data_dir"] = find_data(puzzle, args.ckpt, args.data_dir)
    if getattr(puzzle, "vae", None):
        changes["vae"] = args.vae or data_folder(puzzle.vae, args.ckpt)
        if changes["vae"] is None:
            raise UserError(f"--vae: the autoencoder {puzzle.vae} of {args.ckpt} is not found; pass its folder")
    config = replace(ckpt["config"], puzzle=replace(puzzle, **changes))
    return Solver(ckpt, config, device, opts, args.precision)


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sampling_flags(p)
    p.add_argument("--pieces", default=None,
                   help="image checkpoints: solve a folder of piece images in any order and with any names (resized to "
                        "the model's piece size; cells beyond them are missing and generated); writes solved.png and "
                        "arrangement.json, each piece with its confidence (the share of at least 8 samples that put "
                        "it there)")
    p.add_argument("--frames", default=None,
                   help="video checkpoints: order a folder of pieces (an image per frame for 1-frame pieces, else a "
                        "clip or frame folder per piece); writes order.json")
    p.add_argument("--pin", action="append", default=[], metavar="FILE=ROW,COL",
                   help="a piece whose place you know, kept on its cell (repeatable; needed by models trained with "
                        "--anchor, which are told the first pin's code; other pins hold in the assignment only); video "
                        "models: "
                        "FILE=0 names the first piece")
    p.add_argument("--superres", type=non_negative, default=0,
                   help="video checkpoints: generate K pieces between each pair of given pieces (K frames with 1-frame "
                        "pieces), of test clips (--data-dir, --num-puzzles) or of --video")
    p.add_argument("--video", default=None, help="with --superres: your own clip (a file or a frame folder)")
    p.add_argument("--data-dir", default=None, help="--superres of test clips: the data folder (default: the training "
                                                    "run's)")
    p.add_argument("--num-puzzles", type=positive, default=SUPERRES_CLIPS,
                   help=f"--superres of test clips: how many (at most {SUPERRES_CLIPS})")
    p.add_argument("--out", default=None, help="output folder (default: DIR_solved next to --pieces/--frames DIR; "
                                               "--superres: samples/CKPT-superres/ next to the checkpoint)")
    return p


if __name__ == "__main__":
    with user_errors():
        main(get_parser().parse_args())
