"""
Moving MNIST from the raw MNIST files, for video jigsaw puzzles (paper: Sec. 4.1 "MovingMNIST"; read by
sources/videos.py for train_video.py --dataset movingmnist; the root mnist.py is the download command).

Implements the standard Moving MNIST recipe of Srivastava et al. 2015 ("Unsupervised Learning of Video
Representations using LSTMs"): two 28x28 MNIST digits bounce inside a 64x64 frame for 20 frames. Each digit starts
at a random position with a random direction, moves at a fixed speed, reflects off the walls (position and velocity
mirrored), and the digits are composited with a per-pixel max. Unlike the fixed mnist_test_seq.npy file, clips are
generated on the fly, so there are as many as you like; seed the rng per clip, e.g.
np.random.default_rng([seed, split, index]), and clip `index` is the same every time.

Three differences from Srivastava et al.'s generator, kept because the shipped Moving MNIST checkpoint was trained
and scored on these clips: (1) frame 0 is the start position (theirs takes one step before recording the first
frame); (2) a digit past a wall is mirrored back inside (theirs clamps it to the wall); both flip the velocity;
(3) positions are rounded to the nearest pixel (theirs truncates). Speed (3.6 px a frame), uniform start positions
and directions, random digits and the max composite are theirs. The paper's test clips are the fixed
mnist_test_seq.npy instead (readable here too); these are generated from the t10k digits.

    digits = mnist_digits("mnist", "train")               # (60000, 28, 28) uint8, read once per process
    clip = moving_mnist(digits, np.random.default_rng(0))      # (20, 64, 64) float32 in [0, 1]

The MNIST files are the IDX files from the MNIST site (plain or .gz, or torchvision's MNIST/raw layout).
`load_movingmnist` reads the fixed standard set instead (mnist_test_seq.npy, 10000 clips of 20 frames).

    download("mnist", mirrors=None)      # the four MNIST .gz files, md5-checked (`python mnist.py --download mnist`)
"""
import functools
import gzip
import hashlib
import http.client
import math
import os
import ssl
import tempfile
import urllib.error
import urllib.request
import zlib

import numpy as np
from PIL import Image
from tqdm import tqdm

from plumbing.cli import UserError

DIGIT = 28    # MNIST digit side, px
CANVAS = 64   # Moving MNIST frame side, px; digits move with top-left corner in [0, CANVAS - DIGIT] = [0, 36]
# Speed in px/frame. The paper draws the speed from a fixed range; the widely used generator steps 0.1 of the
# 36 px travel range per frame, i.e. 3.6 px, and so do we (a fixed speed: clips differ by position and direction).
SPEED = 3.6
MOVINGMNIST_FILE = "mnist_test_seq.npy"   # the fixed standard set: 10000 clips of 20 frames
NAMES = {"train": ["train-images-idx3-ubyte", "train-images.idx3-ubyte"],
         "test": ["t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte"]}
# --download: where the MNIST files are fetched from, in order (torchvision's mirror, then TensorFlow's; both serve
# the original files), and the md5 of each file's IDX content (the .gz decompressed): a mirror may compress the
# same digits anew, so the .gz bytes differ while the content is MNIST's
MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "https://storage.googleapis.com/cvdf-datasets/mnist/")
MD5 = {"train-images-idx3-ubyte.gz": "6bbc9ace898e44ae57da46a324031adb",
       "train-labels-idx1-ubyte.gz": "a25bea736e30d166cdddb491f175f624",
       "t10k-images-idx3-ubyte.gz": "2646ac647ad5339dbf082846283269ea",
       "t10k-labels-idx1-ubyte.gz": "27ae3e4e09519cfbb04c329615203637"}
NET_ERRORS = (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, ssl.SSLError)
TIMEOUT = 60          # s without an answer before a mirror counts as down
CHUNK = 1 << 16       # bytes read at a time


