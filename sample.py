"""
Solve puzzles with a trained JPDVT checkpoint: accuracy on fresh test puzzles, pictures, and your own photo.

Paper: "Predicted position encodings" (supplement) and "Metrics" (Sec. 4.2). Everything (model, puzzle
settings) is rebuilt from the checkpoint; the EMA weights are used. Image checkpoints report piece- and
puzzle-level accuracy (a puzzle is solved when every given piece is in place); video checkpoints report the mean
normalized Kendall distance and the fraction of clips fully ordered ("Temporal Jigsaw Puzzles Experiments"), and
can raise a video's frame rate (supplement, "Downstream Task: Temporal Super-resolution").

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
from jpdvt import load_checkpoint, positive, resolve_device, run_cli, solve
from metrics import ASSIGNERS, piece_accuracy, puzzle_accuracy
from posenc import sequence_table
from puzzles import (DATASETS, VIDEO_DATASETS, ImagePuzzles, UserError, VideoPuzzles, assemble, cut_image,
                     fit_channels, fit_image, make_video_puzzle, read_video, shuffle_pieces, unshuffle_video,
                     video_item, video_tensor, write_gif)
from train_image import build_model, collate, evaluate_batch
from train_video import VaeCodec, build_model as build_video_model, evaluate_batch as evaluate_video_batch, \
    video_scores

EXAMPLES = 4  # puzzles pictured in examples.gif / superres.gif


# ----------------------------------------------------------------------------
# Shared
# ----------------------------------------------------------------------------

def to_uint8(img):
    return (np.clip(img, 0, 1) * 255).round().astype(np.uint8)


def save_png(path, img, min_width=480):
    """Save a [0, 1] picture, enlarged by a whole factor (nearest) so small pieces stay visible."""
    k = max(1, min_width // img.shape[1])
    Image.fromarray(to_uint8(img)).resize((img.shape[1] * k, img.shape[0] * k), Image.NEAREST).save(path)


def load_model(args, ckpt, build):
    """The checkpoint's EMA model on the chosen device, its diffusion, the device and a seeded generator."""
    model, diffusion = build(ckpt["config"])
    model.load_state_dict(ckpt["ema"])
    device = resolve_device(args.device)
    model.to(device).eval()
    os.makedirs(args.out, exist_ok=True)
    return model, diffusion, device, torch.Generator(device).manual_seed(args.seed)


def puzzle_count(requested, test):
    """How many test puzzles to solve: as requested, at most the size of the test split."""
    if requested > len(test):
        print(f"note: the test split holds only {len(test)} puzzles; solving {len(test)}")
    return min(requested, len(test))


def iter_batches(test, num, batch_size, device):
    """The first `num` test puzzles, in batches on `device`, with a progress bar."""
    for start in tqdm(range(0, num, batch_size), desc="solving", unit="batch"):
        batch = collate([test[i] for i in range(start, min(start + batch_size, num))])
        yield {k: v.to(device) for k, v in batch.items()}


# ----------------------------------------------------------------------------
# Images
# ----------------------------------------------------------------------------

def pieces_np(content):
    """(N, C, P, P) in [-1, 1] -> (N, P, P, C) in [0, 1]."""
    return ((content.float().cpu() + 1) / 2).permute(0, 2, 3, 1).numpy()


def image_rows(batch, positions, content, grid, k):
    """One picture row of puzzle k: shuffled input | solved (S) | solved and inpainted (SI) | ground truth."""
    n = grid[0] * grid[1]
    given = pieces_np(batch["content"][k])
    missing = batch["missing"][k].cpu().numpy()
    shown = np.where(missing[:, None, None, None], 0.5, given)        # missing pieces are grey in the input
    gen = pieces_np(content[k])
    placed = np.where(missing, -1, positions[k])
    panels = [assemble(shown, np.arange(n), grid, border=2, fill=1.0),
              assemble(given, placed, grid, border=2, fill=1.0),
              assemble(np.where(missing[:, None, None, None], gen, given), positions[k], grid, border=2, fill=1.0),
              assemble(given, batch["order"][k].cpu().numpy(), grid, border=2, fill=1.0)]
    sep = np.ones((panels[0].shape[0], 6, 3), dtype=np.float32)
    return np.concatenate(sum(([p, sep] for p in panels), [])[:-1], axis=1)


