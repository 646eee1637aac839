"""
Score a trained JPDVT checkpoint on fresh test puzzles: rebuild its EMA network, solve the puzzles (jpdvt.solve:
sample every piece's positional code, then match pieces to positions one to one) and count the pieces placed right.
Paper: "Predicted position encodings" (supplement) and "Metrics" (Sec. 4.2).

Images report the share of pieces and of whole puzzles in place, over the pieces the model had to place; clips the
Kendall distance of their order and the share fully ordered (metrics.json's "counted" says what each figure counts).
The first line printed names the sampling and where each setting came from: a flag, the checkpoint (chosen on val)
or the default. Your own pieces, and temporal super-resolution: python -m solving.own.

    python sample.py --ckpt checkpoints/image-shapes-3x3.pt      # checkpoints/samples/image-shapes-3x3-test/
    python sample.py --ckpt out/run/ckpt.pt --missing 2 --judge classic
"""
import argparse
import json
import os
import time
from dataclasses import asdict, fields, replace

import numpy as np
import torch
from torch.utils.data import default_collate
from tqdm import tqdm

import jpdvt
from diffusion import GaussianDiffusion
from dit import DiT, DiTConfig
from pictures import save_pictures
from plumbing.cli import AUTOCAST, UserError, add_sampling_flags, open_checkpoint, positive, user_errors
from puzzles import ImageConfig, VideoConfig, puzzle_set
from sources.files import data_folder, find_data
from unet3d import UNet3D, UNetConfig

PARTS = {"image": (ImageConfig, DiTConfig, DiT), "video": (VideoConfig, UNetConfig, UNet3D)}
COUNTED = {"image": "piece_acc and puzzle_acc count the pieces with content that the model had to place, not the "
                    "anchor (whose cell is told); missing pieces are generated and not scored",
           "video": "kendall and exact compare every slot, the anchor and generated pieces included (strict); "
                    "kendall_set and exact_set compare generated pieces' slots as a set; kendall_rev is the authors' "
                    "variant, the smaller strict distance of the order and of its reverse"}
PICTURED = {"image": 8, "video": 4}          # puzzles drawn in examples.png / examples.gif
SUMMARY = {"image": "piece accuracy {piece_acc:.4f}, puzzle accuracy {puzzle_acc:.4f}",
           "video": "mean Kendall distance {kendall:.4f} (generated pieces as a set {kendall_set:.4f}), exactly "
                    "ordered {exact:.4f} ({exact_set:.4f})"}


def load(args):
    """(the test puzzles' settings, the puzzle settings it trained on, its EMA network, (checkpoint, sampling options,
    device, what metrics.json records of the sampling)) from --ckpt, with the flags that change the test puzzles
    (--dataset, --data-dir, --missing, --anchor, --frame-stride, --vae)."""
    ckpt, opts, device, described = open_checkpoint(args)   # the sampling: flags, else the checkpoint's, else defaults
    c = ckpt["config"]
    puzzle_cls, model_cls, network = PARTS[c["kind"]]
    unknown = sorted(set(c["puzzle"]) - {f.name for f in fields(puzzle_cls)} | set(c["model"]) -
                     {f.name for f in fields(model_cls)})
    if unknown:                              # a mistyped or newer setting is refused, named, never dropped
        raise UserError(f"checkpoint {args.ckpt} has settings this version of jpdvt does not know "
                        f"({', '.join(unknown)}); use a checkpoint written by this version")
    trained = puzzle_cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in c["puzzle"].items()})
    model = network(model_cls(**c["model"]))
    model.load_state_dict(ckpt["ema"])
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
    return puzzle, trained, model.to(device).eval(), (ckpt, opts, device, described)


