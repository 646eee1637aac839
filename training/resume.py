"""
Starting a training run from a checkpoint (train_image.py, train_video.py): --init fine-tunes its EMA weights, --resume
continues it exactly. Not in the paper. Shipped checkpoints hold the EMA weights only (model and opt empty): they can
be fine-tuned, not resumed.

    config, start = resume(args, kind="image")                  # --resume out/run/ckpt.pt
    start = init_weights("checkpoints/image-photos-3x3.pt", config)     # --init: its EMA at step 0
"""
import os
from dataclasses import fields, replace

from config import RunConfig, load_checkpoint
from plumbing.cli import UserError
from puzzles import puzzle_set


def init_weights(path, config):
    """--init: the checkpoint at `path` as a start for train.train (its EMA weights, a fresh optimizer, step 0), after
    checking that its network has this run's settings."""
    src = load_checkpoint(path, config.puzzle.kind)
    if src["config"].model != config.model:
        diff = [f.name for f in fields(config.model) if getattr(src["config"].model, f.name) !=
                getattr(config.model, f.name)]
        raise UserError(f"--init {path} holds a model with other settings ({', '.join(diff)}); fine-tuning needs the "
                        "same --model, --piece-size, --patch-size, --codes and --code-dim (or frame settings) as that "
                        "run")
    if src["config"].prediction != config.prediction:
        raise UserError(f"--init {path} predicts {src['config'].prediction} and this run {config.prediction}; pass "
                        f"--prediction {src['config'].prediction} to fine-tune it")
    return {"model": None, "ema": src["ema"], "opt": None, "step": 0}


def resume(args, kind):
    """(config, checkpoint) of --resume: the checkpoint's settings whole, with --max-steps, the checks' intervals and
    --data-dir (the same data, moved) if given; any other setting flag is refused. --out defaults to the checkpoint's
    folder."""
    if args.init:
        raise UserError("--init starts a new run from a checkpoint's weights and --resume continues a run; give one")
    ckpt = load_checkpoint(args.resume, kind)
    if not ckpt.get("opt"):
        raise UserError(f"checkpoint {args.resume} holds EMA weights only (a shipped checkpoint) and cannot be "
                        "resumed; fine-tune it with --init, or resume from a training run's ckpt.pt")
    kept = {f.name for f in fields(RunConfig)} | {"resume", "max_steps", "ckpt_every", "eval_every", "data_dir"}
    given = [k for k, v in vars(args).items() if v is not None and k not in kept]
    if given:
        raise UserError(f"--{given[0].replace('_', '-')} cannot be given with --resume: a resumed run keeps its "
                        "checkpoint's settings; drop it, or start a new run from its weights with --init")
    config = ckpt["config"]
    if args.max_steps not in (None, config.train.max_steps) and config.train.schedule == "cosine":
        raise UserError(f"--max-steps {args.max_steps} cannot change on --resume under --schedule cosine: the learning "
                        f"rate decays to 0 at the run's {config.train.max_steps} steps, and a new end would bend its "
                        "curve mid-run; resume without --max-steps, or fine-tune longer with --init")
    for name in ("max_steps", "ckpt_every", "eval_every"):
        if getattr(args, name) is not None:
            setattr(config.train, name, getattr(args, name))
    if args.data_dir is not None:
        config.puzzle = moved_data(config.puzzle, args.data_dir)
    args.out = args.out or os.path.dirname(os.path.abspath(args.resume))
    return config, ckpt


def moved_data(puzzle, data_dir):
    """The puzzle settings with the data folder moved to `data_dir`, after checking that it splits its files as the
    old folder did (where the old folder is still there) and holds training files: a file's split follows from its
    path inside the folder (sources/files.py), so the same files split the same wherever the folder lies."""
    new = replace(puzzle, data_dir=data_dir)
    old_files = split_files(puzzle) if puzzle.data_dir and os.path.exists(puzzle.data_dir) else None
    new_files = split_files(new)
    if old_files is not None and old_files != new_files:
        raise UserError(f"--data-dir {data_dir} does not hold the files of {puzzle.data_dir} in the same splits; "
                        "resume with the folder the run trained on, or start a new run with --init")
    if new_files and not new_files["train"]:
        raise UserError(f"--data-dir {data_dir} holds no training files; pass the folder the run trained on")
    return new


def split_files(puzzle):
    """{split: the sorted file names inside the data folder} of a folder dataset (None for generated data)."""
    out = {}
    for split in ("train", "val", "test"):
        files = puzzle_set(puzzle, split).files
        if files is None:
            return None
        out[split] = sorted(os.path.relpath(f, puzzle.data_dir) for f in files)
    return out
