"""
Solve puzzles with a trained JPDVT checkpoint: accuracy on fresh test puzzles, pictures, your own photo or clip,
and temporal super-resolution.

Paper: "Predicted position encodings" (supplement) and "Metrics" (Sec. 4). Everything (model, puzzle settings)
is rebuilt from the checkpoint; the EMA weights are used. Image checkpoints report piece- and puzzle-level
accuracy over the pieces the model had to place; video checkpoints report the mean normalized Kendall distance
and the fraction of clips fully ordered, strict and with generated pieces compared as a set (jpdvt.COUNTED says
what each counts). Video checkpoints can also fill in pieces between given ones (supplement, "Downstream Task:
Temporal Super-resolution").

    python sample.py --ckpt checkpoints/image-shapes-3x3.pt                 # metrics.json + examples.png
    python sample.py --ckpt out/run/ckpt.pt --missing 2 --sampler ddim --steps 25      # deterministic
    python sample.py --ckpt out/run/ckpt.pt --dataset folder --data-dir ~/photos
    python sample.py --ckpt checkpoints/image-shapes-3x3.pt --image photo.jpg
    python sample.py --ckpt out/video/ckpt.pt                              # metrics.json + examples.gif
    python sample.py --ckpt out/video/ckpt.pt --video clip.mp4             # order your own clip
    python sample.py --ckpt out/video/ckpt.pt --superres 1                 # 1 generated piece between given ones
"""
import argparse
import json
import os
import time

import numpy as np
import torch
from PIL import Image
from tqdm import tqdm

from diffusion import SAMPLERS
from errors import UserError, run_cli
from jpdvt import COUNTED, build_model, evaluate, position_table, score, solve
from metrics import ASSIGNERS
from pictures import image_row, save_png, stack, video_row, write_rows
from puzzles import (DATASETS, VIDEO_DATASETS, ImagePuzzles, VideoPuzzles, assemble, check_missing, check_video,
                     collate, cut_image, make_video_puzzle, shuffle_pieces, video_item, video_tensor)
from sources import fit_channels, fit_image, read_video
from training import load_checkpoint, positive, resolve_device
from vae import VaeCodec

PICTURED = {"image": 8, "video": 4}   # puzzles pictured in examples.png / examples.gif
DISPLAY_PIECE = 160                   # --image pictures: piece side in pixels, at most the photo's own resolution


# ----------------------------------------------------------------------------
# A loaded checkpoint
# ----------------------------------------------------------------------------

class Solver:
    """A checkpoint's EMA model and diffusion on --device, its config, a generator seeded by --seed, and (for
    latent models) the autoencoder; `evaluate` solves and scores a batch of pixel puzzles with the flags' sampler."""

    def __init__(self, args, ckpt):
        self.args, self.config, self.step = args, ckpt["config"], ckpt["step"]
        self.codec = VaeCodec(self.config["vae"]) if self.config.get("vae") else None
        self.model, self.diffusion = build_model(self.config)
        self.model.load_state_dict(ckpt["ema"])
        self.device = resolve_device(args.device)
        self.model.to(self.device).eval()
        self.gen = torch.Generator(self.device).manual_seed(args.seed)

    def encode(self, batch):
        return self.codec.encode_batch(batch) if self.codec else batch

    def decode(self, content):
        return self.codec.decode(content) if self.codec else content

    def evaluate(self, batch):
        """(positions, content with missing pieces generated (latents for a latent model), metrics) of a batch."""
        a = self.args
        return evaluate(self.model, self.diffusion, self.encode(batch), self.config, a.steps, a.sampler, a.assign,
                        self.gen, samples=a.samples)


# ----------------------------------------------------------------------------
# Scoring fresh test puzzles (images and videos alike)
# ----------------------------------------------------------------------------

