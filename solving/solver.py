"""
A trained checkpoint ready to solve: its EMA network, diffusion, position table and sampling options, for sample.py's
test batches and for a bag of your own pieces (`jpdvt.load(path).solve(pieces)`, solving/bag.py). Not in the paper.

    solver = jpdvt.load("checkpoints/image-photos-3x3.pt")
    result = solver.solve(pieces, seed=0)     # result.positions, .confidence, .puzzle_confidence, .image
"""
from dataclasses import replace

import numpy as np
import torch

from diffusion import SAMPLERS, GaussianDiffusion
from dit import DiT
from jpdvt import JUDGES, SampleOptions, arrange, code_costs, kind_of
from metrics import ASSIGNERS, assign
from plumbing.checkpoint import load_checkpoint
from plumbing.cli import (
    PRECISIONS,
    UserError,
    autocast,
    check_puzzle,
    cpu_threads,
    non_negative,
    positive,
    resolve_device,
)
from sources.files import data_folder, find_data
from sources.images import DATASETS
from sources.vae import load_codec
from sources.videos import VIDEO_DATASETS
from unet3d import UNet3D

SAMPLING = {"steps": 50, "sampler": "ddpm", "samples": 1, "assign": "hungarian", "judge": "none"}  # unless the
# checkpoint's "sampling" says otherwise


class Solver:
    """A checkpoint's EMA network on `device` with its config, diffusion, position table, sampling options (the
    generator of their noise included) and precision (auto: bf16 autocast on CUDA, fp32 on CPU and mps); for a latent
    video model, the autoencoder."""

    def __init__(self, ckpt, config, device, opts, precision="auto"):
        self.config, self.step, self.device, self.opts, self.precision = config, ckpt["step"], device, opts, precision
        if opts.generator is None:                   # solve(seed=...) seeds it: one of the solver's own
            self.opts = replace(opts, generator=torch.Generator(device).manual_seed(0))
        self.kind = kind_of(config)
        self.trained_missing = ckpt["config"].puzzle.missing     # up to this many pieces missing in training
        self.codec = load_codec(self.kind.vae) if self.kind.vae else None
        self.model = (DiT if config.puzzle.kind == "image" else UNet3D)(config.model)
        self.model.load_state_dict(ckpt["ema"])
        self.model.to(device).eval()
        self.diffusion = GaussianDiffusion(1000, config.prediction)
        self.table = self.kind.table().to(device)

    @property
    def generates(self):
        """Trained with missing pieces, so it generates their content."""
        return self.trained_missing > 0

    def costs(self, batch, given=None, grid=None, opts=None):
        """(costs (S, B, N, positions), content with missing pieces generated) of a batch of pixel puzzles (code_costs;
        latents for a latent model). given: the pieces whose code is told (default: the anchor, if the model has one);
        grid: another grid than the model's (images); opts: other sampling options than the solver's."""
        batch, given = self.inputs(batch, given)
        table = self.table if grid is None else self.kind.table(grid).to(self.device)
        with autocast(self.device, self.precision):
            return code_costs(self.model, self.diffusion, batch, table=table, opts=opts or self.opts, given=given,
                              latent=self.codec is not None)

    def solve_batch(self, batch, given=None, opts=None, callback=None):
        """(positions (B, N), content with missing pieces generated, in pixels): jpdvt.solve with the solver's model and
        options (or opts), the told pieces (default: the anchor, if the model has one) on their cells; a latent
        model's content is decoded by its autoencoder. callback(i, x, x0): after every step of the first sample."""
        opts = replace(opts or self.opts, callback=callback)
        costs, content = self.costs(batch, given, opts=opts)
        batch, given = self.inputs(batch, given, encode=False)
        positions = arrange(costs, batch, given, opts, self.kind.grid)
        if opts.samples > 1 and batch["missing"].any():   # the cells come from all samples, the drawings from the first
            content = follow_cells(content, costs, positions, batch)
        return positions, self.codec.decode(content) if self.codec else content

    def inputs(self, batch, given, encode=True):
        """The batch as the network reads it (a latent model's frames encoded by its autoencoder, unless not `encode`)
        and the pieces whose code is told (`given`, default: the anchor, if the model has one)."""
        given = self.kind.given(batch) if given is None else given
        return (self.codec.encode_batch(batch) if self.codec and encode else batch), given

    def solve(self, pieces, pins=None, grid=None, callback=None, seed=0):
        """
        Solve a bag of pieces nobody has solved (solving/bag.py): images (a list of PIL images or arrays, an (N, H, W,
        3) array, or a {name: piece} dict whose names errors use; resized to the model's piece size) or, for a video
        model, clips ((F, H, W, C) arrays of the model's frames per piece). pins: {index: (row, col)} (video: {index:
        0}) of pieces whose place you know, for models trained with an anchor (a video model always: its first piece).
        grid: (rows, cols) when it differs from the model's; cells beyond the pieces are missing and generated by a
        model trained with missing pieces. callback(i, x, x0): called after every sampling step (images). seed: the
        noise of this solve: the same seed, the same result. Returns a solving.bag.Result, with each piece's
        confidence: the share of the samples (at least 8: solving/bag.py) that put it where the answer does.
        """
        from solving.bag import solve_bag
        self.opts.generator.manual_seed(seed)
        return solve_bag(self, pieces, pins or {}, grid=grid, callback=callback)


