"""
The flags both training scripts share (`add_train_flags`), and how a run starts from them (`start_run`): a fresh run's
settings in one step (`resolve`: the script's defaults, then the paper's table, then the flags), or a resumed
checkpoint's, where only RESUMABLE flags may differ and FIXED ones may not be given at all. Not in the paper.

    config, ckpt, notes = start_run(args, defaults, kind="image", make_config=make_config)
"""
import argparse
import math
import os
from dataclasses import dataclass, fields, replace
from typing import Optional

from configs.paper import PAPER_ONLY
from diffusion import PREDICTIONS
from plumbing.checkpoint import load_checkpoint
from plumbing.cli import (
    PRECISIONS,
    UserError,
    decay,
    loss_weight,
    non_negative,
    parse_grid,
    positive,
    positive_float,
)
from train import SCHEDULES, TrainConfig, learning_rate

# settings a resumed run may change (each change is logged); any other flag that differs from the checkpoint is refused.
# The stream stays the same: --data-dir and --vae may only name where the same files moved
# (plumbing.checkpoint.training_files refuses a folder whose training files, or autoencoder files, differ);
# --precision changes the arithmetic, not the stream
RESUMABLE = ("max_steps", "ckpt_every", "eval_every", "eval_puzzles", "eval_steps", "precision", "data_dir", "vae",
             "accum")
# flags that shape a fresh run only: refused
FIXED = ("model", "patch_size", "codes", "code_dim", "epochs", "curriculum", "paper")


@dataclass
class RunConfig:
    """How this process runs a training (the scripts' run flags of the same names); never stored in a checkpoint."""
    out: str = "out/run"                     # ckpt.pt and log.txt
    device: str = "auto"                     # auto (cuda, else mps, else cpu), cpu, cuda, cuda:N or mps
    workers: int = 1                         # data-loading processes
    compile: bool = False                    # torch.compile the model
    init: Optional[str] = None               # fine-tune from this checkpoint's EMA weights
    log_every: int = 50                      # read and log the losses every N steps


def train_config(args):
    """The TrainConfig of the parsed flags (each field is the flag of the same name)."""
    return TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})


def run_config(args):
    """How this process runs (RunConfig), from the run flags."""
    return RunConfig(out=args.out, device=args.device, workers=args.workers, compile=args.compile, init=args.init,
                     log_every=args.log_every)


def start_run(args, defaults, kind, make_config):
    """
    (config, checkpoint, log lines): a fresh run's config made from the flags by make_config(args) -> (config, settings
    line) (checkpoint None), or with --resume the checkpoint and its config, with the flags given on the command line
    (those not None among `defaults`) checked against it (`resumed`). --out defaults to out/run, or the resumed
    checkpoint's folder.
    """
    if not args.resume:
        args.out = args.out or os.path.join("out", "run")
        config, line = make_config(args)
        config.run = run_config(args)
        return config, None, [line]
    if args.init:
        raise UserError("--init starts a new run from a checkpoint's weights and --resume continues a run; give one")
    ckpt = load_checkpoint(args.resume, kind)
    if ckpt["removed"]:
        gone = ", ".join(f"{k} {v}" for k, v in ckpt["removed"].items())
        raise UserError(f"checkpoint {args.resume} trained with a removed setting ({gone}), so its training stream "
                        "cannot be continued; start a new run from its weights with --init")
    if not ckpt["model"] or not ckpt["opt"]:
        raise UserError(f"checkpoint {args.resume} holds EMA weights only (a shipped checkpoint) and cannot be "
                        "resumed; use it with sample.py, or resume from a training run's ckpt.pt")
    if args.out is None:
        args.out = os.path.dirname(os.path.abspath(args.resume))
    given = {k: getattr(args, k) for k in (*defaults, "paper") if getattr(args, k, None) is not None}
    ckpt["config"].train = TrainConfig(**ckpt["config"].train)          # stored as plain values
    config, notes = resumed(ckpt["config"], given, step=ckpt["step"])
    config.run = run_config(args)
    return config, ckpt, [f"resuming {args.resume} at step {ckpt['step']}", *notes]


