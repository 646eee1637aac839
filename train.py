"""
The training loop shared by train_image.py and train_video.py (the method itself is in jpdvt.py), its settings
(TrainConfig), the held-out check and the checkpoint it writes.

Paper: the objective of Sec. 3.1, "Masked Jigsaw Transformer Diffusion" (jpdvt.puzzle_loss), trained as the
supplement's "Image Experiments" and "Video Experiments" state (their batch sizes, learning rates and steps are the
table of configs/paper.py); gradient clipping, warm-up, EMA and the held-out check are not stated in the paper.

One step: a batch of puzzles -> jpdvt.puzzle_loss -> backward -> clip the gradient at 1 -> AdamW step -> EMA of the
weights (used for sampling) -> log, a periodic held-out check, a periodic checkpoint. DDP is on when torchrun sets
RANK (nanoGPT style; rank 0 writes); --batch-size is the global batch over all processes. The helpers the loop calls
for processes, resume, the data order, micro-batches and the log are in plumbing/training.py; the flags and how a
run starts in plumbing/flags.py.

    train(config, train_set, eval_batch)      # config: puzzle, model, train, prediction, run (plumbing Config)
    python train_image.py / python train_video.py     # the scripts that build config, train_set and eval_batch
"""
import copy
import math
from dataclasses import dataclass

import torch

import jpdvt
from diffusion import GaussianDiffusion
from jpdvt import SampleOptions, clean_parts, given_codes, puzzle_loss, solve
from plumbing.checkpoint import FORMAT, save_checkpoint, training_files
from plumbing.cli import autocast, cpu_threads
from plumbing.training import (
    Log,
    batches,
    check_processes,
    micro_batches,
    no_sync,
    prepare_model,
    process_draws,
    resume_or_init,
    setup_distributed,
)
from puzzles import to_device

SCHEDULES = {"constant": "constant after the warm-up (the paper states no learning-rate schedule)",
             "cosine": "cosine decay from step 0 to 0 at --max-steps, times the warm-up ramp"}


@dataclass
class TrainConfig:
    """How a run trains: the train_*.py flags of the same names (their defaults differ by script)."""
    batch_size: int = 32                     # puzzles per step, over all processes (each of W takes B / W)
    lr: float = 1e-3                         # AdamW learning rate (weight decay 0)
    warmup: int = 100                        # linear warmup steps
    schedule: str = "constant"               # learning rate: constant (the paper states none) or cosine from step 0 to
                                             # 0 at max_steps, either times the warm-up ramp
    max_steps: int = 2000                    # total training steps
    ema_decay: float = 0.999                 # EMA of the weights used for sampling: its largest decay (the loop)
    weight_code: float = 1.0                 # loss weight of the positional codes
    weight_content: float = 0.1              # loss weight of missing pieces' content (a mean over the missing
                                             # entries of the batch, whatever their number)
    precision: str = "auto"                  # autocast: auto (bf16 on CUDA, fp32 on CPU, mps), fp32, bf16, fp16
    seed: int = 0                            # data stream, noise and initial weights
    ckpt_every: int = 500                    # write ckpt.pt every N steps
    eval_every: int = 500                    # held-out check every N steps (0: only at the end)
    eval_puzzles: int = 64                   # puzzles of the held-out check
    eval_steps: int = 20                     # DDIM steps of the held-out check
    accum: int = 1                           # micro-batches per process and step (gradient accumulation): each
                                             # process runs batch_size / (W * accum) puzzles at a time


# ----------------------------------------------------------------------------
# The loop
# ----------------------------------------------------------------------------

