"""
Score a trained JPDVT checkpoint on fresh test puzzles: rebuild its EMA network, solve the puzzles (jpdvt.solve:
sample every piece's positional code, then match pieces to positions one to one) and count the pieces placed right.
Paper: "Predicted position encodings" (supplement) and "Metrics" (Sec. 4.2).

Images report the share of pieces and of whole puzzles in place, over the pieces the model had to place; clips the
Kendall distance of their order and the share fully ordered (metrics.json's "counted" says what each figure counts).
The first line printed names the sampling and where each setting came from: a flag, the checkpoint (chosen on val)
or the default. Your own pieces, and temporal super-resolution: python -m solving.own (a super-resolution model's
figure, the generated frames' PSNR: python -m bench.superres).

    python sample.py --ckpt checkpoints/image-shapes-3x3.pt      # checkpoints/samples/image-shapes-3x3-test/
    python sample.py --ckpt out/run/ckpt.pt --missing 2 --judge classic
"""
import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import asdict, replace

import numpy as np
import torch
from torch.utils.data import default_collate  # as puzzles.collate: the items' tensors stacked
from tqdm import tqdm

import jpdvt
from config import PARTS, load_checkpoint
from diffusion import SAMPLERS, GaussianDiffusion
from metrics import ASSIGNERS
from pictures import save_pictures
from plumbing.cli import AUTOCAST, UserError, cpu_threads, non_negative, positive, resolve_device, user_errors
from puzzles import puzzle_set
from sources.files import data_folder, find_data

COUNTED = {"image": "piece_acc and puzzle_acc count the pieces with content that the model had to place, not the "
                    "anchor (whose cell is told); missing pieces are generated and not scored",
           "video": "kendall and exact compare every slot, the anchor and generated pieces included (strict); "
                    "kendall_set and exact_set compare generated pieces' slots as a set; kendall_rev is the authors' "
                    "variant, the smaller strict distance of the order and of its reverse"}
PICTURED = {"image": 8, "video": 4}          # puzzles drawn in examples.png / examples.gif
SUMMARY = {"image": "piece accuracy {piece_acc:.4f}, puzzle accuracy {puzzle_acc:.4f}",
           "video": "mean Kendall distance {kendall:.4f} (generated pieces as a set {kendall_set:.4f}), exactly "
                    "ordered {exact:.4f} ({exact_set:.4f})"}
DEFAULTS = {k: getattr(jpdvt.SampleOptions(), k) for k in jpdvt.SAMPLING}   # unless the checkpoint or a flag says


def main(args):
    ckpt = load_checkpoint(args.ckpt)
    if getattr(ckpt["config"].puzzle, "superres", 0):      # its pattern is fixed: no order to score, no --missing
        raise UserError(f"--ckpt {args.ckpt} is a super-resolution model, which keeps every given piece in its slot, "
                        f"so an order would measure nothing; measure its generated frames' PSNR with python -m "
                        f"bench.superres --ckpt {args.ckpt}")
    config, (opts, device, described) = ckpt["config"], sampling(args, ckpt)
    puzzle, trained = test_puzzles(args, config.puzzle), config.puzzle     # what is scored; what it trained on
    model = PARTS[puzzle.kind].network(config.model)
    model.load_state_dict(ckpt["ema"])
    model.to(device).eval()
    diffusion = GaussianDiffusion(1000, config.prediction)                   # linear betas, T = 1000
    table = jpdvt.position_table(config).to(device)
    codec = None
    if getattr(puzzle, "vae", None):           # a latent video model diffuses its autoencoder's latents
        from sources.vae import load_codec
        codec = load_codec(puzzle.vae)
    if args.judge != "none":                   # not in the paper: jpdvt.place asks the judge instead
        from solving.judge import judge_for
        opts = replace(opts, judge=judge_for(args.judge, puzzle))

    passes, shown, seconds = [], [], 0.0
    for r in range(args.repeats):             # pass r: the shuffles, missing pieces and noise of --seed + r
        test = puzzle_set(puzzle, args.split, args.seed + r)
        num = min(args.num_puzzles, len(test))
        opts.generator.manual_seed(args.seed + r)
        scores = []
        for start in tqdm(range(0, num, args.batch_size), unit="batch", desc=f"solving (pass {r + 1}/{args.repeats})"):
            batch = default_collate([test[i] for i in range(start, min(start + args.batch_size, num))])  # (B, N, ...)
            batch = {k: v.to(device) for k, v in batch.items()}
            told, pinned = jpdvt.told_and_pinned(batch, jpdvt.pinned_pieces(batch, puzzle), trained)
            t = time.time()
            with torch.autocast(device.type, AUTOCAST[args.precision], enabled=args.precision != "fp32"):
                positions, content = jpdvt.solve(model, diffusion, batch, table, opts, told, pinned, codec)
            seconds += time.time() - t
            scores.append(jpdvt.score(puzzle, positions, batch, pinned))      # per puzzle
            room = min(PICTURED[puzzle.kind] - len(shown), len(positions))          # puzzles still to draw
            shown += [(batch, positions, content, k) for k in range(room)]
        passes.append({k: np.concatenate([s[k] for s in scores]) for k in scores[0]})

    per_puzzle = {k: np.stack([p[k] for p in passes]) for k in passes[0]}    # (passes, puzzles)
    metrics = {**{k: float(v.mean()) for k, v in per_puzzle.items()}, "counted": COUNTED[puzzle.kind],
               "num_puzzles": num, "sec_per_puzzle": seconds / (num * args.repeats), "split": args.split,
               "seed": args.seed, "repeats": args.repeats, "command": shlex.join(["python", *sys.argv]),
               "ckpt": args.ckpt, "train_step": ckpt["step"], **described,
               **{k: v for k, v in asdict(puzzle).items() if k != "data_dir"},
               "anchor_told_to_network": bool(told.any()),
               "passes": [{k: float(v.mean()) for k, v in p.items()} for p in passes],
               "per_puzzle": {k: v.tolist() for k, v in per_puzzle.items()}}
    out = args.out or default_out(args)
    os.makedirs(out, exist_ok=True)            # only now: a failed run leaves no folder behind
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    path, columns = save_pictures(puzzle, out, shown)
    print(f"{num} {args.split} puzzles x {args.repeats} pass(es): {SUMMARY[puzzle.kind].format(**metrics)}")
    print(f"wrote {os.path.join(out, 'metrics.json')} and {path} ({columns})")
    return metrics


