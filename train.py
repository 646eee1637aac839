"""
The training loop shared by train_image.py and train_video.py (the method itself is in jpdvt.py), its settings
(TrainConfig) and its machinery.

Paper: the objective of Sec. 3.1, "Masked Jigsaw Transformer Diffusion" (jpdvt.puzzle_loss), trained as the
supplement's "Image Experiments" and "Video Experiments" state (their batch sizes, learning rates and steps are the
table of configs/paper.py); gradient clipping, warm-up, EMA and the held-out check are not stated in the paper.

One step: a batch of puzzles -> jpdvt.puzzle_loss -> backward -> clip the gradient at 1 -> AdamW step -> EMA of the
weights (used for sampling) -> log, a periodic held-out check, a periodic checkpoint. Around it, the machinery below
the loop: DDP nanoGPT style (on when torchrun sets RANK; rank 0 writes), --resume / --init, torch.compile, the log.
- --batch-size is the global batch B: each of W processes takes B / W puzzles a step, so the paper's batch size is
  the number typed whatever the process count (the flags and how a run starts: plumbing/flags.py).
- Exact resume: the batch of step s is stream positions s*B ... s*B + B - 1 (rank r takes its B / W of them,
  StepBatches) and the noise of step s is seeded by (seed, s, rank), so a resumed run reaches the same weights as an
  uninterrupted one.

    train(config, train_set, eval_batch)      # config: puzzle, model, train, prediction, run (plumbing Config)
    python train_image.py / python train_video.py     # the scripts that build config, train_set and eval_batch
"""
import contextlib
import copy
import math
import os
import time
from dataclasses import dataclass, fields

import torch
import torch.distributed as dist
from tqdm import tqdm

import jpdvt
from diffusion import GaussianDiffusion
from jpdvt import SampleOptions, clean_parts, given_codes, puzzle_loss, solve
from plumbing.checkpoint import FORMAT, load_checkpoint, save_checkpoint, training_files
from plumbing.cli import UserError, autocast, cpu_threads, resolve_device
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
    ema_decay: float = 0.999                 # EMA of the weights used for sampling
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
        torch.manual_seed(tc.seed * 1_000_003 + step * world + rank)   # noise of this step: exact on resume
        batch = encode(to_device(batch, device))
        lr = learning_rate(tc, step)
        for group in opt.param_groups:
            group["lr"] = lr
        given = given_codes(batch, kind.anchored)                  # the anchor's code is told, never generated
        draws = diffusion.draw(clean_parts(batch, table))          # t and noise of the whole batch, then split
        opt.zero_grad(set_to_none=True)
        parts = micro_batches(batch, given, draws, tc.accum)
        losses = {}
        for i, (part, share) in enumerate(parts):
            with no_sync(net, last=i == len(parts) - 1), autocast(device, tc.precision):
                out = puzzle_loss(net, diffusion, part["batch"], table=table, given=part["given"], weights=weights,
                                  t=part["t"], noise=part["noise"])
                shares = {k: out[k] * share[k] for k in share}   # this micro-batch's part of each batch mean
                loss = sum(weights[k] * v for k, v in shares.items())
            scaler.scale(loss).backward()
            for k, v in {"loss": loss, **shares}.items():
                losses[k] = losses.get(k, 0) + v.detach()
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
    """The EMA model on the held-out batch: DDIM (deterministic, so that successive checks compare), noise seed 0, in
    the training's precision."""
    noise = torch.Generator(device).manual_seed(0)
    opts = SampleOptions(steps=config.train.eval_steps, sampler="ddim", generator=noise)
    kind = jpdvt.kind_of(config)
    with autocast(device, config.train.precision):
        positions, _ = solve(ema, diffusion, batch, table=kind.table().to(device), opts=opts,
                             given=given_codes(batch, kind.anchored), latent=kind.vae is not None)
    metrics = kind.score(positions, batch)
    return metrics, " ".join(f"{k} {v:.4f}" for k, v in metrics.items())


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


# ----------------------------------------------------------------------------
# The machinery: processes (DDP when torchrun sets RANK, CPU threads), the starting weights (--resume, --init),
# torch.compile, the order of the data (StepBatches: exact resume) and the log (tqdm and log.txt); not in the paper
# ----------------------------------------------------------------------------

