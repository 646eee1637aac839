"""
The training loop shared by train_image.py and train_video.py, nanoGPT style; the method itself is in jpdvt.py.

Paper: the objective of Sec. 3.1, "Masked Jigsaw Transformer Diffusion" (jpdvt.puzzle_loss), trained as the
supplement's "Image Experiments" and "Video Experiments" state (their batch sizes, learning rates and steps are the
table of configs/paper.py). Gradient clipping, warm-up, the EMA and the held-out check are not stated in the paper.

One step: a batch of puzzles -> jpdvt.puzzle_loss -> backward -> clip the gradient (--clip) -> AdamW step -> EMA of
the weights (used for sampling) -> log; every so many steps a held-out check and a checkpoint.
- DDP is on when torchrun sets RANK (rank 0 writes). --batch-size is the global batch B: each of W processes takes
  B / W puzzles a step, in --accum micro-batches; their exact loss shares are in training/shares.py.
- Exact resume: step s trains on stream positions s*B ... s*B + B - 1, and its noise is seeded by (seed, s).
  (fp16's loss scale is not stored: it restarts on resume.)
- The checkpoint, OUT/ckpt.pt: {format, config, model, ema, opt, step}, written to a temporary file, then renamed
  (a shipped checkpoint keeps the EMA only, with the sampling chosen for it).

    torch.manual_seed(config.train.seed); model = DiT(config.model)      # train_image.py (train_video.py: UNet3D)
    train(config, model, train_set, held_out, run)
"""
import argparse
import copy
import dataclasses
import math
import os
import time
from dataclasses import asdict

import numpy as np
import torch
import torch.distributed as dist
from tqdm import tqdm

from config import FORMAT
from diffusion import PREDICTIONS, GaussianDiffusion
from jpdvt import (
    SampleOptions,
    code_costs,
    pinned_cells,
    pinned_pieces,
    place,
    position_table,
    puzzle_loss,
    score,
    told_and_pinned,
)
from metrics import in_slots, psnr
from plumbing.cli import (
    UserError,
    autocast,
    cpu_threads,
    decay,
    non_negative,
    non_negative_float,
    positive,
    positive_float,
    resolve_device,
)
from puzzles import collate, superres_given
from training.shares import shared_backward

# ----------------------------------------------------------------------------
# The loop
# ----------------------------------------------------------------------------