def sample_image(args, ckpt):
    config = ckpt["config"]
    grid, piece, gap, anchored = tuple(config["grid"]), config["piece_size"], config["gap"], config["anchor"]
    n = grid[0] * grid[1]
    missing = config["missing"] if args.missing is None else args.missing
    if not 0 <= missing < n - (1 if anchored else 0):
        raise UserError(f"--missing must be between 0 and {n - 1 - (1 if anchored else 0)} for this "
                        f"{grid[0]}x{grid[1]} checkpoint, got {missing}")
    model, diffusion, device, gen = load_model(args, ckpt, build_model)

    if args.image:
        return solve_photo(args, model, diffusion, config, grid, piece, gap, device, gen)

    dataset = args.dataset or config["dataset"]
    if dataset not in DATASETS:
        raise UserError(f"--dataset {dataset} holds videos; this image checkpoint needs one of {', '.join(DATASETS)}")
    data_dir = args.data_dir or (config["args"].get("data_dir") if dataset == config["dataset"] else None)
    test = ImagePuzzles(dataset, "test", grid, piece, gap, missing, anchored, args.seed, data_dir)
    num = puzzle_count(args.num_puzzles, test)
    positions, orders, masks, seconds = [], [], [], 0.0
    picture = None
    for batch in iter_batches(test, num, args.batch_size, device):
        t = time.time()
        pos, content, _ = evaluate_batch(model, diffusion, batch, config, args.steps, args.sampler, args.assign, gen)
        seconds += time.time() - t
        positions.append(pos)
        orders.append(batch["order"].cpu().numpy())
        masks.append(~batch["missing"].cpu().numpy())
        if picture is None:
            picture = [image_rows(batch, pos, content, grid, k) for k in range(min(8, len(pos)))]
    positions, orders, masks = np.concatenate(positions), np.concatenate(orders), np.concatenate(masks)
    metrics = {"piece_acc": piece_accuracy(positions, orders, masks),
               "puzzle_acc": puzzle_accuracy(positions, orders, masks), "num_puzzles": num,
               "sec_per_puzzle": seconds / num, "dataset": dataset, "grid": list(grid), "piece_size": piece,
               "gap": gap, "missing": missing, "anchor": anchored, "sampler": args.sampler, "steps": args.steps,
               "assign": args.assign, "seed": args.seed, "ckpt": args.ckpt, "train_step": ckpt["step"]}
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    sep = np.ones((6, picture[0].shape[1], 3), dtype=np.float32)
    grid_png = os.path.join(args.out, "examples.png")
    save_png(grid_png, np.concatenate(sum(([r, sep] for r in picture), [])[:-1]))
    print(f"{num} puzzles ({args.sampler}-{args.steps}, {args.assign}): piece accuracy {metrics['piece_acc']:.4f}, "
          f"puzzle accuracy {metrics['puzzle_acc']:.4f}, {metrics['sec_per_puzzle']:.3f} s/puzzle")
    print(f"wrote {os.path.join(args.out, 'metrics.json')} and {grid_png} "
          "(columns: shuffled input | solved | solved + inpainted | ground truth)")
    return metrics


