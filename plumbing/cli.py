"""
What the scripts (train_image.py, train_video.py, sample.py, mnist.py) share on the command line: clean errors,
argparse types, the training flags (`add_train_flags`), the sampling flags and the sampling line
(`add_sampling_flags`, `sampling_settings`; sample.py and python -m solving.own), the checks of a grid and of a
puzzle's settings (`parse_grid`, `check_puzzle`) and the device (`resolve_device`, `cpu_threads`). Not in the paper.

A wrong flag, a missing file or an unreadable dataset raises `UserError` with one sentence that names the flag or
file and says what to do; `user_errors` turns it into one `error: ...` line and exit code 2, never a traceback.

    if __name__ == "__main__":
        with user_errors():                                # main raises UserError("--grid must ...; use ...")
            main(get_parser().parse_args())
"""
import argparse
import contextlib
import dataclasses
import math
import os
import pickle
import re
import sys
import zipfile

import torch

from diffusion import PREDICTIONS, SAMPLERS
from jpdvt import SampleOptions
from metrics import ASSIGNERS

PRECISIONS = {"auto": "bf16 on CUDA, fp32 on CPU and mps", "fp32": "full precision", "bf16": "bfloat16 autocast",
              "fp16": "float16 autocast + grad scaling (CUDA)"}
AUTOCAST = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}   # solving's --precision: autocast dtype
SCHEDULES = {"constant": "constant after the warm-up (the paper states no learning-rate schedule)",
             "cosine": "cosine decay from step 0 to 0 at --max-steps, times the warm-up ramp"}


class UserError(ValueError):
    """A user-facing problem with settings or data; the message is one sentence saying what to do."""


@contextlib.contextmanager
def user_errors():
    """Turn user errors (UserError, missing files) and ^C inside the block into one line on stderr and exit code 2 (no
    traceback)."""
    try:
        yield
    except (UserError, FileNotFoundError, KeyboardInterrupt) as e:
        end_process_group()
        print(f"error: {'interrupted' if isinstance(e, KeyboardInterrupt) else e}", file=sys.stderr)
        sys.exit(2)


def end_process_group():
    """Leave a multi-process run's group before exiting, so that no communication thread outlives the interpreter."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


# ----------------------------------------------------------------------------
# Argparse types (argparse names the flag in its error)
# ----------------------------------------------------------------------------

def at_least(low):
    """argparse type: a whole number of at least `low`."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {v}")
        return v
    return parse


positive = at_least(1)        # e.g. --max-steps
non_negative = at_least(0)    # e.g. --eval-every


def finite_float(allow_zero):
    """argparse type: a finite number above 0 (or at least 0 with allow_zero)."""
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not (math.isfinite(v) and (v >= 0 if allow_zero else v > 0)):
            raise argparse.ArgumentTypeError(f"must be a finite number {'of at least' if allow_zero else 'above'} 0, "
                                             f"got {text}")
        return v
    return parse


positive_float = finite_float(allow_zero=False)   # e.g. --lr
non_negative_float = finite_float(allow_zero=True)   # --weight-code, --weight-content, --clip


def decay(text):
    """argparse type: an EMA decay, a number in [0, 1)."""
    v = non_negative_float(text)
    if v >= 1:
        raise argparse.ArgumentTypeError(f"must be below 1 (0.9999 is the authors'), got {text}")
    return v


def grid(text):
    """argparse type: a puzzle grid (parse_grid)."""
    try:
        return parse_grid(text)
    except UserError as e:
        raise argparse.ArgumentTypeError(str(e).split(", got")[0]) from None


def parse_grid(text):
    """'3' -> (3, 3); '2x4' -> (2, 4) rows x cols. Each side must be >= 1 and the grid >= 2 pieces."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:[xX*]\s*(\d+))?\s*", str(text))
    if not m:
        raise UserError(f"--grid must look like 3 or 2x4 (rows x cols), got {text!r}")
    rows, cols = int(m.group(1)), int(m.group(2) or m.group(1))
    if rows < 1 or cols < 1 or rows * cols < 2 or (m.group(2) is None and rows < 2):
        raise UserError(f"--grid needs at least 2 pieces (e.g. 3 or 2x4), got {text!r}")
    if rows * cols > 400:
        raise UserError(f"--grid {text} has {rows * cols} pieces; at most 400 are supported")
    return rows, cols


def add_train_flags(p, defaults):
    """The flags both training scripts share (help text on each); `defaults`: the script's recipe (a
    train.TrainConfig), shown in the help. A setting flag left out is None: the script's make_config fills it."""
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


# ----------------------------------------------------------------------------
# Sampling flags (sample.py, python -m solving.own)
# ----------------------------------------------------------------------------