def main(args):
    puzzle, trained, model, (ckpt, opts, device, described) = load(args)
    config = argparse.Namespace(puzzle=puzzle, model=model.config)
    diffusion = GaussianDiffusion(1000, ckpt["config"].get("prediction", "x0"))   # linear betas, T = 1000
    table = jpdvt.position_table(config).to(device)
    codec = None
    if getattr(puzzle, "vae", None):           # a latent video model diffuses its autoencoder's latents
        from sources.vae import load_codec
        codec = load_codec(puzzle.vae)
    solver = argparse.Namespace(model=model, diffusion=diffusion, table=table, opts=opts, codec=codec,
                                judge=args.judge, puzzle=puzzle)
    stem = os.path.splitext(os.path.basename(args.ckpt))[0]
    mode = [f"{k}-{v}" for k, v in (("missing", args.missing), ("judge", args.judge), ("anchor", args.anchor))
            if v not in (None, "none")]
    args.out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.ckpt)), "samples",
                                        "-".join([stem, args.split, *mode]))
    os.makedirs(args.out, exist_ok=True)

    passes, shown, seconds = [], [], 0.0
    for r in range(args.repeats):             # pass r: the shuffles, missing pieces and noise of --seed + r
        test = puzzle_set(puzzle, args.split, args.seed + r)
        num = min(args.num_puzzles, len(test))
        opts.generator.manual_seed(args.seed + r)
        scores = []
        for start in tqdm(range(0, num, args.batch_size), unit="batch", desc=f"solving (pass {r + 1}/{args.repeats})"):
            batch = default_collate([test[i] for i in range(start, min(start + args.batch_size, num))])  # (B, N, ...)
            batch = {k: v.to(device) for k, v in batch.items()}
            given = jpdvt.given_codes(batch, puzzle.anchor and trained.anchor)   # codes told to the network
            pinned = jpdvt.given_codes(batch, puzzle.anchor)                    # pieces kept on their true cells
            t = time.time()
            with torch.autocast(device.type, AUTOCAST[args.precision], enabled=args.precision != "fp32"):
                positions, content = solve(solver, batch, given, pinned)
            seconds += time.time() - t
            scores.append(jpdvt.score(puzzle, positions, batch))              # per puzzle
            room = min(PICTURED[puzzle.kind] - len(shown), len(positions))          # puzzles still to draw
            shown += [(batch, positions, content, k) for k in range(room)]
        passes.append({k: np.concatenate([s[k] for s in scores]) for k in scores[0]})

    per_puzzle = {k: np.stack([p[k] for p in passes]) for k in passes[0]}    # (passes, puzzles)
    metrics = {**{k: float(v.mean()) for k, v in per_puzzle.items()}, "counted": COUNTED[puzzle.kind],
               "num_puzzles": num, "sec_per_puzzle": seconds / (num * args.repeats), "split": args.split,
               "seed": args.seed, "repeats": args.repeats,
               "ckpt": args.ckpt, "train_step": ckpt["step"], **described,
               **{k: v for k, v in asdict(puzzle).items() if k != "data_dir"},
               "anchor_told_to_network": bool(puzzle.anchor and trained.anchor),
               "passes": [{k: float(v.mean()) for k, v in p.items()} for p in passes],
               "per_puzzle": {k: v.tolist() for k, v in per_puzzle.items()}}
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    path, columns = save_pictures(puzzle, args.out, shown)
    print(f"{num} {args.split} puzzles x {args.repeats} pass(es): {SUMMARY[puzzle.kind].format(**metrics)}")
    print(f"wrote {os.path.join(args.out, 'metrics.json')} and {path} ({columns})")
    return metrics


def solve(s, batch, given, pinned):
    """(positions (B, N), content in pixels) of a batch: jpdvt.solve, the paper's method; with --judge classic, the
    samples' arrangement whose pieces fit best, pictures' improved by swaps (solving/judge.py, not in the paper). s
    holds the network and its sampling: model, diffusion, table, opts, codec (a latent model's autoencoder, or None),
    judge, puzzle."""
    inputs = s.codec.encode_batch(batch) if s.codec else batch
    latent = s.codec is not None
    if s.judge == "none":
        positions, content = jpdvt.solve(s.model, s.diffusion, inputs, s.table, s.opts, given, latent, pinned)
    else:
        from solving.judge import judge
        costs, content = jpdvt.code_costs(s.model, s.diffusion, inputs, s.table, s.opts, given, latent)
        positions = judge(costs, batch["content"], batch["missing"], jpdvt.pinned_cells(batch, pinned),
                          s.opts.assign, s.puzzle)
        if s.opts.samples > 1 and batch["missing"].any():    # as jpdvt.solve: the drawings follow the cells
            content = jpdvt.follow_cells(content, costs, positions, batch)
    return positions, s.codec.decode(content) if s.codec else content


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