def train(config, model, train_set, held_out, run, start=None, encode=None):
    """
    Train `model` (config's network, its initial weights drawn from seed tc.seed) on `train_set` (a map-style dataset
    indexed by stream position), from those weights or from `start` (a checkpoint dict: --resume, or --init's EMA
    weights at step 0); check its EMA on the first puzzles of `held_out`.
    encode(batch) -> batch runs on the device before the loss (frames -> autoencoder latents).
    """
    tc = config.train
    rank, world, device = setup_distributed(run.device)
    threads = cpu_threads(device, world, run.workers)
    if tc.batch_size % (world * tc.accum):
        raise UserError(f"--batch-size {tc.batch_size} is the global batch and must split evenly into {world} "
                        f"process(es) x --accum {tc.accum} micro-batches; use a multiple of {world * tc.accum}")
    if tc.precision == "fp16" and device.type != "cuda":
        raise UserError("--precision fp16 needs a CUDA device (its gradient scaler is CUDA only); use fp32 or bf16")
    model = model.to(device)
    ema = copy.deepcopy(model).eval().requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, weight_decay=0.0, fused=device.type == "cuda")
    scaler = torch.amp.GradScaler(enabled=tc.precision == "fp16")   # its scale is not stored: it restarts on resume
    step = load_state(start, model, ema, opt)
    net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda"
                                                    else None) if world > 1 else model
    net = torch.compile(net) if run.compile else net
    diffusion, table = GaussianDiffusion(1000, config.prediction), position_table(config).to(device)
    weights = {"code": tc.weight_code, "content": tc.weight_content}      # the loss's weight of each part
    encode = encode or (lambda batch: batch)
    eval_batch = collate([held_out[i] for i in range(min(tc.eval_puzzles, len(held_out)))])
    eval_batch = encode({k: v.to(device) for k, v in eval_batch.items()})
    log = Log(run.out, rank, world, step, tc.max_steps)
    if start is not None and start["opt"]:
        log.write(f"resuming at step {step}")
    where = f"{world} process(es) on {device}" + (f", {threads} thread(s) each" if threads else "")
    log_settings(log, config, model, where, step)
    loader = torch.utils.data.DataLoader(train_set, batch_sampler=step_batches(tc, step, rank, world),
                                         collate_fn=collate, num_workers=run.workers, pin_memory=device.type == "cuda")
    waited = time.perf_counter()
    for batch in loader:
        log.waited += time.perf_counter() - waited
        torch.manual_seed(tc.seed * 1_000_003 + step)   # noise of this step, the same on every process: exact on resume
        batch = encode({k: v.to(device, non_blocking=True) for k, v in batch.items()})   # content (B, N, ...)
        lr = set_lr(opt, learning_rate(tc, step))
        opt.zero_grad(set_to_none=True)
        pinned = pinned_pieces(batch, config.puzzle)                 # the anchor (super-resolution: given pieces)
        told, _ = told_and_pinned(batch, pinned, config.puzzle)      # the anchor's code if it trains with one (super-
        # resolution: every given piece's)
        if world == 1 and tc.accum == 1:                             # one process, one batch: the step itself
            with autocast(device, tc.precision):
                losses = puzzle_loss(net, diffusion, batch, table=table, given=told, weights=weights)
            scaler.scale(losses["loss"]).backward()                  # loss.backward() (scaled only under fp16)
        else:                                                        # DDP or --accum: the same gradient, in shares
            losses = shared_backward(net, diffusion, batch, table, told, scaler, tc, world)
        scaler.unscale_(opt)                                         # fp16's loss scale off the gradient
        if tc.clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.clip)
        scaler.step(opt)                                             # opt.step(), through the fp16 scaler
        scaler.update()
        step += 1
        ema_update(ema, model, min(tc.ema_decay, (1 + step) / (10 + step)))    # a warm-up of the decay (ema_update)
        log.add({k: v.detach() for k, v in losses.items()})          # kept on the device: no sync here
        evaluate = tc.eval_every and step % tc.eval_every == 0 and step < tc.max_steps
        save = step % tc.ckpt_every == 0 or step == tc.max_steps
        if evaluate or save or step % run.log_every == 0:  # the same steps on every rank
            log.read(step, lr)                        # one sync: every rank stops here if any loss was not finite
        if rank == 0 and evaluate:
            log.write(f"eval step {step} {held_out_check(ema, diffusion, eval_batch, table, config)}")
        if rank == 0 and save:
            save_checkpoint(log.ckpt, config, model, ema, opt, step)
        waited = time.perf_counter()
    log.bar.close()
    if rank == 0:
        line = held_out_check(ema, diffusion, eval_batch, table, config)
        log.write(f"final step {step} {line} (held out: {len(eval_batch['true_pos'])} val puzzles, "
                  f"DDIM-{tc.eval_steps})")
        log.file.close()
    if world > 1:
        dist.barrier()              # every rank leaves together: one that tears down its connections while another
        dist.destroy_process_group()  # still checks can abort (gloo: "connection closed by peer")



# ----------------------------------------------------------------------------
# What the loop calls
# ----------------------------------------------------------------------------

def log_settings(log, config, model, where, step):
    """The log's first lines: every setting of the run (a size the network also holds, such as piece_size, once), the
    network's size, where it runs and how the global batch splits."""
    tc = config.train
    puzzle = asdict(config.puzzle)
    network = {k if puzzle.get(k, v) == v else f"model_{k}": v for k, v in asdict(config.model).items()}
    settings = {**puzzle, **network, **asdict(tc), "prediction": config.prediction}
    log.write("settings: " + "; ".join(f"{k} {v}" for k, v in settings.items()))
    world = log.world
    log.write(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {where}; global batch "
              f"{tc.batch_size} = {world} process(es) x {tc.accum} micro-batch(es) x "
              f"{tc.batch_size // (world * tc.accum)}; step {step} -> {tc.max_steps}")


