"""
Where real pixels come from: image files, video files and frame folders, and their train/test splits.

Paper: Sec. 4.1 "Datasets" (the splits) and the supplement's "Image Experiments" (resize, random crop in training,
centre crop at test time) and "Video Experiments" (temporal downsampling). sources/images.py and sources/videos.py
read through it; `python train_image.py --dataset folder --data-dir DIR` is the way in for your own photos.

- Images (train_image.py --dataset folder/imagenet/jpwleg3): every image file under a folder; `fit_image` resizes
  to cover the puzzle's area and crops it (random in training, the centre at test time: the paper's protocol).
  A small photo collection (`folder`) is trained on fresh views instead: `random_crop` zooms into a random part of
  a photo (kept decoded in memory by `load_photo`) and flips it, so 200 photos give endless distinct puzzles.
- Videos (train_video.py --dataset videos, sample.py --video --superres): video files (mp4, avi, gif, ...) or folders of
  frame images, decoded with imageio, every `frame_stride`-th frame kept (the paper's temporal downsampling).
- Splits (`split_files`): train, val (training's held-out check, model selection) and test (scored once), which
  never share a file: test/ (else val/) is the test split; val/ is the val split when test/ exists too, else a
  fixed ~10% of train/ chosen by a hash of the file name (imagenet: 2/256, HELD_OUT); without a test folder a fixed
  ~5% of train/ (or of a flat folder) is the test split. UCF101's clips are split by group (`band`): groups 1-7 are
  its test split, as in its official split 1.

    files = split_files("photos", "train", "folder", list_images, "images", IMAGE_EXTS)
    img = fit_image(Image.open(files[0]), 48, 48)                           # (48, 48, 3) in [0, 1]
    view = random_crop(load_photo(files[0], 137), 48, 48, rng)              # a fresh zoomed/flipped training view
    clip = read_video("clip.mp4", frame_stride=2, size=64)                  # (L, 64, 64, C) in [0, 1]: L frames
"""
import functools
import hashlib
import math
import os
import re
import sys
from importlib.util import find_spec

import imageio.v3 as iio
import numpy as np
from PIL import Image

from plumbing.cli import UserError

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")
VIDEO_EXTS = (".mp4", ".avi", ".gif", ".mov", ".webm", ".mkv")
FFMPEG_EXTS = (".mp4", ".avi", ".mov", ".webm", ".mkv")  # containers imageio can only decode with ffmpeg/pyav
FRAME_EXTS = tuple(e for e in IMAGE_EXTS if e != ".gif")  # images of a frame folder (a .gif is a video)
# shares of a folder without test/ (val/) subfolders held out for test (val): (test, val), in steps of 1/256 (the
# first md5 byte). JPwLEG-3 keeps about the paper's 2000 test and 1000 val of its 12000 MET images (Sec. 4.1), which
# come in subfolders without a split; ImageNet (its val/ is the test split) holds out about 10,000 of its 1.28M
# training images for training's held-out check, 2/256
SPLITS = {"train": 0, "test": 1, "val": 2}              # each split its own seeded stream
ENDLESS = 2 ** 62                                          # length of an unlimited stream (built-in data)
HELD_OUT = {"jpwleg3": (2000 / 12000, 1000 / 12000), "imagenet": (0.05, 2 / 256)}
TEST_FRACTION, VAL_FRACTION = 0.05, 0.10
VIEW_SCALE = (0.3, 1.0)                                    # a training view's side, of the largest box (random_crop)
# UCF101 comes as <class>/v_<class>_gGG_cCC.avi: the clips of one group GG are cut from one longer video, so a split
# keeps each group whole. Its official split 1 (the paper's 3,783 test videos) tests on groups 1-7; val is a hashed
# tenth of the other groups, so about 8,600 of the split's 9,537 training videos train
UCF_CLIP = re.compile(r"^(v_.+_g(\d+))_c\d+", re.IGNORECASE)
UCF_TEST_GROUPS = 7
# split subfolders, with the names CLEVRER's videos are often unpacked under (video_train/, video_validation/,
# video_test/: its 10,000 / 5,000 / 5,000); of the held-out ones, the first found is the test split
TRAIN_FOLDERS = ("train", "video_train")
TEST_FOLDERS = ("test", "video_test")
EVAL_FOLDERS = (*TEST_FOLDERS, "val", "validation", "video_validation")


# ----------------------------------------------------------------------------
# Splits
# ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=4)
def _epoch_order(length, seed, epoch):
    return np.random.default_rng([seed, 7, epoch]).permutation(length)


def epoch_index(pos, length, seed):
    """Stream position -> item of a finite set: every item once per epoch, each epoch in its own seeded order."""
    epoch, j = divmod(pos, length)
    return int(_epoch_order(length, seed, epoch)[j])



