"""
The JPDVT method glue shared by train_image.py, train_video.py and sample.py.

- puzzle_loss: the paper's training objective on a batch of shuffled puzzles (Sec. 3.1): positional codes of
  every piece are diffused (except an anchored one, whose code is given), content of missing pieces is
  diffused, given content stays clean; weighted per part (paper, video: 0.2 positions / 0.8 missing frames).
- solve: sample codes (and missing content) with DDIM or DDPM, then assign each piece the true position
  whose code is closest (supplement, "Predicted position encodings"; Hungarian or the paper's greedy rule).
- Checkpoints: one `ckpt.pt` = {config, model, ema, opt, step}, plain types and tensors only, written
  atomically (temp file + rename) and read with torch.load(weights_only=True).
- train: the training loop (EMA, tqdm, log.txt, periodic accuracy check, DDP switched on by RANK, exact resume:
  each step's data and noise are a pure function of (seed, step, rank)).
"""
import argparse
import contextlib
import copy
import math
import os
import pickle
import re
import sys
import time
import zipfile

import numpy as np
import torch
import torch.distributed as dist
from tqdm import tqdm

from metrics import assign
from puzzles import StepBatches, UserError


def die(msg):
    """Print one clear line and exit non-zero (no traceback): for user mistakes."""
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def run_cli(main, args):
    """Run main(args), turning user errors (UserError, missing files) into one line and exit code 2."""
    try:
        main(args)
    except (UserError, FileNotFoundError) as e:
        die(str(e))
    except KeyboardInterrupt:
        die("interrupted")


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
# Objective and solver
# ----------------------------------------------------------------------------

def anchor_mask(batch, anchored):
    """(B, N) bool: pieces whose true positional code is given to the model (piece 0 when anchored)."""
    a = torch.zeros_like(batch["missing"])
    if anchored:
        a[:, 0] = True
    return a


def model_fn(model, missing, anchor):
    """Adapt model(pos, content, t, missing, anchor) -> (pos, content) to the diffusion's dict interface."""
    def fn(xt, t):
        pos, content = model(xt["pos"], xt["content"], t, missing, anchor)
        return {"pos": pos, "content": content}
    return fn


def puzzle_loss(model, diffusion, batch, table, anchored, weights):
    """Diffusion loss of one batch; table (num_positions, D) holds the true code of every position."""
    anchor = anchor_mask(batch, anchored)
    x0 = {"pos": table[batch["order"]], "content": batch["content"]}
    masks = {"pos": ~anchor, "content": batch["missing"]}
    return diffusion.training_losses(model_fn(model, batch["missing"], anchor), x0, masks, weights)


@torch.no_grad()
def solve(model, diffusion, batch, table, anchored, steps=50, sampler="ddim", method="hungarian",
          generator=None, progress=False, known=None):
    """
    Returns (positions (B, N) int array: predicted position of each piece, content with missing generated).
    known: (B, N) bool of pieces whose true code is given (default: the anchor); all True generates only the
    missing content at known positions (temporal super-resolution).
    """
    anchor = anchor_mask(batch, anchored) if known is None else known
    keep = ~batch["missing"]
    content = batch["content"] * keep.view(*keep.shape, *[1] * (batch["content"].dim() - 2))
    given = {"pos": table[batch["order"]] * anchor[..., None], "content": content}
    masks = {"pos": ~anchor, "content": batch["missing"]}
    out = diffusion.sample(model_fn(model, batch["missing"], anchor), given, masks, steps, sampler,
                           generator=generator, progress=progress)
    cost = torch.cdist(out["pos"].float(), table[None].float().expand(out["pos"].shape[0], -1, -1))
    positions = np.stack([assign(c, method) for c in cost.cpu()])
    return positions, out["content"]


# ----------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------

