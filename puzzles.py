"""
Puzzles: cutting images and videos into shuffled pieces, some of them missing, and the two puzzle streams.

Paper: "Image Jigsaw Puzzles Experiments", "Temporal Jigsaw Puzzles Experiments" and the supplement.
- Images: an image is resized to an R x C grid of cells of (piece + gap) pixels; each piece is a crop inside its
  cell: random in training, the centre at test time (ImageNet with erosion: 255 px image, 85 px cells, 64 px
  pieces; JPwLEG-3: 96 px pieces, 48 px gaps; without gaps the cells are the pieces).
- Videos: a clip of P*F frames is cut into P pieces of F consecutive frames; piece 0 stays first (the anchor,
  never missing), the others are shuffled.
Pieces are shuffled with a seeded generator and up to K of them are missing (0..K at random while training,
exactly K when evaluating). Every sample is a pure function of (seed, split, stream position), so a batch is a
pure function of the step: that is what makes resuming exact. Built-in pictures and Moving MNIST clips draw from a
seed of their own per split; files are split by sources/files.py, so that no file is in two splits (Moving MNIST's
val clips are new motions of the training digits).
Where the pixels come from: sources/images.py (the pictures) and sources/videos.py (the clips): built in
(sources/synthetic.py), image and video files (sources/files.py) or Moving MNIST (sources/mnist.py). The
settings of a puzzle stream are ImageConfig and VideoConfig, below; the scripts build them from their flags.

    test = ImagePuzzles(ImageConfig(grid=(3, 3), piece_size=16, missing=1), "test")
    item = test[0]   # content (9, 3, 16, 16) in [-1, 1], true_pos (9,) true position of each piece, missing (9,)
    test = VideoPuzzles(VideoConfig(pieces=5, frames_per_piece=4, size=32, missing=1), "test")
    item = test[0]   # content (5, 4, 1, 32, 32) in [-1, 1], true_pos (5,) with true_pos[0] = 0, missing (5,)
    batch = collate([test[i] for i in range(8)])                   # the same keys, stacked: (8, ...)
"""
from dataclasses import dataclass
from typing import ClassVar, Optional, Tuple

import numpy as np
import torch

from sources.files import ENDLESS, SPLITS
from sources.images import Pictures

# ----------------------------------------------------------------------------
# Settings
# ----------------------------------------------------------------------------

@dataclass
class ImageConfig:
    """Image puzzles (train_image.py): an R x C grid of square pieces, each cut from a cell of piece_size + gap px."""
    dataset: str = "shapes"                  # where images come from (sources.images.DATASETS)
    data_dir: Optional[str] = None           # image folder of folder/imagenet/jpwleg3
    grid: Tuple[int, int] = (3, 3)           # rows, cols
    piece_size: int = 16                     # piece side in pixels
    gap: int = 0                             # erosion: extra pixels per cell around each piece
    missing: int = 0                         # missing pieces: 0..K at random in training, exactly K when scoring
    anchor: bool = False                     # the true code of the first shuffled piece is given (paper's anchoring)
    mix_shapes: float = 0.0                  # folder/imagenet, training: this fraction of puzzles are built-in shapes

    kind: ClassVar[str] = "image"


@dataclass
class VideoConfig:
    """Temporal puzzles (train_video.py): a clip cut into pieces of consecutive frames; the first stays first."""
    dataset: str = "digits"                  # where videos come from (sources.videos.VIDEO_DATASETS)
    data_dir: Optional[str] = None           # movingmnist: MNIST IDX folder or .npy file; videos: a folder
    pieces: int = 5                          # pieces per puzzle, the first one the anchor
    frames_per_piece: int = 4                # consecutive frames in each piece
    size: int = 32                           # frame side in pixels
    channels: int = 1                        # pixel channels of the frames (1 grey, 3 RGB)
    frame_stride: int = 1                    # keep every N-th frame
    missing: int = 0                         # missing pieces: 0..K at random in training, exactly K when scoring
    superres: int = 0                        # temporal super-resolution: the pieces at slots 0, K+1, 2(K+1), ... are
    # given and told (a low-rate video comes in time order), the K between each pair missing; 0: missing at random.
    # DEVIATION: the supplement applies the masked model directly; here a model is fine-tuned on the pattern so that
    # the network is only told combinations it trained on
    vae: Optional[str] = None                # autoencoder folder: diffuse its latents instead of pixels
    curriculum: Optional[Tuple[int, int, int]] = None  # training: (first pieces, steps to all, stream items a step)

    kind: ClassVar[str] = "video"
    anchor: ClassVar[bool] = True            # the first piece in time stays first and its code is given


# ----------------------------------------------------------------------------
# Pieces: cutting, shuffling, missing pieces
# ----------------------------------------------------------------------------

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


def collate(items):
    """A list of puzzle dicts -> one dict of stacked tensors (B, ...)."""
    return {k: torch.stack([it[k] for it in items]) for k in items[0]}


# ----------------------------------------------------------------------------
# Image puzzles
# ----------------------------------------------------------------------------

class ImagePuzzles(torch.utils.data.Dataset):
    """
    Stream of image puzzles of an ImageConfig `cfg`: item i is stream position i of the split, everything random
    about it from np.random.default_rng([seed, split, i]); its picture comes from sources/images.py (built-in shapes
    or a folder's photos, split by files). Returns dict(content (N, 3, P, P) in [-1, 1], true_pos (N,) each shuffled
    piece's position, missing (N,) bool). Training: 0..missing pieces missing, pieces anywhere in their cells;
    val/test: exactly `missing`, centred.
    """

    def __init__(self, cfg, split, seed=0):
        self.cfg, self.split, self.seed = cfg, split, seed
        self.train = split == "train"
        self.pictures = Pictures(cfg, split, seed)
        self.files = self.pictures.files                        # None for built-in shapes

    def __len__(self):
        """Training streams are endless (every visit of a file is a fresh crop); a test split is one per file."""
        return ENDLESS if self.files is None or self.train else len(self.files)

    def source(self, i, rng):
        """Position i's (H, W, 3) float image at the grid's size (sources/images.py)."""
        cell = self.cfg.piece_size + self.cfg.gap
        return self.pictures.picture(i, rng, self.cfg.grid[0] * cell, self.cfg.grid[1] * cell)

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

