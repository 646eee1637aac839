"""
The training loop shared by train_image.py and train_video.py (the method itself is in jpdvt.py).

Paper: the objective of "Masked Jigsaw Transformer Diffusion" (Sec. 3.1, jpdvt.puzzle_loss), trained as the
supplement's "Image Experiments" and "Video Experiments" state (their batch sizes, learning rates and steps are the
table of configs/paper.py); gradient clipping, warm-up, EMA and the held-out check are not stated in the paper.

One step: a batch of puzzles -> jpdvt.puzzle_loss -> backward -> clip the gradient at 1 -> AdamW step -> EMA of the
weights (used for sampling) -> log, a periodic held-out check, a periodic checkpoint. Around it, the helpers of
plumbing/machinery.py (and `autocast` of plumbing/cli.py):
- `setup_distributed`: DDP, nanoGPT style: on when torchrun sets RANK (nccl on CUDA, gloo on CPU); rank 0 writes.
- `resume_or_init`: --resume (model, EMA, optimizer, grad scaler and step of a checkpoint) or --init (fine-tune).
- `autocast` / `prepare_model`: precision (fp32, bf16, fp16 with grad scaling) and torch.compile.
- --batch-size is the global batch B: each of W processes takes B / W puzzles a step, so the paper's batch size is
  the number typed whatever the process count (the flags and how a run starts: plumbing/flags.py).
- Exact resume: the batch of step s is stream positions s*B ... s*B + B - 1 (rank r takes its B / W of them,
  StepBatches) and the noise of step s is seeded by (seed, s, rank), so a resumed run reaches the same weights as an
  uninterrupted one.

    train(config, train_set, eval_batch)      # config.run: out, device, workers, compile, init, log_every
    python train_image.py / python train_video.py     # the scripts that build config, train_set and eval_batch
"""
import copy
import math

import torch

import jpdvt
from diffusion import GaussianDiffusion
from jpdvt import SampleOptions, given_codes, puzzle_loss, solve
from plumbing.checkpoint import save_checkpoint
from plumbing.cli import UserError, autocast
from plumbing.machinery import (
    Log,
    batches,
    check_processes,
    cpu_threads,
    prepare_model,
    resume_or_init,
    setup_distributed,
)
from puzzles import to_device
from sources.files import fingerprint

SCHEDULES = {"constant": "constant after the warm-up (the paper states no schedule)",
             "cosine": "cosine decay from step 0 to 0 at --max-steps, times the warm-up ramp"}


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
    data = training_files(train_set, config.puzzle.data_dir, before, resuming=ckpt is not None)
    eval_batch = encode(to_device(eval_batch, device))
    log = Log(run.out, (rank, world), step=step, every=run.log_every, max_steps=tc.max_steps)
    for line in [*notes, f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {world} process(es) "
                 f"on {device}{f', {threads} thread(s) each' if threads else ''} ({tc.batch_size // world} puzzles "
                 f"each a step), step {step} -> {tc.max_steps}"]:
        log.write(line)
    for batch in batches(train_set, tc, step, ranks=(rank, world), workers=run.workers, pin=device.type == "cuda"):
        torch.manual_seed(tc.seed * 1_000_003 + step * world + rank)   # noise of this step: exact on resume
        batch = encode(to_device(batch, device))
        lr = learning_rate(tc, step)
        for group in opt.param_groups:
            group["lr"] = lr
        with autocast(device, tc.precision):
            given = given_codes(batch, kind.anchored)              # the anchor's code is told, never generated
            losses = puzzle_loss(net, diffusion, batch, table=table, given=given, weights=weights)
        opt.zero_grad(set_to_none=True)
        scaler.scale(losses["loss"]).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)                              # optimizer.step(), through the fp16 scaler
        scaler.update()
        step += 1
        ema_update(ema, model, min(tc.ema_decay, (1 + step) / (10 + step)))
        log.step(step, losses)                        # kept on the device: no sync here
        evaluate = tc.eval_every and step % tc.eval_every == 0 and step < tc.max_steps
        save = step % tc.ckpt_every == 0 or step == tc.max_steps
        if evaluate or save or step % log.every == 0:  # the same steps on every rank
            log.read(step, lr)                         # one sync: every rank stops here if any loss was not finite
        if log.master and evaluate:
            line = held_out_check(ema, diffusion, eval_batch, config=config, device=device)[1]
            log.write(f"eval step {step} {line}")
        if log.master and save:
            save_checkpoint(log.ckpt, state(config, model, ema, opt=opt, scaler=scaler, step=step, data=data))
    log.bar.close()
    if log.master:
        metrics, line = held_out_check(ema, diffusion, eval_batch, config=config, device=device)
        log.write(f"final step {step} {line}")
        print(f"held-out ({len(eval_batch['true_pos'])} val puzzles, DDIM-{tc.eval_steps}): "
              + ", ".join(f"{k} {v:.3f}" for k, v in metrics.items()))
        save_checkpoint(log.ckpt, state(config, model, ema, opt=opt, scaler=scaler, step=step, data=data))
    log.close(world)


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
    """The EMA model on the held-out batch: DDIM (deterministic, so that successive checks compare), noise seed 0."""
    noise = torch.Generator(device).manual_seed(0)
    opts = SampleOptions(steps=config.train.eval_steps, sampler="ddim", generator=noise)
    kind = jpdvt.kind_of(config)
    positions, _ = solve(ema, diffusion, batch, table=kind.table().to(device), opts=opts,
                         given=given_codes(batch, kind.anchored), latent=kind.vae is not None)
    metrics = kind.score(positions, batch)
    return metrics, " ".join(f"{k} {v:.4f}" for k, v in metrics.items())


def training_files(train_set, data_dir, before, resuming):
    """The checkpoint's "data": which files of a folder dataset the weights trained on (sources.files.fingerprint; None
    for built-in streams and Moving MNIST, split by construction), with the record of the run they continue
    ("before": --init's) when it differs. A resumed run must train on the files it trained on, and keeps its record."""
    files = getattr(train_set, "files", None)
    data = fingerprint(files, data_dir, splits=["train"]) if files else None
    if resuming and before and data and before.get("digest") == data["digest"]:
        return before                                # the same files: the record (with its --init's) as it was
    if resuming and before and data:
        raise UserError(f"--data-dir {data_dir} holds other training files ({data['files']}) than the checkpoint "
                        f"trained on ({before.get('files')}): a resumed run keeps its training stream; pass the folder "
                        "it trained on, or start a new run from its weights with --init")
    if before is not None and before != data:
        data = {**(data or {"splits": [], "files": 0, "digest": None}), "before": before}
    return data


def state(config, model, ema, opt, scaler, step, data):
    """What ckpt.pt holds: plain types and tensors only; data: the training files' record
    (sources.files.fingerprint)."""
    return {"config": config.to_dict(), "model": model.state_dict(), "ema": ema.state_dict(),
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
