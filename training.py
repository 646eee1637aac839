"""
Training machinery shared by train_image.py and train_video.py (the method itself is in jpdvt.py).

- The loop: AdamW, linear warmup then constant (paper) or cosine learning rate, gradient clipping at 1, an EMA
  of the weights (used for sampling), tqdm, OUT/log.txt, a periodic accuracy check on a fixed held-out batch.
- Checkpoints: one `ckpt.pt` = {config, model, ema, opt, step}, plain types and tensors only, written atomically
  (temp file + rename) and read with torch.load(weights_only=True), so a checkpoint can never run code.
- Exact resume: the batch of step s is stream positions (s*world + rank)*B ... (StepBatches) and the noise of
  step s is seeded by (seed, s, rank), so a resumed run reaches the same weights as an uninterrupted one.
- DDP, nanoGPT style: on when torchrun sets RANK (nccl on CUDA, gloo on CPU); rank 0 alone writes.
- Flags and argparse types the two training scripts share (`add_train_flags`).
"""
import argparse
import contextlib
import copy
import math
import os
import pickle
import re
import time
import zipfile

import torch
import torch.distributed as dist
from tqdm import tqdm

from errors import UserError
from jpdvt import evaluate, position_table, puzzle_loss
from puzzles import ENDLESS, epoch_index


# ----------------------------------------------------------------------------
# Argparse types
# ----------------------------------------------------------------------------

def positive(text):
    """argparse type: an int >= 1 (argparse names the flag in its error)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


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
loss_weight = finite_float(allow_zero=True)       # --weight-pos, --weight-content


# ----------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------

def save_checkpoint(path, ckpt):
    """
    Write atomically: a temp file in the same folder, then rename, so a kill never leaves a broken ckpt. Temp
    files that a killed run left behind are removed after the rename.
    """
    folder, name = os.path.split(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(ckpt, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    for stale in os.listdir(folder):                       # temp files of killed runs (not of live ones)
        pid = stale[len(f".{name}.tmp"):]
        if stale.startswith(f".{name}.tmp") and pid.isdigit() and not process_alive(int(pid)):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(folder, stale))


def process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def load_checkpoint(path, kind=None):
    """Load safely (weights_only: no code runs). kind = "image" | "video" checks what the checkpoint holds."""
    if not os.path.isfile(path):
        raise UserError(f"checkpoint {path} does not exist; pass the ckpt.pt written by a training run")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise UserError(f"checkpoint {path} holds objects other than tensors and plain types; refusing to load "
                        "it (it could run code)") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError):
        raise UserError(f"checkpoint {path} is truncated or not a PyTorch checkpoint; use an intact ckpt.pt") \
            from None
    if not isinstance(ckpt, dict) or not {"config", "model", "ema", "step"} <= set(ckpt) \
            or "kind" not in ckpt.get("config", {}):
        raise UserError(f"checkpoint {path} is not a jpdvt checkpoint (it lacks config/model/ema/step)")
    if kind is not None and ckpt["config"]["kind"] != kind:
        raise UserError(f"checkpoint {path} is a {ckpt['config']['kind']} model, not a {kind} model; use "
                        f"{'train_video.py' if ckpt['config']['kind'] == 'video' else 'train_image.py'}'s "
                        "checkpoints with this command")
    return ckpt


# flags that may change when resuming; every other setting comes from the checkpoint
RUN_FLAGS = {"resume", "max_steps", "out", "device", "ckpt_every", "eval_every", "compile", "workers"}


def resume_args(args, kind, parser):
    """
    With --resume, every setting comes from the checkpoint, except run-control flags given on the command
    line (e.g. a larger --max-steps). Returns the checkpoint (None without --resume).
    """
    if not args.resume:
        return None
    ckpt = load_checkpoint(args.resume, kind)
    if not ckpt["model"] or not ckpt["opt"]:
        raise UserError(f"checkpoint {args.resume} holds EMA weights only (a shipped checkpoint) and cannot be "
                        "resumed; use it with sample.py, or resume from a training run's ckpt.pt")
    for k, v in ckpt["config"]["args"].items():
        if k != "resume" and (k not in RUN_FLAGS or getattr(args, k, None) == parser.get_default(k)):
            setattr(args, k, v)
    return ckpt


# ----------------------------------------------------------------------------
# Devices, precision, learning rate, data order
# ----------------------------------------------------------------------------

def resolve_device(device_arg):
    """--device auto|cpu|cuda|cuda:N -> torch.device ("auto": the GPU when there is one)."""
    if device_arg == "auto":
        device_arg = "cuda" if torch.cuda.is_available() else "cpu"
    if device_arg != "cpu" and not re.fullmatch(r"cuda(:\d+)?", device_arg):
        raise UserError(f"--device must be auto, cpu, cuda or cuda:N, got {device_arg!r}")
    if device_arg.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("--device cuda was asked for but no CUDA GPU is available; use --device cpu")
    return torch.device(device_arg)


def setup_distributed(device_arg):
    """DDP is on when torchrun sets RANK: nccl on CUDA, gloo on CPU. Returns (rank, world, device)."""
    device = resolve_device(device_arg)
    if "RANK" not in os.environ:
        return 0, 1, device
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if device.type == "cuda":
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        return rank, world, torch.device("cuda", local)
    return rank, world, torch.device("cpu")


PRECISIONS = {"fp32": "full precision", "bf16": "bfloat16 autocast", "fp16": "float16 autocast + grad scaling (CUDA)"}


def autocast(device, precision):
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


SCHEDULES = {"constant": "constant after warmup (paper)", "cosine": "cosine decay to 0 at --max-steps"}


def learning_rate(args, step):
    """Linear warmup over --warmup steps, then constant or cosine-decayed."""
    lr = args.lr * min(1.0, (step + 1) / args.warmup) if args.warmup else args.lr
    if args.schedule == "cosine":
        lr *= 0.5 * (1 + math.cos(math.pi * min(step / args.max_steps, 1.0)))
    return lr


class StepBatches(torch.utils.data.Sampler):
    """
    Batch sampler: the batch of step s on rank r is stream positions (s*world + r)*B ... +B (wrapping around
    epochs of a finite dataset through a seeded permutation). Starting at `start_step` resumes exactly.
    """

    def __init__(self, length, batch_size, seed, start_step=0, max_steps=None, rank=0, world=1):
        self.length, self.b, self.seed = length, batch_size, seed
        self.start, self.max_steps, self.rank, self.world = start_step, max_steps, rank, world

    def index(self, pos):
        """An unlimited stream: position = item; a finite set: shuffled epochs (puzzles.epoch_index)."""
        return pos if self.length >= ENDLESS else epoch_index(pos, self.length, self.seed)

    def __iter__(self):
        s = self.start
        while self.max_steps is None or s < self.max_steps:
            first = (s * self.world + self.rank) * self.b
            yield [self.index(p) for p in range(first, first + self.b)]
            s += 1

    def __len__(self):
        return (self.max_steps or 2 ** 31) - self.start


# ----------------------------------------------------------------------------
# Training loop
# ----------------------------------------------------------------------------

def ema_update(ema, model, decay):
    """ema <- decay * ema + (1 - decay) * model, parameter by parameter."""
    with torch.no_grad():
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.lerp_(pm, 1 - decay)


def init_weights(model, ema, path, config):
    """--init: start model and EMA from another run's EMA weights (fine-tuning); optimizer and step start fresh."""
    if not os.path.isfile(path):
        raise UserError(f"--init {path} does not exist; pass the ckpt.pt of the run to fine-tune from")
    src = load_checkpoint(path, config["kind"])
    have, want = src["config"]["model"], config["model"]
    diff = sorted(k for k in want if have.get(k) != want[k])
    grow = diff == ["depth"] and have["depth"] < want["depth"] and config["kind"] == "image"
    if diff and not grow:
        raise UserError(f"--init {path} holds a model with other settings ({', '.join(diff)}); fine-tuning needs "
                        "the same --model, --width, --piece-size and --patch-size (or frame settings) as that "
                        "run, or a larger --depth")
    for net in (model, ema):      # blocks past the source's depth keep their identity initialization
        net.load_state_dict(src["ema"], strict=not grow)