def solve_photo(args, model, diffusion, config, grid, piece, gap, device, gen):
    """Cut a user's photo to the checkpoint's grid, shuffle it (seeded), solve, and picture it."""
    try:
        with Image.open(args.image) as im:
            im.load()
            size = im.size
            h, w = grid[0] * (piece + gap), grid[1] * (piece + gap)
            if size[0] < w // 2 or size[1] < h // 2:
                raise UserError(f"--image {args.image} is {size[0]}x{size[1]} px, too small for this "
                                f"checkpoint's {grid[0]}x{grid[1]} grid (needs at least {w // 2}x{h // 2})")
            img = fit_image(im, h, w)
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        if isinstance(e, UserError):
            raise
        raise UserError(f"--image {args.image} could not be read as an image; pass a JPEG or PNG file") from None
    rng = np.random.default_rng(args.seed)
    pieces = cut_image(img, grid, piece, gap)
    order, miss = shuffle_pieces(len(pieces), rng, 0, config["anchor"])
    content = torch.from_numpy(pieces[order]).permute(0, 3, 1, 2)[None].float() * 2 - 1
    batch = {"content": content.to(device), "order": torch.from_numpy(order)[None].to(device),
             "missing": torch.from_numpy(miss)[None].to(device)}
    pos, _, acc = evaluate_batch(model, diffusion, batch, config, args.steps, args.sampler, args.assign, gen)
    n = len(pieces)
    panels = [assemble(pieces[order], np.arange(n), grid, border=2, fill=1.0),
              assemble(pieces[order], pos[0], grid, border=2, fill=1.0),
              assemble(pieces, np.arange(n), grid, border=2, fill=1.0)]
    sep = np.ones((panels[0].shape[0], 6, 3), dtype=np.float32)
    out = os.path.join(args.out, os.path.splitext(os.path.basename(args.image))[0] + "_solved.png")
    save_png(out, np.concatenate([panels[0], sep, panels[1], sep, panels[2]], axis=1))
    solved = acc["puzzle_acc"] == 1.0
    print(f"{'solved' if solved else 'not solved'}: {int(round(acc['piece_acc'] * n))}/{n} pieces in place; "
          f"wrote {out} (input | solution | original)")
    return acc


# ----------------------------------------------------------------------------
# Videos
# ----------------------------------------------------------------------------

def frames_np(content):
    """(N, F, C, H, W) in [-1, 1] -> (N, F, H, W, C) in [0, 1]."""
    return ((content.float().cpu() + 1) / 2).permute(0, 1, 3, 4, 2).numpy()


def video_row(batch, positions, generated, k):
    """
    Clips of puzzle k, each (N*F, H, W, C): shuffled input (missing pieces grey) | solved (generated pieces put
    where the model placed them, marked) | ground truth; and the marks (per clip a (N*F,) bool or None).
    """
    real = frames_np(batch["content"][k])                      # (N, F, H, W, C), missing pieces' true frames too
    missing = batch["missing"][k].cpu().numpy()
    f = real.shape[1]
    gone = missing[:, None, None, None, None]
    slot_generated = np.empty_like(missing)
    slot_generated[positions[k]] = missing                     # which time slots got a generated piece
    clips = [np.where(gone, 0.5, real).reshape(-1, *real.shape[2:]),   # n f h w c -> (n f) h w c
             unshuffle_video(np.where(gone, frames_np(generated[k]), real), positions[k]),
             unshuffle_video(real, batch["order"][k].cpu().numpy())]
    return clips, [None, np.repeat(slot_generated, f), None]


def write_rows(path, rows, labels):
    """write_gif of video_row outputs; returns path."""
    write_gif(path, [clips for clips, _ in rows], labels, marks=[marks for _, marks in rows])
    return path


def stem(path):
    """clip.mp4 or frames/ -> "clip" or "frames": the name output files are derived from."""
    return os.path.splitext(os.path.basename(os.path.normpath(path)))[0]


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


