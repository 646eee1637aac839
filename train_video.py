"""
Train the JPDVT video model: a pseudo-3D U-Net that denoises the 1D positional codes of shuffled video pieces
(and the frames of missing ones), conditioned on the pieces' frames.

Paper: "Solving temporal jigsaw puzzles" (Sec. 3.2), "Temporal Jigsaw Puzzles Experiments" and the supplement "Video
Experiments": the first piece is the anchor; in the experiments with missing pieces up to 25% of them are missing
(--missing K, which --paper does not set: 0..K at random while training), loss weights 0.8 missing frames / 0.2
positional codes, batch 32, lr 1e-4, linear noise schedule, T = 1000, 250k steps; MovingMNIST is diffused in pixels,
larger videos in the latent space of the Stable Diffusion autoencoder (256x256x3 frames -> 32x32x4 latents, `--vae`).
The settings start at the tiny CPU recipe (RECIPE and the dataclasses' defaults, at the dataset's usual frame size),
the paper's table replaces them where it applies (configs/paper.py; on by default for clevrer, ucf101 and qst, with
--paper for movingmnist), and the flags given replace both (make_config). The log's first line prints the settings.

    python train_video.py                            # tiny U-Net, built-in digits, 5 pieces x 4 frames, 32 px
    python train_video.py --dataset movingmnist --data-dir data/mnist_test_seq.npy --pieces 10 --frames-per-piece 2 \
        --paper                                      # the paper's Moving MNIST 10 x 2 setting
    python train_video.py --dataset ucf101 --data-dir /data/ucf101 --pieces 8 --frames-per-piece 4 --vae /models/sd-vae
    torchrun --standalone --nproc_per_node=8 train_video.py --dataset ucf101 --data-dir ... --vae ...

Writes OUT/ckpt.pt and OUT/log.txt (the loop: train.py); --resume OUT/ckpt.pt continues exactly.
Score test puzzles with sample.py --ckpt OUT/ckpt.pt; order your own pieces or raise a video's frame rate with
python -m solving.own --ckpt OUT/ckpt.pt.
"""
import argparse
from dataclasses import fields, replace

import torch

from config import Config, RunConfig, TrainConfig
from plumbing.cli import UserError, check_puzzle, user_errors
from puzzles import VideoConfig, VideoPuzzles, curriculum_pieces
from sources.vae import VAE_FACTOR, load_codec
from sources.videos import FOLDER_VIDEOS, VIDEO_DATASETS
from train import add_train_flags, check_known, train
from unet3d import CONFIGS, UNet3D, UNetConfig

PAPER_DATASETS = ("clevrer", "ucf101", "qst")          # the paper's settings by default (--no-paper: the tiny recipe)
# the settings of a run: every key of the paper's table must be a field of one of them
SETTINGS = (VideoConfig, UNetConfig, TrainConfig, Config)
# frame side when --size is left out: built-in digits 32, other datasets 64 (the shipped Moving MNIST models use
# --size 32). The paper's settings override it: Moving MNIST 64, clevrer, ucf101 and qst 256 px frames, diffused as
# 32 x 32 latents with --vae (configs/paper.py)
SIZES = {"digits": 32, "movingmnist": 64, "videos": 64, "clevrer": 64, "ucf101": 64, "qst": 64}
# the tiny CPU video recipe: where it differs from TrainConfig's (the image recipe)
RECIPE = {"batch_size": 16, "lr": 1e-3, "max_steps": 300, "ckpt_every": 100, "eval_every": 100, "eval_puzzles": 32,
          "weight_code": 0.2, "weight_content": 0.8}