def resumed(config, given, step):
    """
    The checkpoint's config with the flags `given` on the command line: a RESUMABLE setting that differs is taken and
    logged; any other that differs is refused in one sentence (a resumed run keeps its settings). Returns (config,
    log lines).
    """
    notes, train, puzzle = [], {}, {}
    for name, value in given.items():
        flag = "--" + name.replace("_", "-")
        if name in FIXED:
            raise UserError(f"{flag} shapes a fresh run and cannot be given with --resume (the checkpoint's settings "
                            "are used); drop it, or start a new run from its weights with --init")
        part = train if hasattr(config.train, name) else puzzle if hasattr(config.puzzle, name) else None
        have = (config.train if part is train else config.puzzle if part is puzzle else config).__dict__[name]
        value = parse_grid(value) if name == "grid" else tuple(value) if isinstance(have, tuple) else value
        if value == have:
            continue
        if name == "vae" and have is None:
            raise UserError("--vae may only name where a latent run's autoencoder moved, and this checkpoint diffuses "
                            "pixels; drop --vae, or start a new run with it")
        if name not in RESUMABLE:
            raise UserError(f"{flag} {value} differs from the checkpoint's {have}: a resumed run keeps its settings; "
                            f"drop {flag}, or start a new run from its weights with --init")
        (train if part is train else puzzle)[name] = value
        notes.append(f"resume: {flag} {value} (the checkpoint had {have})")
        if name == "max_steps" and config.train.schedule == "cosine":
            was = learning_rate(config.train, step)
            now = learning_rate(replace(config.train, max_steps=value), step)
            notes.append(f"resume: the cosine schedule now ends at step {value}, not {have}: the learning rate at "
                         f"step {step} becomes {now:.3g} (was {was:.3g}), so this run is not the one a fresh "
                         f"--max-steps {value} run would be (the constant schedule is)")
    config.train, config.puzzle = replace(config.train, **train), replace(config.puzzle, **puzzle)
    return config, notes


