"""
Where the 20 x 1 clips' remaining distance lies (issue 90): on the samples of a `python -m bench.judge --cache` run,
the judge's pick (the candidate of least blurred cut energy, solving/judge.py) against three ways of doing better.
None beat it on 2,000 val clips (docs/choices.md, "The judge's settings"), so none is in solving/.

- new candidates: each candidate's one-step neighbours (a run of pieces reversed, or moved elsewhere: a travelling
  salesman's 2-opt and or-opt moves), and a descent by such moves while the cut energy drops, then the pick;
- a near-tie cue: of the candidates whose energy is within (1 + tol) of the least, the one of least model cost (the
  samples' mean distance, summed over the pieces at their slots: the ensemble's order is its least, so this falls
  back to the model alone within tol) or of least centroid acceleration (the one-frame pieces' centres of
  brightness, which move at a steady pace between bounces unless the digits overlap);
- coverage: how many clips have the right order among the candidates (more samples can only help those without).
Rows: group "judge", `judge NAME val ...: K N, VARIANT`; the pick's own row is bench.judge's.

    python -m bench.judge --ckpt checkpoints/video-mmnist-20x1.pt --split val --num-puzzles 2000 --samples 8 \\
        --ks 2 4 8 --energies mgc --data-dir ../shared/data/mnist --cache runs/mm20x1-val2000.pt
    python -m bench.clip_judge --cache runs/mm20x1-val2000.pt --ckpt checkpoints/video-mmnist-20x1.pt --seed 1 --k 8
"""
import argparse
import functools

import numpy as np
import torch

from bench.intervals import interval
from bench.report import ckpt_name, save_result, this_command
from metrics import kendall_distance
from solving.borders import board_energy, clip_cuts
from solving.judge import candidates

TOLS = (0.01, 0.02, 0.05, 0.1)


@functools.lru_cache(maxsize=4)
def moves(n, first):
    """(M, n) long: slot permutations (old slot -> new) reversing a run [a, b] or rotating it by r (the run [a, a + r)
    moved behind b), first <= a < b: slots before `first` (the anchor's) stay."""
    out = []
    for a in range(first, n):
        for b in range(a + 1, n):
            run = torch.arange(n)
            run[a:b + 1] = torch.arange(b, a - 1, -1)
            out.append(run)
            for r in range(1, b - a + 1) if b > a + 1 else ():            # a run of two rotated: the reversal again
                run = torch.arange(n)
                run[a:b + 1] = a + (torch.arange(b - a + 1) - r) % (b - a + 1)
                out.append(run)
    return torch.stack(out)


def energy(cut, orders):
    """(K, B): the mean cut cost of orders (K, B, N) (the slot of each piece; clips with no missing piece)."""
    return board_energy(cut, None, orders.argsort(2)[:, :, None])


def neighbours(orders, first):
    """(M, K, B, N): each order (K, B, N) moved by each of moves(N, first)."""
    return moves(orders.shape[2], first)[:, orders]


def descend(orders, cut, first):
    """(K, B, N): each order after its best move, again and again, while the move lowers its cut energy."""
    e = energy(cut, orders)
    while True:
        tried = neighbours(orders, first)
        et = energy(cut, tried.flatten(0, 1)).unflatten(0, tried.shape[:2])                 # (M, K, B)
        best, which = et.min(0)
        better = best < e * (1 - 1e-6)
        if not better.any():
            return orders
        take = tried.gather(0, which[None, ..., None].expand(1, *orders.shape))[0]
        orders, e = torch.where(better[..., None], take, orders), torch.where(better, best, e)


def acceleration(content, orders):
    """(K, B): the mean norm of the second difference of the frames' brightness centroids along each order (one-frame
    pieces)."""
    assert content.shape[2] == 1, "the centroid cue reads one-frame pieces"
    w = (content[:, :, 0, 0].float() + 1) / 2                                                  # (B, N, H, W)
    yy, xx = torch.meshgrid(*(torch.arange(s, dtype=w.dtype) for s in w.shape[2:]), indexing="ij")
    mass = w.sum((2, 3)).clamp(min=1e-6)
    cen = torch.stack([(w * yy).sum((2, 3)) / mass, (w * xx).sum((2, 3)) / mass], -1)        # (B, N, 2)
    c = cen[torch.arange(len(cen))[None, :, None], orders.argsort(2)]                         # (K, B, N, 2)
    return (c[:, :, 2:] - 2 * c[:, :, 1:-1] + c[:, :, :-2]).norm(dim=-1).mean(-1)


