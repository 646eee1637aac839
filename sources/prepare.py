"""
Prepare an image folder once for fast training (after nanoGPT's data/*/prepare.py): every image resized so that its
shorter side is the paper's 255 px (Sec. 4.3: images resized to 255 px, cut into 3x3 cells of 85 px), saved under
--out at the same relative path, with the same name and extension, in the format that extension names (a .jpg or
.JPEG as a JPEG of quality 95, a .png as a PNG). The path is what `sources.files.hashed_split` hashes, so every file of
the copy falls in the same split as its original: a test image never becomes a training image. Training then decodes
under half the pixels of a usual 500 x 375 ImageNet picture, with nothing left to shrink: `python -m bench
loader-prepared` measures the pictures a second per worker, raw against prepared. Not in the paper; a JPEG is the same
up to one re-encoding, so score the test split on the original folder (sample.py --data-dir).

    python -m sources.prepare --data-dir /data/imagenet --out /data/imagenet-255
    python train_image.py --dataset imagenet --data-dir /data/imagenet-255 --grid 3
    python sample.py --ckpt out/run/ckpt.pt --data-dir /data/imagenet ...        # the test split as it ships
"""
import argparse
import os
from multiprocessing import Pool

from PIL import Image
from tqdm import tqdm

from plumbing.cli import UserError, positive, user_errors
from sources.files import list_images


def shrink(job):
    """Resize one image (src, dst, side) so its shorter side is at most `side`, and save it in the format of dst's
    extension (JPEG and WebP at quality 95); returns 1 if written, 0 if it could not be read (it is then left out,
    as training would skip it)."""
    src, dst, side = job
    try:
        with Image.open(src) as im:
            im.draft("RGB", (side, side))                     # JPEG: decode at a reduced scale, never below side
            img = im.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError):
        return 0
    k = side / min(img.size)
    if k < 1:
        img = img.resize((round(img.width * k), round(img.height * k)), Image.BICUBIC)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    img.save(dst, quality=95)                                   # the format: dst's extension
    return 1


def main(args):
    src = os.path.abspath(args.data_dir)
    if not os.path.isdir(src):
        raise UserError(f"--data-dir {args.data_dir} is not a folder; pass the image folder to prepare")
    if os.path.abspath(args.out) == src:
        raise UserError("--out must be another folder than --data-dir; the originals are kept")
    files = list_images(src)
    if not files:
        raise UserError(f"--data-dir {args.data_dir} holds no images; pass the folder of train/ and val/")
    jobs = [(f, os.path.join(args.out, os.path.relpath(f, src)), args.side) for f in files]   # same path: same split
    with Pool(args.workers) as pool:
        done = sum(tqdm(pool.imap_unordered(shrink, jobs, chunksize=64), total=len(jobs), desc="prepare"))
    print(f"wrote {done} of {len(jobs)} images to {args.out} (shorter side at most {args.side} px)"
          + (f"; {len(jobs) - done} could not be read and were left out" if done < len(jobs) else ""))


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", required=True, help="the image folder to prepare (its layout is kept)")
    p.add_argument("--out", required=True, help="where the prepared copy goes")
    p.add_argument("--side", type=positive, default=255,
                   help="shorter side in pixels after resizing, never enlarged (default 255, the paper's ImageNet; "
                        "at least the puzzle's side, e.g. 432 for JPwLEG-3's 3 x (96 + 48) px)")
    p.add_argument("--workers", type=positive, default=os.cpu_count(), help="processes (default: all cores)")
    return p


if __name__ == "__main__":
    with user_errors():
        main(get_parser().parse_args())
