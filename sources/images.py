"""
The pictures image puzzles are cut from (puzzles.ImagePuzzles): built-in shapes (sources/synthetic.py) or the photos
of a folder's split (sources/files.py: split_files), resized to the grid's size; in training a fresh view of a
folder's photo at every visit (`random_crop`) and a `mix_shapes` share of built-in shapes. Paper: the image datasets
of Sec. 4.1 (ImageNet, JPwLEG-3) and the supplement's "Image Experiments" (resized and cropped at random in
training, the centre at test time); the rest is not in the paper.

    pictures = Pictures(ImageConfig(dataset="folder", data_dir="my_photos"), "train", seed=0)
    img = pictures.picture(i, np.random.default_rng([0, 0, i]), 48, 48)       # (48, 48, 3) in [0, 1]
"""
import math

from PIL import Image

from plumbing.cli import UserError
from sources.files import (
    IMAGE_EXTS,
    VIEW_SCALE,
    epoch_index,
    fit_image,
    list_images,
    load_photo,
    note_skip,
    random_crop,
    split_files,
)
from sources.synthetic import shapes_image

# --dataset of train_image.py: where images come from
DATASETS = {
    "shapes": "built-in procedural images (no data needed)",
    "folder": "any folder of images (--data-dir)",
    "imagenet": "ImageNet train/val folders (--data-dir), paper preprocessing with flips",
    "jpwleg3": "MET images (--data-dir), JPwLEG-3 protocol: 96 px pieces, 48 px gaps",
}


class Pictures:
    """The pictures of an ImageConfig `cfg`'s split: `files` (None for built-in shapes) and picture(i, rng, h, w);
    unreadable or too small files are skipped (and counted in `skipped`)."""

    def __init__(self, cfg, split, seed=0):
        self.cfg, self.split, self.seed = cfg, split, seed
        self.train = split == "train"
        self.mix_shapes = cfg.mix_shapes if self.train else 0.0
        self.fresh_views = self.train and cfg.dataset == "folder"        # a fresh zoomed view at every visit
        self.files = None if cfg.dataset == "shapes" else split_files(
            cfg.data_dir, split, cfg.dataset, lister=list_images, what="images", exts=IMAGE_EXTS)
        self.skipped = set()

    def file_index(self, i):
        """Training: stream position i -> a file, every file once per epoch in a seeded order; test: file i."""
        return epoch_index(i, len(self.files), self.seed) if self.train else i

    def picture(self, i, rng, h, w):
        """Position i's (h, w, 3) float image: built-in shapes or a photo (training: a new view)."""
        if self.files is None or (self.mix_shapes and rng.random() < self.mix_shapes):
            return shapes_image(rng, h, w)
        return self.photo(i, rng, h, w)

    def photo(self, i, rng, h, w):
        """Photo i sized to (h, w), or the next usable one: unreadable or too small files are skipped and counted."""
        n, first = len(self.files), self.file_index(i)
        for k in range(n):
            path = self.files[(first + k) % n]
            if path in self.skipped:
                continue
            try:
                if self.fresh_views:
                    photo = load_photo(path, math.ceil(max(h, w) / VIEW_SCALE[0]))
                    if min(photo.size) >= max(h, w):
                        return random_crop(photo, h, w, rng=rng)
                    note_skip(self.skipped, path, f"too small (under {max(h, w)} px a side) image", total=n)
                    continue
                with Image.open(path) as im:
                    return fit_image(im, h, w, rng=rng if self.train else None, hflip=self.cfg.dataset == "imagenet"
                                     and self.train)
            except (OSError, ValueError, Image.DecompressionBombError):
                note_skip(self.skipped, path, "unreadable image", total=n)
        raise UserError(f"--data-dir: none of the {n} {self.split} images could be read" +
                        (f" and is at least {max(h, w)} px on its shorter side; use a smaller --piece-size or "
                         "larger photos" if self.fresh_views else ""))