def read_idx(path):
    """An IDX file (plain or gzip) as a uint8 array of the shape in its header, e.g. (60000, 28, 28)."""
    if not os.path.isfile(path):
        raise UserError(f"MNIST file {path} not found; download the MNIST files and pass their folder as --data-dir")
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":  # gzip magic, whatever the name
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            raise UserError(f"MNIST file {path} is a corrupt gzip file; download it again") from None
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] != 0x08:
        raise UserError(f"MNIST file {path} is not an unsigned-byte IDX file (wrong magic number); "
                        f"pass the original MNIST images file")
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise UserError(f"MNIST file {path} is truncated (header cut short); download it again")
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", ndim, 4))
    start, want = 4 + 4 * ndim, math.prod(shape)
    if len(raw) - start != want:
        raise UserError(f"MNIST file {path} holds {len(raw) - start} data bytes but its header {shape} says {want}; "
                        f"it is {'truncated' if len(raw) - start < want else 'corrupt'}, download it again")
    return np.frombuffer(raw, np.uint8, want, start).reshape(shape)  # read-only view of the file's bytes


def find_idx(data_dir, split):
    """Path of the split's images file in data_dir, data_dir/MNIST/raw or data_dir/raw (plain or .gz), else None."""
    for folder in (data_dir, os.path.join(data_dir, "MNIST", "raw"), os.path.join(data_dir, "raw")):
        for name in NAMES[split]:
            for ext in ("", ".gz"):
                path = os.path.join(folder, name + ext)
                if os.path.isfile(path):
                    return path
    return None


def is_mnist_dir(data_dir):
    """True if data_dir holds MNIST images (train or test) in one of the layouts find_idx knows."""
    return bool(data_dir) and os.path.isdir(data_dir) and any(find_idx(data_dir, s) for s in NAMES)


@functools.lru_cache(maxsize=4)
def _load(path):
    return read_idx(path)  # cached per path: a DataLoader worker reads (and gunzips) each file once


def mnist_digits(data_dir, split):
    """The split's digits, (N, 28, 28) uint8, read-only: train = the 60k training digits, test = the 10k t10k."""
    path = find_idx(data_dir, split) if data_dir and os.path.isdir(data_dir) else None
    if path is None:
        names = " or ".join(f"{n}[.gz]" for n in NAMES[split])
        raise UserError(f"--data-dir {data_dir} holds no MNIST {split} images; put {names} there (or in its "
                        f"MNIST/raw folder), e.g. with `python mnist.py --download {data_dir or 'mnist'}`")
    digits = _load(path)
    if digits.ndim != 3 or digits.shape[1:] != (DIGIT, DIGIT):
        raise UserError(f"MNIST file {path} holds an array of shape {digits.shape}, not (N, 28, 28) digit images; "
                        f"pass the images file, not the labels")
    return digits


def _bounce(rng, num_frames):
    """Top-left corners of one bouncing digit, int (num_frames, 2) (row, col) in [0, 36]."""
    hi = CANVAS - DIGIT
    pos = rng.uniform(0, hi, size=2)                       # (2,) start, continuous
    angle = rng.uniform(0, 2 * np.pi)
    vel = SPEED * np.array([np.sin(angle), np.cos(angle)])  # (2,) px/frame
    out = np.empty((num_frames, 2), np.int64)
    for t in range(num_frames):
        out[t] = np.rint(pos)
        pos = pos + vel
        for k in range(2):                                  # reflect: mirror position and velocity at the walls
            if pos[k] < 0:
                pos[k], vel[k] = -pos[k], -vel[k]
            elif pos[k] > hi:
                pos[k], vel[k] = 2 * hi - pos[k], -vel[k]
    return out


def moving_mnist(digits, rng, num_frames=20, size=64, num_digits=2):
    """One clip, float32 (num_frames, size, size) in [0, 1]; a pure function of rng. Made at 64 px, then resized."""
    picks = rng.integers(len(digits), size=num_digits)
    clip = np.zeros((num_frames, CANVAS, CANVAS), np.float32)  # (L, 64, 64)
    for i in picks:
        digit = digits[i].astype(np.float32) / 255.0           # (28, 28)
        for t, (r, c) in enumerate(_bounce(rng, num_frames)):
            win = clip[t, r:r + DIGIT, c:c + DIGIT]
            np.maximum(win, digit, out=win)                     # composite with max, as in the recipe
    if size != CANVAS:  # anti-aliased: BOX averages 2x2 blocks at 32 px, so --size 32 is the same clip at half size
        resample = Image.BOX if size < CANVAS else Image.BILINEAR
        clip = np.stack([np.asarray(Image.fromarray(f).resize((size, size), resample)) for f in clip])
    return np.clip(clip, 0.0, 1.0).astype(np.float32)


