"""
Puzzles: cutting images and videos into shuffled pieces, missing pieces, reassembly, and the two datasets.

Paper: "Image Jigsaw Puzzles Experiments", "Temporal Jigsaw Puzzles Experiments" and the supplement.
- Images: an image is resized to an R x C grid of cells of (piece + gap) pixels; each piece is a crop inside its
  cell: random in training, the centre at test time (ImageNet with erosion: 255 px image, 85 px cells, 64 px
  pieces; JPwLEG-3: 96 px pieces, 48 px gaps; without gaps the cells are the pieces).
- Videos: a clip of P*F frames is cut into P pieces of F consecutive frames; piece 0 stays first (the anchor,
  never missing), the others are shuffled.
Pieces are shuffled with a seeded generator and up to K of them are missing (0..K at random while training,
exactly K when evaluating). Every sample is a pure function of (seed, split, stream position), so a batch is a
pure function of the step: that is what makes resuming exact and the train, val and test streams disjoint.
Where the pixels come from: synthetic.py (built in), sources.py (image and video files), mnist.py (Moving MNIST).

    test = ImagePuzzles(ImageConfig(grid=(3, 3), piece_size=16, missing=1), "test")         # config.py
    item = test[0]   # content (9, 3, 16, 16) in [-1, 1], true_pos (9,) true position of each piece, missing (9,)
    test = VideoPuzzles(VideoConfig(pieces=5, frames_per_piece=4, size=32, missing=1), "test")
    item = test[0]   # content (5, 4, 1, 32, 32) in [-1, 1], true_pos (5,) with true_pos[0] = 0, missing (5,)
    batch = collate([test[i] for i in range(8)])                   # the same keys, stacked: (8, ...)
"""
import functools
import math
import re

import numpy as np
import torch
from PIL import Image

from cli import UserError
from mnist import MOVINGMNIST_FILE, is_mnist_dir, load_movingmnist, mnist_digits, moving_mnist
from sources import (
    IMAGE_EXTS,
    VIDEO_EXTS,
    _resize,
    fit_channels,
    fit_image,
    list_images,
    list_videos,
    load_photo,
    note_skip,
    random_crop,
    read_video,
    require_backend,
    split_files,
)
from synthetic import moving_digits, shapes_image

SPLITS = {"train": 0, "test": 1, "val": 2}              # each split its own seeded stream
ENDLESS = 2 ** 62                                          # length of an unlimited stream (built-in data)
MNIST_TEST_CLIPS = 10000                                   # Moving MNIST generated from the t10k digits: test clips


# ----------------------------------------------------------------------------
# Pieces: cutting, shuffling, missing pieces, reassembly
# ----------------------------------------------------------------------------

