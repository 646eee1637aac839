"""
A positive control for eps against x0: puzzles whose content says each piece's cell. Each built-in shapes piece (3x3,
16 px) gets a fourth channel, constant over the piece, at a level that names its true cell (cell r * 3 + c at
-1 + 2 (r * 3 + c) / 8: nine levels 0.25 apart). A network that reads its input can place every piece from that
channel alone, so an arm that stays low here learns slowly through its target and loss, not because the interface
is miswired. One arm a call, each the tiny recipe (tiny DiT, 1 token a piece; AdamW lr 2e-3, 100 warm-up steps,
batch 64, gradient clipped at 1, EMA as train.py's), its own short loop (not train.py's):

- x0: the network predicts x0, the loss is the x0 error (every t weighs alike);
- eps: the network predicts eps, the loss is the eps error (an x0 error times SNR(t));
- x0-snr: the network predicts x0, the loss is its x0 error times SNR(t), which is the eps loss written in x0.

At each --checks step: the EMA's piece and puzzle accuracy on --puzzles val puzzles (jpdvt.solve, DDIM-20, no
anchor), the raw network's too, and a one-call probe (bench/eps_probe.py's: true codes noised to t, one call,
pieces placed by x0_hat alone) at a few t. With --record, a row `eps-control ARM` (group eps) holds the last check
and the curve (`--arm noisy-code`: the probe's baseline, no network, row `eps-control noisy-code`).

    OMP_NUM_THREADS=2 python -m bench.eps_control --arm ARM --steps 4000 --checks 200,400,1000,2000,3000,4000 --record
    (the rows: ARM x0 and eps at 4000 steps, x0-snr at 2000; about 2.4 CPU minutes per 1000 steps on 2 cores)
    python -m bench.eps_control --arm noisy-code --record
"""
import argparse
import copy
import json
import os
import sys
import time
from dataclasses import replace

import torch

import jpdvt
from diffusion import GaussianDiffusion, expand_mask, extract
from dit import CONFIGS, DiT
from metrics import assign_batch, piece_accuracy, puzzle_accuracy
from posenc import grid_table
from puzzles import ImageConfig, collate, puzzle_set

ARMS = {"x0": ("x0", False), "eps": ("eps", False), "x0-snr": ("x0", True)}   # arm: (prediction, x0 error * SNR)
PUZZLE = ImageConfig(grid=(3, 3), piece_size=16)
PROBE_T = (999, 900, 700, 500, 200)
WEIGHTS = {"code": 1.0, "content": 0.1}          # train_image.py's; no piece is missing, so only the codes count


def with_cue(batch):
    """The batch with a fourth content channel (B, N, 1, P, P), constant over a piece: its true cell's level."""
    n = batch["content"].shape[1]
    level = -1 + 2 * batch["true_pos"].float() / (n - 1)                       # (B, N) in [-1, 1]
    cue = level[:, :, None, None, None].expand(-1, -1, 1, *batch["content"].shape[-2:])
    return {**batch, "content": torch.cat([batch["content"], cue], 2)}       # (B, N, 4, P, P)


def train_batch(stream, step, size):
    """Training batch `step`: stream positions step * size .. (step + 1) * size - 1, with the cue channel."""
    return with_cue(collate([stream[step * size + j] for j in range(size)]))


def snr_loss(model, diffusion, batch, table, given):
    """The x0-snr arm's loss: the x0 error of the codes times SNR(t) (= the eps error of an eps network), mean over
    the generated entries. No piece is missing, so the content has nothing to generate."""
    x0 = jpdvt.clean_parts(batch, table)
    masks = {"code": ~given, "content": batch["missing"]}
    t, noise = diffusion.draw(x0)
    out = jpdvt.model_fn(model, batch["missing"], given)(diffusion.noise_parts(x0, masks, t, noise), t)
    abar = extract(diffusion.alphas_cumprod, t, x0["code"].shape)                          # (B, 1, 1)
    m = expand_mask(masks["code"], x0["code"]).expand_as(x0["code"])                       # (B, N, D)
    err = (out["code"].float() - x0["code"]) ** 2 * abar / (1 - abar) * m
    return err.sum() / m.sum().clamp(min=1.0)


@torch.no_grad()
def solve_acc(model, diffusion, batch, table, given):
    """(piece, puzzle) accuracy of jpdvt.solve (DDIM-20, Hungarian) on a val batch, noise seeded."""
    opts = jpdvt.SampleOptions(steps=20, sampler="ddim", generator=torch.Generator().manual_seed(0))
    positions, _ = jpdvt.solve(model, diffusion, batch, table=table, opts=opts, given=given)
    true = batch["true_pos"].numpy()
    return piece_accuracy(positions, true), puzzle_accuracy(positions, true)


@torch.no_grad()
def probe(model, diffusion, batch, table, given):
    """{t: piece accuracy of one call's x0_hat}: the true codes noised to t, pieces placed by x0_hat (Hungarian).
    model None: placed by the noisy code itself, no network (the probe's baseline, as bench/eps_probe.py's)."""
    x0 = jpdvt.clean_parts(batch, table)
    masks = {"code": ~given, "content": batch["missing"]}
    fn, out = jpdvt.model_fn(model, batch["missing"], given), {}
    for step in PROBE_T:
        g = torch.Generator().manual_seed(step)
        t = torch.full((len(given),), step, dtype=torch.long)
        noisy = diffusion.noise_parts(x0, masks, t, {k: torch.randn(v.shape, generator=g) for k, v in x0.items()})
        code = noisy["code"]                                                                 # (B, N, D)
        if model is not None:
            code, _ = diffusion.predict_x0_eps(code, t, fn(noisy, t)["code"])
        positions = assign_batch(torch.cdist(code, table[None].expand(len(code), -1, -1)), "hungarian")
        out[step] = round(piece_accuracy(positions, batch["true_pos"].numpy()), 4)
    return out