def check_processes(tc, world, device):
    """Refuse, in one sentence, a global batch that does not split over the processes and fp16 off CUDA."""
    if tc.batch_size % (world * tc.accum):
        raise UserError(f"--batch-size {tc.batch_size} is the global batch and must split evenly into {world} "
                        f"process(es) x --accum {tc.accum} micro-batches; use a multiple of {world * tc.accum}")
    if tc.precision == "fp16" and device.type != "cuda":
        raise UserError("--precision fp16 needs a CUDA device (its gradient scaler is CUDA only); use fp32 or bf16")


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
                        "train with python train_image.py (or train_video.py) without torchrun, or pass --device cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if device.type == "cuda":
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        return rank, world, torch.device("cuda", local)
    return rank, world, device


def resume_or_init(ckpt, init, config, objects):
    """Load objects = (model, ema, opt, scaler) from `ckpt` (--resume) or model and EMA from --init's EMA weights
    (fine-tuning: optimizer and step start fresh); else leave them. Returns (first step, the training-files record of
    the run it continues, or None)."""
    model, ema, opt, scaler = objects
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        ema.load_state_dict(ckpt["ema"])
        opt.load_state_dict(ckpt["opt"])
        if ckpt["scaler"] and scaler.is_enabled():    # a run that was not fp16 stored an empty scaler state
            scaler.load_state_dict(ckpt["scaler"])
        return ckpt["step"], ckpt.get("data")
    if init:
        if not os.path.isfile(init):
            raise UserError(f"--init {init} does not exist; pass the ckpt.pt of the run to fine-tune from")
        src = load_checkpoint(init, config.kind)
        if src["config"].model != config.model:
            diff = [f.name for f in fields(config.model)
                    if getattr(src["config"].model, f.name) != getattr(config.model, f.name)]
            raise UserError(f"--init {init} holds a model with other settings ({', '.join(diff)}); fine-tuning needs "
                            "the same --model, --piece-size and --patch-size (or frame settings) as that run")
        model.load_state_dict(src["ema"])
        ema.load_state_dict(src["ema"])
        return 0, src["data"]
    return 0, None


def prepare_model(model, device, world, compile_):
    """The network the loss runs through: DDP-wrapped with several processes, torch.compile'd with --compile."""
    net = model
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda"
                                                        else None)
    return torch.compile(net) if compile_ else net


class StepBatches(torch.utils.data.Sampler):
    """
    Batch sampler over an endless stream (training datasets map a stream position to a fresh puzzle, visiting a
    finite set of files once per epoch): step s is positions s*B ... s*B + B - 1 of the global batch B, of which rank
    r of W takes the r-th B / W. Starting at `start_step` resumes exactly.
    """

    def __init__(self, tc, start_step, rank=0, world=1):
        self.batch, self.per_rank, self.max_steps = tc.batch_size, tc.batch_size // world, tc.max_steps
        self.start, self.rank = start_step, rank

    def __iter__(self):
        for s in range(self.start, self.max_steps):
            first = s * self.batch + self.rank * self.per_rank
            yield list(range(first, first + self.per_rank))

    def __len__(self):
        return self.max_steps - self.start


def batches(train_set, tc, step, ranks, workers, pin):
    """The training batches from `step` to tc.max_steps of this process (ranks = (rank, world)); pin: page-locked
    batches (CUDA), so that the copies to the device can overlap with compute."""
    sampler = StepBatches(tc, start_step=step, rank=ranks[0], world=ranks[1])
    return torch.utils.data.DataLoader(train_set, batch_sampler=sampler, num_workers=workers, pin_memory=pin)


