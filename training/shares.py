"""
The exact loss shares of a step split over DDP processes and micro-batches (--accum): the same gradient as one process
taking the whole batch at once, to float tolerance. train.py takes this path only when torchrun starts several
processes or --accum splits the batch; with one process and one batch, its loop calls jpdvt.puzzle_loss itself.

Each part's loss (code, content) is a mean over its generated entries, and micro-batches hold different numbers of
them (missing pieces are drawn per puzzle). So each micro-batch's part losses are weighted by their share of the
global batch's generated entries, times W; summed over micro-batches and averaged over the W processes (as DDP
averages the gradients), that is the global batch's mean. The draws (t, noise) are made for the whole global batch
from the step's seed on every process, each keeping its own rows: W processes of B / W puzzles train as one of B.
"""
import contextlib

import torch
import torch.distributed as dist

from jpdvt import clean_parts, puzzle_loss
from plumbing.cli import autocast


def shared_backward(net, diffusion, batch, table, given, scaler, tc, world):
    """The global batch's jpdvt.puzzle_loss, backward: gradients in the parameters, the mean losses {loss, code,
    content} returned (on the device). The step's t and noise are drawn for the whole global batch (process_draws),
    and the batch runs in tc.accum micro-batches, each in tc.precision's autocast; DDP averages the gradients over
    the W processes once, at the last micro-batch's backward."""
    weights = {"code": tc.weight_code, "content": tc.weight_content}
    draws = process_draws(diffusion, clean_parts(batch, table), net_rank(world), world)   # this process's rows
    parts = micro_batches(batch, given, draws, tc.accum, world)
    losses = {}
    for i, (part, share) in enumerate(parts):
        sync = i == len(parts) - 1 or world == 1
        with (contextlib.nullcontext() if sync else net.no_sync()), autocast(batch["true_pos"].device, tc.precision):
            out = puzzle_loss(net, diffusion, part["batch"], table=table, given=part["given"], weights=weights,
                              t=part["t"], noise=part["noise"])
            # out[k]: this micro-batch's mean over its generated entries of part k (code, content); share[k]: its
            # fraction of the global batch's generated entries of k, times W. Summed over micro-batches and averaged
            # over processes (DDP): the global batch's mean (out["loss"], this micro-batch's own weighted mean, is not)
            shares = {k: out[k] * share[k] for k in share}
            loss = sum(weights[k] * v for k, v in shares.items())
        scaler.scale(loss).backward()
        for k, v in {"loss": loss, **shares}.items():
            losses[k] = losses.get(k, 0) + v.detach()
    return losses


def net_rank(world):
    """This process's rank (0 without DDP)."""
    return dist.get_rank() if world > 1 else 0


def process_draws(diffusion, x0, rank, world):
    """This process's rows of the global batch's draws (t, noise): every process draws the whole batch's from the same
    seed and keeps its own rows, so that W processes by B / W puzzles train as one process by B."""
    b = next(iter(x0.values())).shape[0]
    t, noise = diffusion.draw({k: v.new_empty(b * world, *v.shape[1:]) for k, v in x0.items()})
    rows = slice(rank * b, (rank + 1) * b)
    return t[rows], {k: v[rows] for k, v in noise.items()}


def micro_batches(batch, given, draws, k, world=1):
    """A process's batch, its anchor mask and its draws (t, noise) split into k micro-batches along the puzzle axis:
    [({"batch", "given", "t", "noise"}, share)], share[part] = the micro-batch's generated entries of that part over
    their mean count per process in the global batch. Each part's loss is a mean over generated entries, so the losses
    times their shares, summed over micro-batches and averaged over processes as DDP averages the gradients, are the
    global batch's losses: the accumulated gradient is the one-process, unsplit step's."""
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