def test_puzzles(args, config, missing, stride=None, seed=None):
    """The checkpoint's test split (or --dataset/--data-dir's), with `missing` pieces missing per puzzle; its
    shuffles (and crops, missing pieces) are drawn from `seed` (default --seed)."""
    seed = args.seed if seed is None else seed
    kind = config["kind"]
    dataset = args.dataset or config["dataset"]
    if dataset not in (DATASETS if kind == "image" else VIDEO_DATASETS):
        raise UserError(f"--dataset {dataset} does not fit this {kind} checkpoint; use one of "
                        f"{', '.join(DATASETS if kind == 'image' else VIDEO_DATASETS)}")
    data_dir = args.data_dir or (config["args"].get("data_dir") if dataset == config["dataset"] else None)
    if kind == "image":
        return ImagePuzzles(dataset, "test", tuple(config["grid"]), config["piece_size"], config["gap"], missing,
                            config["anchor"], seed, data_dir)
    return VideoPuzzles(dataset, "test", config["pieces"], config["frames_per_piece"], config["size"],
                        config["channels"], missing, stride, seed, data_dir)


def solve_pass(solver, test, num, batch_size, rows, desc):
    """Solve and score the first `num` puzzles of `test`: (metrics, seconds spent solving); pictures of the first
    puzzles are appended to `rows` until it holds PICTURED of them."""
    config = solver.config
    kind = config["kind"]
    positions, truth, seconds = [], [], 0.0
    for start in tqdm(range(0, num, batch_size), desc=desc, unit="batch"):
        batch = collate([test[i] for i in range(start, min(start + batch_size, num))])
        batch = {k: v.to(solver.device) for k, v in batch.items()}
        t = time.time()
        pos, content, _ = solver.evaluate(batch)
        seconds += time.time() - t
        positions.append(pos)
        truth.append({k: batch[k].cpu() for k in ("order", "missing")})
        pictured = range(min(PICTURED[kind] - len(rows), len(pos)))
        if kind == "video" and pictured:
            content = solver.decode(content[:len(pictured)])
        rows += [image_row(batch, pos, content, config["grid"], k) if kind == "image" else
                 video_row(batch, pos, content, k) for k in pictured]
    truth = {k: torch.cat([t[k] for t in truth]) for k in ("order", "missing")}
    return score(np.concatenate(positions), truth, config), seconds


def score_test_set(args, solver, missing, stride):
    """
    Solve --num-puzzles test puzzles, --repeats times (pass r: shuffles, missing pieces and sampling noise of seed
    --seed + r, so pass 0 is a run with --repeats 1); write metrics.json (the mean over passes, which weigh the same,
    and each pass's figures) and examples.png (images) or examples.gif (videos) of the first pass.
    """
    config = solver.config
    kind = config["kind"]
    passes, rows, seconds = [], [], 0.0
    for r in range(args.repeats):
        test = test_puzzles(args, config, missing, stride, args.seed + r)
        num = min(args.num_puzzles, len(test))
        if r == 0 and num < args.num_puzzles:
            print(f"note: the test split holds only {len(test)} puzzles; solving {num}")
        solver.gen.manual_seed(args.seed + r)
        desc = "solving" + (f" (pass {r + 1}/{args.repeats})" if args.repeats > 1 else "")
        metrics, sec = solve_pass(solver, test, num, args.batch_size, rows, desc)
        passes.append(metrics)
        seconds += sec
    metrics = {**{k: float(np.mean([p[k] for p in passes])) for k in passes[0]},
               "counted": COUNTED[kind], "num_puzzles": num, "sec_per_puzzle": seconds / (num * args.repeats),
               "dataset": test.dataset, "missing": missing, "sampler": args.sampler, "steps": args.steps,
               "samples": args.samples, "assign": args.assign, "seed": args.seed, "repeats": args.repeats,
               "ckpt": args.ckpt, "train_step": solver.step}
    if args.repeats > 1:
        metrics["passes"] = passes
    metrics.update({k: config[k] for k in (("grid", "piece_size", "gap", "anchor") if kind == "image" else
                                           ("pieces", "frames_per_piece", "size"))})
    if kind == "video":
        metrics["frame_stride"] = stride
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    if kind == "image":
        picture = os.path.join(args.out, "examples.png")
        save_png(picture, stack(rows, axis=0))
        shown = "shuffled input | solved | solved + inpainted | ground truth"
        summary = f"piece accuracy {metrics['piece_acc']:.4f}, puzzle accuracy {metrics['puzzle_acc']:.4f}"
    else:
        picture = write_rows(os.path.join(args.out, "examples.gif"), rows, ["shuffled", "solved", "ground truth"])
        shown = "shuffled input | solved, generated frames in red | ground truth"
        summary = (f"mean Kendall distance {metrics['kendall']:.4f} (generated pieces as a set "
                   f"{metrics['kendall_set']:.4f}), exactly ordered {metrics['exact']:.4f} "
                   f"({metrics['exact_set']:.4f})")
    ensemble = f" x{args.samples} samples" if args.samples > 1 else ""
    if args.repeats > 1:
        summary += f" (mean of {args.repeats} passes; puzzle accuracy of each: " + \
            " ".join(f"{p['puzzle_acc' if kind == 'image' else 'exact']:.3f}" for p in passes) + ")"
    print(f"{num} puzzles ({args.sampler}-{args.steps}{ensemble}, {args.assign}): {summary}, "
          f"{metrics['sec_per_puzzle']:.3f} s/puzzle")
    print(f"wrote {os.path.join(args.out, 'metrics.json')} and {picture} ({shown})")
    return metrics