def micro_batches(batch, given, draws, k):
    """A process's batch, its anchor mask and its draws (t, noise) split into k micro-batches along the puzzle axis:
    [({"batch", "given", "t", "noise"}, share)], share[part] = the micro-batch's fraction of the batch's generated
    entries of that part. Each part's loss is a mean over generated entries, so the losses times their shares sum
    to the whole batch's losses, and the accumulated gradient is the unsplit step's."""
    t, noise = draws
    puzzles = [dict(zip(batch, c)) for c in zip(*(v.tensor_split(k) for v in batch.values()))]
    givens, ts = given.tensor_split(k), t.tensor_split(k)
    noises = [dict(zip(noise, c)) for c in zip(*(v.tensor_split(k) for v in noise.values()))]
    counts = {"code": (~given).sum().clamp(min=1), "content": batch["missing"].sum().clamp(min=1)}
    return [({"batch": b, "given": g, "t": s, "noise": n},
             {"code": (~g).sum() / counts["code"], "content": b["missing"].sum() / counts["content"]})
            for b, g, s, n in zip(puzzles, givens, ts, noises)]


def no_sync(net, last):
    """DDP's no_sync() before the last micro-batch of a step (gradients are averaged over processes once, at its
    backward), else nothing."""
    ddp = getattr(net, "_orig_mod", net)                 # under torch.compile
    if isinstance(ddp, torch.nn.parallel.DistributedDataParallel) and not last:
        return ddp.no_sync()
    return contextlib.nullcontext()


class Log:
    """
    tqdm bar (rank 0) and OUT/log.txt: mean losses and steps/s every --log-every steps, held-out checks. Losses are
    summed on the device and read only by `read` (a device sync), which also stops every process with the same
    error if any loss since the last read was not finite (before a checkpoint could keep such weights).
    """

    def __init__(self, out, ranks, step, every, max_steps):
        (self.rank, self.world), self.every, self.last = ranks, every, step
        self.master, self.ckpt, self.file = self.rank == 0, os.path.join(out, "ckpt.pt"), None
        self.sums, self.bad = {}, None
        if self.master:
            os.makedirs(out, exist_ok=True)
            self.file = open(os.path.join(out, "log.txt"), "a")
            if step >= max_steps:
                print(f"checkpoint is already at step {step} >= --max-steps {max_steps}; nothing to train")
        self.bar = tqdm(total=max_steps, initial=step, disable=not self.master, desc="train", dynamic_ncols=True)
        self.t0, self.waited = time.time(), 0.0

    def timed(self, loader):
        """The loader's batches, adding the time this process waits for each to self.waited: the share of the
        step time spent waiting for data (on CUDA the host runs ahead of the GPU, so a fed GPU shows about 0%)."""
        it = iter(loader)
        while True:
            start = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                return
            self.waited += time.perf_counter() - start
            yield batch

    def write(self, msg, file=True):
        if self.master:
            tqdm.write(msg)
            if file:
                self.file.write(msg + "\n")
                self.file.flush()

    def step(self, step, losses):
        """Add this step's losses to the running sums (on the device)."""
        for k, v in losses.items():
            self.sums[k] = self.sums.get(k, 0) + v.detach().float()
        bad = (~torch.isfinite(losses["loss"].detach())).int()
        self.bad = bad if self.bad is None else self.bad + bad
        self.bar.update(1)

    def read(self, step, lr):
        """Sync: refuse non-finite losses on any process, then log the mean losses since the last read."""
        bad = self.bad.reshape(1).clone()
        if self.world > 1:
            dist.all_reduce(bad)
        if bad.item():
            self.bar.close()                            # the error goes on a line of its own
            raise UserError(f"the loss became nan or inf between steps {self.last} and {step} (on "
                            f"{'one of the processes' if self.world > 1 else 'this process'}); the last good "
                            f"checkpoint is {self.ckpt} (try a lower --lr or --precision fp32)")
        elapsed = max(time.time() - self.t0, 1e-9)
        n, rate = step - self.last, (step - self.last) / elapsed
        means = {k: v.item() / n for k, v in self.sums.items()}
        self.bar.set_postfix(loss=f"{means['loss']:.4f}")
        parts = " ".join(f"{k} {v:.4f}" for k, v in means.items() if k != "loss")
        self.write(f"step {step} loss {means['loss']:.4f} {parts} lr {lr:.2e} steps/s {rate:.2f} "
                   f"data wait {100 * min(self.waited / elapsed, 1):.0f}%")
        self.sums, self.bad, self.t0, self.last, self.waited = {}, None, time.time(), step, 0.0

    def close(self, world):
        """Close log.txt, and end the process group of a multi-process run."""
        if self.master:
            self.file.close()
        if world > 1:
            dist.destroy_process_group()
