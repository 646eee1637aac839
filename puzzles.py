"""
Puzzles: cutting images (and videos) into shuffled pieces, the datasets they come from, and reassembly.

Paper: "Image Jigsaw Puzzles Experiments" and the supplement "Image Experiments". An image is resized to an
R x C grid of cells of (piece + gap) pixels; each piece is a crop inside its cell: random in training, the
centre at test time (ImageNet with erosion: 255 px image, 85 px cells, 64 px pieces; JPwLEG-3: 96 px pieces,
48 px gaps; without gaps the cells are the pieces). Pieces are shuffled with a seeded generator and up to K of
them are missing.

Every sample is a pure function of (seed, split, stream position), so a batch is a pure function of the step:
that is what makes resuming exact and train/test streams disjoint.

Image datasets (`train_image.py --dataset`):
  shapes   built in, procedural, unlimited: smooth colour fields, overlapping shapes, lines and texture
  folder   any folder of images (recursive); `train/` and `val/` (or `test/`) subfolders are used if present
  imagenet the same, with the paper's preprocessing (ImageNet train/val layout, horizontal flips)
  jpwleg3  MET images with the JPwLEG-3 protocol (3x3, 96 px pieces, 48 px gaps)

Videos (paper: "Solving temporal jigsaw puzzles" and the supplement "Video Experiments"): a clip of P*F frames
(every `frame_stride`-th frame of the source) is cut into P pieces of F consecutive frames; piece 0 stays first
(the anchor, never missing), the others are shuffled, and up to K of them are missing (paper: at most 25%).
Video datasets (`train_video.py --dataset`):
  digits      built in, MovingMNIST-like: one or two drawn digits bouncing around a 64 (or 32) px frame
  movingmnist mnist_test_seq.npy (20 frames x 10000 videos x 64 x 64): the first 9000 train, the last 1000 test
  videos      a folder of video files (mp4, avi, gif, ...) or of frame folders, read with imageio

    test = VideoPuzzles("digits", "test", pieces=5, frames_per_piece=4, size=32, missing=1)
    item = test[0]          # content (5, 4, 1, 32, 32) in [-1, 1], order (5,) with order[0] = 0, missing (5,)
    clip = moving_digits(np.random.default_rng(0), num_frames=20, size=32)          # (20, 32, 32) in [0, 1]
    puzzle = make_video_puzzle(clip, 5, 4, np.random.default_rng(0))               # pieces (5, 4, 32, 32), ...
    write_gif("clip.gif", [[clip, unshuffle_video(puzzle["pieces"], puzzle["order"])]])  # rows of clips
"""
import functools
import hashlib
import os
import re
from importlib.util import find_spec

import imageio.v3 as iio
import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFilter

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")
SPLITS = {"train": 0, "test": 1}


class UserError(ValueError):
    """A user-facing problem with puzzle settings or data; the message is one sentence saying what to do."""


# ----------------------------------------------------------------------------
# Grid geometry
# ----------------------------------------------------------------------------

def parse_grid(text):
    """'3' -> (3, 3); '2x4' -> (2, 4) rows x cols. Each side must be >= 1 and the grid >= 2 pieces."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:[xX*]\s*(\d+))?\s*", str(text))
    if not m:
        raise UserError(f"--grid must look like 3 or 2x4 (rows x cols), got {text!r}")
    rows = int(m.group(1))
    cols = int(m.group(2)) if m.group(2) else rows
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
    A random order of n pieces and which of them are missing. order[i] = true position of shuffled piece i.
    With anchor, shuffled piece 0 is the one whose position the model is told, so it is never missing.
    """
    order = rng.permutation(n)
    miss = np.zeros(n, dtype=bool)
    if missing:
        first = 1 if anchor else 0
        miss[first + rng.choice(n - first, size=missing, replace=False)] = True
    return order, miss


# ----------------------------------------------------------------------------
# Built-in procedural images: "shapes"
# ----------------------------------------------------------------------------

def _colour(rng):
    return tuple(int(v) for v in rng.integers(0, 256, 3))