def curriculum_pieces(curriculum, pieces, step):
    """Pieces at 0-based training step `step` of a curriculum (first, steps, ...): `first`, growing stepwise to all.
    Not in the paper: without it, puzzles of 10 pieces stayed at chance here (docs/choices.md)."""
    return min(pieces, curriculum[0] + (pieces - curriculum[0]) * step // curriculum[1])


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
    if start is None:
        start = int(rng.integers(0, len(frames) - span + 1))
    window = np.asarray(frames[start:start + span])
    pieces = window.reshape(p, f, *window.shape[1:])           # (p f) ... -> p f ...
    rest, rest_missing = shuffle_pieces(p - 1, rng, missing)   # shuffle pieces 1..P-1 behind the anchor
    true_pos = np.concatenate([[0], 1 + rest]).astype(np.int64)
    return dict(pieces=pieces[true_pos], true_pos=true_pos, missing=np.concatenate([[False], rest_missing]))


def superres_given(slots, k):
    """Temporal super-resolution with K drawn pieces between given ones (VideoConfig.superres): True at the time slots
    (an int array or tensor) of the given pieces, 0, K + 1, 2 (K + 1), ...; the slots between are missing."""
    return slots % (k + 1) == 0


def video_tensor(pieces):
    """Pieces (N, F, H, W, C) in [0, 1] -> a float tensor (N, F, C, H, W) in [-1, 1], the model's layout."""
    pieces = torch.from_numpy(np.ascontiguousarray(pieces)).float()
    return pieces.permute(0, 1, 4, 2, 3) * 2 - 1                 # n f h w c -> n f c h w


def video_item(puzzle):
    """A make_video_puzzle dict as tensors: content (N, F, C, H, W) in [-1, 1], true_pos (N,), missing (N,) bool."""
    return dict(content=video_tensor(puzzle["pieces"]), true_pos=torch.from_numpy(puzzle["true_pos"]),
                missing=torch.from_numpy(puzzle["missing"]))


class VideoPuzzles(torch.utils.data.Dataset):
    """
    Stream of temporal puzzles of a VideoConfig `cfg`. Item `i` is stream position i of the split; everything random
    about it (window, shuffle, missing pieces) comes from np.random.default_rng([seed, split, i]); its clip comes
    from sources/videos.py (built-in digits, Moving MNIST, a folder of videos; every `frame_stride`-th frame, size x
    size, `channels` channels). A clip gives a window of P*F frames: random in training, centred at test time.
    Returns dict(content (N, F, C, H, W) in [-1, 1], true_pos (N,) with true_pos[0] = 0, missing (N,) bool, never
    the anchor). Training puzzles have 0..missing pieces missing (at most N - 2 of a curriculum's shorter N pieces,
    so that one piece beside the anchor is left to place) and, with cfg.curriculum = (first, steps, per_step: the
    global batch), start as shorter windows of `first` pieces (slots 0..first-1), growing to all. With cfg.superres
    = K, every puzzle, in training and test alike, misses the pieces between slots 0, K+1, 2(K+1), ...
    """

    def __init__(self, cfg, split, seed=0, clips=None):
        from sources.videos import Clips  # video sources: read only by video puzzles
        self.cfg, self.split, self.seed = cfg, split, seed
        self.train = split == "train"
        self.curriculum = cfg.curriculum if self.train else None
        self.span = cfg.pieces * cfg.frames_per_piece          # frames of one puzzle, after striding
        # where the clips come from: pixels (Clips), or sources.latents.LatentClips (latents encoded once)
        self.clips = clips if clips is not None else Clips(cfg, split, seed)
        self.files = self.clips.files                          # a video folder's files (else None)

    def __len__(self):
        return ENDLESS if self.train else self.clips.count

    def pieces_at(self, i):
        """Pieces of the puzzle at stream position i (training step i // per_step): all, or fewer early on."""
        c = self.curriculum
        return self.cfg.pieces if c is None else curriculum_pieces(c, self.cfg.pieces, i // c[2])

    def __getitem__(self, i):
        rng = np.random.default_rng([self.seed, SPLITS[self.split], int(i)])
        clip = self.clips.clip(int(i), rng)
        pieces = self.pieces_at(int(i))
        k = int(rng.integers(0, self.cfg.missing + 1)) if self.train else self.cfg.missing
        k = min(k, pieces - 2)      # a curriculum's short puzzle keeps a piece to place beside the anchor (otherwise
        # a no-op: check_puzzle bounds --missing)
        start = None if self.train else (len(clip) - self.span) // 2
        puzzle = make_video_puzzle(clip, pieces, self.cfg.frames_per_piece, rng=rng, missing=k, start=start)
        if self.cfg.superres:       # super-resolution: the slots between every (K + 1)-th piece's are missing
            puzzle["missing"] = ~superres_given(puzzle["true_pos"], self.cfg.superres)
        return self.clips.item(puzzle) if self.clips.latent else video_item(puzzle)


def puzzle_set(cfg, split, seed=0):
    """The ImagePuzzles or VideoPuzzles of a puzzle config (ImageConfig or VideoConfig)."""
    return (ImagePuzzles if cfg.kind == "image" else VideoPuzzles)(cfg, split, seed)