SAMPLING = {"steps": 50, "sampler": "ddpm", "samples": 1, "assign": "hungarian"}  # unless the checkpoint's "sampling"
# (chosen on val) or a flag says otherwise
JUDGES = ("none", "classic")                 # solving/judge.py: none (the paper's method) or classic


def add_sampling_flags(p):
    """The flags of opening a checkpoint and sampling its codes."""
    p.add_argument("--ckpt", required=True, help="ckpt.pt written by train_image.py or train_video.py")
    p.add_argument("--seed", type=non_negative, default=0, help="seed of the puzzles (shuffles, crops) and of the "
                                                                "sampling noise (default 0)")
    p.add_argument("--steps", type=positive, help="sampling steps, respaced out of T = 1000. --steps, --sampler, "
                   "--samples and --assign default to the sampling the checkpoint stores (chosen on val), else to "
                   "50, ddpm, 1, hungarian")
    p.add_argument("--sampler", choices=SAMPLERS,
                   help="ddpm (ancestral: fresh noise at every step) or ddim (deterministic: only the starting noise "
                        "is random); default: the checkpoint's, else ddpm")
    p.add_argument("--samples", type=positive,
                   help="independent samples of the codes per puzzle, assigned on their mean distance (not in the "
                        "paper, which samples once; K times the sampling time); default: the checkpoint's, else 1")
    p.add_argument("--assign", choices=ASSIGNERS,
                   help="codes -> positions: hungarian (optimal, the least total distance) or greedy (the paper's "
                        "text: piece by piece, the closest free position); default: the checkpoint's, else hungarian")
    p.add_argument("--judge", choices=JUDGES, default="none",
                   help="none (default: the paper's method) or classic: of the samples' arrangements (each sample's "
                        "and their mean's), keep the one whose pieces fit best across their cuts (clips) or, improved "
                        "by swaps, their borders (images, Gallagher's MGC); not in the paper (solving/judge.py)")
    p.add_argument("--device", default="auto",
                   help="auto (a CUDA GPU, else a Mac's GPU, mps, else the CPU), cpu, cuda, cuda:N or mps")
    p.add_argument("--precision", default="fp32", choices=AUTOCAST,
                   help="arithmetic: fp32 (the default, as every figure was measured), or bf16 or fp16 autocast")
    p.add_argument("--vae", default=None, help="latent video checkpoints: the autoencoder folder, if it moved since "
                                               "training (default: the training run's)")


def open_checkpoint(args):
    """(checkpoint, jpdvt.SampleOptions, device, what metrics.json records of the sampling) of --ckpt (read_checkpoint):
    the sampling of the flags given, else the checkpoint's stored "sampling" (chosen on val), else SAMPLING, its noise
    seeded by --seed on --device (on a CPU with a core left free: cpu_threads). Prints the sampling line: each
    setting and where it came from."""
    ckpt = read_checkpoint(args.ckpt)
    if args.steps is not None and args.steps > 1000:
        raise UserError(f"--steps {args.steps} is more than the model's 1000 diffusion steps; use at most 1000")
    stored = ckpt.get("sampling", {})
    chosen = f"the checkpoint's, chosen on {stored['chosen']}" if "chosen" in stored else "the checkpoint's"
    where = {k: "flag" if getattr(args, k) is not None else chosen if k in stored else "default" for k in SAMPLING}
    values = {k: getattr(args, k) if where[k] == "flag" else stored.get(k, SAMPLING[k]) for k in SAMPLING}
    sources = {w: [k for k in SAMPLING if where[k] == w] for w in dict.fromkeys(where.values())}
    ensemble = " averaged (ours, not the paper's)" if values["samples"] > 1 else ""
    print(f"sampling: {values['sampler']}, {values['steps']} steps, {values['samples']} sample(s){ensemble}, "
          f"{values['assign']} assignment, judge {args.judge} (" +
          "; ".join(f"{', '.join(ks)}: {w}" for w, ks in sources.items()) + ")")
    device = resolve_device(args.device)
    cpu_threads(device, world=1, workers=1)    # a core left free: on a busy machine, threads wait on each other
    noise = torch.Generator(device).manual_seed(args.seed)
    described = {**values, "judge": args.judge, "sampling_from": where, "precision": args.precision}
    return ckpt, SampleOptions(**values, generator=noise), device, described


