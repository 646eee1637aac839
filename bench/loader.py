"""
Data-loading throughput of the paper's ImageNet protocol (decode a JPEG, resize it to cover the puzzle, 3x3 cells of
85 px, 64 px pieces cropped at random inside them, flips) on ImageNet-sized JPEGs made from the photos: training
pictures a second in the main process and in one DataLoader worker, as they come and after `python -m sources.prepare`.

    python -m bench loader-imagenet     # 0 and 1 workers, 500 px JPEGs
    python -m bench loader-prepared     # 1 worker, 500 px JPEGs against the prepared 255 px copy
"""
import os
import time

import torch
from PIL import Image

from puzzles import ImageConfig, ImagePuzzles


def images_per_second(puzzle, workers, images, batch_size=32):
    """Training puzzles made per second through a DataLoader with `workers` processes (first batch excluded)."""
    data = ImagePuzzles(puzzle, "train", seed=0)
    sampler = torch.utils.data.BatchSampler(range(images + batch_size), batch_size, drop_last=True)
    loader = iter(torch.utils.data.DataLoader(data, batch_sampler=sampler, num_workers=workers))
    next(loader)                                                   # start-up: process spawn, first files
    t = time.time()
    n = sum(len(batch["true_pos"]) for batch in loader)
    return n / (time.time() - t)


def imagenet_sized(photos, dst, count=256, side=500):
    """An ImageNet-layout folder (train/<class>/*.JPEG, val/<class>/*.JPEG) of `count` training JPEGs the size of a
    typical ImageNet picture (longer side `side`, quality 90, 4:3 photos about 500 x 375) made from the photos."""
    files = sorted(os.path.join(photos, "train", f) for f in os.listdir(os.path.join(photos, "train")))
    for split, n in (("train", count), ("val", 8)):
        os.makedirs(os.path.join(dst, split, "n00000000"), exist_ok=True)
        for i in range(n):
            with Image.open(files[i % len(files)]) as im:
                im = im.convert("RGB")
                k = side / max(im.size)
                im = im.resize((round(im.width * k), round(im.height * k)), Image.BICUBIC)
                if i >= len(files):
                    im = im.transpose(Image.FLIP_LEFT_RIGHT)           # a second pass: other pixels, same size
                im.save(os.path.join(dst, split, "n00000000", f"{i:05d}.JPEG"), quality=90)
    return dst


def imagenet_pace(photos, tmp, prepared=False, images=512):
    """Rows: training pictures a second of the paper's ImageNet protocol (gap 21) on ImageNet-sized JPEGs, in the main
    process and in one worker; with `prepared`, in one worker on the JPEGs as they come and on the copy `python -m
    sources.prepare` makes (255 px shorter side). The pictures one CPU core makes a second, so the cores that feed a
    GPU (4,550 pictures a second: bf16 + compile at batch 256; 2,950 in bf16)."""
    raw = imagenet_sized(photos, os.path.join(tmp, "imagenet-sized"))
    folders = [("raw 500px JPEG", raw, 1)] if prepared else [("500px JPEG", raw, 0), ("500px JPEG", raw, 1)]
    if prepared:
        from sources.prepare import get_parser, main
        main(get_parser().parse_args(["--data-dir", raw, "--out", os.path.join(tmp, "imagenet-sized-255"),
                                      "--workers", "1"]))
        folders.append(("prepared 255px JPEG", os.path.join(tmp, "imagenet-sized-255"), 1))
    rows = {}
    for name, folder, workers in folders:
        rate = images_per_second(ImageConfig(dataset="imagenet", data_dir=folder, grid=(3, 3), piece_size=64, gap=21),
                                 workers, images)
        key = f"loader imagenet-sized {name}, paper protocol 3x3 64px gap 21, " + \
            (f"{workers} worker" if prepared else f"{workers} workers")
        rows[key] = {"images_per_s": rate, "workers": workers,
                     **({"cores_for_2950_per_s": 2950 / rate} if prepared else {"cores_for_4500_per_s": 4500 / rate})}
    return rows