# ----------------------------------------------------------------------------
# The test puzzles and the sampling, from the checkpoint and the flags
# ----------------------------------------------------------------------------

def test_puzzles(args, trained):
    """The settings of the puzzles to score: those the checkpoint trained on (`trained`), with the flags that change
    them (--dataset, --data-dir, --missing, --anchor, --frame-stride, --vae)."""
    if args.dataset:                         # another dataset of the same kind
        from sources.images import DATASETS
        from sources.videos import VIDEO_DATASETS
        datasets = DATASETS if trained.kind == "image" else VIDEO_DATASETS
        if args.dataset not in datasets:
            raise UserError(f"--dataset {args.dataset} does not fit this {trained.kind} checkpoint; use one of "
                            f"{', '.join(datasets)}")
    changes = {"dataset": args.dataset or trained.dataset, "data_dir": args.data_dir,
               "missing": trained.missing if args.missing is None else args.missing}
    if trained.data_dir and not args.data_dir:        # the training run's data folder, found from here or the ckpt's
        changes["data_dir"] = find_data(trained, args.ckpt, None, args.dataset)
    if args.anchor is not None:              # the scoring protocol (docs/protocols.md)
        if trained.kind != "image":
            raise UserError("--anchor applies to image checkpoints; a clip's first piece is always its anchor")
        changes["anchor"] = args.anchor
    if args.frame_stride is not None and trained.kind == "video":
        changes["frame_stride"] = args.frame_stride
    if trained.kind == "video" and trained.vae:                   # a latent model: its autoencoder's folder
        changes["vae"] = args.vae or data_folder(trained.vae, args.ckpt)
        if changes["vae"] is None:
            raise UserError(f"--vae: the autoencoder {trained.vae} of {args.ckpt} is not found; pass its folder")
    puzzle = replace(trained, **changes)
    pieces = puzzle.grid[0] * puzzle.grid[1] if puzzle.kind == "image" else puzzle.pieces
    if not 0 <= puzzle.missing < pieces - puzzle.anchor:       # the anchor and a piece to place stay
        raise UserError(f"--missing must be between 0 and {pieces - 1 - puzzle.anchor} for this checkpoint's "
                        f"puzzles, got {puzzle.missing}")
    return puzzle


def sampling(args, ckpt):
    """(jpdvt.SampleOptions, device, what metrics.json records of the sampling): each option from its flag, else the
    checkpoint's stored "sampling" (chosen on val), else DEFAULTS; the noise seeded by --seed on --device (on a CPU,
    with a core left free: cpu_threads). Prints the sampling line: each setting and where it came from."""
    if args.steps is not None and args.steps > 1000:
        raise UserError(f"--steps {args.steps} is more than the model's 1000 diffusion steps; use at most 1000")
    stored = ckpt.get("sampling", {})
    chosen = f"the checkpoint's, chosen on {stored['chosen']}" if "chosen" in stored else "the checkpoint's"
    where = {k: "flag" if getattr(args, k) is not None else chosen if k in stored else "default" for k in DEFAULTS}
    values = {k: getattr(args, k) if where[k] == "flag" else stored.get(k, DEFAULTS[k]) for k in DEFAULTS}
    sources = {w: [k for k in DEFAULTS if where[k] == w] for w in dict.fromkeys(where.values())}
    ensemble = " averaged (ours, not the paper's)" if values["samples"] > 1 else ""
    print(f"sampling: {values['sampler']}, {values['steps']} steps, {values['samples']} sample(s){ensemble}, "
          f"{values['assign']} assignment, judge {args.judge} (" +
          "; ".join(f"{', '.join(ks)}: {w}" for w, ks in sources.items()) + ")")
    device = resolve_device(args.device)
    cpu_threads(device, world=1, workers=1)    # a core left free: on a busy machine, threads wait on each other
    noise = torch.Generator(device).manual_seed(args.seed)
    described = {**values, "judge": args.judge, "sampling_from": where, "precision": args.precision}
    return jpdvt.SampleOptions(**values, generator=noise), device, described