def parse_grid(text):
    """'3' -> (3, 3); '2x4' -> (2, 4) rows x cols. Each side must be >= 1 and the grid >= 2 pieces."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:[xX*]\s*(\d+))?\s*", str(text))
    if not m:
        raise UserError(f"--grid must look like 3 or 2x4 (rows x cols), got {text!r}")
    rows, cols = int(m.group(1)), int(m.group(2) or m.group(1))
    if rows < 1 or cols < 1 or rows * cols < 2 or (m.group(2) is None and rows < 2):
        raise UserError(f"--grid needs at least 2 pieces (e.g. 3 or 2x4), got {text!r}")
    if rows * cols > 400:
        raise UserError(f"--grid {text} has {rows * cols} pieces; at most 400 are supported")
    return rows, cols


def cut_image(img, grid, piece, gap=0, rng=None):
    """
    Cut img (H, W, C) with H = rows*(piece+gap), W = cols*(piece+gap) into (rows*cols, piece, piece, C) pieces
    in raster order. Each piece is a crop of its cell: random offsets if rng is given, else the centre.
    """
    rows, cols = grid
    cell = piece + gap
    assert img.shape[0] == rows * cell and img.shape[1] == cols * cell, (img.shape, grid, cell)
    out = []
    for r in range(rows):
        for c in range(cols):
            dy, dx = (rng.integers(0, gap + 1, 2) if rng is not None else (gap // 2, gap // 2))
            y, x = r * cell + dy, c * cell + dx
            out.append(img[y:y + piece, x:x + piece])
    return np.stack(out)


def assemble(pieces, positions, grid, border=0, fill=0.5):
    """
    Place pieces (N, P, P, C) at grid positions (N,) (raster index; -1 = leave out) and return the image
    (rows*(P+border) - border, ...). Cells that get no piece are filled with `fill`.
    """
    rows, cols = grid
    n, p = pieces.shape[0], pieces.shape[1]
    s = p + border
    img = np.full((rows * s - border, cols * s - border, pieces.shape[-1]), fill, dtype=np.float32)
    for i in range(n):
        if positions[i] < 0:
            continue
        r, c = divmod(int(positions[i]), cols)
        img[r * s:r * s + p, c * s:c * s + p] = pieces[i]
    return img


def shuffle_pieces(n, rng, missing=0, anchor=False):
    """
    A random order of n pieces and which of them are missing: true_pos[i] = true position of shuffled piece i.
    With anchor, shuffled piece 0 is the one whose position the model is told, so it is never missing.
    """
    true_pos = rng.permutation(n)
    miss = np.zeros(n, dtype=bool)
    if missing:
        first = 1 if anchor else 0
        miss[first + rng.choice(n - first, size=missing, replace=False)] = True
    return true_pos, miss


@functools.lru_cache(maxsize=4)
def _epoch_order(length, seed, epoch):
    return np.random.default_rng([seed, 7, epoch]).permutation(length)


def epoch_index(pos, length, seed):
    """Stream position -> item of a finite set: every item once per epoch, each epoch in its own seeded order."""
    epoch, j = divmod(pos, length)
    return int(_epoch_order(length, seed, epoch)[j])


def collate(items):
    """A list of puzzle dicts -> one dict of stacked tensors (B, ...)."""
    return {k: torch.stack([it[k] for it in items]) for k in items[0]}


def to_device(batch, device):
    """A batch dict with every tensor on `device`."""
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


# ----------------------------------------------------------------------------
# Image puzzles
# ----------------------------------------------------------------------------

DATASETS = {
    "shapes": "built-in procedural images (no data needed)",
    "folder": "any folder of images (--data-dir)",
    "imagenet": "ImageNet train/val folders (--data-dir), paper preprocessing with flips",
    "jpwleg3": "MET images (--data-dir), JPwLEG-3 protocol: 96 px pieces, 48 px gaps",
}


class ImagePuzzles(torch.utils.data.Dataset):
    """
    Stream of image puzzles of a config.ImageConfig `cfg`: item i is stream position i of the split (sources.
    split_files), everything random about it from np.random.default_rng([seed, split, i]) (`paired_picture` aside).
    Returns dict(content (N, 3, P, P) in [-1, 1], true_pos (N,) each shuffled piece's position, missing (N,) bool).
    Training: 0..missing pieces missing, pieces anywhere in their cells, fresh views of photos (`crop_scale`), a
    `mix_shapes` share of built-in shapes, `paired_pictures`; val/test: exactly `missing`, centred, whole photos.
    """

    def __init__(self, cfg, split, seed=0):
        self.cfg, self.split, self.seed = cfg, split, seed
        self.train = split == "train"
        self.mix_shapes = cfg.mix_shapes if self.train else 0.0
        self.crop_scale = cfg.crop_scale if self.train and cfg.dataset == "folder" else None
        self.files = None if cfg.dataset == "shapes" else split_files(
            cfg.data_dir, split, cfg.dataset, lister=list_images, what="images", exts=IMAGE_EXTS)
        self.skipped = set()
        self.last_picture = (None, None)                           # (pair k, picture): paired_picture's

    def __len__(self):
        """Training streams are endless (every visit of a file is a fresh crop); a test split is one per file."""
        return ENDLESS if self.files is None or self.train else len(self.files)

    def file_index(self, i):
        """Training: stream position i -> a file, every file once per epoch in a seeded order; test: file i."""
        return epoch_index(i, len(self.files), self.seed) if self.train else i

    def source(self, i, rng):
        """Position i's (H, W, 3) float image at the grid's size: built-in shapes or a photo (training: a new view)."""
        cell = self.cfg.piece_size + self.cfg.gap
        h, w = self.cfg.grid[0] * cell, self.cfg.grid[1] * cell
        if self.files is None and self.train and self.cfg.paired_pictures:
            return self.paired_picture(i, h, w)
        if self.files is None or (self.mix_shapes and rng.random() < self.mix_shapes):
            return shapes_image(rng, h, w)
        return self.photo(i, rng, h, w)

    def paired_picture(self, i, h, w):
        """Built-in training picture with `paired_pictures`: positions 2k and 2k+1 share one, the second mirrored
        (half the drawing: bench/notes.md, "Issue 29, second session"). Seeded [seed, split, k, 1]: the trailing 1
        keeps it apart from position k's own [seed, split, k] (numpy pads a shorter seed with zeros)."""
        k, (have, img) = i // 2, self.last_picture
        if have != k:
            img = shapes_image(np.random.default_rng([self.seed, SPLITS[self.split], k, 1]), h, w)
            img.setflags(write=False)                              # shared by the pair: never edited in place
            self.last_picture = (k, img)
        return np.ascontiguousarray(img[:, ::-1]) if i % 2 else img

    def photo(self, i, rng, h, w):
        """Photo i sized to (h, w), or the next usable one: unreadable or too small files are skipped and counted."""
        n, first = len(self.files), self.file_index(i)
        for k in range(n):
            path = self.files[(first + k) % n]
            if path in self.skipped:
                continue
            try:
                if self.crop_scale:
                    photo = load_photo(path, math.ceil(max(h, w) / self.crop_scale[0]))
                    if min(photo.size) >= max(h, w):
                        return random_crop(photo, h, w, rng=rng, scale=self.crop_scale)
                    note_skip(self.skipped, path, f"too small (under {max(h, w)} px a side) image", total=n)
                    continue
                with Image.open(path) as im:
                    return fit_image(im, h, w, rng=rng if self.train else None, hflip=self.cfg.dataset == "imagenet"
                                     and self.train)
            except (OSError, ValueError, Image.DecompressionBombError):
                note_skip(self.skipped, path, "unreadable image", total=n)
        raise UserError(f"--data-dir: none of the {n} {self.split} images could be read" +
                        (f" and is at least {max(h, w)} px on its shorter side; use a smaller --piece-size or "
                         "larger photos" if self.crop_scale else ""))

    def __getitem__(self, i):
        cfg = self.cfg
        rng = np.random.default_rng([self.seed, SPLITS[self.split], int(i)])
        img = self.source(int(i), rng)
        pieces = cut_image(img, cfg.grid, cfg.piece_size, gap=cfg.gap, rng=rng if self.train else None)
        k = int(rng.integers(0, cfg.missing + 1)) if self.train else cfg.missing
        true_pos, miss = shuffle_pieces(len(pieces), rng, k, anchor=cfg.anchor)
        content = torch.from_numpy(pieces[true_pos]).permute(0, 3, 1, 2) * 2 - 1   # (N, 3, P, P)
        return dict(content=content.float(), true_pos=torch.from_numpy(true_pos), missing=torch.from_numpy(miss))


# ----------------------------------------------------------------------------
# Video puzzles
# ----------------------------------------------------------------------------

def make_video_puzzle(frames, num_pieces, frames_per_piece, rng, missing=0, start=None):
    """
    Cut a temporal puzzle from frames (L, ...) with L >= P*F: a window of P*F consecutive frames (at `start`, or a
    random one), split into P pieces of F frames; piece 0 (the anchor) stays first, the others are shuffled, and
    `missing` of the non-anchor pieces are marked missing. Returns dict(
        pieces  (P, F, ...) in shuffled order,
        true_pos (P,) int64, the true temporal index of each shuffled piece (true_pos[0] == 0),
        missing (P,) bool, never True for the anchor).
    """
    p, f = num_pieces, frames_per_piece
    span = p * f
    if len(frames) < span:
        raise ValueError(f"a puzzle of {p} pieces x {f} frames needs {span} frames, the clip has {len(frames)}")
    if not 0 <= missing < p:
        raise ValueError(f"missing must be in [0, {p - 1}] (the anchor is never missing), got {missing}")
    if start is None:
        start = int(rng.integers(0, len(frames) - span + 1))
    window = np.asarray(frames[start:start + span])
    pieces = window.reshape(p, f, *window.shape[1:])           # (p f) ... -> p f ...
    rest, rest_missing = shuffle_pieces(p - 1, rng, missing)   # shuffle pieces 1..P-1 behind the anchor
    true_pos = np.concatenate([[0], 1 + rest]).astype(np.int64)
    return dict(pieces=pieces[true_pos], true_pos=true_pos, missing=np.concatenate([[False], rest_missing]))


def unshuffle_video(pieces, positions):
    """Put shuffled pieces (P, F, ...) back in time order: piece i goes to slot positions[i]. Returns (P*F, ...)."""
    positions = np.asarray(positions)
    p = len(pieces)
    if sorted(positions.tolist()) != list(range(p)):
        raise ValueError(f"positions must be a permutation of 0..{p - 1}, got {positions.tolist()}")
    out = np.empty_like(pieces)
    out[positions] = pieces
    return out.reshape(-1, *pieces.shape[2:])                  # p f ... -> (p f) ...


def video_tensor(pieces):
    """Pieces (N, F, H, W, C) in [0, 1] -> a float tensor (N, F, C, H, W) in [-1, 1], the model's layout."""
    pieces = torch.from_numpy(np.ascontiguousarray(pieces)).float()
    return pieces.permute(0, 1, 4, 2, 3) * 2 - 1                 # n f h w c -> n f c h w


def video_item(puzzle):
    """A make_video_puzzle dict as tensors: content (N, F, C, H, W) in [-1, 1], true_pos (N,), missing (N,) bool."""
    return dict(content=video_tensor(puzzle["pieces"]), true_pos=torch.from_numpy(puzzle["true_pos"]),
                missing=torch.from_numpy(puzzle["missing"]))


VIDEO_DATASETS = {
    "digits": "built-in moving digits, MovingMNIST-like (no data needed)",
    "movingmnist": f"Moving MNIST (--data-dir): the MNIST IDX files (clips generated on the fly, training digits for "
                   f"training and val, t10k digits for testing) or {MOVINGMNIST_FILE} (8000 train / 1000 val / 1000 "
                   "test clips)",
    "videos": "a folder of video files (mp4, avi, gif, ...) or frame folders (--data-dir)",
    "clevrer": "CLEVRER videos (--data-dir, a video folder; the paper's settings by default, paper.py)",
    "ucf101": "UCF101 videos (--data-dir, a video folder with class subfolders; the paper's settings by default)",
    "qst": "Quick Sky Time videos (--data-dir, a video folder; the paper's settings by default)",
}
FOLDER_VIDEOS = ("videos", "clevrer", "ucf101", "qst")    # datasets read from a folder of videos (sources.py)
FOLDER_DATASETS = ("folder", "imagenet", "jpwleg3", *FOLDER_VIDEOS)   # split by files (sources.split_files)


class VideoPuzzles(torch.utils.data.Dataset):
    """
    Stream of temporal puzzles of a config.VideoConfig `cfg`. Item `i` is stream position i of the split; everything
    random about it (window, shuffle, missing pieces) comes from np.random.default_rng([seed, split, i]). Training
    streams are endless: a finite set of clips (a folder, mnist_test_seq.npy) is visited once per epoch in a seeded
    order (`clip_index`), each visit a fresh puzzle of its clip; val and test hold one puzzle per clip. A clip
    (every `frame_stride`-th frame, size x size, `channels` channels) gives a window of P*F frames: random in
    training, centred at test time.
    Returns dict(content (N, F, C, H, W) in [-1, 1], true_pos (N,) with true_pos[0] = 0, missing (N,) bool, never
    the anchor). Unreadable or too-short videos of a folder are skipped (and counted in `skipped`).
    Training puzzles have 0..missing pieces missing and, with cfg.curriculum = (first, steps, per_step), start with
    `first` pieces, growing linearly to all over `steps` training steps of `per_step` stream positions.
    """

    def __init__(self, cfg, split, seed=0):
        self.cfg, self.split, self.seed = cfg, split, seed
        self.train = split == "train"
        self.curriculum = cfg.curriculum if self.train else None
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

    def __len__(self):
        if self.train:
            return ENDLESS
        if self.videos is not None:
            return len(self.videos)
        if self.mnist_dir is not None:
            return MNIST_TEST_CLIPS
        return len(self.files) if self.files is not None else ENDLESS

    def clip_index(self, i):
        """Stream position i -> clip of a finite set: training visits every clip once per epoch in a seeded order
        (epoch_index); val and test: clip i."""
        n = len(self.videos) if self.videos is not None else len(self.files)
        return epoch_index(i, n, self.seed) if self.train else i

    def source(self, i, rng):
        """The clip (frames, size, size, channels) in [0, 1] of stream position i, every frame_stride-th frame."""
        size = self.cfg.size
        if self.cfg.dataset == "digits":
            clip = moving_digits(rng, self.span * self.stride, size)[::self.stride, :, :, None]
        elif self.mnist_dir is not None:
            digits = mnist_digits(self.mnist_dir, self.digits)
            clip = moving_mnist(digits, rng, max(20, self.span * self.stride), size=size)[::self.stride, :, :, None]
        elif self.videos is not None:
            clip = self.videos[self.clip_index(i), ::self.stride, :, :, None].astype(np.float32) / 255
            if size != clip.shape[1]:
                clip = np.stack([_resize(f, size) for f in clip])
        else:
            clip = self.read(self.clip_index(i))
        return fit_channels(clip, self.cfg.channels)

    def read(self, i):
        """Video i of the folder, or the next usable one: unreadable or too short ones are skipped and counted."""
        n = len(self.files)
        for k in range(n):
            path = self.files[(i + k) % n]
            if path in self.skipped:
                continue
            require_backend(path)                              # a missing decoder is the user's to install
            try:
                clip = read_video(path, self.stride, self.cfg.size)
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

    def pieces_at(self, i):
        """Pieces of the puzzle at stream position i (training step i // per_step): all, or fewer early on in a
        curriculum."""
        if self.curriculum is None:
            return self.cfg.pieces
        first, steps, per_step = self.curriculum
        return min(self.cfg.pieces, first + (self.cfg.pieces - first) * (i // per_step) // steps)

    def __getitem__(self, i):
        rng = np.random.default_rng([self.seed, SPLITS[self.split], int(i)])
        clip = self.source(int(i), rng)
        pieces = self.pieces_at(int(i))
        k = min(int(rng.integers(0, self.cfg.missing + 1)) if self.train else self.cfg.missing, pieces - 2)
        start = None if self.train else (len(clip) - self.span) // 2
        return video_item(make_video_puzzle(clip, pieces, self.cfg.frames_per_piece, rng=rng, missing=k, start=start))
