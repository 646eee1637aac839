"""
Train the JPDVT image model: a DiT that denoises the 2D positional codes of shuffled pieces (and the pixels of
missing ones), conditioned on the pieces' content.

Paper: "Masked Jigsaw Transformer Diffusion" and "Image Experiments" (supplement: batch 256, lr 1e-4,
linear schedule, T = 1000, 3x3 puzzles of 64 px pieces, optional erosion 85 px cells / 64 px pieces).

    python train_image.py                                   # tiny model, built-in shapes, 3x3, a few CPU minutes
    python train_image.py --dataset imagenet --data-dir /data/imagenet --grid 3 --model base --lr 1e-4 \
        --batch-size 256 --prediction eps --max-steps 1500000 --device cuda
    torchrun --standalone --nproc_per_node=8 train_image.py --dataset imagenet --data-dir ... --model base

Writes OUT/ckpt.pt ({config, model, ema, opt, step}) and OUT/log.txt; --resume OUT/ckpt.pt continues exactly.
"""
import argparse
from dataclasses import asdict, replace

import torch

from diffusion import PREDICTIONS
from dit import CONFIGS
from errors import UserError, run_cli
from jpdvt import build_model
from puzzles import DATASETS, ImagePuzzles, check_missing, collate, parse_grid
from training import add_train_flags, loss_weight, positive, resume_args, train

# piece size and gap when the flags are left out: the paper's protocol for each dataset
DATASET_DEFAULTS = {"shapes": (16, 0), "folder": (64, 0), "imagenet": (64, 0), "jpwleg3": (96, 48)}


def check_settings(args):
    """Validate puzzle flags; returns (grid, piece, gap). Raises UserError with a one-line fix."""
    grid = parse_grid(args.grid)
    piece, gap = DATASET_DEFAULTS[args.dataset]
    piece = args.piece_size if args.piece_size is not None else piece
    gap = args.gap if args.gap is not None else gap
    if piece < 1 or gap < 0:
        raise UserError(f"--piece-size must be >= 1 and --gap >= 0, got {piece} and {gap}")
    check_missing(args.missing, grid[0] * grid[1], kept=int(args.anchor),
                  what=f"a {grid[0]}x{grid[1]} grid{' with an anchor' if args.anchor else ''}")
    lo, hi = args.crop_scale
    if not 0 < lo <= hi <= 1:
        raise UserError(f"--crop-scale needs 0 < LO <= HI <= 1 (fractions of a photo's side), got {lo} {hi}")
    if not 0 <= args.mix_shapes < 1 or (args.mix_shapes and args.dataset == "shapes"):
        raise UserError(f"--mix-shapes needs 0 <= FRACTION < 1 and a photo --dataset, got {args.mix_shapes} with "
                        f"--dataset {args.dataset}")
    if args.dataset == "jpwleg3" and grid != (3, 3):
        raise UserError("--dataset jpwleg3 is a 3x3 protocol; use --grid 3")
    return grid, piece, gap


def model_config(name, piece, patch, depth=None, width=None):
    """The DiT config of --model for --piece-size pieces cut into --patch-size patches (--depth, --width if given)."""
    cfg = replace(CONFIGS[name], piece_size=piece, depth=depth or CONFIGS[name].depth)
    if width:
        if width % cfg.heads:
            raise UserError(f"--width {width} must be a multiple of the {cfg.heads} attention heads of --model {name}")
        cfg = replace(cfg, hidden=width, mlp_dim=4 * width)
    patch = patch or max(d for d in range(1, min(cfg.patch_size, piece) + 1) if piece % d == 0)
    if piece % patch:
        raise UserError(f"--patch-size {patch} must divide --piece-size {piece}")
    return replace(cfg, patch_size=patch)


