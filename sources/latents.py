"""
Encode a dataset's clips through the autoencoder once, and train from the stored latents (train_video.py --latents).

Latent diffusion (sources/vae.py) otherwise encodes every batch's frames on every step, in fp32. The autoencoder is a
2D one, frame by frame, and deterministic here (VaeCodec.encode takes the mean of its latent distribution, never a
sample), so a clip's latent frames are the same whichever puzzle window they fall in: each clip's every
frame_stride-th frame is encoded once, stored (fp16 by default), and a puzzle's window of frames is cut from its
latent frames exactly as from its pixels (puzzles.VideoPuzzles with LatentClips). Only a finite set of clips can be
stored: a video folder (clevrer, ucf101, qst, videos) or Moving MNIST's mnist_test_seq.npy.

    python -m sources.latents --vae /models/sd-vae --dataset ucf101 --data-dir /data/ucf101 --out /data/ucf101-latents
    python train_video.py --dataset ucf101 --data-dir /data/ucf101 --vae /models/sd-vae --latents /data/ucf101-latents

OUT/manifest.json holds what the latents were made from (dataset, size, frame stride, channels, the autoencoder's
fingerprint, each split's files and frame counts), checked against the training run; OUT/SPLIT/NNNNNN.npy holds clip
NNNNNN of the split's sorted files, (frames, latent channels, size/8, size/8). A stopped encoding continues where it
stopped; the manifest is written last.
"""
import argparse
import hashlib
import json
import os
import time

import numpy as np
import torch

from plumbing.cli import UserError, resolve_device, user_errors
from sources.vae import load_codec
from sources.videos import FOLDER_VIDEOS, Clips

FORMAT = 1                                     # of manifest.json
DTYPES = {"float16": np.float16, "float32": np.float32}
# what a store must share with the run that reads it (VideoConfig fields); pieces, frames per piece, missing pieces
# and the curriculum are free: a store holds whole clips
SHARED = ("dataset", "size", "frame_stride", "channels")


def fingerprint(folder):
    """sha256 of the autoencoder folder's files (names and bytes, not in subfolders): the same weights, wherever."""
    h = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            h.update(name.encode() + b"\0")
            with open(path, "rb") as f:
                while chunk := f.read(1 << 24):
                    h.update(chunk)
    return h.hexdigest()


def split_names(clips):
    """The split's clips as the manifest names them: the files' paths inside --data-dir, or a .npy's clip count."""
    if clips.files is not None:
        return [os.path.relpath(f, clips.cfg.data_dir) for f in clips.files]
    return len(clips.videos)


def finite_clips(cfg, split):
    """The split's Clips, refused (one sentence) if its clips are generated afresh and cannot be stored."""
    clips = Clips(cfg, split)
    if clips.files is None and clips.videos is None:
        raise UserError(f"--dataset {cfg.dataset} generates its clips afresh (nothing to store once); stored latents "
                        f"need a video folder ({', '.join(FOLDER_VIDEOS)}) or movingmnist's mnist_test_seq.npy")
    return clips


@torch.no_grad()
def encode_clip(codec, clip, device, dtype):
    """Pixel clip (frames, H, W, C) in [0, 1] -> its latents (frames, channels, H/8, W/8) as `dtype`, through the same
    [-1, 1] tensor the on-the-fly path encodes (puzzles.video_tensor, then VaeCodec.encode)."""
    from puzzles import video_tensor  # the pixels' tensor of the on-the-fly path (sources import no method code)
    frames = video_tensor(clip[None])[0].to(device)                  # (F, C, H, W) in [-1, 1]
    return codec.encode(frames).float().cpu().numpy().astype(dtype)