def follow_cells(generated, costs, positions, batch):
    """The first sample's drawings re-paired with the cells that the answer gives the missing pieces: a missing piece
    has no content of its own, so each of those cells shows the drawing whose first-sample code lies nearest it (one to
    one), not whichever drawing the piece that won the cell happened to make."""
    first, out = costs[0], generated.clone()
    for b, miss in enumerate(batch["missing"].cpu().numpy()):
        m = np.flatnonzero(miss)
        if len(m) > 1:                                # drawing of piece m[i] -> the cell held by piece m[pair[i]]
            pair = assign(first[b][m][:, positions[b, m]].cpu().numpy(), "hungarian")
            out[b, m[pair]] = generated[b, m]
    return out


def load_solver(path, device="auto", precision="auto"):
    """jpdvt.load: a Solver with the sampling its checkpoint stores (`sampling`: chosen on val or test, as its
    `chosen` says), else SAMPLING. It leaves torch's thread count as it is (sample.py sets it as training does)."""
    ckpt, device = load_checkpoint(path), resolve_device(device)
    opts = SampleOptions(**stored_sampling(ckpt), generator=torch.Generator(device).manual_seed(0))
    return Solver(ckpt, ckpt["config"], device, opts, precision)


def stored_sampling(ckpt):
    """The sampling options a checkpoint recommends, over SAMPLING (its `chosen` key, where they were chosen, left
    out)."""
    return {**SAMPLING, **{k: v for k, v in ckpt.get("sampling", {}).items() if k != "chosen"}}


# ----------------------------------------------------------------------------
# Opening a checkpoint from the command line (sample.py, python -m solving.own)
# ----------------------------------------------------------------------------

# What is reported of each kind of puzzle: the puzzle settings copied into metrics.json, the puzzles pictured, the
# metric of fully solved puzzles and what the scores count
REPORT = {"image": {"settings": ("grid", "piece_size", "gap", "anchor"), "pictured": 8,
                    "counted": "piece_acc and puzzle_acc count the pieces with content that the model had to place, "
                               "not the anchored one (whose position the model is told); missing pieces are generated "
                               "and not scored"},
          "video": {"settings": ("pieces", "frames_per_piece", "size", "frame_stride"), "pictured": 4,
                    "counted": "kendall and exact compare every piece's slot, generated pieces included, each against "
                               "the slot of the clip it replaced (strict); kendall_set and exact_set compare the slots "
                               "of generated pieces as a set (they start as interchangeable noise); the anchor (first "
                               "piece) counts in all four; kendall_rev is the authors' variant, the smaller of the "
                               "strict distances of the predicted order and of its reverse"}}
PROTOCOLS = {True: "anchored: one piece's cell told (the paper's text), that piece not counted",
             False: "all pieces: no piece's cell told (the authors' released code), every piece with content counted"}


def summary(kind, metrics):
    """One line of a kind's scores (jpdvt.Images.score or jpdvt.Videos.score)."""
    if kind == "image":
        return f"piece accuracy {metrics['piece_acc']:.4f}, puzzle accuracy {metrics['puzzle_acc']:.4f}"
    return (f"mean Kendall distance {metrics['kendall']:.4f} (generated pieces as a set "
            f"{metrics['kendall_set']:.4f}), exactly ordered {metrics['exact']:.4f} ({metrics['exact_set']:.4f})")


def add_solver_flags(p):
    """The flags of opening a checkpoint and sampling its codes, shared by sample.py and python -m solving.own."""
    p.add_argument("--ckpt", required=True, help="ckpt.pt written by train_image.py or train_video.py")
    p.add_argument("--seed", type=non_negative, default=0, help="seed of the puzzles (shuffles, crops) and of the "
                                                                "sampling noise (default 0)")
    p.add_argument("--steps", type=positive, help="sampling steps, respaced out of T = 1000. --steps, --sampler, "
                   "--samples, --assign and --judge default to the sampling the checkpoint stores (its `sampling`, "
                   "chosen on val or test as it says), else to 50, ddpm, 1, hungarian, none")
    p.add_argument("--sampler", choices=SAMPLERS,
                   help="ddpm (ancestral: fresh noise at every respaced step) or ddim (deterministic, eta = 0: only "
                        "the starting noise is random)")
    p.add_argument("--samples", type=positive,
                   help="independent samples of the codes per puzzle, assigned on their mean distance to the true "
                        "codes (K times the sampling time)")
    p.add_argument("--assign", choices=ASSIGNERS,
                   help="codes -> positions: hungarian (optimal, the least total L2 distance) or greedy (the paper's "
                        "text: piece by piece, the closest free position)")
    p.add_argument("--judge", choices=JUDGES,
                   help="none, or edges: of the samples' arrangements (each sample's and their mean's), keep the one "
                        "whose pieces fit best across their borders (images, scored by Gallagher's MGC) or cuts "
                        "(clips); not in the paper")
    p.add_argument("--device", default="auto",
                   help="auto (a CUDA GPU, else a Mac's GPU, mps, else the CPU), cpu, cuda, cuda:N or mps")
    p.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help="arithmetic: auto (bf16 autocast on CUDA, fp32 on CPU and mps, as in training)")
    p.add_argument("--vae", default=None, help="latent video checkpoints: the autoencoder folder, if it moved since "
                                               "training (default: the training run's)")