def val_set(puzzles, seed):
    """(batch, given): the first `puzzles` val puzzles with the cue channel, no code told."""
    val = puzzle_set(PUZZLE, "val", seed)
    batch = with_cue(collate([val[i] for i in range(puzzles)]))
    return batch, jpdvt.given_codes(batch, anchored=False)


def run(arm, steps, checks, puzzles, batch_size=64, lr=2e-3, warmup=100, ema_decay=0.999, seed=0, log=print):
    """Train one arm for `steps` steps; returns the list of checks (dicts) at the `checks` steps (and the last)."""
    prediction, snr = ARMS[arm]
    torch.manual_seed(seed)
    diffusion = GaussianDiffusion(1000, prediction)
    model = DiT(replace(CONFIGS["tiny"], in_channels=4))
    ema = copy.deepcopy(model).eval().requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    table = grid_table(*PUZZLE.grid)                                             # (9, 32)
    stream, (val_batch, val_given) = puzzle_set(PUZZLE, "train", seed), val_set(puzzles, seed)
    curve, start = [], time.time()
    for step in range(steps):
        batch = train_batch(stream, step, batch_size)
        given = jpdvt.given_codes(batch, anchored=False)
        if snr:
            loss = snr_loss(model, diffusion, batch, table, given)
        else:
            loss = jpdvt.puzzle_loss(model, diffusion, batch, table=table, given=given, weights=WEIGHTS)["loss"]
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / warmup)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        decay = min(ema_decay, (1 + step) / (10 + step))                          # train.py's EMA warm-up
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p, 1 - decay)
        done = step + 1
        if done in checks or done == steps:
            train_s = time.time() - start
            model.eval()
            piece, puzzle = solve_acc(ema, diffusion, val_batch, table, val_given)
            raw_piece, _ = solve_acc(model, diffusion, val_batch, table, val_given)
            point = {"step": done, "piece_acc": round(piece, 4), "puzzle_acc": round(puzzle, 4),
                     "piece_acc_raw": round(raw_piece, 4), "loss": round(loss.item(), 5),
                     "probe_x0_hat": probe(ema, diffusion, val_batch, table, val_given),
                     "train_minutes": round(train_s / 60, 2)}
            model.train()
            curve.append(point)
            log(json.dumps(point))
            start = time.time() - train_s                                          # checks are not training time
    return curve


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arm", required=True, choices=[*ARMS, "noisy-code"],
                   help="x0, eps, x0-snr (x0 output, eps's weighting), or noisy-code (no training: the probe's "
                        "baseline, pieces placed by the noisy code alone)")
    p.add_argument("--steps", type=int, default=3000, help="training steps (default 3000)")
    p.add_argument("--checks", default="200,400,1000,2000,3000",
                   help="comma-separated steps of the val checks (default 200,400,1000,2000,3000; the last step "
                        "is always checked)")
    p.add_argument("--puzzles", type=int, default=200, help="val puzzles of each check (default 200)")
    p.add_argument("--seed", type=int, default=0, help="data stream, noise and initial weights (default 0)")
    p.add_argument("--record", action="store_true", help="write the row 'eps-control ARM' to bench/results.json")
    a = p.parse_args()
    try:
        checks = {int(s) for s in a.checks.split(",") if s.strip()}
    except ValueError:
        sys.exit(f"--checks {a.checks!r} is not a comma-separated list of steps; pass e.g. 200,400,1000")
    if a.steps < 1 or a.puzzles < 1:
        sys.exit("--steps and --puzzles must be at least 1; pass positive counts")
    from bench.report import save_result
    threads = os.environ.get("OMP_NUM_THREADS")
    if a.arm == "noisy-code":
        batch, given = val_set(a.puzzles, a.seed)
        accs = probe(None, GaussianDiffusion(1000, "x0"), batch, grid_table(*PUZZLE.grid), given)
        print(json.dumps(accs))
        if a.record:
            save_result("eps-control noisy-code", {
                "group": "eps", "train_minutes": 0.0, "metrics": {"probe_noisy_code": accs, "split": "val",
                                                                  "num_puzzles": a.puzzles},
                "command": f"python -m bench.eps_control --arm noisy-code --puzzles {a.puzzles} --seed {a.seed} "
                           "--record",
                "note": "the probe's baseline of the eps-control rows: the same val puzzles and noise, each piece "
                        "placed by its noisy code alone (no network)"})
        return
    curve = run(a.arm, a.steps, checks, a.puzzles, seed=a.seed)
    if a.record:
        command = f"python -m bench.eps_control --arm {a.arm} --steps {a.steps} --checks {a.checks} " \
                  f"--puzzles {a.puzzles} --seed {a.seed} --record"
        prediction, snr = ARMS[a.arm]
        save_result(f"eps-control {a.arm}", {
            "group": "eps", "train_minutes": curve[-1]["train_minutes"],
            "command": (f"OMP_NUM_THREADS={threads} " if threads else "") + command,
            "metrics": {**{k: curve[-1][k] for k in ("piece_acc", "puzzle_acc", "step")}, "split": "val",
                        "num_puzzles": a.puzzles, "curve": curve},
            "note": "positive control: built-in shapes 3x3, a fourth content channel whose constant level names the "
                    f"piece's true cell; tiny DiT, prediction {prediction}, loss: "
                    + ("x0 error times SNR(t) (eps's weighting)" if snr else f"the {prediction} error")
                    + "; EMA, DDIM-20, no anchor"})


if __name__ == "__main__":
    main()