def shapes_image(rng, height, width):
    """
    A natural-looking procedural image (H, W, 3) float32 in [0, 1]: a smooth two-colour gradient field, several
    overlapping filled shapes, a few lines and a patch of stripes, lightly blurred and with mild noise. Shapes
    cross piece borders, so solving a puzzle needs to match content across edges.
    """
    s = 2  # draw at 2x and downsample: anti-aliased edges
    h, w = height * s, width * s
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    ang = rng.uniform(0, 2 * np.pi)
    ramp = (np.cos(ang) * xx / w + np.sin(ang) * yy / h)
    ramp = (ramp - ramp.min()) / max(np.ptp(ramp), 1e-6)
    c0, c1 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    field = c0 + ramp[..., None] * (c1 - c0)
    bump = np.sin(xx / w * rng.uniform(1, 4) * np.pi + rng.uniform(0, 6)) * np.sin(
        yy / h * rng.uniform(1, 4) * np.pi + rng.uniform(0, 6))
    field = field + 40 * bump[..., None] * rng.uniform(-1, 1, 3)
    img = Image.fromarray(np.clip(field, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(rng.integers(3, 7)):
        kind = rng.integers(0, 3)
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        rx, ry = rng.uniform(0.1, 0.35) * w, rng.uniform(0.1, 0.35) * h
        box = [cx - rx, cy - ry, cx + rx, cy + ry]
        if kind == 0:
            draw.ellipse(box, fill=_colour(rng))
        elif kind == 1:
            draw.rectangle(box, fill=_colour(rng))
        else:
            k = rng.integers(3, 6)
            a = np.sort(rng.uniform(0, 2 * np.pi, k))
            draw.polygon([(cx + rx * np.cos(t), cy + ry * np.sin(t)) for t in a], fill=_colour(rng))
    for _ in range(rng.integers(1, 4)):
        pts = rng.uniform(0, 1, 4) * [w, h, w, h]
        draw.line(list(pts), fill=_colour(rng), width=int(rng.integers(1, 4) * s))
    arr = np.asarray(img, dtype=np.float32)
    # a patch of stripes (texture) in a random box
    y0, x0 = rng.integers(0, h // 2), rng.integers(0, w // 2)
    y1, x1 = y0 + rng.integers(h // 4, h // 2), x0 + rng.integers(w // 4, w // 2)
    period = rng.uniform(3, 8) * s
    stripes = (np.sin((xx[y0:y1, x0:x1] * np.cos(ang) + yy[y0:y1, x0:x1] * np.sin(ang)) / period * 2 * np.pi) > 0)
    arr[y0:y1, x0:x1] = np.where(stripes[..., None], arr[y0:y1, x0:x1], 255 - arr[y0:y1, x0:x1])
    img = Image.fromarray(arr.astype(np.uint8)).filter(ImageFilter.GaussianBlur(0.6 * s))
    img = img.resize((width, height), Image.BILINEAR)
    out = np.asarray(img, dtype=np.float32) / 255.0
    out = out + rng.normal(0, 0.015, out.shape).astype(np.float32)
    return np.clip(out, 0, 1)


# ----------------------------------------------------------------------------
# Image sources
# ----------------------------------------------------------------------------

def fit_image(img, height, width, rng=None, hflip=False):
    """Resize a PIL image to cover (height, width), crop (random if rng, else centre), optional random flip."""
    img = img.convert("RGB")
    scale = max(height / img.height, width / img.width)
    nh, nw = max(height, round(img.height * scale)), max(width, round(img.width * scale))
    img = img.resize((nw, nh), Image.BICUBIC)
    if rng is not None:
        y, x = int(rng.integers(0, nh - height + 1)), int(rng.integers(0, nw - width + 1))
    else:
        y, x = (nh - height) // 2, (nw - width) // 2
    img = img.crop((x, y, x + width, y + height))
    if hflip and rng is not None and rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    return np.asarray(img, dtype=np.float32) / 255.0


def list_images(root):
    """All image files under root (recursive), sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames.sort()
        out += [os.path.join(dirpath, f) for f in sorted(filenames) if f.lower().endswith(IMAGE_EXTS)]
    return out


def split_files(data_dir, split, dataset, lister, what, exts):
    """
    Files of one split, found by lister(folder): train/ and val/ (or test/) subfolders if present, else a fixed
    95/5 hash split of everything under data_dir. `what` ("images", "videos") and `exts` are for the messages.
    """
    if not data_dir:
        raise UserError(f"--dataset {dataset} needs --data-dir pointing at a folder of {what}")
    if not os.path.isdir(data_dir):
        raise UserError(f"--data-dir {data_dir} does not exist or is not a folder; pass a folder of {what}")
    names = {"train": ["train"], "test": ["val", "test", "validation"]}[split]
    sub = [os.path.join(data_dir, n) for n in names if os.path.isdir(os.path.join(data_dir, n))]
    if sub:
        files = lister(sub[0])
    else:
        every = lister(data_dir)
        test = [hashlib.md5(os.path.relpath(f, data_dir).encode()).digest()[0] < 13 for f in every]  # ~5%
        files = [f for f, t in zip(every, test) if t == (split == "test")]
    if not files:
        raise UserError(f"--data-dir {data_dir} holds no {split} {what} ({', '.join(exts)}); check the path")
    return files


# ----------------------------------------------------------------------------
# Datasets of image puzzles
# ----------------------------------------------------------------------------

DATASETS = {
    "shapes": "built-in procedural images (no data needed)",
    "folder": "any folder of images (--data-dir)",
    "imagenet": "ImageNet train/val folders (--data-dir), paper preprocessing with flips",
    "jpwleg3": "MET images (--data-dir), JPwLEG-3 protocol: 96 px pieces, 48 px gaps",
}


class ImagePuzzles(torch.utils.data.Dataset):
    """
    Stream of image puzzles. Item `i` is stream position i of the split; everything random about it comes from
    np.random.default_rng([seed, split, i]). Returns dict(content (N, 3, P, P) in [-1, 1], order (N,),
    missing (N,) bool, image (H, W, 3) uint8 of the cut grid area, for pictures).
    """

    def __init__(self, dataset, split, grid, piece, gap=0, missing=0, anchor=False, seed=0, data_dir=None,
                 vary_missing=None):
        self.dataset, self.split, self.grid, self.piece, self.gap = dataset, split, grid, piece, gap
        self.missing, self.anchor, self.seed = missing, anchor, seed
        self.train = split == "train"
        self.vary_missing = self.train if vary_missing is None else vary_missing  # train: 0..K missing
        self.files = None if dataset == "shapes" else split_files(data_dir, split, dataset, list_images,
                                                                             "images", IMAGE_EXTS)
        self.skipped = set()

    def __len__(self):
        return len(self.files) if self.files is not None else 2 ** 62

    def source(self, i, rng):
        """The (H, W, 3) float image of stream position i, sized to the grid's cells."""
        h, w = self.grid[0] * (self.piece + self.gap), self.grid[1] * (self.piece + self.gap)
        if self.files is None:
            return shapes_image(rng, h, w)
        n = len(self.files)
        for k in range(n):  # a corrupt file is skipped (and counted); the next one takes its place
            path = self.files[(i + k) % n]
            if path in self.skipped:
                continue
            try:
                with Image.open(path) as im:
                    return fit_image(im, h, w, rng if self.train else None, hflip=self.dataset == "imagenet"
                                     and self.train)
            except (OSError, ValueError, Image.DecompressionBombError):
                self.skipped.add(path)
        raise UserError(f"--data-dir: none of the {n} {self.split} images could be read")

    def __getitem__(self, i):
        rng = np.random.default_rng([self.seed, SPLITS[self.split], int(i)])
        img = self.source(int(i), rng)
        pieces = cut_image(img, self.grid, self.piece, self.gap, rng if self.train else None)
        k = int(rng.integers(0, self.missing + 1)) if self.vary_missing else self.missing
        order, miss = shuffle_pieces(len(pieces), rng, k, self.anchor)
        content = torch.from_numpy(pieces[order]).permute(0, 3, 1, 2) * 2 - 1   # (N, 3, P, P)
        return dict(content=content.float(), order=torch.from_numpy(order), missing=torch.from_numpy(miss),
                    image=torch.from_numpy((img * 255).round().astype(np.uint8)))


class StepBatches(torch.utils.data.Sampler):
    """
    Batch sampler: the batch of step s on rank r is stream positions (s*world + r)*B ... +B (wrapping around
    epochs of a finite dataset through a seeded permutation). Starting at `start_step` resumes exactly.
    """

    def __init__(self, length, batch_size, seed, start_step=0, max_steps=None, rank=0, world=1):
        self.length, self.b, self.seed = length, batch_size, seed
        self.start, self.max_steps, self.rank, self.world = start_step, max_steps, rank, world
        self._perm = (None, None)

    def index(self, pos):
        if self.length >= 2 ** 62:
            return pos
        epoch, j = divmod(pos, self.length)
        if self._perm[0] != epoch:
            self._perm = (epoch, np.random.default_rng([self.seed, 7, epoch]).permutation(self.length))
        return int(self._perm[1][j])

    def __iter__(self):
        s = self.start
        while self.max_steps is None or s < self.max_steps:
            first = (s * self.world + self.rank) * self.b
            yield [self.index(p) for p in range(first, first + self.b)]
            s += 1

    def __len__(self):
        return (self.max_steps or 2 ** 31) - self.start


# ----------------------------------------------------------------------------
# Video puzzles
# ----------------------------------------------------------------------------

VIDEO_EXTS = (".mp4", ".avi", ".gif", ".mov", ".webm", ".mkv")
FFMPEG_EXTS = (".mp4", ".avi", ".mov", ".webm", ".mkv")  # containers imageio can only decode with ffmpeg/pyav
FRAME_EXTS = tuple(e for e in IMAGE_EXTS if e != ".gif")  # images of a frame folder (a .gif is a video)
MOVINGMNIST_FILE = "mnist_test_seq.npy"


# ----------------------------------------------------------------------------
# Video puzzles: built-in moving digits ("digits")
# ----------------------------------------------------------------------------

def _arc(cx, cy, rx, ry, a0, a1, n=24):
    """Points along an ellipse arc; angles in degrees, 0 = right, 90 = down (image coordinates)."""
    a = np.radians(np.linspace(a0, a1, n))
    return list(zip(cx + rx * np.cos(a), cy + ry * np.sin(a)))


# Each digit is a list of strokes (polylines) in a unit box, drawn with round ends.
DIGIT_STROKES = {
    0: [_arc(0.5, 0.5, 0.22, 0.34, 0, 360, 48)],
    1: [[(0.36, 0.28), (0.53, 0.15), (0.53, 0.85)]],
    2: [_arc(0.5, 0.33, 0.21, 0.18, 190, 385) + [(0.28, 0.85), (0.74, 0.85)]],
    3: [_arc(0.49, 0.32, 0.19, 0.16, 205, 450) + _arc(0.49, 0.66, 0.22, 0.19, 270, 515)],
    4: [[(0.63, 0.85), (0.63, 0.15), (0.25, 0.63), (0.78, 0.63)]],
    5: [[(0.72, 0.16), (0.35, 0.16), (0.32, 0.48)] + _arc(0.5, 0.64, 0.21, 0.2, 220, 520)],
    6: [[(0.66, 0.15), (0.33, 0.56)], _arc(0.5, 0.65, 0.2, 0.19, 0, 360, 40)],
    7: [[(0.26, 0.16), (0.74, 0.16), (0.43, 0.85)]],
    8: [_arc(0.5, 0.32, 0.17, 0.16, 0, 360, 40), _arc(0.5, 0.67, 0.21, 0.18, 0, 360, 40)],
    9: [_arc(0.5, 0.35, 0.2, 0.19, 0, 360, 40), [(0.7, 0.37), (0.64, 0.85)]],
}


def draw_digit_glyphs(size=28, thickness=0.11):
    """Digits 0-9 drawn with anti-aliased PIL strokes: uint8 (10, size, size), white on black."""
    s = 4 * size                                               # draw 4x larger, then downsample (anti-aliasing)
    width = max(1, int(round(thickness * s)))
    out = np.zeros((10, size, size), np.uint8)
    for d, strokes in DIGIT_STROKES.items():
        img = Image.new("L", (s, s), 0)
        draw = ImageDraw.Draw(img)
        for stroke in strokes:
            pts = [(x * s, y * s) for x, y in stroke]
            draw.line(pts, fill=255, width=width, joint="curve")
            for x, y in (pts[0], pts[-1]):                     # round caps
                draw.ellipse([x - width / 2, y - width / 2, x + width / 2, y + width / 2], fill=255)
        img = img.filter(ImageFilter.GaussianBlur(s / 56)).resize((size, size), Image.Resampling.BOX)
        out[d] = np.asarray(img)
    return out


@functools.lru_cache(maxsize=None)
def _glyph_bank(glyph_size):
    """Glyphs at three stroke thicknesses, float32 (3, 10, g, g) in [0, 1]; cached per size."""
    return np.stack([draw_digit_glyphs(glyph_size, th) for th in (0.08, 0.11, 0.14)]).astype(np.float32) / 255


def _random_digit(rng, glyph_size):
    """One glyph with a random digit, stroke thickness, scale (0.8-1.1) and small rotation: float32 (g', g')."""
    glyph = _glyph_bank(glyph_size)[rng.integers(3), rng.integers(10)]
    g = max(4, int(round(glyph_size * rng.uniform(0.8, 1.1))))
    img = Image.fromarray(glyph).rotate(rng.uniform(-12, 12), resample=Image.Resampling.BILINEAR)
    return np.clip(np.asarray(img.resize((g, g), Image.Resampling.BILINEAR)), 0, 1)


def moving_digits(rng, num_frames=20, size=64, num_digits=2, glyph_size=28):
    """
    A MovingMNIST-like clip, float32 (num_frames, size, size) in [0, 1]: `num_digits` digits with random start and
    constant velocity (2-4 px/frame at 64 px), bouncing off the walls, composited with max. Glyphs (and speeds)
    are scaled by size/64, so size=32 gives a half-size version of the same motion.
    """
    scale = size / 64
    video = np.zeros((num_frames, size, size), np.float32)
    for _ in range(num_digits):
        glyph = _random_digit(rng, max(4, int(round(glyph_size * scale))))
        g = glyph.shape[0]
        lim = size - g                                         # top-left corner lives in [0, lim]^2
        p = rng.uniform(0, lim, 2)
        angle = rng.uniform(0, 2 * np.pi)
        v = rng.uniform(2, 4) * scale * np.array([np.cos(angle), np.sin(angle)])
        for t in range(num_frames):
            y, x = np.round(p).astype(int)
            np.maximum(video[t, y:y + g, x:x + g], glyph, out=video[t, y:y + g, x:x + g])
            p = p + v
            for k in range(2):                                 # reflect off the walls
                if p[k] < 0:
                    p[k], v[k] = -p[k], -v[k]
                elif p[k] > lim:
                    p[k], v[k] = 2 * lim - p[k], -v[k]
    return video


# ----------------------------------------------------------------------------
# Video puzzles: files ("movingmnist", "videos", your own clip)
# ----------------------------------------------------------------------------

def load_movingmnist(path):
    """
    The standard MovingMNIST file mnist_test_seq.npy (or a folder holding it), stored (20 frames, 10000 videos,
    64, 64) uint8, as a memory-mapped uint8 view (videos, frames, 64, 64). Any number of videos is accepted.
    """
    if not path:
        raise UserError(f"--dataset movingmnist needs --data-dir pointing at {MOVINGMNIST_FILE} or its folder")
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, MOVINGMNIST_FILE)
    if not os.path.isfile(path):
        raise UserError(f"--data-dir {path} not found; download {MOVINGMNIST_FILE} and pass the file or its folder")
    if not path.endswith(".npy"):
        raise UserError(f"--data-dir {path} must be a .npy file like {MOVINGMNIST_FILE}")
    try:
        data = np.load(path, mmap_mode="r")
    except (OSError, ValueError):
        raise UserError(f"--data-dir {path} could not be read as a .npy array; download {MOVINGMNIST_FILE} "
                        "again") from None
    if data.ndim != 4 or data.shape[0] != 20 or data.shape[2:] != (64, 64) or data.dtype != np.uint8:
        raise UserError(f"--data-dir {path} holds a {data.dtype} array of shape {data.shape}; MovingMNIST needs "
                        "uint8 (20, 10000, 64, 64) = (frames, videos, height, width)")
    return data.transpose(1, 0, 2, 3)                          # t n h w -> n t h w


def _natural_key(name):
    """Sort key putting frame_2 before frame_10."""
    return [int(s) if s.isdigit() else s.lower() for s in re.split(r"(\d+)", name)]


def _to_float_frame(frame):
    """An image array (H, W), (H, W, 1|3|4) of any integer/float dtype -> float32 (H, W, C) in [0, 1], C = 1 or 3."""
    frame = np.asarray(frame)
    if frame.ndim == 2:
        frame = frame[..., None]
    if frame.shape[-1] == 4:                                   # drop alpha
        frame = frame[..., :3]
    if np.issubdtype(frame.dtype, np.integer):
        return frame.astype(np.float32) / np.iinfo(frame.dtype).max
    return np.clip(frame.astype(np.float32), 0, 1)


def _resize(frame, size):
    """float32 (H, W, C) -> (size, size, C) with PIL bicubic (anti-aliased when shrinking)."""
    chans = [Image.fromarray(frame[..., c]).resize((size, size), Image.Resampling.BICUBIC)
             for c in range(frame.shape[-1])]
    return np.clip(np.stack([np.asarray(c) for c in chans], -1), 0, 1)


def fit_channels(frames, channels):
    """(T, H, W, C) -> (T, H, W, channels): grey -> RGB by repeating, RGB -> grey by averaging."""
    if frames.shape[-1] == channels:
        return frames
    if channels == 1:
        return frames.mean(axis=-1, keepdims=True)
    return np.repeat(frames, channels, axis=-1)


def require_backend(path):
    """A UserError naming the package to install when decoding `path` needs an ffmpeg backend that is missing."""
    if path.lower().endswith(FFMPEG_EXTS) and find_spec("imageio_ffmpeg") is None and find_spec("av") is None:
        raise UserError(f"reading {os.path.basename(path)} needs an ffmpeg backend for imageio: "
                        "pip install imageio-ffmpeg")


def read_video(path, frame_stride=1, size=None, max_frames=None):
    """
    Frames of a video file (mp4/avi/gif/...) or of a folder of frame images (sorted by name), as float32
    (T, H, W, C) in [0, 1] with C = 1 (grayscale images) or 3. Keeps every `frame_stride`-th frame (the paper's
    temporal downsampling), at most `max_frames` of them, resized to size x size when `size` is given.
    """
    path = os.fspath(path)
    if frame_stride < 1:
        raise UserError(f"--frame-stride must be >= 1, got {frame_stride}")
    frames = []
    if os.path.isdir(path):
        names = sorted((f for f in os.listdir(path) if f.lower().endswith(FRAME_EXTS)), key=_natural_key)
        try:
            for name in names[::frame_stride][:max_frames]:
                with Image.open(os.path.join(path, name)) as img:
                    img = img.convert("L" if img.mode in ("1", "L", "LA", "I", "I;16") else "RGB")
                    frames.append(_to_float_frame(np.asarray(img)))
        except (OSError, ValueError, Image.DecompressionBombError):
            raise UserError(f"a frame image in {path} could not be read; check the folder's images") from None
    elif os.path.isfile(path):
        require_backend(path)
        plugin = "pillow" if path.lower().endswith(".gif") else None
        try:
            for i, frame in enumerate(iio.imiter(path, plugin=plugin)):
                if max_frames is not None and len(frames) >= max_frames:
                    break
                if i % frame_stride == 0:
                    frames.append(_to_float_frame(frame))
        except Exception:                                      # decoders raise many kinds of errors on bad files
            raise UserError(f"video {path} could not be read; pass an intact video file or a folder of frames") \
                from None
    else:
        raise UserError(f"video {path} not found; pass a video file or a folder of frame images")
    if not frames:
        raise UserError(f"{path} holds no frames; pass a video file or a folder of frame images")
    if size is not None:
        frames = [_resize(f, size) for f in frames]
    if len({f.shape for f in frames}) > 1:
        raise UserError(f"frames of {path} differ in size or channels; pass --size to resize them")
    return np.stack(frames)                                    # (T, H, W, C)


def list_videos(root):
    """Sorted paths of every video file and every frame folder (a folder directly holding images) under root."""
    found = []
    for folder, dirs, files in os.walk(os.fspath(root), followlinks=True):
        dirs.sort()
        found += [os.path.join(folder, f) for f in files if f.lower().endswith(VIDEO_EXTS)]
        if any(f.lower().endswith(FRAME_EXTS) for f in files):
            found.append(folder)
    return sorted(found)


# ----------------------------------------------------------------------------
# Video puzzles: cutting, reassembly and the dataset
# ----------------------------------------------------------------------------

def make_video_puzzle(frames, num_pieces, frames_per_piece, rng, missing=0, start=None):
    """
    Cut a temporal puzzle from frames (T, ...) with T >= P*F: a window of P*F consecutive frames (at `start`, or a
    random one), split into P pieces of F frames; piece 0 (the anchor) stays first, the others are shuffled, and
    `missing` of the non-anchor pieces are marked missing. Returns dict(
        pieces  (P, F, ...) in shuffled order,
        order   (P,) int64, the true temporal index of each shuffled piece (order[0] == 0),
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
    order = np.concatenate([[0], 1 + rest]).astype(np.int64)
    return dict(pieces=pieces[order], order=order, missing=np.concatenate([[False], rest_missing]))


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
    """A make_video_puzzle dict as tensors: content (N, F, C, H, W) in [-1, 1], order (N,), missing (N,) bool."""
    return dict(content=video_tensor(puzzle["pieces"]), order=torch.from_numpy(puzzle["order"]),
                missing=torch.from_numpy(puzzle["missing"]))


VIDEO_DATASETS = {
    "digits": "built-in moving digits, MovingMNIST-like (no data needed)",
    "movingmnist": f"{MOVINGMNIST_FILE} (--data-dir): 9000 train / 1000 test videos of 20 frames, 64 px",
    "videos": "a folder of video files (mp4, avi, gif, ...) or frame folders (--data-dir)",
}


class VideoPuzzles(torch.utils.data.Dataset):
    """
    Stream of temporal puzzles. Item `i` is stream position i of the split; everything random about it comes from
    np.random.default_rng([seed, split, i]). A clip (every `frame_stride`-th frame, size x size, `channels`
    channels) gives a window of P*F frames: random in training, centred at test time. Returns dict(
    content (N, F, C, H, W) in [-1, 1], order (N,) with order[0] = 0, missing (N,) bool, never the anchor).
    Unreadable or too-short videos of a folder are skipped (and counted in `skipped`).
    """

    def __init__(self, dataset, split, pieces, frames_per_piece, size, channels=1, missing=0, frame_stride=1,
                 seed=0, data_dir=None, vary_missing=None):
        self.dataset, self.split, self.pieces, self.frames_per_piece = dataset, split, pieces, frames_per_piece
        self.size, self.channels, self.missing, self.stride, self.seed = size, channels, missing, frame_stride, seed
        self.span = pieces * frames_per_piece                  # frames of one puzzle, after striding
        self.train = split == "train"
        self.vary_missing = self.train if vary_missing is None else vary_missing  # train: 0..K missing
        self.videos = self.files = None
        if dataset == "movingmnist":
            data = load_movingmnist(data_dir)
            cut = len(data) * 9 // 10                          # 10000 videos: 9000 train, 1000 test
            self.videos = data[:cut] if self.train else data[cut:]
            if not len(self.videos):
                raise UserError(f"--data-dir {data_dir} holds too few videos for a {split} split; use the full "
                                f"{MOVINGMNIST_FILE}")
            if data.shape[1] < self.span * frame_stride:
                raise UserError(f"MovingMNIST videos have {data.shape[1]} frames, fewer than the "
                                f"{self.span * frame_stride} of {pieces} pieces x {frames_per_piece} frames x "
                                f"--frame-stride {frame_stride}; use fewer or shorter pieces")
        elif dataset == "videos":
            self.files = split_files(data_dir, split, dataset, list_videos, "videos", VIDEO_EXTS + ("frame folders",))
        self.skipped = set()

    def __len__(self):
        if self.videos is not None:
            return len(self.videos)
        return len(self.files) if self.files is not None else 2 ** 62

    def source(self, i, rng):
        """The clip (T, size, size, channels) in [0, 1] of stream position i, every frame_stride-th frame, T >= P*F."""
        if self.dataset == "digits":
            clip = moving_digits(rng, self.span * self.stride, self.size)[::self.stride, :, :, None]
        elif self.videos is not None:
            clip = self.videos[i, ::self.stride, :, :, None].astype(np.float32) / 255
            if self.size != clip.shape[1]:
                clip = np.stack([_resize(f, self.size) for f in clip])
        else:
            clip = self.read(i)
        return fit_channels(clip, self.channels)

    def read(self, i):
        """Video i of the folder, or the next usable one: unreadable or too short ones are skipped and counted."""
        n = len(self.files)
        for k in range(n):
            path = self.files[(i + k) % n]
            if path in self.skipped:
                continue
            require_backend(path)                              # a missing decoder is the user's to install
            try:
                clip = read_video(path, self.stride, self.size)
            except UserError:
                self.skipped.add(path)
                continue
            if len(clip) >= self.span:
                return clip
            self.skipped.add(path)
        raise UserError(f"--data-dir: none of the {n} {self.split} videos is readable and at least "
                        f"{self.span * self.stride} frames long ({self.pieces} pieces x {self.frames_per_piece} "
                        f"frames x --frame-stride {self.stride}); use fewer or shorter pieces or longer videos")

    def __getitem__(self, i):
        rng = np.random.default_rng([self.seed, SPLITS[self.split], int(i)])
        clip = self.source(int(i), rng)
        k = int(rng.integers(0, self.missing + 1)) if self.vary_missing else self.missing
        start = None if self.train else (len(clip) - self.span) // 2
        return video_item(make_video_puzzle(clip, self.pieces, self.frames_per_piece, rng, k, start))


# ----------------------------------------------------------------------------
# Video puzzles: pictures
# ----------------------------------------------------------------------------

def _to_rgb_uint8(frames):
    """(T, H, W) or (T, H, W, 1|3) float in [0, 1] -> uint8 (T, H, W, 3)."""
    frames = np.asarray(frames, np.float32)
    if frames.ndim == 3:
        frames = frames[..., None]
    return (np.clip(fit_channels(frames, 3), 0, 1) * 255 + 0.5).astype(np.uint8)


def write_gif(path, rows, labels=None, fps=4, marks=None, min_size=96):
    """
    Animated GIF of a grid of clips: rows (e.g. one per puzzle) of clips side by side (e.g. shuffled | solved |
    ground truth). Each clip is a (T, H, W) or (T, H, W, 1|3) float array in [0, 1], all of the same T, H, W;
    labels: a title per column; marks: nested like rows, per clip a bool (T,) (or None) of frames to outline in
    red (generated frames). Small frames are upscaled (nearest) to at least `min_size` pixels.
    """
    clips = [[_to_rgb_uint8(c) for c in row] for row in rows]
    shapes = {c.shape for row in clips for c in row}
    if len(shapes) != 1:
        raise ValueError(f"all clips must have the same (T, H, W), got {sorted(s[:3] for s in shapes)}")
    t, h, w, _ = shapes.pop()
    k = max(1, -(-min_size // min(h, w)))                      # ceil(min_size / min(h, w))
    h, w, border, gap, header = h * k, w * k, 3, 6, (14 if labels else 0)
    cols = max(len(row) for row in clips)
    red = np.array([255, 0, 0], np.uint8)

    canvas = np.full((t, header + len(clips) * (h + gap) + gap, cols * (w + gap) + gap, 3), 32, np.uint8)
    for r, row in enumerate(clips):
        y0 = header + gap + r * (h + gap)
        for c, clip in enumerate(row):
            x0 = gap + c * (w + gap)
            canvas[:, y0:y0 + h, x0:x0 + w] = clip.repeat(k, axis=1).repeat(k, axis=2)  # t h w c -> t (h k) (w k) c
            if marks is not None and marks[r][c] is not None:  # red frame around the marked time steps
                m = np.asarray(marks[r][c], bool)
                canvas[m, y0 - border:y0, x0 - border:x0 + w + border] = red
                canvas[m, y0 + h:y0 + h + border, x0 - border:x0 + w + border] = red
                canvas[m, y0:y0 + h, x0 - border:x0] = red
                canvas[m, y0:y0 + h, x0 + w:x0 + w + border] = red
    if labels:                                                 # titles in a strip above the columns
        strip = Image.fromarray(canvas[0, :header])
        draw = ImageDraw.Draw(strip)
        for c, label in enumerate(labels):
            draw.text((gap + c * (w + gap), 2), str(label), fill=(230, 230, 230))
        canvas[:, :header] = np.asarray(strip)
    iio.imwrite(path, canvas, extension=".gif", duration=int(round(1000 / fps)), loop=0)