def set_lr(opt, lr):
    """Set every parameter group's learning rate; returns it."""
    for group in opt.param_groups:
        group["lr"] = lr
    return lr


def save_checkpoint(path, config, model, ema, opt, step):
    """OUT/ckpt.pt = {format, config, model, ema, opt, step}, written to a temporary file, then renamed: a kill never
    leaves a broken ckpt.pt."""
    ckpt = {"format": FORMAT, "config": {"kind": config.puzzle.kind, **asdict(config)},
            "model": model.state_dict(), "ema": ema.state_dict(), "opt": opt.state_dict(), "step": step}
    torch.save(ckpt, path + ".tmp")
    os.replace(path + ".tmp", path)

def setup_distributed(device_arg):
    """DDP is on when torchrun sets RANK: nccl on CUDA, gloo on CPU. Returns (rank, world, device). On CUDA, fp32
    matmuls and convolutions may use TF32 (the fp32 weights and the autocast regions are unchanged)."""
    device = resolve_device(device_arg)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    if "RANK" not in os.environ:
        return 0, 1, device
    if device.type == "mps":
        raise UserError("torchrun runs several processes on CUDA GPUs or CPU cores, and a Mac's GPU is one device; "
                        "train without torchrun, or pass --device cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    return dist.get_rank(), dist.get_world_size(), device


def load_state(start, model, ema, opt):
    """The first step: 0, or a checkpoint's (--resume: its network, EMA and optimizer; --init: its EMA weights into
    the network and the EMA, with a fresh optimizer at step 0)."""
    if start is None:
        return 0
    model.load_state_dict(start["model"] or start["ema"])
    ema.load_state_dict(start["ema"])
    if start["opt"]:
        opt.load_state_dict(start["opt"])
    return start["step"]


def step_batches(tc, start, rank=0, world=1):
    """The batches of an endless stream (a training dataset maps a stream position to a fresh puzzle): step s is
    positions s*B ... s*B + B - 1 of the global batch B, of which rank r of W takes the r-th B / W. Starting at
    `start` resumes exactly."""
    per_rank = tc.batch_size // world
    for s in range(start, tc.max_steps):
        first = s * tc.batch_size + rank * per_rank
        yield list(range(first, first + per_rank))


def held_out_check(ema, diffusion, batch, table, config):
    """The EMA model's scores on the held-out batch (already encoded, for a latent model), as one line: DDIM
    (deterministic, so that successive checks compare), noise seed 0, the Hungarian assignment, in the training's
    precision, on the device of the position table. A super-resolution run pins every given piece, so its order
    measures nothing: the line is its generated frames' PSNR instead (superres_check)."""
    device, puzzle = table.device, config.puzzle
    noise = torch.Generator(device).manual_seed(0)
    opts = SampleOptions(steps=config.train.eval_steps, sampler="ddim", generator=noise)
    given, pinned = told_and_pinned(batch, pinned_pieces(batch, puzzle), puzzle)
    with autocast(device, config.train.precision):
        costs, generated = code_costs(ema, diffusion, batch, table=table, opts=opts, given=given,
                                      latent=getattr(puzzle, "vae", None) is not None)
    positions, generated = place(costs, generated, batch, opts, pinned_cells(batch, pinned))
    if getattr(puzzle, "superres", 0):
        return superres_check(puzzle, positions, generated, batch)
    return " ".join(f"{k} {v.mean():.4f}" for k, v in score(puzzle, positions, batch).items())


def superres_check(puzzle, positions, generated, batch):
    """A super-resolution run's held-out line: the mean PSNR (dB) of the generated pieces' frames against the truth
    (metrics.psnr, as python -m bench.superres measures a checkpoint, without its blend baseline). A latent model's
    content is latents, which it cannot decode here: the line names the command that measures its frames."""
    if puzzle.vae:
        return "(latent super-resolution: python -m bench.superres --ckpt CKPT measures the generated frames' PSNR)"
    keep = superres_given(np.arange(puzzle.pieces), puzzle.superres)          # the given slots
    true = in_slots(batch["content"], batch["true_pos"].cpu().numpy())
    return f"psnr {psnr(in_slots(generated.float().clamp(-1, 1), positions), true, keep).mean():.2f}"


def ema_update(ema, model, decay):
    """ema <- decay * ema + (1 - decay) * model, parameter by parameter. The loop's decay grows as (1 + step) / (10 +
    step) up to tc.ema_decay, so that the EMA soon leaves the random initial weights (0.999 is reached at step 8,990,
    0.9999 at 89,990: shorter runs never reach it)."""
    with torch.no_grad():
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.lerp_(pm, 1 - decay)


def learning_rate(tc, step):
    """The peak tc.lr, constant or cosine-decayed from step 0 to 0 at tc.max_steps, times a linear warm-up ramp over
    the first tc.warmup steps."""
    lr = tc.lr * min(1.0, (step + 1) / tc.warmup) if tc.warmup else tc.lr
    if tc.schedule == "cosine":
        lr *= 0.5 * (1 + math.cos(math.pi * min(step / tc.max_steps, 1.0)))
    return lr


class Log:
    """The tqdm bar and OUT/log.txt (rank 0): mean losses, steps/s and the share of time spent waiting for data every
    --log-every steps, and the held-out checks. Losses are summed on the device and read only by `read` (a sync),
    which also stops every process if any loss since the last read was not finite, before a checkpoint keeps it."""

    def __init__(self, out, rank, world, step, max_steps):
        self.rank, self.world, self.last, self.ckpt = rank, world, step, os.path.join(out, "ckpt.pt")
        self.sums, self.t0, self.waited = {}, time.time(), 0.0
        if rank == 0:
            os.makedirs(out, exist_ok=True)
            self.file = open(os.path.join(out, "log.txt"), "a")
            if step >= max_steps:
                print(f"checkpoint is already at step {step} >= --max-steps {max_steps}; nothing to train")
        self.bar = tqdm(total=max_steps, initial=step, disable=rank != 0, desc="train", dynamic_ncols=True)

    def write(self, msg):
        if self.rank == 0:
            tqdm.write(msg)
            self.file.write(msg + "\n")
            self.file.flush()

    def add(self, losses):
        """Add a step's losses, and whether the loss was not finite, to the running sums (on the device)."""
        losses = {**losses, "bad": (~torch.isfinite(losses["loss"])).float()}
        for k, v in losses.items():
            self.sums[k] = self.sums.get(k, 0) + v.float()
        self.bar.update(1)

    def read(self, step, lr):
        """Sync: refuse non-finite losses on any process, then log the mean losses since the last read (each
        process's losses are its share of the global batch's times W: their mean over processes is the global one)."""
        if self.world > 1:
            for v in self.sums.values():
                dist.all_reduce(v)
                v /= self.world
        if self.sums.pop("bad").item():
            self.bar.close()                            # the error goes on a line of its own
            raise UserError(f"the loss became nan or inf between steps {self.last} and {step}; the last good "
                            f"checkpoint is {self.ckpt} (try a lower --lr or --precision fp32)")
        elapsed, n = max(time.time() - self.t0, 1e-9), step - self.last
        means = {k: v.item() / n for k, v in self.sums.items()}
        self.bar.set_postfix(loss=f"{means['loss']:.4f}")
        parts = " ".join(f"{k} {v:.4f}" for k, v in means.items() if k != "loss")
        self.write(f"step {step} loss {means['loss']:.4f} {parts} lr {lr:.2e} steps/s {n / elapsed:.2f} "
                   f"data wait {100 * min(self.waited / elapsed, 1):.0f}%")
        self.sums, self.t0, self.last, self.waited = {}, time.time(), step, 0.0


# ----------------------------------------------------------------------------
# The flags both training scripts share (train_image.py, train_video.py)
# ----------------------------------------------------------------------------

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