def hashed_split(path, root, fractions=(TEST_FRACTION, VAL_FRACTION)):
    """"test", "val" or "train": the fixed band that the hash of the path under root falls in (test [0, 5%),
    val [5%, 15%), train the rest, by default), so a file's split never depends on which other files exist. The
    hash reads the relative path with its name and extension as they are; `python -m sources.prepare` keeps them, so a
    prepared copy splits as its source (and no split a shipped model was chosen or scored on moved)."""
    u = hashlib.md5(os.path.relpath(path, root).encode()).digest()[0] / 256
    test, val = fractions
    return "test" if u < test else "val" if u < test + val else "train"


def band(path, root, dataset, fractions):
    """The split a file of train/ (or of a flat folder) falls in: hashed_split of its path, or for a UCF101 clip (named
    v_CLASS_gGG_cCC) of its group: groups 1-7 test (the official split 1), the others val by a hash of the group (a
    share fractions[1] of them) or train."""
    clip = UCF_CLIP.match(os.path.splitext(os.path.basename(path))[0]) if dataset == "ucf101" else None
    if clip is None:
        return hashed_split(path, root, fractions)
    if int(clip.group(2)) <= UCF_TEST_GROUPS:
        return "test"
    return hashed_split(os.path.join(root, clip.group(1)), root, (0.0, fractions[1]))


def data_folder(path, ckpt):
    """A checkpoint's relative data (or autoencoder) folder, found from here, or from the checkpoint's folder or one
    or two above it (a shipped checkpoint's folder name, e.g. mnist, is found at the repository's root); None if none
    exists (an absolute path is returned as it is)."""
    if path is None or os.path.isabs(path) or os.path.exists(path):
        return path
    here = os.path.dirname(os.path.abspath(ckpt))
    for base in (here, os.path.dirname(here), os.path.dirname(os.path.dirname(here))):
        if os.path.exists(os.path.join(base, path)):
            return os.path.normpath(os.path.join(base, path))
    return None


# shipped checkpoints name their data by a folder name (puzzle.data_dir), never by a path: (dataset, name) -> what
# the folder holds and how a user gets it (find_data's message when it is not found)
SHIPPED_DATA = {
    ("movingmnist", "mnist"): ("the MNIST digits", "fetch them with `python mnist.py --download mnist` (about 12 MB) "
                               "or pass --data-dir with a folder that holds them"),
    ("folder", "photos"): ("its photos", "pass --data-dir with a folder of train/ and test/ photos (docs/photos.tsv "
                           "lists the ones it was trained and scored on, with their sha256 and source package)"),
}


def find_data(puzzle, ckpt, data_dir=None, dataset=None):
    """
    The folder to score a checkpoint's test puzzles on: `data_dir` (--data-dir) when given; None for built-in data
    or for another --dataset than the model's (that one's own check asks for --data-dir); else the folder its
    training run stored in puzzle.data_dir (a user's path as given, or a shipped model's folder name: SHIPPED_DATA),
    found from here or from the checkpoint's folder or the two above it. A stored folder that is not found is
    refused in one sentence: for a shipped model, how to get its data.
    """
    if data_dir or not puzzle.data_dir or (dataset or puzzle.dataset) != puzzle.dataset:
        return data_dir
    found = data_folder(puzzle.data_dir, ckpt)
    if found is not None and os.path.exists(found):
        return found
    if (puzzle.dataset, puzzle.data_dir) in SHIPPED_DATA:
        what, how = SHIPPED_DATA[puzzle.dataset, puzzle.data_dir]
        raise UserError(f"{ckpt} reads {what} from a folder {puzzle.data_dir}/, which is found neither from here nor "
                        f"next to the checkpoint; {how}")
    raise UserError(f"{ckpt} was trained on {puzzle.data_dir}, which is found neither from here nor next to the "
                    "checkpoint; pass --data-dir with that folder")