def add_train_flags(p, defaults):
    """Flags shared by the two training scripts (help text on each), --prediction among them; `defaults` are the
    script's TrainConfig, shown in the help; a flag left out is None until resolve fills it."""
    d = defaults
    p.add_argument("--prediction", choices=PREDICTIONS,
                   help="network target: x0, the clean codes (default, as in the authors' released video code; eps "
                        "stayed at chance here: README, 'Differences from the paper') or eps, the noise (the paper's "
                        "text)")
    p.add_argument("--batch-size", type=positive, help=f"puzzles per step, over all processes: with torchrun each of "
                                                       f"W processes takes B / W (default {d.batch_size})")
    p.add_argument("--accum", type=positive,
                   help=f"gradient accumulation: split each process's share of --batch-size into K micro-batches, "
                        f"so the global batch fits in less memory (the same update to float tolerance; default "
                        f"{d.accum})")
    p.add_argument("--lr", type=positive_float, help=f"AdamW learning rate (default {d.lr}; paper: 1e-4)")
    p.add_argument("--warmup", type=non_negative,
                   help=f"linear learning-rate warmup steps, 0 = none (default {d.warmup})")
    p.add_argument("--schedule", choices=SCHEDULES, help=f"learning-rate schedule (default {d.schedule})")
    p.add_argument("--max-steps", type=positive, help=f"total training steps (default {d.max_steps})")
    p.add_argument("--ema-decay", type=decay,
                   help=f"largest decay of the EMA of the weights used for sampling; it grows as (1 + step) / (10 + "
                        f"step) up to this (default {d.ema_decay}; paper settings: 0.9999, the authors' and DiT's)")
    p.add_argument("--weight-code", type=loss_weight, help=f"loss weight of the positional codes (default "
                                                           f"{d.weight_code})")
    p.add_argument("--weight-content", type=loss_weight,
                   help=f"loss weight of missing pieces' content (default {d.weight_content}); each part's loss is a "
                        "mean over its generated entries, so this weight does not grow with the number missing")
    p.add_argument("--precision", choices=PRECISIONS, help=f"training precision (default {d.precision})")
    p.add_argument("--seed", type=non_negative,
                   help=f"seed of the data stream, noise and initial weights (default {d.seed})")
    p.add_argument("--ckpt-every", type=positive, help=f"write ckpt.pt every N steps (default {d.ckpt_every})")
    p.add_argument("--eval-every", type=non_negative,
                   help=f"check accuracy on a fixed batch of val puzzles every N steps, 0 = only at the end (default "
                        f"{d.eval_every})")
    p.add_argument("--eval-puzzles", type=positive, help=f"size of that batch (default {d.eval_puzzles})")
    p.add_argument("--eval-steps", type=positive, help=f"DDIM steps for that check (default {d.eval_steps})")
    p.add_argument("--paper", action=argparse.BooleanOptionalAction, default=None,
                   help="take every setting not given as a flag from the paper's table for --dataset "
                        "(configs/paper.py); on by default for the datasets only the paper's setting makes sense on: "
                        + ", ".join(PAPER_ONLY))
    p.add_argument("--out", default=None, help="output folder: ckpt.pt and log.txt (default: out/run, or with "
                                               "--resume the checkpoint's folder)")
    p.add_argument("--resume", default=None,
                   help="continue this ckpt.pt with its settings; --max-steps (and the checks, precision, data folder) "
                        "may change, logged; other flags that differ are refused")
    p.add_argument("--init", default=None,
                   help="fine-tune: start from this checkpoint's (EMA) weights with a fresh optimizer at step 0")
    p.add_argument("--device", default="auto",
                   help="auto (a CUDA GPU, else a Mac's GPU, mps, else the CPU), cpu, cuda, cuda:N or mps (torchrun "
                        "sets one per process)")
    p.add_argument("--log-every", type=positive, default=50,
                   help="log the mean losses every N steps (reading them syncs the device, so not every step)")
    p.add_argument("--workers", type=non_negative, default=1,
                   help="data-loading processes (0 = in the main process)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (GPU speed-up)")


# ----------------------------------------------------------------------------
# A fresh run's settings: the defaults, then the paper's table (configs/paper.py), then the flags
# ----------------------------------------------------------------------------

def paper_settings(table, dataset, wanted):
    """The paper's settings of `dataset` when they apply: wanted = --paper/--no-paper (None: PAPER_ONLY datasets)."""
    if wanted is None:
        wanted = dataset in PAPER_ONLY
    if wanted and dataset not in table:
        raise UserError(f"--paper: the paper has no experiment on --dataset {dataset}; use one of "
                        f"{', '.join(table)} (or drop --paper)")
    return table[dataset] if wanted else {}


def resolve(args, defaults, paper):
    """
    Fill every flag of `args` left out (None), in place, in one step: `defaults`, replaced by the paper's settings
    where it has them, replaced by the flags given. Returns {name: source} for every name of `defaults`.
    """
    paper = {k: v for k, v in paper.items() if k in defaults and v[0] != "required"}
    sources = {k: "default" for k in defaults} | {k: f"paper table: {why}" for k, (_, why) in paper.items()}
    given = {k for k in defaults if getattr(args, k) is not None}
    settings = defaults | {k: value for k, (value, _) in paper.items()} | {k: getattr(args, k) for k in given}
    for name, value in settings.items():
        setattr(args, name, value)
    return sources | {k: "flag" for k in given}


def steps_of_epochs(epochs, files, batch_size):
    """Training steps of `epochs` passes over `files` training images at the global `batch_size`."""
    return math.ceil(epochs * files / batch_size)


def settings_line(values, sources):
    """The first log line of a run: every setting, with its source unless it is the script's default."""
    parts = [f"{k} {v}" + (f" ({sources[k]})" if sources.get(k, "default") != "default" else "")
             for k, v in values.items()]
    return "settings: " + "; ".join(parts)
