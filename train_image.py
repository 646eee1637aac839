"""
Train the JPDVT image model: a DiT that denoises the 2D positional codes of shuffled pieces (and the pixels of
missing ones), conditioned on the pieces' content.

Paper: Sec. 3.1, "Masked Jigsaw Transformer Diffusion", and the supplement's "Image Experiments". Every setting
starts at the tiny CPU recipe below (at the dataset's usual piece size), is replaced by the paper's table where it
applies (configs/paper.py; on by default for --dataset imagenet and jpwleg3), then by the flags given; the log's
first line prints each with its source.

    python train_image.py                                   # tiny model, built-in shapes, 3x3, a few CPU minutes
    python train_image.py --dataset imagenet --data-dir /data/imagenet --grid 3        # the paper's ImageNet 3x3
    torchrun --standalone --nproc_per_node=8 train_image.py --dataset imagenet --data-dir /data/imagenet --grid 3

Writes OUT/ckpt.pt ({config, model, ema, opt, scaler, step, data}) and OUT/log.txt; --resume OUT/ckpt.pt continues
exactly. The flags become a Config (plumbing/checkpoint.py: puzzle, model, train), stored in the checkpoint; the loop
is train.py. Solve test puzzles or your own pieces (--pieces) with sample.py --ckpt OUT/ckpt.pt.
"""
import argparse
from dataclasses import asdict, replace

import jpdvt
from configs.paper import IMAGE
from dit import CODES, CONFIGS
from plumbing.checkpoint import Config
from plumbing.cli import UserError, check_puzzle, parse_grid, positive, run_cli
from plumbing.flags import (
    add_train_flags,
    paper_settings,
    resolve,
    settings_line,
    start_run,
    steps_of_epochs,
    train_config,
)
from puzzles import ImageConfig, collate
from sources.images import DATASETS
from train import TrainConfig, train

# piece size and gap when the flags are left out: the usual protocol of each dataset
DATASET_DEFAULTS = {"shapes": (16, 0), "folder": (64, 0), "imagenet": (64, 0), "jpwleg3": (96, 48)}
# the paper gives no loss weights for images (its videos: 0.2 codes, 0.8 frames); missing pieces' pixels weigh 0.1
# here so that drawing them does not crowd out placing the pieces (bench/notes.md)
DEFAULTS = TrainConfig(batch_size=64, lr=2e-3, max_steps=3000, weight_code=1.0, weight_content=0.1)
# every setting a flag can leave out, with the tiny CPU recipe's value (piece_size, gap: DATASET_DEFAULTS; patch_size
# None: the largest divisor of the piece size up to the model's patch; epochs None: --max-steps counts)
SCRIPT_DEFAULTS = {"grid": "3", "piece_size": None, "gap": None, "mix_shapes": 0.0,
                   "missing": 0, "anchor": False, "model": "tiny",
                   "patch_size": None, "codes": "piece", "code_dim": 32, "prediction": "x0",
                   "epochs": None, **asdict(DEFAULTS)}


def puzzle_config(args):
    """The ImageConfig of the (resolved) puzzle flags, validated (a UserError with a one-line fix)."""
    grid = parse_grid(args.grid)
    if args.piece_size < 1 or args.gap < 0:
        raise UserError(f"--piece-size must be >= 1 and --gap >= 0, got {args.piece_size} and {args.gap}")
    if not 0 <= args.mix_shapes < 1 or (args.mix_shapes and args.dataset == "shapes"):
        raise UserError(f"--mix-shapes needs 0 <= FRACTION < 1 and a photo --dataset, got {args.mix_shapes} with "
                        f"--dataset {args.dataset}")
    if args.dataset == "jpwleg3" and grid != (3, 3):
        raise UserError("--dataset jpwleg3 is a 3x3 protocol; use --grid 3")
    puzzle = ImageConfig(dataset=args.dataset, data_dir=args.data_dir, grid=grid, piece_size=args.piece_size,
                         gap=args.gap, missing=args.missing, anchor=args.anchor, mix_shapes=args.mix_shapes)
    check_puzzle(puzzle)
    return puzzle


def model_config(args, piece):
    """The DiT config of --model for --piece-size pieces cut into --patch-size patches, reading --codes codes of
    --code-dim."""
    cfg = replace(CONFIGS[args.model], piece_size=piece, codes=args.codes, code_dim=args.code_dim)
    patch = args.patch_size
    patch = patch or max(d for d in range(1, min(cfg.patch_size, piece) + 1) if piece % d == 0)
    if piece % patch:
        raise UserError(f"--patch-size {patch} must divide --piece-size {piece}")
    return replace(cfg, patch_size=patch)