def load_movingmnist(path):
    """
    The standard MovingMNIST file mnist_test_seq.npy (or a folder holding it), stored (20 frames, 10000 videos,
    64, 64) uint8, as a memory-mapped uint8 view (videos, frames, 64, 64). Any number of videos is accepted.
    """
    if not path:
        raise UserError("--dataset movingmnist needs --data-dir: a folder with the MNIST IDX files or "
                        f"{MOVINGMNIST_FILE}")
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, MOVINGMNIST_FILE)
    if not os.path.isfile(path):
        raise UserError(f"--data-dir {path} holds neither the MNIST IDX files (train-images-idx3-ubyte[.gz], "
                        f"t10k-images-idx3-ubyte[.gz]) nor {MOVINGMNIST_FILE}; pass the folder or the file")
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


# ----------------------------------------------------------------------------
# python mnist.py --download DIR: fetch the MNIST files
# ----------------------------------------------------------------------------

def file_md5(path):
    """The md5 hex digest of a .gz file's decompressed content, read in chunks; None if it is no gzip file."""
    digest = hashlib.md5()
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
    except (OSError, EOFError, zlib.error):
        return None
    return digest.hexdigest()


def _stream(url, dest, name):
    """Copy url into the open binary file dest with a progress bar."""
    with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
        size = response.headers.get("Content-Length") or ""
        total = int(size) if size.isdigit() else None
        with tqdm(total=total, desc=name, unit="B", unit_scale=True, unit_divisor=1024, leave=False,
                  disable=None) as bar:  # disable=None: no bar when stderr is not a terminal
            while chunk := response.read(CHUNK):
                dest.write(chunk)
                bar.update(len(chunk))


def _reason(error):
    """A short reason for a failed fetch, e.g. 'HTTP 404 Not Found' or 'timed out'."""
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code} {error.reason}"
    reason = getattr(error, "reason", None) or error
    return str(reason) or type(reason).__name__


def fetch_file(folder, name, mirrors):
    """
    folder/name from the first of mirrors (base URLs) that serves it with MD5[name]; returns the URL it came from,
    or None when folder/name is already there with the right md5. Each try goes to a temp file in folder that is
    renamed only once its md5 matches and deleted otherwise, so no partial or corrupt file is ever left.
    """
    path, want = os.path.join(folder, name), MD5[name]
    if os.path.isfile(path):
        if file_md5(path) == want:
            return None
        print(f"{path} is there but its md5 is not MNIST's; fetching it again")
    failures, corrupt = [], False
    for base in mirrors:
        url = base + name
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                _stream(url, f, name)
            got = file_md5(tmp)
            if got == want:
                os.replace(tmp, path)
                if failures:
                    print(f"{name}: {'; '.join(failures)}; fetched from {url} instead")
                return url
            corrupt = True
            failures.append(f"{url} sent a file that is not gzip" if got is None else
                            f"{url} sent a file whose content has md5 {got}, not {want}")
        except NET_ERRORS as e:
            failures.append(f"{url} failed ({_reason(e)})")
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    todo = ("run again later or pass --mirror URL of a good copy" if corrupt else
            "check the network connection, or pass --mirror URL of a folder that holds the MNIST .gz files")
    raise UserError(f"MNIST file {name} could not be fetched into {folder}" + (" (a corrupt download was not kept)"
                    if corrupt else "") + f": {'; '.join(failures)}; {todo}")


def download(folder, mirrors=None):
    """
    Fetch the four MNIST .gz files (MD5's names) into folder (created if needed), trying mirrors (base URLs, default
    MIRRORS) in order; files already there with the right md5 are kept. Returns {name: URL, or None when kept}.
    """
    mirrors = [m if m.endswith("/") else m + "/" for m in (MIRRORS if mirrors is None else mirrors)]
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise UserError(f"--download {folder} is a file, not a folder; pass a folder for the MNIST files")
    try:
        os.makedirs(folder, exist_ok=True)
        return {name: fetch_file(folder, name, mirrors) for name in MD5}
    except OSError as e:  # the network's errors are handled per mirror: this is the folder's
        raise UserError(f"could not write the MNIST files into {folder} ({e}); pass a writable folder with "
                        "about 12 MB free as --download") from None