def encode_store(cfg, codec, out, splits=("train", "val"), device="cpu", dtype="float16"):
    """Encode every clip of `splits` once into `out` (see the module's docstring); returns the manifest. Clips already
    stored are kept (a stopped encoding continues)."""
    device = torch.device(device)
    manifest = {"format": FORMAT, **{k: getattr(cfg, k) for k in SHARED}, "vae": os.path.abspath(cfg.vae),
                "vae_sha256": fingerprint(cfg.vae), "dtype": dtype, "channels_latent": codec.channels, "splits": {}}
    t0, frames_done = time.perf_counter(), 0
    for split in splits:
        clips = finite_clips(cfg, split)
        names = split_names(clips)
        n = names if isinstance(names, int) else len(names)
        os.makedirs(os.path.join(out, split), exist_ok=True)
        frames = []
        for k in range(n):
            path = os.path.join(out, split, f"{k:06d}.npy")
            if os.path.exists(path):                          # stored by an earlier, stopped encoding
                frames.append(len(np.load(path, mmap_mode="r")))
                continue
            try:
                z = encode_clip(codec, clips.load(k), device, DTYPES[dtype])
            except UserError as e:                            # an unreadable video: skipped when training, as now
                print(f"warning: {e}; stored as unreadable")
                frames.append(0)
                continue
            np.save(path + ".tmp.npy", z)
            os.replace(path + ".tmp.npy", path)                # a kill never leaves a broken clip
            frames.append(len(z))
            frames_done += len(z)
            if (k + 1) % 50 == 0 or k + 1 == n:
                rate = frames_done / max(time.perf_counter() - t0, 1e-9)
                print(f"{split}: {k + 1}/{n} clips, {rate:.1f} frames/s")
        manifest["splits"][split] = {"clips": names, "frames": frames}
    with open(os.path.join(out, "manifest.json.tmp"), "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(os.path.join(out, "manifest.json.tmp"), os.path.join(out, "manifest.json"))
    return manifest


def read_manifest(folder, cfg):
    """The store's manifest, checked against the run's VideoConfig `cfg`: the same dataset, size, frame stride,
    channels and autoencoder (by its files' sha256). Each split's files are checked by LatentClips."""
    path = os.path.join(folder, "manifest.json")
    if not os.path.isfile(path):
        raise UserError(f"--latents {folder} holds no manifest.json (no finished encoding); run python -m "
                        f"sources.latents --vae {cfg.vae} --dataset {cfg.dataset} --data-dir {cfg.data_dir} --size "
                        f"{cfg.size} --frame-stride {cfg.frame_stride} --out {folder}")
    with open(path) as f:
        manifest = json.load(f)
    if cfg.vae is None:
        raise UserError("--latents needs --vae, the autoencoder the latents were encoded with (sample.py decodes "
                        "with it)")
    for k in SHARED:
        if manifest[k] != getattr(cfg, k):
            raise UserError(f"--latents {folder} was encoded with {k} {manifest[k]}, this run has {getattr(cfg, k)}; "
                            "encode again with python -m sources.latents, or pass the same setting")
    if manifest["vae_sha256"] != fingerprint(cfg.vae):
        raise UserError(f"--latents {folder} was encoded by the autoencoder in {manifest['vae']}, not by --vae "
                        f"{cfg.vae}; pass that one, or encode again")
    return manifest


class LatentClips(Clips):
    """Clips whose frames are read from a store's latents: clip(i, rng) is the latent clip (frames, channels, h, w)
    of the clip that Clips would read at stream position i (the same epoch order and the same skipped videos), so
    that a puzzle's window of frames is the same window of latent frames."""

    latent = True

    def __init__(self, folder, cfg, split, seed=0):
        super().__init__(cfg, split, seed)
        manifest = read_manifest(folder, cfg)
        if split not in manifest["splits"]:
            raise UserError(f"--latents {folder} holds no {split} split; encode it with python -m sources.latents "
                            f"--splits {' '.join([*manifest['splits'], split])}")
        stored = manifest["splits"][split]
        if self.files is None and self.videos is None or stored["clips"] != split_names(self):
            raise UserError(f"--latents {folder}: its {split} clips are not the {split} files of --data-dir "
                            f"{cfg.data_dir}; encode this folder again with python -m sources.latents")
        self.folder, self.frames = os.path.join(folder, split), stored["frames"]

    def load(self, k):
        """Latents (frames, channels, h, w) of clip k, memory-mapped (a puzzle reads its window only)."""
        if not self.frames[k]:
            raise UserError(f"clip {k} was unreadable when encoded")
        return np.load(os.path.join(self.folder, f"{k:06d}.npy"), mmap_mode="r")

    @staticmethod
    def item(puzzle):
        """A make_video_puzzle dict of latent pieces (N, F, channels, h, w) as the batch item that VideoPuzzles makes
        of pixels and VaeCodec.encode_batch of its frames: content float32 (N, F, channels, h, w), true_pos, missing."""
        return dict(content=torch.from_numpy(np.ascontiguousarray(puzzle["pieces"])).float(),
                    true_pos=torch.from_numpy(puzzle["true_pos"]), missing=torch.from_numpy(puzzle["missing"]))


def latent_sets(folder, cfg, seed):
    """The training and val VideoPuzzles of `cfg` read from the store in `folder` (the splits Clips makes)."""
    from puzzles import VideoPuzzles
    return [VideoPuzzles(cfg, split, seed, clips=LatentClips(folder, cfg, split, seed)) for split in ("train", "val")]


def get_parser():
    from configs.paper import VIDEO  # the paper's frame strides (UCF101 and QST 2, CLEVRER 4)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vae", required=True, help="the autoencoder folder (diffusers AutoencoderKL), as train_video.py's")
    p.add_argument("--dataset", required=True, choices=(*FOLDER_VIDEOS, "movingmnist"),
                   help="a finite set of clips: a video folder, or movingmnist's mnist_test_seq.npy")
    p.add_argument("--data-dir", required=True, help="the data folder (or .npy), as train_video.py's")
    p.add_argument("--size", type=int, default=256, help="frame side in pixels before encoding (default 256: the "
                                                         "paper's, 32 x 32 latents)")
    p.add_argument("--frame-stride", type=int, default=None,
                   help="keep every N-th frame (default: the paper's for the dataset, "
                        + ", ".join(f"{k} {v['frame_stride'][0]}" for k, v in VIDEO.items() if "frame_stride" in v)
                        + "; else 1)")
    p.add_argument("--splits", nargs="+", default=["train", "val"], choices=("train", "val", "test"),
                   help="splits to encode (default train val: what training reads; sample.py encodes test itself)")
    p.add_argument("--dtype", choices=DTYPES, default="float16",
                   help="stored precision (default float16: half the disk; its rounding measured 2e-4 of the "
                        "latents' std, rms, at most 2e-3 at unit scale)")
    p.add_argument("--device", default="auto", help="where the autoencoder runs: auto (cuda, else mps, else cpu), "
                                                    "cpu, cuda, cuda:N or mps")
    p.add_argument("--out", required=True, help="the store's folder (then train_video.py --latents OUT)")
    return p


def main(args):
    from configs.paper import VIDEO
    from puzzles import VideoConfig
    stride = args.frame_stride or VIDEO.get(args.dataset, {}).get("frame_stride", (1,))[0]
    if args.size < 8 or args.size % 8:
        raise UserError(f"--size must be a multiple of 8 (the autoencoder's factor), got {args.size}")
    cfg = VideoConfig(dataset=args.dataset, data_dir=args.data_dir, size=args.size, channels=3, frame_stride=stride,
                      vae=args.vae)
    codec = load_codec(args.vae)
    manifest = encode_store(cfg, codec, args.out, args.splits, resolve_device(args.device), args.dtype)
    counts = {s: sum(1 for f in v["frames"] if f) for s, v in manifest["splits"].items()}
    frames = sum(sum(v["frames"]) for v in manifest["splits"].values())
    per_frame = codec.channels * (args.size // 8) ** 2 * np.dtype(DTYPES[args.dtype]).itemsize
    print(f"stored {', '.join(f'{n} {s}' for s, n in counts.items())} clips, {frames} frames x {per_frame} bytes in "
          f"{args.out}; train with --latents {args.out}")


if __name__ == "__main__":
    with user_errors():
        main(get_parser().parse_args())
