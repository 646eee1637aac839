"""
Train the JPDVT image model: a DiT that denoises the 2D positional codes of shuffled pieces (and the pixels of
missing ones), conditioned on the pieces' content.

Paper: Sec. 3.1, "Masked Jigsaw Transformer Diffusion", and the supplement's "Image Experiments". The settings start
at the tiny CPU recipe (the dataclasses' defaults, at the dataset's usual piece size), the paper's table replaces them
where it applies (configs/paper.py; on by default for --dataset imagenet and jpwleg3), and the flags given replace
both (make_config). The log's first line prints the run's settings.

    python train_image.py                                   # tiny model, built-in shapes, 3x3, a few CPU minutes
    python train_image.py --dataset imagenet --data-dir /data/imagenet --grid 3        # the paper's ImageNet 3x3
    torchrun --standalone --nproc_per_node=8 train_image.py --dataset imagenet --data-dir /data/imagenet --grid 3

Writes OUT/ckpt.pt and OUT/log.txt (the loop: train.py); --resume OUT/ckpt.pt continues exactly. Score test puzzles
with sample.py --ckpt OUT/ckpt.pt; solve your own pieces with python -m solving.own --ckpt OUT/ckpt.pt.
"""
import argparse
import math
from dataclasses import fields, replace

import torch

from config import Config, RunConfig, TrainConfig
from dit import CODES, CONFIGS, DiT, DiTConfig
from plumbing.cli import UserError, check_puzzle, grid, positive, user_errors
from puzzles import ImageConfig, ImagePuzzles
from sources.images import DATASETS
from train import add_train_flags, check_known, train

PAPER_DATASETS = ("imagenet", "jpwleg3")          # the paper's settings by default (--no-paper: the tiny recipe)
# the settings of a run: every key of the paper's table must be a field of one of them
SETTINGS = (ImageConfig, DiTConfig, TrainConfig, Config)
# piece size and gap of each dataset's usual protocol, when the flags leave them out
PIECES = {"shapes": (16, 0), "folder": (64, 0), "imagenet": (64, 0), "jpwleg3": (96, 48)}


def make_config(args):
    """The run's Config: the tiny CPU recipe (the dataclasses' defaults, the tiny model, the dataset's usual piece
    size), then the paper's table where it applies, then the flags given."""
    dataset = args.dataset or "shapes"
    settings = {"dataset": dataset, "model": "tiny", "piece_size": PIECES[dataset][0], "gap": PIECES[dataset][1]}
    if args.paper or (args.paper is None and dataset in PAPER_DATASETS):
        from configs.paper import IMAGE  # the paper's table: read only where it applies
        if dataset not in IMAGE:
            raise UserError(f"--paper: the paper has no experiment on --dataset {dataset}; use one of "
                            f"{', '.join(IMAGE)} (or drop --paper)")
        check_known(IMAGE[dataset], SETTINGS, f"configs/paper.py's IMAGE[{dataset!r}]")
        settings |= {k: value for k, (value, why) in IMAGE[dataset].items()}
    flags = {k: v for k, v in vars(args).items() if v is not None}
    if "epochs" in flags and "max_steps" in flags:
        raise UserError("give --epochs or --max-steps, not both")
    settings |= flags
    puzzle = ImageConfig(**{f.name: settings[f.name] for f in fields(ImageConfig) if f.name in settings})
    if puzzle.piece_size < 1 or puzzle.gap < 0:
        raise UserError(f"--piece-size must be >= 1 and --gap >= 0, got {puzzle.piece_size} and {puzzle.gap}")
    if not 0 <= puzzle.mix_shapes < 1 or (puzzle.mix_shapes and dataset == "shapes"):
        raise UserError(f"--mix-shapes needs 0 <= FRACTION < 1 and a photo --dataset, got {puzzle.mix_shapes} with "
                        f"--dataset {dataset}")
    if dataset == "jpwleg3" and puzzle.grid != (3, 3):
        raise UserError("--dataset jpwleg3 is a 3x3 protocol; use --grid 3")
    check_puzzle(puzzle)
    if "epochs" in settings and "max_steps" not in flags:    # epochs of the training images at the global batch
        files = len(ImagePuzzles(puzzle, "train").files or ())
        if not files:
            raise UserError(f"--epochs needs a folder of images (--dataset {dataset} has none); use --max-steps")
        batch = settings.get("batch_size", TrainConfig.batch_size)
        settings["max_steps"] = math.ceil(settings["epochs"] * files / batch)
    model = replace(CONFIGS[settings["model"]], piece_size=puzzle.piece_size,
                    **{k: settings[k] for k in ("codes", "code_dim") if k in settings})
    if model.code_dim % 4:
        raise UserError(f"--code-dim must be a multiple of 4 (half for the column, half for the row), got "
                        f"{model.code_dim}")
    # the patch: the largest divisor of the piece size up to the model's, unless given
    patch = settings.get("patch_size") or max(d for d in range(1, min(model.patch_size, puzzle.piece_size) + 1)
                                              if puzzle.piece_size % d == 0)
    if puzzle.piece_size % patch:
        raise UserError(f"--patch-size {patch} must divide --piece-size {puzzle.piece_size}")
    train_config = TrainConfig(**{f.name: settings[f.name] for f in fields(TrainConfig) if f.name in settings})
    return Config(puzzle=puzzle, model=replace(model, patch_size=patch), train=train_config,
                  prediction=settings.get("prediction", "x0"))


def main(args):
    if args.resume or args.init:                 # a run that starts from a checkpoint
        from training.resume import init_weights, resume
    if args.resume:
        config, start = resume(args, kind="image")
    else:
        config = make_config(args)
        start = init_weights(args.init, config) if args.init else None
    run = RunConfig(out=args.out or "out/run", device=args.device, workers=args.workers, compile=args.compile,
                    log_every=args.log_every)
    seed = config.train.seed
    held_out = ImagePuzzles(config.puzzle, "val", seed)          # model selection: never the test split
    torch.manual_seed(config.train.seed)           # the same initial weights on every rank and every rerun
    model = DiT(config.model)
    train(config, model, ImagePuzzles(config.puzzle, "train", seed), held_out, run, start=start)


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", choices=DATASETS, help="where images come from (default shapes)")
    p.add_argument("--data-dir", default=None, help="image folder for folder/imagenet/jpwleg3")
    p.add_argument("--grid", type=grid, help="puzzle grid: 3 (3x3, the default) or rows x cols such as 2x4")
    p.add_argument("--piece-size", type=int,
                   help="piece side in pixels (default: shapes 16, folder/imagenet 64, jpwleg3 96)")
    p.add_argument("--gap", type=int,
                   help="erosion: extra pixels per cell around each piece (default: 0, jpwleg3 48; paper: 21 for 85 "
                        "px cells); training crops pieces at random inside cells, testing at the centre")
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
    add_train_flags(p, TrainConfig())
    return p


if __name__ == "__main__":
    with user_errors():
        main(get_parser().parse_args())