def train(config, train_set, eval_batch, ckpt=None, encode=None, notes=()):
    """
    Train config's network on `train_set` (a map-style dataset indexed by stream position) from scratch, from
    --init's weights or from `ckpt` (--resume); score its EMA on the fixed held-out `eval_batch`. encode(batch)
    -> batch runs on the device before the loss and the check (frames -> autoencoder latents). `notes`: the first
    lines of the log (start_run's settings and their sources, or what a resume changed). How this process runs
    (output folder, device, workers, torch.compile, --init, log interval) is config.run.
    """
    tc, run = config.train, config.run
    rank, world, device = setup_distributed(run.device)
    threads = cpu_threads(device, world, run.workers)
    check_processes(tc, world, device)
    kind = jpdvt.kind_of(config)
    (model, ema, opt, scaler), step, before = build(config, device, ckpt)
    net = prepare_model(model, device, world=world, compile_=run.compile)
    diffusion, table = GaussianDiffusion(1000, config.prediction), kind.table().to(device)
    weights = {"code": tc.weight_code, "content": tc.weight_content}
    encode = encode or (lambda batch: batch)
    data = training_files(train_set, config.puzzle, before, resuming=ckpt is not None)
    eval_batch = encode(to_device(eval_batch, device))
    log = Log(run.out, (rank, world), step=step, every=run.log_every, max_steps=tc.max_steps)
    micro_size = tc.batch_size // (world * tc.accum)
    for line in [*notes, f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {world} process(es) "
                 f"on {device}{f', {threads} thread(s) each' if threads else ''}; global batch {tc.batch_size} = "
                 f"{world} process(es) x {tc.accum} micro-batch(es) x {micro_size} puzzles; step {step} -> "
                 f"{tc.max_steps}"]:
        log.write(line)
    loader = log.timed(batches(train_set, tc, step, ranks=(rank, world), workers=run.workers,
                               pin=device.type == "cuda"))
    for batch in loader:
        torch.manual_seed(tc.seed * 1_000_003 + step)   # noise of this step, the same on every process: exact on resume
        batch = encode(to_device(batch, device))
        lr = learning_rate(tc, step)
        for group in opt.param_groups:
            group["lr"] = lr
        given = given_codes(batch, kind.anchored)                  # the anchor's code is told, never generated
        draws = process_draws(diffusion, clean_parts(batch, table), (rank, world))  # t and noise, then split
        opt.zero_grad(set_to_none=True)
        parts = micro_batches(batch, given, draws, tc.accum, world)
        losses = {}
        for i, (part, share) in enumerate(parts):
            with no_sync(net, last=i == len(parts) - 1), autocast(device, tc.precision):
                out = puzzle_loss(net, diffusion, part["batch"], table=table, given=part["given"], weights=weights,
                                  t=part["t"], noise=part["noise"])
                # out[k]: this micro-batch's mean over its generated entries of part k (code, content); share[k]:
                # its fraction of the global batch's generated entries of k, times W. Summed over micro-batches and
                # averaged over processes (DDP): the global batch's mean
                shares = {k: out[k] * share[k] for k in share}
                loss = sum(weights[k] * v for k, v in shares.items())
            scaler.scale(loss).backward()
            for k, v in {"loss": loss, **shares}.items():
                losses[k] = losses.get(k, 0) + v.detach()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)                              # optimizer.step(), through the fp16 scaler
        scaler.update()
        step += 1
        # the decay grows as (1 + step) / (10 + step) up to ema_decay (0.999 from step 8,990 on, 0.9999 from step
        # 89,990), so that the EMA soon leaves the random initial weights; shorter runs never reach ema_decay
        ema_update(ema, model, min(tc.ema_decay, (1 + step) / (10 + step)))
        log.step(step, losses)                        # kept on the device: no sync here
        evaluate = tc.eval_every and step % tc.eval_every == 0 and step < tc.max_steps
        save = step % tc.ckpt_every == 0 or step == tc.max_steps
        if evaluate or save or step % log.every == 0:  # the same steps on every rank
            log.read(step, lr)                         # one sync: every rank stops here if any loss was not finite
        if log.master and evaluate:
            line = held_out_check(ema, diffusion, eval_batch, config=config, device=device)
            log.write(f"eval step {step} {line}")
        if log.master and save:
            save_checkpoint(log.ckpt, state(config, model, ema, opt=opt, scaler=scaler, step=step, data=data))
    log.bar.close()
    if log.master:
        line = held_out_check(ema, diffusion, eval_batch, config=config, device=device)
        log.write(f"final step {step} {line} (held out: {len(eval_batch['true_pos'])} val puzzles, "
                  f"DDIM-{tc.eval_steps})")
    log.close(world)                                   # the last step's checkpoint was written in the loop


def build(config, device, ckpt):
    """((network, its EMA, AdamW, grad scaler), first step, the training-files record of the run it continues): from
    the seed (the same initial weights on every rank and every rerun), --init's weights or `ckpt` (--resume)."""
    tc = config.train
    torch.manual_seed(tc.seed)
    model = jpdvt.kind_of(config).network(config.model).to(device)
    ema = copy.deepcopy(model).eval().requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, weight_decay=0.0, fused=device.type == "cuda")
    scaler = torch.amp.GradScaler(enabled=tc.precision == "fp16" and device.type == "cuda")
    step, before = resume_or_init(ckpt, config.run.init, config, objects=(model, ema, opt, scaler))
    return (model, ema, opt, scaler), step, before


def held_out_check(ema, diffusion, batch, config, device):
    """The EMA model's scores on the held-out batch, as one line: DDIM (deterministic, so that successive checks
    compare), noise seed 0, in the training's precision."""
    noise = torch.Generator(device).manual_seed(0)
    opts = SampleOptions(steps=config.train.eval_steps, sampler="ddim", generator=noise)
    kind = jpdvt.kind_of(config)
    with autocast(device, config.train.precision):
        positions, _ = solve(ema, diffusion, batch, table=kind.table().to(device), opts=opts,
                             given=given_codes(batch, kind.anchored), latent=kind.vae is not None)
    return " ".join(f"{k} {v:.4f}" for k, v in kind.score(positions, batch).items())


def state(config, model, ema, opt, scaler, step, data):
    """What ckpt.pt holds: plain types and tensors only; data: the training files' record
    (sources.files.fingerprint)."""
    return {"format": FORMAT, "config": config.to_dict(), "model": model.state_dict(), "ema": ema.state_dict(),
            "opt": opt.state_dict(), "scaler": scaler.state_dict(), "step": step, "data": data}


def ema_update(ema, model, decay):
    """ema <- decay * ema + (1 - decay) * model, parameter by parameter."""
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
