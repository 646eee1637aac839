"""
Train the JPDVT video model: a pseudo-3D U-Net that denoises the 1D positional codes of shuffled video pieces
(and the frames of missing ones), conditioned on the pieces' frames.

Paper: "Solving temporal jigsaw puzzles" (Sec. 3.2), "Temporal Jigsaw Puzzles Experiments" and the supplement "Video
Experiments": the first piece is the anchor; in the experiments with missing pieces up to 25% of them are missing
(--missing K, which --paper does not set: 0..K at random while training), loss weights 0.8 missing frames / 0.2
positional codes, batch 32, lr 1e-4, linear noise schedule, T = 1000, 250k steps; MovingMNIST is diffused in pixels,
larger videos in the latent space of the Stable Diffusion autoencoder (256x256x3 frames -> 32x32x4 latents, `--vae`).
Every setting comes from a flag, else the paper's table (configs/paper.py; on by default for clevrer, ucf101 and qst,
with --paper for movingmnist), else the dataset's default, else the tiny CPU recipe below; the log's first line prints
each with its source.

    python train_video.py                            # tiny U-Net, built-in digits, 5 pieces x 4 frames, 32 px
    python train_video.py --dataset movingmnist --data-dir data/mnist_test_seq.npy --pieces 10 --frames-per-piece 2 \
        --paper                                      # the paper's Moving MNIST 10 x 2 setting
    python train_video.py --dataset ucf101 --data-dir /data/ucf101 --pieces 8 --frames-per-piece 4 --vae /models/sd-vae
    torchrun --standalone --nproc_per_node=8 train_video.py --dataset ucf101 --data-dir ... --vae ...

Writes OUT/ckpt.pt ({config, model, ema, opt, scaler, step, data}) and OUT/log.txt; --resume OUT/ckpt.pt continues
exactly. Solve test puzzles, order your own pieces or raise a video's frame rate with sample.py --ckpt OUT/ckpt.pt.
"""
import argparse
from dataclasses import asdict, replace

import jpdvt
from configs.paper import VIDEO
from plumbing.checkpoint import Config
from plumbing.cli import UserError, check_puzzle, run_cli
from plumbing.flags import add_train_flags, paper_settings, resolve, settings_line, start_run, train_config
from puzzles import VideoConfig, collate, curriculum_pieces
from sources.vae import VAE_FACTOR, load_codec
from sources.videos import FOLDER_VIDEOS, VIDEO_DATASETS
from train import TrainConfig, train
from unet3d import CONFIGS

# frame side when --size is left out: built-in digits 32, other datasets 64 (the shipped Moving MNIST models use
# --size 32). The paper's settings override it: Moving MNIST 64, clevrer, ucf101 and qst 256 px frames, diffused as
# 32 x 32 latents with --vae (configs/paper.py)
DATASET_SIZES = {"digits": 32, "movingmnist": 64, "videos": 64, "clevrer": 64, "ucf101": 64, "qst": 64}
DEFAULTS = TrainConfig(batch_size=16, lr=1e-3, max_steps=300, ckpt_every=100, eval_every=100, eval_puzzles=32,
                       weight_code=0.2, weight_content=0.8)
# every setting a flag can leave out, with the tiny CPU recipe's value (size: DATASET_SIZES)
SCRIPT_DEFAULTS = {"pieces": 5, "frames_per_piece": 4, "curriculum": None, "missing": 0, "frame_stride": 1,
                   "size": None, "model": "tiny", "prediction": "x0", "vae": None, **asdict(DEFAULTS)}


def puzzle_config(args):
    """The VideoConfig of the (resolved) puzzle flags, validated (a UserError with a one-line fix)."""
    if args.curriculum and not (2 <= args.curriculum[0] <= args.pieces and args.curriculum[1] >= 1):
        raise UserError(f"--curriculum FIRST STEPS needs 2 <= FIRST <= --pieces ({args.pieces}) and STEPS >= 1, "
                        f"got {args.curriculum[0]} {args.curriculum[1]}")
    cfg = CONFIGS[args.model]
    factor = cfg.patch_size * 2 ** (len(cfg.channels) - 1) * (VAE_FACTOR if args.vae else 1)
    if args.size < 8 or args.size % factor:
        raise UserError(f"--size must be at least 8 and a multiple of {factor} for --model {args.model}"
                        f"{' with --vae' if args.vae else ''}, got {args.size}")
    curriculum = (*args.curriculum, args.batch_size) if args.curriculum else None   # (first, steps, global batch)
    if curriculum and (last := curriculum_pieces(curriculum, args.pieces, args.max_steps - 1)) < args.pieces:
        first, steps = args.curriculum                                    # the run ends short of all pieces
        print(f"note: --curriculum {first} {steps} reaches all {args.pieces} pieces at step {steps}; this run stops at "
              f"--max-steps {args.max_steps} with {last} (scored on all): raise it, or --resume with a larger one")
    puzzle = VideoConfig(dataset=args.dataset, data_dir=args.data_dir, pieces=args.pieces,
                         frames_per_piece=args.frames_per_piece, size=args.size,
                         channels=3 if args.vae or args.dataset in FOLDER_VIDEOS else 1,
                         frame_stride=args.frame_stride, missing=args.missing, vae=args.vae, curriculum=curriculum)
    check_puzzle(puzzle)
    return puzzle