def near_tie(e, cue, tol):
    """(B,): of the candidates (K, B) within (1 + tol) of the least energy e, the one of least cue."""
    return torch.where(e <= e.min(0).values * (1 + tol), cue, torch.inf).argmin(0)


def variants(costs, batch, k):
    """{name: positions (B, N)} of one chunk of clips for the first k samples, and {name: (B,) bool} coverage."""
    pinned, content = batch["pinned"], batch["content"]
    first = int((pinned >= 0).sum(1).max())                                          # the anchor's slots stay
    assert not batch["missing"].any(), "the study scores clips with no missing piece"
    assert (pinned[:, :first] == torch.arange(first)).all(), "the pinned pieces must be the first, on slots 0.."
    cands = candidates(costs[:k], pinned, "hungarian")                                  # (1 + k, B, N)
    cut, b = clip_cuts(content), torch.arange(cands.shape[1])
    e, mean = energy(cut, cands), costs[:k].mean(0)
    model = mean[None].expand(len(cands), *mean.shape).gather(3, cands[..., None])[..., 0].sum(2)     # (1 + k, B)
    accel = acceleration(content, cands)
    out = {"pick": cands[e.argmin(0), b]}
    for tol in TOLS:
        out[f"near tie {tol:g}, model cost"] = cands[near_tie(e, model, tol), b]
        out[f"near tie {tol:g}, centroid acceleration"] = cands[near_tie(e, accel, tol), b]
    wide = torch.cat([cands, neighbours(cands, first).flatten(0, 1)])
    out["one-step neighbours, pick"] = wide[energy(cut, wide).argmin(0), b]
    reached = descend(cands, cut, first)
    out["descent by moves, pick"] = reached[energy(cut, reached).argmin(0), b]
    true = batch["true_pos"]
    cover = {"candidates": (cands == true).all(-1).any(0),
             "candidates and their one-step neighbours": (wide == true).all(-1).any(0)}
    return out, cover


def main(args):
    passes = torch.load(args.cache, weights_only=False)
    scores, cover = {}, {}
    for p in passes:                                     # per pass: scores[name] holds (passes, clips) at the end
        n, chunks = p["costs"].shape[1], {}
        for s in range(0, n, args.chunk):
            batch = {key: v[s:s + args.chunk] for key, v in p["batch"].items()}
            out, cov = variants(p["costs"][:, s:s + args.chunk], batch, args.k)
            for name, pos in out.items():
                chunks.setdefault(name, []).append(kendall_distance(pos.numpy(), batch["true_pos"].numpy()))
            for name, v in cov.items():
                cover.setdefault(name, []).append(v.numpy())
            print(f"{min(s + args.chunk, n)}/{n} clips", flush=True)
        for name, v in chunks.items():
            scores.setdefault(name, []).append(np.concatenate(v))
    scores = {name: np.stack(v) for name, v in scores.items()}                         # (passes, clips)
    cover = {name: float(np.concatenate(v).mean()) for name, v in cover.items()}
    command = this_command("bench.clip_judge")
    num = scores["pick"].shape[1]
    for name, v in scores.items():
        gain = interval(v - scores["pick"], np.random.default_rng(0))       # paired over clips: (mean, low, high)
        m = {"kendall": float(v.mean()), "kendall_95": list(interval(v, np.random.default_rng(0))[1:]),
             "exact": float((v == 0).mean()), "kendall_minus_pick": list(gain), "num_puzzles": num,
             "samples": args.k, "clips_changed": int((v != scores["pick"]).sum()),
             **{f"right order among the {c}": r for c, r in cover.items()}}
        key = f"judge {ckpt_name(args.ckpt)} {args.split} seed {args.seed} ({num} puzzles): K {args.k}, {name}"
        print(key, {a: round(b, 6) for a, b in m.items() if a in ("kendall", "exact")},
              [round(x, 6) for x in gain], flush=True)
        if name != "pick":                                   # the pick's row is bench.judge's
            save_result(key, {"group": "judge", "command": command, "train_minutes": 0.0, "metrics": m,
                              "note": "issue 90: the 20 x 1 judge study; a variant, not shipped"})


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache", required=True, help="the samples a `python -m bench.judge --cache FILE` run drew (val)")
    p.add_argument("--ckpt", required=True, help="the checkpoint those samples came from (names the rows)")
    p.add_argument("--split", default="val", choices=("val", "test"), help="the --split of that run (names the rows)")
    p.add_argument("--seed", type=int, required=True, help="the --seed of that run (names the rows)")
    p.add_argument("--k", type=int, default=8, help="score the first K samples of each clip")
    p.add_argument("--chunk", type=int, default=50, help="clips scored at once")
    return p


if __name__ == "__main__":
    main(get_parser().parse_args())