def sample_video(args, ckpt):
    """Score --num-puzzles test puzzles (metrics.json, examples.gif), or order --video, or run --superres."""
    config = ckpt["config"]
    pieces, fpp = config["pieces"], config["frames_per_piece"]
    missing = args.missing if args.missing is not None else (0 if args.video else config["missing"])
    if not 0 <= missing < pieces - 1:
        raise UserError(f"--missing must be between 0 and {pieces - 2} for this {pieces}-piece checkpoint, "
                        f"got {missing}")
    stride = config["frame_stride"] if args.frame_stride is None else args.frame_stride
    if stride < 1:
        raise UserError(f"--frame-stride must be at least 1, got {stride}")
    dataset = args.dataset or config["dataset"]
    if dataset not in VIDEO_DATASETS:
        raise UserError(f"--dataset {dataset} holds images; this video checkpoint needs one of "
                        f"{', '.join(VIDEO_DATASETS)}")
    codec = VaeCodec(config["vae"]) if config["vae"] else None
    model, diffusion, device, gen = load_model(args, ckpt, build_video_model)
    encode = codec.encode_batch if codec else (lambda batch: batch)
    decode = codec.decode if codec else (lambda content: content)
    data_dir = args.data_dir or (config["args"].get("data_dir") if dataset == config["dataset"] else None)

    def test_set(k):
        return VideoPuzzles(dataset, "test", pieces, fpp, config["size"], config["channels"], k, stride, args.seed,
                            data_dir)

    if args.superres:
        return superres(args, model, diffusion, config, stride, test_set, encode, decode, device, gen)
    if args.video:
        return order_clip(args, model, diffusion, config, stride, missing, encode, decode, device, gen)

    test = test_set(missing)
    num = puzzle_count(args.num_puzzles, test)
    positions, orders, seconds, rows = [], [], 0.0, []
    for batch in iter_batches(test, num, args.batch_size, device):
        t = time.time()
        pos, content, _ = evaluate_video_batch(model, diffusion, encode(batch), config, args.steps, args.sampler,
                                               args.assign, gen)
        seconds += time.time() - t
        positions.append(pos)
        orders.append(batch["order"].cpu().numpy())
        if len(rows) < EXAMPLES:
            generated = decode(content)
            rows += [video_row(batch, pos, generated, k) for k in range(min(EXAMPLES - len(rows), len(pos)))]
    metrics = {**video_scores(np.concatenate(positions), np.concatenate(orders)), "num_puzzles": num,
               "sec_per_puzzle": seconds / num, "dataset": dataset, "pieces": pieces, "frames_per_piece": fpp,
               "missing": missing, "frame_stride": stride, "size": config["size"], "sampler": args.sampler,
               "steps": args.steps, "assign": args.assign, "seed": args.seed, "ckpt": args.ckpt,
               "train_step": ckpt["step"]}
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    gif = write_rows(os.path.join(args.out, "examples.gif"), rows, ["shuffled", "solved", "ground truth"])
    print(f"{num} puzzles ({args.sampler}-{args.steps}, {args.assign}): mean Kendall distance "
          f"{metrics['kendall']:.4f}, exactly ordered {metrics['exact']:.4f}, {metrics['sec_per_puzzle']:.3f} s/puzzle")
    print(f"wrote {os.path.join(args.out, 'metrics.json')} and {gif} "
          "(shuffled input | solved, generated frames in red | ground truth)")
    return metrics


def order_clip(args, model, diffusion, config, stride, missing, encode, decode, device, gen):
    """Cut --video into the checkpoint's pieces (centre window), shuffle it (seeded), solve, and picture it."""
    pieces, fpp = config["pieces"], config["frames_per_piece"]
    clip = read_clip(args, config, stride, pieces * fpp)
    puzzle = make_video_puzzle(clip, pieces, fpp, np.random.default_rng(args.seed), missing, start=0)
    batch = {k: v[None].to(device) for k, v in video_item(puzzle).items()}   # a batch of one
    pos, generated, scores = evaluate_video_batch(model, diffusion, encode(batch), config, args.steps, args.sampler,
                                                  args.assign, gen)
    gif = write_rows(os.path.join(args.out, f"{stem(args.video)}_solved.gif"),
                     [video_row(batch, pos, decode(generated), 0)],
                     ["shuffled", "solved", "original"])
    print(f"predicted positions of the shuffled pieces {pos[0].tolist()} (true {puzzle['order'].tolist()}): "
          f"Kendall distance {scores['kendall']:.3f}, {'in order' if scores['exact'] == 1 else 'not in order'}; "
          f"wrote {gif} (shuffled | solved | original)")
    return scores