def make_config(args):
    """(Config, settings line) of a fresh run: the defaults, then the paper's settings, then the flags
    (plumbing.flags.resolve)."""
    sources = {"dataset": "flag" if args.dataset else "default"}
    args.dataset = args.dataset or "digits"
    paper = paper_settings(VIDEO, args.dataset, args.paper)
    sources.update(resolve(args, {**SCRIPT_DEFAULTS, "size": DATASET_SIZES[args.dataset]}, paper))
    if "vae" in paper and args.vae is None:                 # the paper's latent setting needs the user's autoencoder
        if sources["size"] != "flag":
            raise UserError(f"--dataset {args.dataset} with the paper's settings diffuses 256 px frames as Stable "
                            "Diffusion latents: pass --vae FOLDER (a diffusers AutoencoderKL), or --size for a pixel "
                            "run (or --no-paper)")
        sources["vae"] = f"not given: pixels at --size {args.size}, not the paper's latents ({paper['vae'][1]})"
    puzzle = puzzle_config(args)
    channels = load_codec(args.vae).channels if args.vae else puzzle.channels     # what the U-Net diffuses
    model = replace(CONFIGS[args.model], in_channels=channels, frames_per_piece=args.frames_per_piece)
    config = Config(puzzle=puzzle, model=model, train=train_config(args), prediction=args.prediction)
    return config, settings_line({k: getattr(args, k) for k in sources}, sources)


def main(args):
    config, ckpt, notes = start_run(args, {"dataset": None, "data_dir": None, **SCRIPT_DEFAULTS}, kind="video",
                                    make_config=make_config)
    kind = jpdvt.kind_of(config)
    codec = load_codec(kind.vae) if kind.vae else None
    train_set = kind.puzzles("train", config.train.seed)
    held_out = kind.puzzles("val", config.train.seed)   # model selection: never the test split
    eval_batch = collate([held_out[i] for i in range(min(config.train.eval_puzzles, len(held_out)))])
    train(config, train_set, eval_batch, ckpt=ckpt, encode=codec.encode_batch if codec else None, notes=notes)


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", choices=VIDEO_DATASETS, help="where videos come from (default digits)")
    p.add_argument("--data-dir", default=None,
                   help="movingmnist: a folder with the MNIST IDX files (clips generated) or mnist_test_seq.npy; "
                        "videos, clevrer, ucf101, qst: a folder of video files or frame folders (train/ and val/ or "
                        "test/ subfolders are used if present, and CLEVRER's video_train/, video_validation/ and "
                        "video_test/; UCF101 as it ships is split by clip group)")
    p.add_argument("--pieces", type=int, help="pieces per puzzle; the first stays first (the anchor; default 5)")
    p.add_argument("--frames-per-piece", type=int, help="consecutive frames in each piece (default 4)")
    p.add_argument("--curriculum", type=int, nargs=2, metavar=("FIRST", "STEPS"),
                   help="train on FIRST pieces (a shorter window: FIRST x --frames-per-piece frames) at first, growing "
                        "stepwise to --pieces over STEPS steps (the same network orders any number of pieces)")
    p.add_argument("--missing", type=int,
                   help="up to K missing pieces while training (0..K at random), exactly K when evaluating (default "
                        "0: the content head then learns nothing; paper: at most 25%% of the pieces)")
    p.add_argument("--size", type=int,
                   help="frame side in pixels (default: digits 32, other datasets 64; paper: 64 MovingMNIST, 256 "
                        "with --vae)")
    p.add_argument("--model", choices=CONFIGS, help="U-Net size (default tiny; paper = the paper's)")
    p.add_argument("--frame-stride", type=int,
                   help="keep every N-th frame (default 1; paper: MovingMNIST 1, CLEVRER 4, UCF101 2, QST 2)")
    p.add_argument("--vae", default=None,
                   help="diffuse in the latent space of the Stable-Diffusion-style autoencoder in this local folder "
                        "(diffusers AutoencoderKL; needs pip install diffusers)")
    add_train_flags(p, DEFAULTS)
    return p


if __name__ == "__main__":
    run_cli(main, get_parser().parse_args())
