"""
What every script shares on the command line, in three parts that import nothing of the method: clean errors
(`UserError`, `user_errors`), argparse types and the checks of a puzzle's settings (`positive`, `grid`,
`check_puzzle`), and the device a script runs on (`resolve_device`, `cpu_threads`, `autocast`). Not in the paper.
The flags of each script live beside it: sample.py's sampling flags, train.py's training flags.

A wrong flag, a missing file or an unreadable dataset raises `UserError` with one sentence that names the flag or
file and says what to do; `user_errors` turns it into one `error: ...` line and exit code 2, never a traceback.

    if __name__ == "__main__":
        with user_errors():                                # main raises UserError("--grid must ...; use ...")
            main(get_parser().parse_args())
"""
import argparse
import contextlib
import math
import os
import re
import sys

import torch

# ----------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------

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
# Argparse types (argparse names the flag in its error) and the checks of a puzzle's settings
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
    if p.superres and (p.missing or p.curriculum or p.superres < 0 or (p.pieces - 1) % (p.superres + 1)):
        raise UserError(f"--superres K gives the pieces at slots 0, K+1, ..., up to the last ({p.pieces - 1}), and "
                        f"generates the rest: it needs --missing 0, no --curriculum and --pieces - 1 a multiple of "
                        f"K + 1, got K {p.superres}, {p.pieces} pieces, --missing {p.missing}")
    if p.frame_stride < 1:
        raise UserError(f"--frame-stride must be at least 1, got {p.frame_stride}")


def check_missing(missing, pieces, kept, what):
    """--missing must leave the `kept` always-given pieces (the anchor) and at least one more piece to place."""
    if not 0 <= missing < pieces - kept:
        raise UserError(f"--missing must be between 0 and {pieces - 1 - kept} for {what}, got {missing}")


# ----------------------------------------------------------------------------
# The device
# ----------------------------------------------------------------------------

AUTOCAST = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}   # solving's --precision: autocast dtype


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


@contextlib.contextmanager
def solving_threads(device):
    """On a CPU, a compute thread per core but one while solving (cpu_threads; OMP_NUM_THREADS, if set, decides), then
    the process's own count again: a thread per core makes the threads wait on each other on a machine busy with
    other work, and a library call leaves the process's setting as it found it."""
    before = torch.get_num_threads()
    cpu_threads(device, world=1, workers=1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
