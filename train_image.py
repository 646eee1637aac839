"""
Train the JPDVT image model: a DiT that denoises the 2D positional codes of shuffled pieces (and the pixels of
missing ones), conditioned on the pieces' content.

Paper: "Masked Jigsaw Transformer Diffusion" and "Image Experiments" (supplement: batch 256, lr 1e-4,
linear schedule, T = 1000, 3x3 puzzles of 64 px pieces, optional erosion 85 px cells / 64 px pieces).

    python train_image.py                                   # tiny model, built-in shapes, 3x3, a few CPU minutes
    python train_image.py --dataset imagenet --data-dir /data/imagenet --grid 3 --model base --lr 1e-4 \
        --batch-size 256 --prediction eps --max-steps 1500000 --device cuda
    torchrun --standalone --nproc_per_node=8 train_image.py --dataset imagenet --data-dir ... --model base

Writes OUT/ckpt.pt ({config, model, ema, opt, scaler, step}) and OUT/log.txt; --resume OUT/ckpt.pt continues
exactly. The flags become a config.Config (puzzle, model, train), stored in the checkpoint; the loop is training.py.
"""
import argparse
from dataclasses import replace

from cli import UserError, positive, run_cli
from config import Config, ImageConfig, TrainConfig
from diffusion import PREDICTIONS
from dit import CONFIGS
from puzzles import DATASETS, collate, parse_grid
from training import add_train_flags, start_run, train, train_config

# piece size and gap when the flags are left out: the paper's protocol for each dataset
DATASET_DEFAULTS = {"shapes": (16, 0), "folder": (64, 0), "imagenet": (64, 0), "jpwleg3": (96, 48)}
DEFAULTS = TrainConfig(batch_size=64, lr=2e-3, weight_code=1.0, weight_content=0.1)


def puzzle_config(args):
    """The ImageConfig of the puzzle flags, validated (a UserError with a one-line fix)."""
    grid = parse_grid(args.grid)
    piece, gap = DATASET_DEFAULTS[args.dataset]
    piece = args.piece_size if args.piece_size is not None else piece
    gap = args.gap if args.gap is not None else gap
    if piece < 1 or gap < 0:
        raise UserError(f"--piece-size must be >= 1 and --gap >= 0, got {piece} and {gap}")
    lo, hi = args.crop_scale
    if not 0 < lo <= hi <= 1:
        raise UserError(f"--crop-scale needs 0 < LO <= HI <= 1 (fractions of a photo's side), got {lo} {hi}")
    if not 0 <= args.mix_shapes < 1 or (args.mix_shapes and args.dataset == "shapes"):
        raise UserError(f"--mix-shapes needs 0 <= FRACTION < 1 and a photo --dataset, got {args.mix_shapes} with "
                        f"--dataset {args.dataset}")
    if args.dataset == "jpwleg3" and grid != (3, 3):
        raise UserError("--dataset jpwleg3 is a 3x3 protocol; use --grid 3")
    puzzle = ImageConfig(dataset=args.dataset, data_dir=args.data_dir, grid=grid, piece_size=piece, gap=gap,
                         missing=args.missing, anchor=args.anchor, crop_scale=tuple(args.crop_scale),
                         mix_shapes=args.mix_shapes)
    puzzle.check()
    return puzzle


def model_config(name, piece, patch):
    """The DiT config of --model for --piece-size pieces cut into --patch-size patches."""
    cfg = replace(CONFIGS[name], piece_size=piece)
    patch = patch or max(d for d in range(1, min(cfg.patch_size, piece) + 1) if piece % d == 0)
    if piece % patch:
        raise UserError(f"--patch-size {patch} must divide --piece-size {piece}")
    return replace(cfg, patch_size=patch)


def make_config(args):
    puzzle = puzzle_config(args)
    return Config(puzzle=puzzle, model=model_config(args.model, puzzle.piece_size, args.patch_size),
                  train=train_config(args), prediction=args.prediction)


def main(args):
    config, ckpt = start_run(args, get_parser(), kind="image", make_config=make_config)
    seed = config.train.seed
    held_out = config.puzzle.puzzles("val", seed)                # model selection: never the test split
    eval_batch = collate([held_out[i] for i in range(min(config.train.eval_puzzles, len(held_out)))])
    train(config, config.puzzle.puzzles("train", seed), eval_batch, args=args, ckpt=ckpt)


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
    p.add_argument("--crop-scale", type=float, nargs=2, default=[0.3, 1.0], metavar=("LO", "HI"),
                   help="folder: every training puzzle is a fresh random view of a photo, a box whose side is LO..HI "
                        "of the largest box that fits (flipped half of the time); test puzzles use the whole photo")
    p.add_argument("--mix-shapes", type=float, default=0.0, metavar="FRACTION",
                   help="folder/imagenet: this fraction of the training puzzles are built-in shapes instead (a "
                        "procedural prior; the test split stays the folder's)")
    p.add_argument("--missing", type=int, default=0,
                   help="up to K missing pieces while training (0..K at random), exactly K when evaluating")
    p.add_argument("--model", default="tiny", choices=CONFIGS, help="DiT size (base = the paper's)")
    p.add_argument("--patch-size", type=positive, default=None,
                   help="ViT patch side in pixels, must divide the piece size (default: the largest divisor of "
                        "the piece size up to the model's patch size)")
    p.add_argument("--prediction", default="x0", choices=PREDICTIONS,
                   help="network target: x0 (learns faster, see BENCHMARKS.md) or eps (paper)")
    p.add_argument("--anchor", action=argparse.BooleanOptionalAction, default=False,
                   help="give the model the true position of the first shuffled piece (paper's anchoring)")
    add_train_flags(p, DEFAULTS)
    return p


if __name__ == "__main__":
    run_cli(main, get_parser().parse_args())