def train(args, config, model, diffusion, train_set, eval_batch, ckpt=None, encode=None):
    """
    Train `model` on `train_set` (a map-style dataset indexed by stream position) with the loss of jpdvt.py;
    `config` (plain types) goes into the checkpoint. The EMA model is scored on the fixed held-out `eval_batch`.
    encode(batch) -> batch runs on the device before the loss and the check (frames -> autoencoder latents).
    Returns the final held-out metrics (rank 0; {} on other ranks).
    """
    rank, world, device = setup_distributed(args.device)
    master = rank == 0
    model.to(device)
    ema = copy.deepcopy(model).eval().requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    step = 0
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        ema.load_state_dict(ckpt["ema"])
        opt.load_state_dict(ckpt["opt"])
        step = ckpt["step"]
    elif args.init:
        init_weights(model, ema, args.init, config)
    if step >= args.max_steps and master:
        print(f"checkpoint is already at step {step} >= --max-steps {args.max_steps}; nothing to train")
    table = position_table(config).to(device)
    encode = encode or (lambda batch: batch)
    net = model
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda"
                                                        else None)
    if args.compile:
        net = torch.compile(net)
    scaler = torch.amp.GradScaler(enabled=args.precision == "fp16" and device.type == "cuda")
    loader = torch.utils.data.DataLoader(
        train_set, batch_sampler=StepBatches(len(train_set), args.batch_size, args.seed, step, args.max_steps, rank,
                                             world), num_workers=args.workers, persistent_workers=False)
    out_ckpt = os.path.join(args.out, "ckpt.pt")
    log = None
    if master:
        os.makedirs(args.out, exist_ok=True)
        log = open(os.path.join(args.out, "log.txt"), "a")
        n_params = sum(p.numel() for p in model.parameters())
        print(f"{n_params / 1e6:.2f}M parameters, {world} process(es) on {device}, step {step} -> {args.max_steps}")
    eval_batch = encode({k: v.to(device) for k, v in eval_batch.items()})

    def write(msg):
        tqdm.write(msg)
        log.write(msg + "\n")
        log.flush()

    def check(what):
        metrics = evaluate(ema, diffusion, eval_batch, config, args.eval_steps,
                           generator=torch.Generator(device).manual_seed(0))[2]
        write(f"{what} step {step} " + " ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
        return metrics

    weights = {"pos": args.weight_pos, "content": args.weight_content}
    bar = tqdm(total=args.max_steps, initial=step, disable=not master, desc="train", dynamic_ncols=True)
    t0, last_step, metrics = time.time(), step, {}
    for batch in loader:
        torch.manual_seed(args.seed * 1_000_003 + step * world + rank)   # noise of this step: exact on resume
        batch = encode({k: v.to(device, non_blocking=True) for k, v in batch.items()})
        lr = learning_rate(args, step)
        for g in opt.param_groups:
            g["lr"] = lr
        with autocast(device, args.precision):
            losses = puzzle_loss(net, diffusion, batch, table, config["anchor"], weights)
        loss = losses["loss"]
        if not torch.isfinite(loss):
            bar.close()
            raise UserError(f"loss became {loss.item()} at step {step}; the last good checkpoint is {out_ckpt} "
                            "(try a lower --lr or --precision fp32)")
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        step += 1
        ema_update(ema, model, min(args.ema_decay, (1 + step) / (10 + step)))
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.4f}")
        if master and (step % 50 == 0 or step == args.max_steps):
            rate = (step - last_step) / max(time.time() - t0, 1e-9)
            parts = " ".join(f"{k} {v.item():.4f}" for k, v in losses.items() if k != "loss")
            write(f"step {step} loss {loss.item():.4f} {parts} lr {lr:.2e} steps/s {rate:.2f}")
            t0, last_step = time.time(), step
        if master and args.eval_every and step % args.eval_every == 0 and step < args.max_steps:
            check("eval")
        if master and (step % args.ckpt_every == 0 or step == args.max_steps):
            save_checkpoint(out_ckpt, {"config": config, "model": model.state_dict(), "ema": ema.state_dict(),
                                       "opt": opt.state_dict(), "step": step})
    bar.close()
    if master:
        metrics = check("final")
        print(f"held-out ({len(eval_batch['order'])} test puzzles, DDIM-{args.eval_steps}): "
              + ", ".join(f"{k} {v:.3f}" for k, v in metrics.items()))
        save_checkpoint(out_ckpt, {"config": config, "model": model.state_dict(), "ema": ema.state_dict(),
                                   "opt": opt.state_dict(), "step": step})
        log.close()
    if world > 1:
        dist.destroy_process_group()
    return metrics