def make_config(args):
    """(Config, settings line) of a fresh run: the defaults, then the paper's settings, then the flags
    (plumbing.flags.resolve)."""
    sources = {"dataset": "flag" if args.dataset else "default"}
    args.dataset = args.dataset or "shapes"
    piece, gap = DATASET_DEFAULTS[args.dataset]
    defaults = {**SCRIPT_DEFAULTS, "piece_size": piece, "gap": gap}      # the tiny recipe, at the dataset's piece size
    sources.update(resolve(args, defaults, paper_settings(IMAGE, args.dataset, args.paper)))
    puzzle = puzzle_config(args)
    if args.epochs is not None:
        if sources["max_steps"] == "flag" and sources["epochs"] == "flag":
            raise UserError("give --epochs or --max-steps, not both")
        if sources["max_steps"] == "flag":                          # --max-steps overrides the paper's epochs
            del sources["epochs"]
        else:                                                       # epochs of the training split, global batch
            files = len(jpdvt.kind_of(puzzle).puzzles("train", args.seed).files or ())
            if not files:
                raise UserError(f"--epochs needs a folder of images (--dataset {args.dataset} has no files); use "
                                "--max-steps")
            args.max_steps = steps_of_epochs(args.epochs, files, args.batch_size)
            sources["max_steps"] = f"{args.epochs} epochs of {files} training images at batch {args.batch_size}"
    if args.code_dim % 4:
        raise UserError(f"--code-dim must be a multiple of 4 (half for the column, half for the row), got "
                        f"{args.code_dim}")
    config = Config(puzzle=puzzle, model=model_config(args, puzzle.piece_size),
                    train=train_config(args), prediction=args.prediction)
    args.patch_size = config.model.patch_size                       # the one chosen when left out
    return config, settings_line({k: getattr(args, k) for k in sources if getattr(args, k) is not None}, sources)


def main(args):
    config, ckpt, notes = start_run(args, {"dataset": None, "data_dir": None, **SCRIPT_DEFAULTS}, kind="image",
                                    make_config=make_config)
    seed = config.train.seed
    kind = jpdvt.kind_of(config)
    held_out = kind.puzzles("val", seed)                         # model selection: never the test split
    eval_batch = collate([held_out[i] for i in range(min(config.train.eval_puzzles, len(held_out)))])
    train(config, kind.puzzles("train", seed), eval_batch, ckpt=ckpt, notes=notes)


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", choices=DATASETS, help="where images come from (default shapes)")
    p.add_argument("--data-dir", default=None, help="image folder for folder/imagenet/jpwleg3")
    p.add_argument("--grid", help="puzzle grid: 3 (3x3, the default) or rows x cols such as 2x4")
    p.add_argument("--piece-size", type=int,
                   help="piece side in pixels (default: shapes 16, folder/imagenet 64, jpwleg3 96)")
    p.add_argument("--gap", type=int,
                   help="erosion: extra pixels per cell around each piece (paper: 21 for 85 px cells, "
                        "jpwleg3 48); training crops pieces at random inside cells, testing at the centre")
    p.add_argument("--mix-shapes", type=float, metavar="FRACTION",
                   help="folder/imagenet: this fraction of the training puzzles are built-in shapes instead (a "
                        "procedural prior; the test split stays the folder's; default 0)")
    p.add_argument("--missing", type=int,
                   help="up to K missing pieces while training (0..K at random), exactly K when evaluating (default 0)")
    p.add_argument("--model", choices=CONFIGS, help="DiT size (default tiny; base = the paper's)")
    p.add_argument("--patch-size", type=positive,
                   help="ViT patch side in pixels, must divide the piece size (default: the largest divisor of "
                        "the piece size up to the model's patch size)")
    p.add_argument("--codes", choices=CODES,
                   help="how the network reads the noisy positional codes: piece, one per piece (the paper's text; "
                        "the default), or token, a copy on every token, each noised on its own (the authors' code; "
                        "the paper settings' choice)")
    p.add_argument("--code-dim", type=positive,
                   help="size of the 2D positional code, a multiple of 4 (default 32, the paper's text; the authors' "
                        "code and the paper settings: 8)")
    p.add_argument("--anchor", action=argparse.BooleanOptionalAction, default=None,
                   help="give the model the true position of the first shuffled piece (a random cell; the paper's "
                        "anchoring; default off)")
    p.add_argument("--epochs", type=positive,
                   help="train for this many passes over the training images (sets --max-steps; paper: 300)")
    add_train_flags(p, DEFAULTS)
    return p


if __name__ == "__main__":
    run_cli(main, get_parser().parse_args())