def make_config(args):
    """The run's Config: the tiny CPU recipe (RECIPE, the dataclasses' defaults, the tiny model, the dataset's usual
    frame size), then the paper's table where it applies, then the flags given."""
    dataset = args.dataset or "digits"
    settings = {"dataset": dataset, "model": "tiny", "size": SIZES[dataset], **RECIPE}
    paper = {}
    if args.paper or (args.paper is None and dataset in PAPER_DATASETS):
        from configs.paper import VIDEO  # the paper's table: read only where it applies
        if dataset not in VIDEO:
            raise UserError(f"--paper: the paper has no experiment on --dataset {dataset}; use one of "
                            f"{', '.join(VIDEO)} (or drop --paper)")
        check_known(VIDEO[dataset], SETTINGS, f"configs/paper.py's VIDEO[{dataset!r}]")
        paper = {k: value for k, (value, why) in VIDEO[dataset].items()}
        if paper.pop("vae", None) and args.vae is None and args.size is None:  # the paper's latents need your VAE
            raise UserError(f"--dataset {dataset} with the paper's settings diffuses 256 px frames as Stable "
                            "Diffusion latents: pass --vae FOLDER (a diffusers AutoencoderKL), or --size for a pixel "
                            "run (or --no-paper)")
    settings |= paper | {k: v for k, v in vars(args).items() if v is not None}
    settings["channels"] = 3 if settings.get("vae") or dataset in FOLDER_VIDEOS else 1
    cfg = CONFIGS[settings["model"]]
    factor = cfg.patch_size * 2 ** (len(cfg.channels) - 1) * (VAE_FACTOR if settings.get("vae") else 1)
    if settings["size"] < 8 or settings["size"] % factor:
        raise UserError(f"--size must be at least 8 and a multiple of {factor} for --model {settings['model']}"
                        f"{' with --vae' if settings.get('vae') else ''}, got {settings['size']}")
    if settings.get("curriculum"):
        settings["curriculum"] = check_curriculum(settings)
    puzzle = VideoConfig(**{f.name: settings[f.name] for f in fields(VideoConfig) if f.name in settings})
    check_puzzle(puzzle)
    channels = load_codec(puzzle.vae).channels if puzzle.vae else puzzle.channels     # what the U-Net diffuses
    model = replace(cfg, in_channels=channels, frames_per_piece=puzzle.frames_per_piece)
    train_config = TrainConfig(**{f.name: settings[f.name] for f in fields(TrainConfig) if f.name in settings})
    return Config(puzzle=puzzle, model=model, train=train_config, prediction=settings.get("prediction", "x0"))


def check_curriculum(settings):
    """--curriculum FIRST STEPS as the puzzle stores it, (first, steps, global batch), checked."""
    (first, steps), pieces = settings["curriculum"], settings.get("pieces", VideoConfig.pieces)
    if not (2 <= first <= pieces and steps >= 1):
        raise UserError(f"--curriculum FIRST STEPS needs 2 <= FIRST <= --pieces ({pieces}) and STEPS >= 1, "
                        f"got {first} {steps}")
    curriculum = (first, steps, settings["batch_size"])
    if (last := curriculum_pieces(curriculum, pieces, settings["max_steps"] - 1)) < pieces:
        print(f"note: --curriculum {first} {steps} reaches all {pieces} pieces at step {steps}; this run stops at "
              f"--max-steps {settings['max_steps']} with {last} (scored on all): raise it, or --resume with a larger "
              "one")
    return curriculum


def main(args):
    latents, args.latents = args.latents, None   # a data location, not a setting: also given with --resume
    if args.resume or args.init:                 # a run that starts from a checkpoint
        from training.resume import init_weights, resume
    if args.resume:
        config, start = resume(args, kind="video")
    else:
        config = make_config(args)
        start = init_weights(args.init, config) if args.init else None
    run = RunConfig(out=args.out or "out/run", device=args.device, workers=args.workers, compile=args.compile,
                    log_every=args.log_every)
    codec = load_codec(config.puzzle.vae) if config.puzzle.vae else None
    seed = config.train.seed
    if latents:                                  # clips encoded once (python -m sources.latents): nothing to encode
        from sources.latents import latent_sets
        (train_set, held_out), codec = latent_sets(latents, config.puzzle, seed), None
        print(f"reading the latents stored in {latents} (train and val clips encoded once)")
    else:
        train_set = VideoPuzzles(config.puzzle, "train", seed)
        held_out = VideoPuzzles(config.puzzle, "val", seed)     # model selection: never the test split
    torch.manual_seed(config.train.seed)           # the same initial weights on every rank and every rerun
    model = UNet3D(config.model)
    train(config, model, train_set, held_out, run, start=start, encode=codec.encode_batch if codec else None)


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
    p.add_argument("--superres", type=int,
                   help="train temporal super-resolution (the supplement's downstream task): the pieces at slots 0, "
                        "K+1, 2(K+1), ... given and their codes told (a low-rate video comes in time order), the K "
                        "between each pair missing (default 0: --missing at random)")
    p.add_argument("--size", type=int,
                   help="frame side in pixels (default: digits 32, other datasets 64; paper: 64 MovingMNIST, 256 "
                        "with --vae)")
    p.add_argument("--model", choices=CONFIGS, help="U-Net size (default tiny; paper = the paper's)")
    p.add_argument("--frame-stride", type=int,
                   help="keep every N-th frame (default 1; paper: MovingMNIST 1, CLEVRER 4, UCF101 2, QST 2)")
    p.add_argument("--vae", default=None,
                   help="diffuse in the latent space of the Stable-Diffusion-style autoencoder in this local folder "
                        "(diffusers AutoencoderKL; needs pip install diffusers)")
    p.add_argument("--latents", default=None,
                   help="train from the latents that python -m sources.latents stored in this folder (each clip "
                        "encoded once) instead of encoding every batch; with the same --vae, --dataset, --data-dir, "
                        "--size and --frame-stride")
    add_train_flags(p, TrainConfig(**RECIPE))
    return p


if __name__ == "__main__":
    with user_errors():
        main(get_parser().parse_args())