def open_solver(args, own=False):
    """The Solver of args.ckpt on the puzzles args describe (test_settings; own: your own data, none missing), with the
    sampling of the flags given over the checkpoint's stored sampling over SAMPLING. Prints one line that names each
    sampling setting and where it came from."""
    if args.steps is not None and args.steps > 1000:
        raise UserError(f"--steps {args.steps} is more than the model's 1000 diffusion steps; use at most 1000 (50 is "
                        "the usual)")
    ckpt = load_checkpoint(args.ckpt)
    stored = ckpt.get("sampling", {})
    chosen = f"the checkpoint's, chosen on {stored['chosen']}" if "chosen" in stored else "the checkpoint's"
    where = {k: "flag" if getattr(args, k) is not None else chosen if k in stored else "default" for k in SAMPLING}
    for k, v in stored_sampling(ckpt).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    sources = {w: [k for k in SAMPLING if where[k] == w] for w in dict.fromkeys(where.values())}
    print(f"sampling: {args.sampler}, {args.steps} steps, {args.samples} sample(s), {args.assign} assignment, judge "
          f"{args.judge} (" + "; ".join(f"{', '.join(ks)}: {w}" for w, ks in sources.items()) + ")")
    config = replace(ckpt["config"], puzzle=test_settings(args, ckpt["config"].puzzle, own))
    device = resolve_device(args.device)
    cpu_threads(device, world=1, workers=1)    # on a CPU a core left free, as beside a data worker: on a machine
    # busy with other work, a thread per core makes the solve's threads wait on each other
    opts = SampleOptions(**{k: getattr(args, k) for k in SAMPLING}, generator=torch.Generator(device).manual_seed(
        args.seed))
    solver = Solver(ckpt, config, device, opts, precision=args.precision)
    puzzle = config.puzzle
    solver.described = {"dataset": puzzle.dataset, "missing": puzzle.missing, **{k: getattr(args, k) for k in SAMPLING},
                        "sampling_from": where, "precision": args.precision, "ckpt": args.ckpt,
                        "train_step": solver.step, **{k: getattr(puzzle, k) for k in REPORT[puzzle.kind]["settings"]}}
    if puzzle.kind == "image":
        solver.described["protocol"] = PROTOCOLS[puzzle.anchor]
    return solver


def test_settings(args, puzzle, own=False):
    """The checkpoint's puzzle settings with the flags that change them: --dataset, --data-dir (default: the training
    run's, sources.files.find_data), --missing (default: the checkpoint's; 0 for your own data), --anchor (images),
    --frame-stride (videos), --vae (latent videos)."""
    dataset = getattr(args, "dataset", None) or puzzle.dataset
    datasets = DATASETS if puzzle.kind == "image" else VIDEO_DATASETS
    if dataset not in datasets:
        raise UserError(f"--dataset {dataset} does not fit this {puzzle.kind} checkpoint; use one of "
                        f"{', '.join(datasets)}")
    data_dir = getattr(args, "data_dir", None)
    if puzzle.data_dir and not data_dir and not (own and not getattr(args, "superres", 0)):
        data_dir = find_data(puzzle, args.ckpt, data_dir, dataset)   # the training run's folder, found
    changes = {"dataset": dataset, "data_dir": data_dir}
    missing = getattr(args, "missing", None)
    changes["missing"] = missing if missing is not None else 0 if own else puzzle.missing
    if getattr(args, "anchor", None) is not None:
        if puzzle.kind != "image":
            raise UserError("--anchor applies to image checkpoints; a clip's first piece is always its anchor")
        changes["anchor"] = args.anchor
    if getattr(args, "frame_stride", None) is not None and puzzle.kind == "video":
        changes["frame_stride"] = args.frame_stride
    if getattr(puzzle, "vae", None):                           # a latent video model: its autoencoder folder
        vae = args.vae or data_folder(puzzle.vae, args.ckpt)
        if vae is None:
            raise UserError(f"{args.ckpt} diffuses latents of the autoencoder {puzzle.vae}, which is found neither "
                            "from here nor next to the checkpoint; pass --vae with that folder")
        changes["vae"] = vae
    puzzle = replace(puzzle, **changes)
    check_puzzle(puzzle)
    return puzzle
