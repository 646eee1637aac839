"""
The training loop's machinery (train.py), not in the paper: processes (DDP when torchrun sets RANK), the starting
weights (--resume, --init), torch.compile, the order of the data (StepBatches: exact resume), micro-batches
(--accum) and the log (tqdm and log.txt).

- --batch-size is the global batch B: each of W processes takes B / W puzzles a step, so the paper's batch size is
  the number typed whatever the process count.
- Exact resume: the batch of step s is stream positions s*B ... s*B + B - 1 (rank r takes its B / W of them,
  StepBatches) and the noise of step s is seeded by (seed, s) in train.py, each process keeping its rows of the
  global batch's draws (process_draws), so a resumed run reaches the same weights as an uninterrupted one, and W
  processes the weights of one. (A multi-process run begun before 2026-12-04 resumes with another noise stream.)
"""
import contextlib
import os
import time
from dataclasses import fields

import torch
import torch.distributed as dist
from tqdm import tqdm

from plumbing.checkpoint import load_checkpoint
from plumbing.cli import UserError, resolve_device


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
                            "the same --model, --piece-size, --patch-size, --codes and --code-dim (or frame settings) "
                            "as that run")
        if src["config"].prediction != config.prediction:
            raise UserError(f"--init {init} predicts {src['config'].prediction} and this run {config.prediction}; "
                            f"pass --prediction {src['config'].prediction} to fine-tune it")
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


def process_draws(diffusion, x0, ranks):
    """This process's rows of the global batch's draws (t, noise): every process draws the whole batch's from the same
    seed and keeps its own rows, so that W processes by B / W puzzles train as one process by B."""
    rank, world = ranks
    b = next(iter(x0.values())).shape[0]
    t, noise = diffusion.draw({k: v.new_empty(b * world, *v.shape[1:]) for k, v in x0.items()})
    rows = slice(rank * b, (rank + 1) * b)
    return t[rows], {k: v[rows] for k, v in noise.items()}


def micro_batches(batch, given, draws, k, world=1):
    """A process's batch, its anchor mask and its draws (t, noise) split into k micro-batches along the puzzle axis:
    [({"batch", "given", "t", "noise"}, share)], share[part] = the micro-batch's generated entries of that part over
    their mean count per process in the global batch (its fraction of the global batch's entries, times W). Each
    part's loss is a mean over generated entries, so the losses times their shares, summed over micro-batches and
    averaged over processes as DDP averages the gradients, are the global batch's losses: the accumulated gradient is
    the one-process, unsplit step's."""
    t, noise = draws
    puzzles = [dict(zip(batch, c)) for c in zip(*(v.tensor_split(k) for v in batch.values()))]
    givens, ts = given.tensor_split(k), t.tensor_split(k)
    noises = [dict(zip(noise, c)) for c in zip(*(v.tensor_split(k) for v in noise.values()))]
    counts = torch.stack([(~given).sum(), batch["missing"].sum()]).float()      # generated codes, missing content
    if world > 1:
        dist.all_reduce(counts)                                                  # over the global batch
    codes_per_process, missing_per_process = counts.clamp(min=1) / world        # on the device: no sync
    return [({"batch": b, "given": g, "t": s, "noise": n},
             {"code": (~g).sum() / codes_per_process, "content": b["missing"].sum() / missing_per_process})
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

    def write(self, msg):
        if self.master:
            tqdm.write(msg)
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
        """Sync: refuse non-finite losses on any process, then log the mean losses since the last read (each
        process's losses are its share of the global batch's times W: their mean over processes is the global one)."""
        bad = self.bad.reshape(1).clone()
        if self.world > 1:
            dist.all_reduce(bad)
            for v in self.sums.values():
                dist.all_reduce(v)
                v /= self.world
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