def read_checkpoint(path):
    """ckpt.pt as train.py wrote it, {format, config (plain dicts with "kind"), model, ema, opt, step}, loaded safely
    (weights_only: tensors and plain types, no code runs); a missing, unsafe, truncated or foreign file is refused in
    one sentence."""
    if not os.path.isfile(path):
        raise UserError(f"checkpoint {path} does not exist; pass the ckpt.pt written by a training run")
    if not zipfile.is_zipfile(path):
        raise UserError(f"checkpoint {path} is truncated or not a PyTorch checkpoint; pass the ckpt.pt of a training "
                        "run or one of checkpoints/*.pt")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise UserError(f"checkpoint {path} holds objects other than tensors and plain types; refusing to load "
                        "it (it could run code)") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError):
        raise UserError(f"checkpoint {path} is truncated or not a PyTorch checkpoint; use an intact ckpt.pt") \
            from None
    if not isinstance(ckpt, dict) or not {"config", "ema", "step"} <= set(ckpt) or \
            not isinstance(ckpt["config"], dict) or ckpt["config"].get("kind") not in ("image", "video"):
        raise UserError(f"checkpoint {path} is not a jpdvt checkpoint (it lacks config/ema/step)")
    return ckpt


def check_puzzle(p):
    """Refuse, in one sentence, the settings of a puzzle (a puzzles.ImageConfig or VideoConfig) that cannot make one:
    --missing must leave the anchor and at least one more piece to place; a clip needs 2 pieces of 1 frame or more."""
    if p.kind == "image":
        rows, cols = p.grid
        return check_missing(p.missing, rows * cols, kept=int(p.anchor),
                             what=f"a {rows}x{cols} grid{' with an anchor' if p.anchor else ''}")
    if p.pieces < 2:
        raise UserError(f"--pieces must be at least 2 (the anchor and a piece to place), got {p.pieces}")
    if p.frames_per_piece < 1:
        raise UserError(f"--frames-per-piece must be at least 1, got {p.frames_per_piece}")
    check_missing(p.missing, p.pieces, kept=1, what=f"{p.pieces} pieces (the first, the anchor, stays given)")
    if p.frame_stride < 1:
        raise UserError(f"--frame-stride must be at least 1, got {p.frame_stride}")


def check_missing(missing, pieces, kept, what):
    """--missing must leave the `kept` always-given pieces (the anchor) and at least one more piece to place."""
    if not 0 <= missing < pieces - kept:
        raise UserError(f"--missing must be between 0 and {pieces - 1 - kept} for {what}, got {missing}")


def mps_available():
    """Is Apple's Metal backend (a Mac's GPU) there to use?"""
    mps = getattr(torch.backends, "mps", None)
    return bool(mps and mps.is_available())


def resolve_device(device_arg):
    """--device auto|cpu|cuda|cuda:N|mps -> torch.device ("auto": a CUDA GPU, else a Mac's GPU (mps), else the CPU).
    On mps everything runs in fp32 (--precision auto)."""
    if device_arg == "auto":
        device_arg = "cuda" if torch.cuda.is_available() else "mps" if mps_available() else "cpu"
    if device_arg not in ("cpu", "mps") and not re.fullmatch(r"cuda(:\d+)?", device_arg):
        raise UserError(f"--device must be auto, cpu, cuda, cuda:N or mps, got {device_arg!r}")
    if device_arg.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("--device cuda was asked for but no CUDA GPU is available; use --device auto or cpu")
    if device_arg == "mps" and not mps_available():
        raise UserError("--device mps was asked for but this machine has no Apple GPU (Metal); use --device auto or "
                        "cpu")
    return torch.device(device_arg)


def cpu_threads(device, world, workers):
    """On CPU: one compute thread per core left free by the data workers of this machine's processes, unless
    OMP_NUM_THREADS is set (torchrun sets it to 1 when it starts several processes per machine). Torch's default, a
    thread per core, makes the workers and the step fight for the cores.
    Exact resume holds for the same thread count (the same cores and --workers). Returns the threads in use, or None
    on any other device."""
    if device.type != "cpu":
        return None
    if "OMP_NUM_THREADS" not in os.environ:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        per_machine = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        torch.set_num_threads(max(1, cores // per_machine - workers))
    return torch.get_num_threads()


def arithmetic(device, precision):
    """What --precision means on `device`: fp32, bf16 or fp16 (auto: bf16 on CUDA, fp32 on CPU and mps)."""
    if precision == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return precision


def autocast(device, precision):
    """The autocast region of --precision (auto: bf16 on CUDA, none on CPU and mps); the weights stay fp32."""
    precision = arithmetic(device, precision)
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


# ----------------------------------------------------------------------------
# Settings: dataclass defaults, then the paper's table, then the flags (each script's make_config)
# ----------------------------------------------------------------------------

NOT_FIELDS = {"model", "epochs", "paper", "resume", "init"}   # keys of a script's settings that name no field: the
# network's size, --epochs (sets max_steps) and how a run starts


def check_known(settings, classes, source):
    """Refuse, named, a key of `settings` (from `source`, e.g. the paper's table) that is a field of none of `classes`:
    a mistyped key must not be dropped without a word."""
    known = NOT_FIELDS | {f.name for cls in classes for f in dataclasses.fields(cls)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise UserError(f"{source} has a setting that jpdvt does not know: {unknown[0]}; correct or remove it")