# ----------------------------------------------------------------------------
# Your own photo or clip
# ----------------------------------------------------------------------------

def open_photo(path, grid, cell):
    """The photo at `path` (PIL, loaded), refused in one sentence if unreadable or much smaller than the grid."""
    try:
        with Image.open(path) as im:
            im.load()
            photo = im.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError):
        raise UserError(f"--image {path} could not be read as an image; pass a JPEG or PNG file") from None
    h, w = grid[0] * cell, grid[1] * cell
    if photo.width < w // 2 or photo.height < h // 2:
        raise UserError(f"--image {path} is {photo.width}x{photo.height} px, too small for this checkpoint's "
                        f"{grid[0]}x{grid[1]} grid (needs at least {w // 2}x{h // 2})")
    return photo


def solve_photo(args, solver):
    """
    Cut --image to the checkpoint's grid at the model's resolution, shuffle it (seeded) and solve it; draw
    input | solution | original with pieces cut from the photo's own pixels (up to DISPLAY_PIECE px a side).
    """
    config, device = solver.config, solver.device
    grid, piece, gap = tuple(config["grid"]), config["piece_size"], config["gap"]
    photo = open_photo(args.image, grid, piece + gap)
    pieces = cut_image(fit_image(photo, grid[0] * (piece + gap), grid[1] * (piece + gap)), grid, piece, gap)
    order, miss = shuffle_pieces(len(pieces), np.random.default_rng(args.seed), 0, config["anchor"])
    batch = {"content": torch.from_numpy(pieces[order]).permute(0, 3, 1, 2)[None].float().to(device) * 2 - 1,
             "order": torch.from_numpy(order)[None].to(device), "missing": torch.from_numpy(miss)[None].to(device)}
    pos, _, acc = solver.evaluate(batch)
    # the same cut at display resolution: as large as the photo allows, up to DISPLAY_PIECE px per piece
    k = max(1.0, min(DISPLAY_PIECE / piece, min(photo.width / grid[1], photo.height / grid[0]) / (piece + gap)))
    big_piece, big_gap = round(piece * k), round(gap * k)
    big = cut_image(fit_image(photo, grid[0] * (big_piece + big_gap), grid[1] * (big_piece + big_gap)), grid,
                    big_piece, big_gap)
    n, border = len(big), max(2, big_piece // 40)
    out = os.path.join(args.out, os.path.splitext(os.path.basename(args.image))[0] + "_solved.png")
    save_png(out, stack([assemble(big[order], np.arange(n), grid, border, fill=1.0),
                         assemble(big[order], pos[0], grid, border, fill=1.0),
                         assemble(big, np.arange(n), grid, border, fill=1.0)], gap=4 * border))
    placed = round(acc["piece_acc"] * (n - int(config["anchor"]))) + int(config["anchor"])
    print(f"{'solved' if acc['puzzle_acc'] == 1.0 else 'not solved'}: {placed}/{n} pieces in place; "
          f"wrote {out} (input | solution | original)")
    return acc


def read_clip(args, config, stride, num_frames):
    """The centre num_frames frames of --video, at the checkpoint's size and channels: (T, H, W, C) in [0, 1]."""
    clip = fit_channels(read_video(args.video, stride, config["size"]), config["channels"])
    if len(clip) < num_frames:
        fpp = config["frames_per_piece"]
        raise UserError(f"--video {args.video} has {len(clip)} frames at --frame-stride {stride}, fewer than the "
                        f"{num_frames} ({num_frames // fpp} pieces x {fpp} frames) needed; pass a longer clip or a "
                        "smaller --frame-stride")
    start = (len(clip) - num_frames) // 2
    return clip[start:start + num_frames]


def stem(path):
    """clip.mp4 or frames/ -> "clip" or "frames": the name output files are derived from."""
    return os.path.splitext(os.path.basename(os.path.normpath(path)))[0]


def order_clip(args, solver, missing, stride):
    """Cut --video into the checkpoint's pieces (centre window), shuffle it (seeded), solve, and picture it."""
    config = solver.config
    pieces, fpp = config["pieces"], config["frames_per_piece"]
    clip = read_clip(args, config, stride, pieces * fpp)
    puzzle = make_video_puzzle(clip, pieces, fpp, np.random.default_rng(args.seed), missing, start=0)
    batch = {k: v[None].to(solver.device) for k, v in video_item(puzzle).items()}   # a batch of one
    pos, generated, scores = solver.evaluate(batch)
    gif = write_rows(os.path.join(args.out, f"{stem(args.video)}_solved.gif"),
                     [video_row(batch, pos, solver.decode(generated), 0)], ["shuffled", "solved", "original"])
    print(f"predicted positions of the shuffled pieces {pos[0].tolist()} (true {puzzle['order'].tolist()}): "
          f"Kendall distance {scores['kendall']:.3f}, {'in order' if scores['exact'] == 1 else 'not in order'}; "
          f"wrote {gif} (shuffled | solved | original)")
    return scores


# ----------------------------------------------------------------------------
# Temporal super-resolution (supplement, "Downstream Task: Temporal Super-resolution")
# ----------------------------------------------------------------------------

def superres(args, solver, stride):
    """
    The pieces at positions 0, K+1, 2(K+1), ... are given, the K pieces between each pair are missing content
    generated at known positions (every positional code is given). Input: the clip of --video (its frames are
    the low-rate video), else test clips of the dataset (every (K+1)-th piece kept, the ground truth shown next
    to the result).
    """
    config, device = solver.config, solver.device
    pieces, fpp, k = config["pieces"], config["frames_per_piece"], args.superres
    valid = [j for j in range(1, pieces - 1) if (pieces - 1) % (j + 1) == 0]
    if k not in valid:
        raise UserError(f"--superres {k} does not fit this {pieces}-piece checkpoint (given pieces at 0, K+1, ... "
                        f"up to {pieces - 1}); use {' or '.join(map(str, valid)) or 'a checkpoint with more pieces'}")
    keep = np.arange(pieces) % (k + 1) == 0                   # time slots of the given (low-rate) pieces
    if args.video:
        low = read_clip(args, config, stride, int(keep.sum()) * fpp)
        low = low.reshape(-1, fpp, *low.shape[1:])           # (m f) h w c -> m f h w c
        full = np.zeros((pieces, *low.shape[1:]), np.float32)
        full[keep] = low
        content = video_tensor(full)[None]
    else:                                                      # test clips in time order: (B, N, F, C, H, W)
        test = test_puzzles(args, config, 0, stride)
        items = [test[i] for i in range(min(args.num_puzzles, PICTURED["video"], len(test)))]
        content = torch.stack([it["content"][torch.argsort(it["order"])] for it in items])
    b = content.shape[0]
    batch = {"content": content.to(device), "order": torch.arange(pieces, device=device).expand(b, -1),
             "missing": torch.from_numpy(~keep).to(device).expand(b, -1)}
    _, generated = solve(solver.model, solver.diffusion, solver.encode(batch), position_table(config).to(device),
                         config["anchor"], args.steps, args.sampler, args.assign, solver.gen,
                         known=torch.ones_like(batch["missing"]), latents=solver.codec is not None)
    generated = solver.decode(generated)
    rows = [video_row(batch, np.arange(pieces)[None].repeat(b, 0), generated, i) for i in range(b)]
    if args.video:                                             # no ground truth for the user's clip
        rows = [(clips[:2], marks[:2]) for clips, marks in rows]
    name = f"{stem(args.video)}_superres.gif" if args.video else "superres.gif"
    gif = write_rows(os.path.join(args.out, name), rows, ["input", "super-resolved", "ground truth"][:len(rows[0][0])])
    print(f"wrote {gif}: {int(keep.sum())} given pieces of {fpp} frames, {k} generated piece(s) between each pair "
          "(in red)")
    return gif


# ----------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------

def main(args):
    ckpt = load_checkpoint(args.ckpt)
    config = ckpt["config"]
    if args.out is None:
        args.out = os.path.join(os.path.dirname(os.path.abspath(args.ckpt)), "samples")
    if config["kind"] == "image" and (args.video or args.superres):
        raise UserError(f"--video and --superres need a video checkpoint; {args.ckpt} is an image model")
    if config["kind"] == "video" and args.image:
        raise UserError(f"--image needs an image checkpoint; {args.ckpt} is a video model (use --video)")
    if config["kind"] == "image":
        missing = config["missing"] if args.missing is None else args.missing
        check_missing(missing, config["grid"][0] * config["grid"][1], int(config["anchor"]), "this checkpoint's grid")
        stride = None
    else:
        missing = args.missing if args.missing is not None else (0 if args.video else config["missing"])
        stride = config["frame_stride"] if args.frame_stride is None else args.frame_stride
        check_video(config["pieces"], config["frames_per_piece"], missing, stride)
    solver = Solver(args, ckpt)
    os.makedirs(args.out, exist_ok=True)
    if args.image:
        return solve_photo(args, solver)
    if args.superres:
        return superres(args, solver, stride)
    if args.video:
        return order_clip(args, solver, missing, stride)
    return score_test_set(args, solver, missing, stride)


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True, help="ckpt.pt written by train_image.py or train_video.py")
    p.add_argument("--num-puzzles", type=positive, default=200, help="test puzzles to solve and score")
    p.add_argument("--seed", type=int, default=0, help="seed of the test puzzles (shuffles, crops) and noise")
    p.add_argument("--repeats", type=positive, default=1,
                   help="solve the test puzzles this many times, pass r with the shuffles and noise of --seed + r, and "
                        "report the mean (for small test folders, whose single pass is a noisy estimate)")
    p.add_argument("--steps", type=positive, default=50, help="sampling steps (respaced out of T = 1000)")
    p.add_argument("--sampler", default="ddpm", choices=SAMPLERS,
                   help="ddpm (ancestral on respaced steps; 3.5-7.5 points more solved 3x3 puzzles than ddim at 50 "
                        "steps, BENCHMARKS.md) or ddim (deterministic)")
    p.add_argument("--samples", type=positive, default=1,
                   help="independent samples of the codes per puzzle; positions are assigned on their mean distance "
                        "to the true codes (K times the sampling time)")
    p.add_argument("--assign", default="hungarian", choices=ASSIGNERS,
                   help="codes -> positions: hungarian (optimal) or greedy (paper)")
    p.add_argument("--missing", type=int, default=None,
                   help="missing pieces per puzzle (default: the checkpoint's; 0 for --video)")
    p.add_argument("--out", default=None, help="output folder (default: samples/ next to the checkpoint)")
    p.add_argument("--dataset", default=None, choices=[*DATASETS, *VIDEO_DATASETS],
                   help="evaluate on another dataset than trained on (of the checkpoint's kind)")
    p.add_argument("--data-dir", default=None,
                   help="image folder for folder/imagenet/jpwleg3, the MNIST IDX folder or mnist_test_seq.npy for "
                        "movingmnist, video folder for videos (default: the training run's)")
    p.add_argument("--image", default=None, help="solve your own photo: cut, shuffle, solve, picture")
    p.add_argument("--video", default=None,
                   help="video checkpoints: order your own clip (file or frame folder; its centre is cut into the "
                        "checkpoint's pieces, shuffled and solved)")
    p.add_argument("--superres", type=int, default=0,
                   help="video checkpoints: generate K pieces between each pair of given pieces (K frames with "
                        "1-frame pieces), of --video or of test clips")
    p.add_argument("--frame-stride", type=int, default=None,
                   help="video checkpoints: keep every N-th frame (default: the checkpoint's)")
    p.add_argument("--batch-size", type=positive, default=50, help="puzzles solved at once")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    return p


if __name__ == "__main__":
    run_cli(main, get_parser().parse_args())