def split_files(data_dir, split, dataset, lister, what, exts):
    """
    Files of one split ("train", "val" or "test"), found by lister(folder); the three never share a file.
    - test: test/ (else val/ or validation/); without such a folder, the hashed 5% of train/ (or of a flat folder;
      jpwleg3: the paper's shares, HELD_OUT).
    - val: val/ (or validation/) when the folder also has test/; otherwise the hashed 10% of train/ (or of a flat
      folder; imagenet 2/256, HELD_OUT) next to the test band, so training's held-out check never reads the test
      split.
    - train: train/ (or the flat folder) without the bands held out above.
    CLEVRER's video_train/, video_validation/ and video_test/ count as train/, validation/ and test/. `what` and
    `exts` are for the messages.
    """
    if not data_dir:
        raise UserError(f"--dataset {dataset} needs --data-dir pointing at a folder of {what}")
    if not os.path.isdir(data_dir):
        raise UserError(f"--data-dir {data_dir} does not exist or is not a folder; pass a folder of {what}")
    trains = [n for n in TRAIN_FOLDERS if os.path.isdir(os.path.join(data_dir, n))]
    evals = [n for n in EVAL_FOLDERS if os.path.isdir(os.path.join(data_dir, n))]
    has_train = bool(trains)
    train_dir = os.path.join(data_dir, trains[0]) if trains else data_dir      # where the training files are
    if evals and not has_train and split != "test":           # a folder of test images only: nothing to train on
        raise UserError(f"--data-dir {data_dir} has {evals[0]}/ but no train/ (or video_train/) folder; add train/ "
                        f"with the training {what} (the test {what} are never trained on)")
    vals = [n for n in evals if n not in TEST_FOLDERS]
    val_dir = bool(vals) and evals[0] in TEST_FOLDERS           # test/ and val/ (or validation/): val is a folder
    if split == "test" and evals:
        files = lister(os.path.join(data_dir, evals[0]))
    elif split == "val" and val_dir:
        files = lister(os.path.join(data_dir, vals[0]))
    else:                                                      # bands of train/ (or of the flat folder) by hash
        held_out = set() if val_dir else {"val"} if evals else {"val", "test"}   # bands not kept for training
        fractions = HELD_OUT.get(dataset, (TEST_FRACTION, VAL_FRACTION))
        files = [f for f in lister(train_dir) if (part := band(f, train_dir, dataset, fractions)) == split
                 or split == "train" and part not in held_out]
    if not files and split != "train" and lister(train_dir):
        fix = (f"add more training {what} (the val split is a hashed share of {os.path.basename(train_dir)}/, since "
               f"{evals[0]}/ is the test split), or a test/ folder beside {evals[0]}/ to make {evals[0]}/ the val "
               "split") \
            if split == "val" and evals else f"add a {split}/ subfolder with a few {what}"
        raise UserError(f"--data-dir {data_dir} has too few {what} for its automatic {split} split (none fell in "
                        f"it); {fix}")
    if not files:
        raise UserError(f"--data-dir {data_dir} holds no {split} {what} ({', '.join(exts)}); check the path")
    return files


def note_skip(skipped, path, why, total):
    """Skip a file for good (the next one takes its place) and say so on stderr, with the count so far (unless
    none of the `total` files is left: the caller then stops with one error)."""
    skipped.add(path)
    if len(skipped) < total:
        print(f"warning: skipped {why} file {path} ({len(skipped)} of {total} skipped so far)", file=sys.stderr)



# ----------------------------------------------------------------------------
# Images
# ----------------------------------------------------------------------------

def fit_image(img, height, width, rng=None, hflip=False):
    """
    Resize a PIL image to cover (height, width), crop (random if rng, else centre), optional random flip. Training
    (rng given) decodes a not yet loaded JPEG at a reduced scale (Pillow's draft: 1/2, 1/4 or 1/8 of its side, never
    below the size needed; much faster on large photos: python -m bench loader); test images are decoded in full.
    """
    scale = max(height / img.height, width / img.width)
    if rng is not None and img.format == "JPEG" and scale <= 0.5:
        img.draft("RGB", (math.ceil(scale * img.width), math.ceil(scale * img.height)))
        scale = max(height / img.height, width / img.width)         # of the reduced image
    img = img.convert("RGB")
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


@functools.lru_cache(maxsize=1024)
def load_photo(path, short_side):
    """
    A photo as an RGB PIL image, shrunk (never enlarged) so its shorter side is at most `short_side`: decoded once
    per process and kept, so a small collection is read from disk once and cropped afresh at every step.
    """
    with Image.open(path) as im:
        photo = im.convert("RGB")
    k = short_side / min(photo.size)
    if k < 1:
        photo = photo.resize((round(photo.width * k), round(photo.height * k)), Image.BICUBIC)
    return photo


def random_crop(photo, height, width, rng, scale=VIEW_SCALE):
    """
    A fresh training view of a photo (H, W, 3) float32 in [0, 1]: a box of the puzzle's aspect whose side is a
    fraction s of the largest such box (s^2 uniform in scale^2: uniform in area), at a random position, resized to
    (height, width), flipped left-right half of the time. Flips and zooms keep a puzzle solvable.
    """
    fit = min(photo.width / width, photo.height / height)        # the largest box: fit*width x fit*height
    s = fit * np.sqrt(rng.uniform(scale[0] ** 2, scale[1] ** 2))
    w, h = max(1, round(s * width)), max(1, round(s * height))
    x, y = int(rng.integers(0, photo.width - w + 1)), int(rng.integers(0, photo.height - h + 1))
    out = photo.resize((width, height), Image.BICUBIC, box=(x, y, x + w, y + h))
    if rng.random() < 0.5:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    return np.asarray(out, dtype=np.float32) / 255.0


