"""
The flags both training scripts share (train_image.py, train_video.py), each with its help, and the check of a
settings table's keys (the paper's, configs/paper.py). Not in the paper.

    p = argparse.ArgumentParser(); ...; add_train_flags(p, TrainConfig())    # the script's recipe, shown in the help
"""
import argparse
import dataclasses

from diffusion import PREDICTIONS
from plumbing.cli import UserError, decay, non_negative, non_negative_float, positive, positive_float

PRECISIONS = {"auto": "bf16 on CUDA, fp32 on CPU and mps", "fp32": "full precision", "bf16": "bfloat16 autocast",
              "fp16": "float16 autocast + grad scaling (CUDA)"}
SCHEDULES = {"constant": "constant after the warm-up (the paper states no learning-rate schedule)",
             "cosine": "cosine decay from step 0 to 0 at --max-steps, times the warm-up ramp"}
NOT_FIELDS = {"model", "epochs", "paper", "resume", "init"}   # keys of a script's settings that name no field: the
# network's size, --epochs (sets max_steps) and how a run starts


def add_train_flags(p, defaults):
    """The flags both training scripts share (help text on each); `defaults`: the script's recipe (a
    config.TrainConfig), shown in the help. A setting flag left out is None: the script's make_config fills it."""
    d = defaults
    p.add_argument("--prediction", choices=PREDICTIONS,
                   help="network target: x0, the clean codes (default, as in the authors' released video code; eps "
                        "stayed at chance here: docs/choices.md) or eps, the noise (the paper's "
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
    p.add_argument("--weight-code", type=non_negative_float, help=f"loss weight of the positional codes (default "
                                                           f"{d.weight_code})")
    p.add_argument("--weight-content", type=non_negative_float,
                   help=f"loss weight of missing pieces' content (default {d.weight_content}); each part's loss is a "
                        "mean over its generated entries, so this weight does not grow with the number missing")
    p.add_argument("--clip", type=non_negative_float,
                   help=f"clip the gradient's norm at this, 0 = no clipping (default {d.clip}; the paper states none)")
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
                        "imagenet, jpwleg3, clevrer, ucf101, qst")
    p.add_argument("--out", default=None, help="output folder: ckpt.pt and log.txt (default: out/run, or with "
                                               "--resume the checkpoint's folder)")
    p.add_argument("--resume", default=None,
                   help="continue this ckpt.pt exactly, with its settings: only --max-steps, --ckpt-every, "
                        "--eval-every, --data-dir (the same data, moved) and how the process runs (--out, --device, "
                        "--workers, --compile, --log-every) may be given")
    p.add_argument("--init", default=None,
                   help="fine-tune: start from this checkpoint's (EMA) weights with a fresh optimizer at step 0")
    p.add_argument("--device", default="auto",
                   help="auto (a CUDA GPU, else a Mac's GPU, mps, else the CPU), cpu, cuda, cuda:N or mps (torchrun "
                        "sets one per process)")
    p.add_argument("--log-every", type=positive, default=50,
                   help="log the mean losses every N steps (reading them syncs the device, so not every step; "
                        "default 50)")
    p.add_argument("--workers", type=non_negative, default=1,
                   help="data-loading processes (0 = in the main process; default 1)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (GPU speed-up)")


def check_known(settings, classes, source):
    """Refuse, named, a key of `settings` (from `source`, e.g. the paper's table) that is a field of none of `classes`:
    a mistyped key must not be dropped without a word."""
    known = NOT_FIELDS | {f.name for cls in classes for f in dataclasses.fields(cls)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise UserError(f"{source} has a setting that jpdvt does not know: {unknown[0]}; correct or remove it")
