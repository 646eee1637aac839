"""
The clips temporal puzzles are cut from (puzzles.VideoPuzzles): built-in moving digits (sources/synthetic.py), Moving
MNIST generated from the MNIST digits or read from mnist_test_seq.npy (sources/mnist.py), or a folder of videos or
frame folders (sources/files.py), every `frame_stride`-th frame at size x size with `channels` channels. Paper: the
video datasets of Sec. 4.1 (MovingMNIST, CLEVRER, UCF101, QST) and the supplement's "Video Experiments" (temporal
downsampling).

    clips = Clips(VideoConfig(dataset="movingmnist", data_dir="mnist", size=64), "test", seed=0)
    clip = clips.clip(i, np.random.default_rng([0, 1, i]))         # (frames, 64, 64, 1) in [0, 1]
"""
import numpy as np

from plumbing.cli import UserError
from sources.files import (
    ENDLESS,
    VIDEO_EXTS,
    epoch_index,
    fit_channels,
    list_videos,
    note_skip,
    read_video,
    require_backend,
    resize_frame,
    split_files,
)
from sources.mnist import MOVINGMNIST_FILE, is_mnist_dir, load_movingmnist, mnist_digits, moving_mnist
from sources.synthetic import moving_digits

FOLDER_VIDEOS = ("videos", "clevrer", "ucf101", "qst")    # datasets read from a folder of videos (sources/files.py)
MNIST_TEST_CLIPS = 10000                                   # Moving MNIST generated from the t10k digits: test clips
# --dataset of train_video.py: where videos come from
VIDEO_DATASETS = {
    "digits": "built-in moving digits, MovingMNIST-like (no data needed)",
    "movingmnist": f"Moving MNIST (--data-dir): the MNIST IDX files (clips generated on the fly, training digits for "
                   f"training and val, t10k digits for testing) or {MOVINGMNIST_FILE} (8000 train / 1000 val / 1000 "
                   "test clips)",
    "videos": "a folder of video files (mp4, avi, gif, ...) or frame folders (--data-dir)",
    "clevrer": "CLEVRER videos (--data-dir, a video folder; the paper's settings by default, configs/paper.py)",
    "ucf101": "UCF101 videos (--data-dir, a video folder with class subfolders; the paper's settings by default)",
    "qst": "Quick Sky Time videos (--data-dir, a video folder; the paper's settings by default)",
}


class Clips:
    """The clips of a VideoConfig `cfg`'s split: clip(i, rng) of stream position i (training visits a finite set
    once per epoch in a seeded order, each visit a fresh window; val and test: clip i); `files` for a video folder;
    unreadable or too short videos are skipped (and counted in `skipped`)."""

    latent = False                                         # pixel clips (sources.latents.LatentClips: latents)

    def __init__(self, cfg, split, seed=0):
        self.cfg, self.split, self.seed = cfg, split, seed
        self.train = split == "train"
        self.stride = cfg.frame_stride
        self.span = cfg.pieces * cfg.frames_per_piece          # frames of one puzzle, after striding
        self.videos = self.files = self.mnist_dir = None
        if cfg.dataset == "movingmnist" and cfg.data_dir and is_mnist_dir(cfg.data_dir):
            self.mnist_dir = cfg.data_dir
            self.digits = "test" if split == "test" else "train"   # val: its own clips of the training digits
            mnist_digits(cfg.data_dir, self.digits)            # a missing or broken file fails here, in one line
        elif cfg.dataset == "movingmnist":
            data = load_movingmnist(cfg.data_dir)
            val, test = len(data) * 8 // 10, len(data) * 9 // 10   # 10000 videos: 8000 train, 1000 val, 1000 test
            self.videos = {"train": data[:val], "val": data[val:test], "test": data[test:]}[split]
            if not len(self.videos):
                raise UserError(f"--data-dir {cfg.data_dir} holds too few videos for a {split} split; use the full "
                                f"{MOVINGMNIST_FILE}")
            if data.shape[1] < self.span * self.stride:
                raise UserError(f"MovingMNIST videos have {data.shape[1]} frames, fewer than the "
                                f"{self.span * self.stride} of {cfg.pieces} pieces x {cfg.frames_per_piece} frames x "
                                f"--frame-stride {self.stride}; use fewer or shorter pieces")
        elif cfg.dataset in FOLDER_VIDEOS:
            self.files = split_files(cfg.data_dir, split, cfg.dataset, lister=list_videos, what="videos",
                                     exts=VIDEO_EXTS + ("frame folders",))
        self.skipped = set()
        # clips of a finite split (Moving MNIST's t10k digits: MNIST_TEST_CLIPS), else ENDLESS
        self.count = (len(self.videos) if self.videos is not None else MNIST_TEST_CLIPS if self.mnist_dir is not None
                      else len(self.files) if self.files is not None else ENDLESS)

    def __len__(self):
        return self.count

    def clip_index(self, i):
        """Stream position i -> clip of a finite set: training visits every clip once per epoch in a seeded order
        (epoch_index); val and test: clip i."""
        n = len(self.videos) if self.videos is not None else len(self.files)
        return epoch_index(i, n, self.seed) if self.train else i

    def clip(self, i, rng):
        """The clip (frames, size, size, channels) in [0, 1] of stream position i, every frame_stride-th frame."""
        size = self.cfg.size
        if self.cfg.dataset == "digits":
            clip = moving_digits(rng, self.span * self.stride, size)[::self.stride, :, :, None]
        elif self.mnist_dir is not None:
            digits = mnist_digits(self.mnist_dir, self.digits)
            clip = moving_mnist(digits, rng, max(20, self.span * self.stride), size=size)[::self.stride, :, :, None]
        else:
            return self.read(self.clip_index(i))
        return clip if clip.shape[-1] == self.cfg.channels else fit_channels(clip, self.cfg.channels)

    def load(self, k):
        """Clip k of a finite set (a .npy of Moving MNIST or a folder's video k), every frame_stride-th frame at size x
        size with cfg.channels channels, (frames, size, size, channels) in [0, 1]; an unreadable video raises
        UserError. sources.latents.LatentClips reads its stored latents here instead."""
        if self.videos is not None:
            clip = self.videos[k, ::self.stride, :, :, None].astype(np.float32) / 255
            if self.cfg.size != clip.shape[1]:
                clip = np.stack([resize_frame(f, self.cfg.size) for f in clip])
        else:
            clip = read_video(self.files[k], self.stride, self.cfg.size)
        return clip if clip.shape[-1] == self.cfg.channels else fit_channels(clip, self.cfg.channels)

    def read(self, i):
        """Clip i of the finite set; of a folder, video i or the next usable one: unreadable or too short ones are
        skipped and counted."""
        if self.videos is not None:
            return self.load(i)
        n = len(self.files)
        for k in range(n):
            path = self.files[(i + k) % n]
            if path in self.skipped:
                continue
            if not self.latent:
                require_backend(path)                          # a missing decoder is the user's to install
            try:
                clip = self.load((i + k) % n)
            except UserError:
                note_skip(self.skipped, path, "unreadable video", total=n)
                continue
            if len(clip) >= self.span:
                return clip
            note_skip(self.skipped, path, f"too short (under {self.span} frames) video", total=n)
        raise UserError(f"--data-dir: none of the {n} {self.split} videos is readable and at least "
                        f"{self.span * self.stride} frames long ({self.cfg.pieces} pieces x "
                        f"{self.cfg.frames_per_piece} frames x --frame-stride {self.stride}); use fewer or shorter "
                        "pieces or longer videos")