def save_checkpoint(path, ckpt):
    """Write atomically: a temp file in the same folder, then rename, so a kill never leaves a broken ckpt."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(ckpt, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


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


# ----------------------------------------------------------------------------
# Distributed setup
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


PRECISIONS = {"fp32": "full precision", "bf16": "bfloat16 autocast", "fp16": "float16 autocast + grad scaling (CUDA)"}
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
# Training loop
# ----------------------------------------------------------------------------

def train(args, config, model, diffusion, dataset, table, eval_batch, evaluate_batch, ckpt=None, prepare=None):
    """
    Train `model` on `dataset` (a map-style dataset indexed by stream position). `config` (plain types) goes
    into the checkpoint; evaluate_batch(model, diffusion, batch, config, steps, generator=...) -> (..., metrics)
    scores the EMA model on the fixed held-out `eval_batch`; prepare(batch) -> batch runs on the device before
    the loss and the evaluation (e.g. frames -> autoencoder latents). Loss weights: --weight-pos/--weight-content.
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
    if step >= args.max_steps and master:
        print(f"checkpoint is already at step {step} >= --max-steps {args.max_steps}; nothing to train")
    table = table.to(device)
    net = model
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda"
                                                        else None)
    if args.compile:
        net = torch.compile(net)
    scaler = torch.amp.GradScaler(enabled=args.precision == "fp16" and device.type == "cuda")
    loader = torch.utils.data.DataLoader(
        dataset, batch_sampler=StepBatches(len(dataset), args.batch_size, args.seed, step, args.max_steps, rank,
                                           world), num_workers=args.workers, persistent_workers=False)
    out_ckpt = os.path.join(args.out, "ckpt.pt")
    log = None
    if master:
        os.makedirs(args.out, exist_ok=True)
        log = open(os.path.join(args.out, "log.txt"), "a")
        n_params = sum(p.numel() for p in model.parameters())
        print(f"{n_params / 1e6:.2f}M parameters, {world} process(es) on {device}, step {step} -> {args.max_steps}")

    def write(msg):
        if master:
            tqdm.write(msg)
            log.write(msg + "\n")
            log.flush()

    def save():
        if master:
            save_checkpoint(out_ckpt, {"config": config, "model": model.state_dict(), "ema": ema.state_dict(),
                                       "opt": opt.state_dict(), "step": step})

    def evaluate():
        batch = {k: v.to(device) for k, v in eval_batch.items()}
        batch = prepare(batch) if prepare is not None else batch
        return evaluate_batch(ema, diffusion, batch, config, args.eval_steps,
                              generator=torch.Generator(device).manual_seed(0))[2]

    weights = {"pos": args.weight_pos, "content": args.weight_content}
    bar = tqdm(total=args.max_steps, initial=step, disable=not master, desc="train", dynamic_ncols=True)
    t0, last_step, metrics = time.time(), step, {}
    for batch in loader:
        torch.manual_seed(args.seed * 1_000_003 + step * world + rank)   # noise of this step: exact on resume
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items() if k != "image"}
        if prepare is not None:
            batch = prepare(batch)
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
        decay = min(args.ema_decay, (1 + step) / (10 + step))
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.lerp_(pm, 1 - decay)
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.4f}")
        if step % 50 == 0 or step == args.max_steps:
            rate = (step - last_step) / max(time.time() - t0, 1e-9)
            parts = " ".join(f"{k} {v.item():.4f}" for k, v in losses.items() if k != "loss")
            write(f"step {step} loss {loss.item():.4f} {parts} lr {lr:.2e} steps/s {rate:.2f}")
            t0, last_step = time.time(), step
        if args.eval_every and step % args.eval_every == 0 and step < args.max_steps and master:
            metrics = evaluate()
            write(f"eval step {step} " + " ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
        if step % args.ckpt_every == 0 or step == args.max_steps:
            save()
    bar.close()
    if master:
        metrics = evaluate()
        write(f"final step {step} " + " ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
        save()
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
    p.add_argument("--seed", type=int, default=0, help="seed of the data stream, noise and initial weights")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (torchrun sets one per process)")
    p.add_argument("--workers", type=int, default=1, help="data-loading processes (0 = in the main process)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (GPU speed-up)")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS, help="training precision")