def default_out(args):
    """samples/CKPT-SPLIT[-flags]/ next to the checkpoint."""
    stem = os.path.splitext(os.path.basename(args.ckpt))[0]
    mode = [f"{k}-{v}" for k, v in (("missing", args.missing), ("judge", args.judge), ("anchor", args.anchor))
            if v not in (None, "none")]
    return os.path.join(os.path.dirname(os.path.abspath(args.ckpt)), "samples", "-".join([stem, args.split, *mode]))


# ----------------------------------------------------------------------------
# Flags
# ----------------------------------------------------------------------------

def add_sampling_flags(p):
    """The flags of opening a checkpoint and sampling its codes (sample.py, python -m solving.own)."""
    from solving.judge import JUDGES  # an option not in the paper: loaded only to name its choices
    p.add_argument("--ckpt", required=True, help="ckpt.pt written by train_image.py or train_video.py")
    p.add_argument("--seed", type=non_negative, default=0, help="seed of the puzzles (shuffles, crops) and of the "
                                                                "sampling noise (default 0)")
    p.add_argument("--steps", type=positive, help="sampling steps, respaced out of T = 1000. --steps, --sampler, "
                   "--samples and --assign default to the sampling the checkpoint stores (chosen on val), else to "
                   f"{', '.join(str(v) for v in DEFAULTS.values())}")
    p.add_argument("--sampler", choices=SAMPLERS,
                   help="ddpm (ancestral: fresh noise at every step) or ddim (deterministic: only the starting noise "
                        "is random); default: the checkpoint's, else ddpm")
    p.add_argument("--samples", type=positive,
                   help="independent samples of the codes per puzzle, assigned on their mean distance (not in the "
                        "paper, which samples once; K times the sampling time); default: the checkpoint's, else 1")
    p.add_argument("--assign", choices=ASSIGNERS,
                   help="codes -> positions: hungarian (optimal, the least total distance) or greedy (the paper's "
                        "text: piece by piece, the closest free position); default: the checkpoint's, else hungarian")
    p.add_argument("--judge", choices=JUDGES, default="none",
                   help="none (default: the paper's method, no judge) or classic: of the samples' arrangements (each "
                        "sample's and their mean's), keep the one whose pieces fit best across their cuts (clips) or, "
                        "improved by swaps, their borders (images, Gallagher's MGC); not in the paper "
                        "(solving/judge.py)")
    p.add_argument("--device", default="auto",
                   help="auto (a CUDA GPU, else a Mac's GPU, mps, else the CPU), cpu, cuda, cuda:N or mps")
    p.add_argument("--precision", default="fp32", choices=AUTOCAST,
                   help="arithmetic: fp32 (the default, as every figure was measured), or bf16 or fp16 autocast")
    p.add_argument("--vae", default=None, help="latent video checkpoints: the autoencoder folder, if it moved since "
                                               "training (default: the training run's)")


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sampling_flags(p)
    p.add_argument("--split", default="test", choices=("test", "val"),
                   help="test (score it once, for the final figures; the default) or val (choose settings on it)")
    p.add_argument("--num-puzzles", type=positive, default=200, help="puzzles to solve and score (default 200)")
    p.add_argument("--repeats", type=positive, default=1,
                   help="solve the puzzles this many times, pass r with the shuffles and noise of --seed + r (for "
                        "small test folders; default 1)")
    p.add_argument("--missing", type=int, default=None,
                   help="missing pieces per puzzle, generated by the model (default: the checkpoint's)")
    p.add_argument("--anchor", action=argparse.BooleanOptionalAction, default=None,
                   help="image puzzles, the scoring protocol: --anchor keeps one piece on its true cell and does not "
                        "count it (the paper's text; the network is told its code only if it trained with an anchor); "
                        "--no-anchor counts every piece (the authors' code). Default: as the checkpoint trained")
    p.add_argument("--dataset", default=None, help="score on another dataset of the checkpoint's kind")
    p.add_argument("--data-dir", default=None, help="the data folder (default: the training run's, found from here or "
                                                    "next to the checkpoint)")
    p.add_argument("--frame-stride", type=positive, default=None,
                   help="video checkpoints: keep every N-th frame (default: the checkpoint's)")
    p.add_argument("--out", default=None,
                   help="output folder (default: samples/CKPT-SPLIT[-flags]/ next to the checkpoint)")
    p.add_argument("--batch-size", type=positive, default=50, help="puzzles solved at once (default 50)")
    return p


if __name__ == "__main__":
    with user_errors():
        main(get_parser().parse_args())