def superres(args, model, diffusion, config, stride, test_set, encode, decode, device, gen):
    """
    Temporal super-resolution (supplement, "Downstream Task"): the pieces at positions 0, K+1, 2(K+1), ... are
    given, the K pieces between each pair are missing content generated at known positions (every positional code
    is given). Input: the clip of --video (its frames are the low-rate video), else test clips of the dataset
    (every (K+1)-th piece kept, the ground truth shown next to the result).
    """
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
        test = test_set(0)
        items = [test[i] for i in range(min(args.num_puzzles, EXAMPLES, len(test)))]
        content = torch.stack([it["content"][torch.argsort(it["order"])] for it in items])
    b = content.shape[0]
    batch = {"content": content.to(device), "order": torch.arange(pieces, device=device).expand(b, -1),
             "missing": torch.from_numpy(~keep).to(device).expand(b, -1)}
    known = torch.ones_like(batch["missing"])
    _, generated = solve(model, diffusion, encode(batch), sequence_table(pieces).to(device), config["anchor"],
                         args.steps, args.sampler, args.assign, gen, known=known)
    generated = decode(generated)
    rows = [video_row(batch, np.arange(pieces)[None].repeat(b, 0), generated, i) for i in range(b)]
    if args.video:                                             # no ground truth for the user's clip
        rows = [(clips[:2], marks[:2]) for clips, marks in rows]
        name = f"{stem(args.video)}_superres.gif"
    else:
        name = "superres.gif"
    gif = write_rows(os.path.join(args.out, name), rows, ["input", "super-resolved", "ground truth"][:len(rows[0][0])])
    print(f"wrote {gif}: {int(keep.sum())} given pieces of {fpp} frames, {k} generated piece(s) between each pair "
          "(in red)")
    return gif


# ----------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------

def main(args):
    ckpt = load_checkpoint(args.ckpt)
    if args.out is None:
        args.out = os.path.join(os.path.dirname(os.path.abspath(args.ckpt)), "samples")
    if ckpt["config"]["kind"] == "image":
        if args.video or args.superres:
            raise UserError(f"--video and --superres need a video checkpoint; {args.ckpt} is an image model")
        return sample_image(args, ckpt)
    if args.image:
        raise UserError(f"--image needs an image checkpoint; {args.ckpt} is a video model (use --video)")
    return sample_video(args, ckpt)


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True, help="ckpt.pt written by train_image.py or train_video.py")
    p.add_argument("--num-puzzles", type=positive, default=200, help="test puzzles to solve and score")
    p.add_argument("--seed", type=int, default=0, help="seed of the test puzzles (shuffles, crops) and noise")
    p.add_argument("--steps", type=positive, default=50, help="sampling steps (respaced out of T = 1000)")
    p.add_argument("--sampler", default="ddpm", choices=SAMPLERS,
                   help="ddpm (ancestral on respaced steps; 3.5-7.5 points more solved 3x3 puzzles than ddim at 50 "
                        "steps, BENCHMARKS.md) or ddim (deterministic)")
    p.add_argument("--assign", default="hungarian", choices=ASSIGNERS,
                   help="codes -> positions: hungarian (optimal) or greedy (paper)")
    p.add_argument("--missing", type=int, default=None,
                   help="missing pieces per puzzle (default: the checkpoint's; 0 for --video)")
    p.add_argument("--out", default=None, help="output folder (default: samples/ next to the checkpoint)")
    p.add_argument("--dataset", default=None, choices=[*DATASETS, *VIDEO_DATASETS],
                   help="evaluate on another dataset than trained on (of the checkpoint's kind)")
    p.add_argument("--data-dir", default=None,
                   help="image folder for folder/imagenet/jpwleg3, mnist_test_seq.npy for movingmnist, video folder "
                        "for videos (default: the training run's)")
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
