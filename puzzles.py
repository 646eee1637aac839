"""
Puzzles: cutting images (and videos) into shuffled pieces, the datasets they come from, and reassembly.

Paper: "Image Jigsaw Puzzles Experiments" and the supplement "Image Experiments". An image is resized to an
R x C grid of cells of (piece + gap) pixels; each piece is a crop inside its cell: random in training, the
centre at test time (ImageNet with erosion: 255 px image, 85 px cells, 64 px pieces; JPwLEG-3: 96 px pieces,
48 px gaps; without gaps the cells are the pieces). Pieces are shuffled with a seeded generator and up to K of
them are missing.

Every sample is a pure function of (seed, split, stream position), so a batch is a pure function of the step:
that is what makes resuming exact and train/test streams disjoint.

Datasets (`--dataset`):
  shapes   built in, procedural, unlimited: smooth colour fields, overlapping shapes, lines and texture
  folder   any folder of images (recursive); `train/` and `val/` (or `test/`) subfolders are used if present
  imagenet the same, with the paper's preprocessing (ImageNet train/val layout, horizontal flips)
  jpwleg3  MET images with the JPwLEG-3 protocol (3x3, 96 px pieces, 48 px gaps)
"""
import hashlib
import os
import re

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


def image_files(data_dir, split, dataset):
    """Files of one split: train/ and val/ (or test/) subfolders if present, else a fixed 95/5 hash split."""
    if not data_dir:
        raise UserError(f"--dataset {dataset} needs --data-dir pointing at a folder of images")
    if not os.path.isdir(data_dir):
        raise UserError(f"--data-dir {data_dir} does not exist or is not a folder; pass a folder of images")
    names = {"train": ["train"], "test": ["val", "test", "validation"]}[split]
    sub = [os.path.join(data_dir, n) for n in names if os.path.isdir(os.path.join(data_dir, n))]
    if sub:
        files = list_images(sub[0])
    else:
        every = list_images(data_dir)
        test = [hashlib.md5(os.path.relpath(f, data_dir).encode()).digest()[0] < 13 for f in every]  # ~5%
        files = [f for f, t in zip(every, test) if t == (split == "test")]
    if not files:
        raise UserError(f"--data-dir {data_dir} holds no {split} images ({', '.join(IMAGE_EXTS)}); "
                          "check the path")
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
        self.files = None if dataset == "shapes" else image_files(data_dir, split, dataset)
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