def main(args):
    ckpt = resume_args(args, "image", get_parser())
    grid, piece, gap = check_settings(args)
    mcfg = model_config(args.model, piece, args.patch_size, args.depth, args.width)
    config = {"kind": "image", "model": asdict(mcfg), "model_name": args.model, "dataset": args.dataset,
              "grid": list(grid), "piece_size": piece, "gap": gap, "missing": args.missing, "anchor": args.anchor,
              "prediction": args.prediction, "args": vars(args)}
    torch.manual_seed(args.seed)                 # initial weights: the same on every rank and every rerun
    model, diffusion = build_model(config)
    data = dict(grid=grid, piece=piece, gap=gap, missing=args.missing, anchor=args.anchor, seed=args.seed,
                data_dir=args.data_dir)
    train_set = ImagePuzzles(args.dataset, "train", **data, jitter=args.jitter,
                             crop_scale=tuple(args.crop_scale) if args.dataset == "folder" else None,
                             mix_shapes=args.mix_shapes)
    test_set = ImagePuzzles(args.dataset, "test", **data)
    eval_batch = collate([test_set[i] for i in range(min(args.eval_puzzles, len(test_set)))])
    train(args, config, model, diffusion, train_set, eval_batch, ckpt)


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="shapes", choices=DATASETS, help="where images come from")
    p.add_argument("--data-dir", default=None, help="image folder for folder/imagenet/jpwleg3")
    p.add_argument("--grid", default="3", help="puzzle grid: 3 (3x3) or rows x cols such as 2x4")
    p.add_argument("--piece-size", type=int, default=None,
                   help="piece side in pixels (default: shapes 16, folder/imagenet 64, jpwleg3 96)")
    p.add_argument("--gap", type=int, default=None,
                   help="erosion: extra pixels per cell around each piece (paper: 21 for 85 px cells, "
                        "jpwleg3 48); training crops pieces at random inside cells, testing at the centre")
    p.add_argument("--jitter", action=argparse.BooleanOptionalAction, default=True,
                   help="with --gap, training pieces are cut at random places in their cells, so neighbours lie "
                        "0..2*gap apart (paper); --no-jitter cuts the centre as at test time (every gap = --gap)")
    p.add_argument("--crop-scale", type=float, nargs=2, default=[0.3, 1.0], metavar=("LO", "HI"),
                   help="folder: every training puzzle is a fresh random view of a photo, a box whose side is LO..HI "
                        "of the largest box that fits (flipped half of the time); test puzzles use the whole photo")
    p.add_argument("--mix-shapes", type=float, default=0.0, metavar="FRACTION",
                   help="folder/imagenet: this fraction of the training puzzles are built-in shapes instead (a "
                        "procedural prior; the test split stays the folder's)")
    p.add_argument("--missing", type=int, default=0,
                   help="up to K missing pieces while training (0..K at random), exactly K when evaluating")
    p.add_argument("--model", default="tiny", choices=CONFIGS, help="DiT size (base = the paper's)")
    p.add_argument("--depth", type=positive, default=None,
                   help="transformer blocks (default: the --model's); with --init from a shallower run, the extra "
                        "blocks start as the identity (adaLN-Zero), so training starts from that run's solver")
    p.add_argument("--width", type=positive, default=None,
                   help="hidden size of the DiT (default: the --model's; the MLP is 4x as wide)")
    p.add_argument("--patch-size", type=positive, default=None,
                   help="ViT patch side in pixels, must divide the piece size (default: the largest divisor of "
                        "the piece size up to the model's patch size)")
    p.add_argument("--prediction", default="x0", choices=PREDICTIONS,
                   help="network target: x0 (learns faster, see BENCHMARKS.md) or eps (paper)")
    p.add_argument("--anchor", action=argparse.BooleanOptionalAction, default=False,
                   help="give the model the true position of the first shuffled piece (paper's anchoring)")
    p.add_argument("--weight-pos", type=loss_weight, default=1.0, help="loss weight of the positional codes")
    p.add_argument("--weight-content", type=loss_weight, default=0.1,
                   help="loss weight of missing pieces' pixels (0.1: 48%% of pieces placed after 1500 steps "
                        "with up to 3 missing, 1.0: 18%%; BENCHMARKS.md)")
    add_train_flags(p, lr=2e-3)
    p.set_defaults(batch_size=64)
    return p


if __name__ == "__main__":
    run_cli(main, get_parser().parse_args())
