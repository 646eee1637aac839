"""
Solve puzzles with a trained JPDVT checkpoint: accuracy on fresh test puzzles, pictures, and your own photo.

Paper: "Predicted position encodings" (supplement) and "Metrics" (Sec. 4.2). Everything (model, puzzle
settings) is rebuilt from the checkpoint; the EMA weights are used. Image checkpoints report piece- and
puzzle-level accuracy (a puzzle is solved when every given piece is in place); video checkpoints report the
normalized Kendall distance.

    python sample.py --ckpt checkpoints/image-shapes-3x3.pt                 # metrics.json + examples.png
    python sample.py --ckpt out/run/ckpt.pt --missing 2 --sampler ddpm --steps 1000
    python sample.py --ckpt out/run/ckpt.pt --dataset folder --data-dir ~/photos
    python sample.py --ckpt checkpoints/image-shapes-3x3.pt --image photo.jpg
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
from jpdvt import load_checkpoint, positive, run_cli
from metrics import ASSIGNERS, piece_accuracy, puzzle_accuracy
from puzzles import DATASETS, ImagePuzzles, UserError, assemble, cut_image, fit_image, shuffle_pieces
from train_image import build_model, collate, evaluate_batch


def to_uint8(img):
    return (np.clip(img, 0, 1) * 255).round().astype(np.uint8)


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
    model, diffusion = build_model(config)
    model.load_state_dict(ckpt["ema"])
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    model.to(device).eval()
    os.makedirs(args.out, exist_ok=True)
    gen = torch.Generator(device).manual_seed(args.seed)

    if args.image:
        return solve_photo(args, model, diffusion, config, grid, piece, gap, device, gen)

    dataset = args.dataset or config["dataset"]
    data_dir = args.data_dir or (config["args"].get("data_dir") if dataset == config["dataset"] else None)
    test = ImagePuzzles(dataset, "test", grid, piece, gap, missing, anchored, args.seed, data_dir)
    if dataset != "shapes" and args.num_puzzles > len(test):
        print(f"note: the test split has {len(test)} images; using {len(test)} puzzles")
    num = min(args.num_puzzles, len(test))
    positions, orders, masks, seconds = [], [], [], 0.0
    picture = None
    for start in tqdm(range(0, num, args.batch_size), desc="solving", unit="batch"):
        batch = collate([test[i] for i in range(start, min(start + args.batch_size, num))])
        batch = {k: v.to(device) for k, v in batch.items()}
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
    Image.fromarray(to_uint8(np.concatenate(sum(([r, sep] for r in picture), [])[:-1]))).save(grid_png)
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
    Image.fromarray(to_uint8(np.concatenate([panels[0], sep, panels[1], sep, panels[2]], axis=1))).save(out)
    solved = acc["puzzle_acc"] == 1.0
    print(f"{'solved' if solved else 'not solved'}: {int(round(acc['piece_acc'] * n))}/{n} pieces in place; "
          f"wrote {out} (input | solution | original)")
    return acc


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
    from train_video import sample_video
    return sample_video(args, ckpt)


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True, help="ckpt.pt written by train_image.py or train_video.py")
    p.add_argument("--num-puzzles", type=positive, default=200, help="test puzzles to solve and score")
    p.add_argument("--seed", type=int, default=0, help="seed of the test puzzles (shuffles, crops) and noise")
    p.add_argument("--steps", type=positive, default=50, help="sampling steps (respaced out of T = 1000)")
    p.add_argument("--sampler", default="ddim", choices=SAMPLERS, help="ddim (deterministic) or ddpm (ancestral)")
    p.add_argument("--assign", default="hungarian", choices=ASSIGNERS,
                   help="codes -> positions: hungarian (optimal) or greedy (paper)")
    p.add_argument("--missing", type=int, default=None, help="missing pieces per puzzle (default: the checkpoint's)")
    p.add_argument("--out", default=None, help="output folder (default: samples/ next to the checkpoint)")
    p.add_argument("--dataset", default=None, choices=DATASETS, help="evaluate on another dataset than trained on")
    p.add_argument("--data-dir", default=None, help="image folder for --dataset folder/imagenet/jpwleg3")
    p.add_argument("--image", default=None, help="solve your own photo: cut, shuffle, solve, picture")
    p.add_argument("--video", default=None, help="video checkpoints: order your own clip (file or frame folder)")
    p.add_argument("--superres", type=int, default=0,
                   help="video checkpoints: generate K frames between each pair of given frames")
    p.add_argument("--batch-size", type=positive, default=50, help="puzzles solved at once")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    return p


if __name__ == "__main__":
    run_cli(main, get_parser().parse_args())