def add_train_flags(p, lr):
    """Flags shared by the two training scripts (help text on each)."""
    p.add_argument("--batch-size", type=positive, default=32, help="puzzles per step per process")
    p.add_argument("--lr", type=positive_float, default=lr, help="AdamW learning rate (paper: 1e-4)")
    p.add_argument("--warmup", type=int, default=100, help="linear learning-rate warmup steps (0 = none)")
    p.add_argument("--schedule", default="constant", choices=SCHEDULES, help="learning-rate schedule after warmup")
    p.add_argument("--max-steps", type=positive, default=2000, help="total training steps")
    p.add_argument("--ckpt-every", type=positive, default=500, help="write ckpt.pt every N steps")
    p.add_argument("--eval-every", type=int, default=500,
                   help="check accuracy on a fixed held-out batch every N steps (0 = only at the end)")
    p.add_argument("--eval-puzzles", type=positive, default=64, help="size of that batch")
    p.add_argument("--eval-steps", type=positive, default=20, help="DDIM steps for that check")
    p.add_argument("--ema-decay", type=float, default=0.999, help="EMA decay of the weights used for sampling")
    p.add_argument("--out", default="out/run", help="output folder: ckpt.pt and log.txt")
    p.add_argument("--resume", default=None, help="continue from this ckpt.pt (settings come from it)")
    p.add_argument("--init", default=None,
                   help="fine-tune: start from this checkpoint's (EMA) weights with a fresh optimizer at step 0")
    p.add_argument("--seed", type=int, default=0, help="seed of the data stream, noise and initial weights")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (torchrun sets one per process)")
    p.add_argument("--workers", type=int, default=1, help="data-loading processes (0 = in the main process)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (GPU speed-up)")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS, help="training precision")
