"""
Which margin tells right from wrong pieces (python -m bench confidence-evidence; solving/confidence.py): the sampled
codes' own (DDPM-50) or the one-call posterior mean's, both at the DDPM-50 assignment, as the AUROC over the counted
pieces.
"""
import numpy as np
import torch

import jpdvt
from jpdvt import given_codes
from metrics import assign_batch
from puzzles import collate
from solving.confidence import margins
from solving.solver import Solver


def auroc_of_margins(ckpt, split, passes, num):
    """{"auroc_sampled", "auroc_mean", "piece_acc", "pieces"} over `passes` passes of `num` puzzles (seed 1 + r)."""
    solver, score = Solver.load(ckpt, device="cpu"), {"sampled": [], "mean": [], "ok": []}
    solver.opts.steps, solver.opts.sampler, solver.opts.samples = 50, "ddpm", 1
    puzzle = solver.config.puzzle
    for r in range(passes):
        test = jpdvt.kind_of(puzzle).puzzles(split, 1 + r)
        batch = collate([test[i] for i in range(min(num, len(test)))])
        solver.opts.generator.manual_seed(1 + r)
        cost = solver.costs(batch)[0].numpy()
        pos = assign_batch(cost)
        counted = (~given_codes(batch, jpdvt.kind_of(puzzle).anchored) & ~batch["missing"]).numpy()
        score["sampled"].append(margins(cost, pos)[counted])
        score["mean"].append(margins(solver.mean_costs(batch).numpy(), pos)[counted])
        score["ok"].append((pos == batch["true_pos"].numpy())[counted])
    ok = torch.tensor(np.concatenate(score["ok"]))
    metrics = {"piece_acc": float(ok.float().mean()), "pieces": int(len(ok))}
    for kind in ("sampled", "mean"):
        m = torch.tensor(np.concatenate(score[kind]))
        right, wrong = m[ok], m[~ok]
        metrics[f"auroc_{kind}"] = float(((right[:, None] > wrong[None]).float().mean()
                                          + 0.5 * (right[:, None] == wrong[None]).float().mean()).item())
    return metrics