def as_image(piece, name):
    """A piece as an RGB PIL image: a PIL image, or an (H, W, 3) or (H, W) array (uint8, or float in [0, 1])."""
    if isinstance(piece, Image.Image):
        return piece.convert("RGB")
    arr = np.asarray(piece)
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[-1] not in (1, 3, 4)):
        raise UserError(f"piece {name} is an array of shape {arr.shape}; pass images or (H, W, 3) arrays")
    if arr.dtype != np.uint8:
        if arr.size and (arr.min() < 0 or arr.max() > 1):
            raise UserError(f"piece {name} is a float array with values outside [0, 1]; pass uint8 (0..255) or "
                            "floats in [0, 1]")
        arr = (arr.astype(np.float32) * 255).round().astype(np.uint8)
    return Image.fromarray(arr.squeeze(-1) if arr.ndim == 3 and arr.shape[-1] == 1 else arr).convert("RGB")


def piece_pixels(piece, side, name, aspect=1.25):
    """A square piece (see as_image) resized to (side, side, 3) float32 in [0, 1]; one that is not roughly square
    (sides differing by more than `aspect`) is refused in one sentence naming it."""
    img = as_image(piece, name)
    if max(img.size) > aspect * min(img.size):
        raise UserError(f"piece {name} is {img.width}x{img.height} px, not roughly square; pass square pieces cut "
                        "from one grid")
    return np.asarray(img.resize((side, side), Image.BICUBIC), dtype=np.float32) / 255


def list_images(root):
    """All image files under root (recursive), sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames.sort()
        out += [os.path.join(dirpath, f) for f in sorted(filenames) if f.lower().endswith(IMAGE_EXTS)]
    return out


# ----------------------------------------------------------------------------
# Videos
# ----------------------------------------------------------------------------

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


def resize_frame(frame, size):
    """float32 (H, W, C) -> (size, size, C) with PIL bicubic (anti-aliased when shrinking)."""
    chans = [Image.fromarray(frame[..., c]).resize((size, size), Image.Resampling.BICUBIC)
             for c in range(frame.shape[-1])]
    return np.clip(np.stack([np.asarray(c) for c in chans], -1), 0, 1)


def fit_channels(frames, channels):
    """(L, H, W, C) -> (L, H, W, channels): grey -> RGB by repeating, RGB -> grey by averaging."""
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


def read_video(path, frame_stride=1, size=None):
    """
    Frames of a video file (mp4/avi/gif/...) or of a folder of frame images (sorted by name), as float32
    (L, H, W, C) in [0, 1] with C = 1 (grayscale images) or 3. Keeps every `frame_stride`-th frame (the paper's
    temporal downsampling), resized to size x size when `size` is given.
    """
    path = os.fspath(path)
    frames = []
    if os.path.isdir(path):
        names = sorted((f for f in os.listdir(path) if f.lower().endswith(FRAME_EXTS)), key=_natural_key)
        try:
            for name in names[::frame_stride]:
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
        frames = [resize_frame(f, size) for f in frames]
    if len({f.shape for f in frames}) > 1:
        raise UserError(f"frames of {path} differ in size or channels; pass --size to resize them")
    return np.stack(frames)                                    # (L, H, W, C)


def clip_frames(clip, puzzle, name):
    """A video piece (F, H, W, C) (or (F, H, W)) of a video checkpoint's `puzzle` settings as (F, size, size, channels)
    float32 in [0, 1]; a wrong frame count is refused in one sentence naming it."""
    arr = np.asarray(clip)
    if arr.ndim == 3:
        arr = arr[..., None]
    if arr.ndim != 4 or len(arr) != puzzle.frames_per_piece:
        raise UserError(f"piece {name} has shape {arr.shape}; this model's pieces are {puzzle.frames_per_piece} "
                        "frame(s) of (H, W, C)")
    frames = np.stack([resize_frame(_to_float_frame(f), puzzle.size) for f in arr])
    return fit_channels(frames, puzzle.channels)


def list_videos(root):
    """Sorted paths of every video file and every frame folder (a folder directly holding images) under root."""
    found = []
    for folder, dirs, files in os.walk(os.fspath(root), followlinks=True):
        dirs.sort()
        found += [os.path.join(folder, f) for f in files if f.lower().endswith(VIDEO_EXTS)]
        if any(f.lower().endswith(FRAME_EXTS) for f in files):
            found.append(folder)
    return sorted(found)
