"""
What differs between image and video puzzles, in one place: the table of true codes, the network, the puzzle stream,
scoring and pictures. Settings stay plain data (config.py); a kind is bound to a puzzle config:

    kind = kinds.of(config)               # Images or Videos (a Config or its puzzle config)
    kind.table()                          # (positions, D): the true code of every position (posenc.py)
    model = kind.network(config.model)    # dit.DiT or unet3d.UNet3D
    test = kind.puzzles("test", seed=0)   # puzzles.ImagePuzzles or puzzles.VideoPuzzles
    metrics = kind.score(positions, batch)          # {"piece_acc": ..., "puzzle_acc": ...} or Kendall distances
    kind.anchored                         # is the first piece's code given (images: --anchor; videos: always)
"""
import os

import numpy as np

from dit import DiT
from jpdvt import given_codes
from metrics import kendall_distance, kendall_reversible, piece_accuracy, puzzle_accuracy, relabel_generated
from pictures import image_row, save_png, stack, video_row, write_rows
from posenc import grid_table, sequence_table
from puzzles import DATASETS, VIDEO_DATASETS, ImagePuzzles, VideoPuzzles
from unet3d import UNet3D


class Images:
    """Image puzzles (train_image.py): an R x C grid of square pieces."""
    network = DiT
    datasets = DATASETS
    inputs = ("image", "pieces")             # sample.py flags that take your own data
    reported = ("grid", "piece_size", "gap", "anchor")   # copied into sample.py's metrics.json
    pictured = 8                             # test puzzles pictured by sample.py
    solved = "puzzle_acc"                    # the metric of fully solved puzzles
    counted = ("piece_acc and puzzle_acc count the pieces with content that the model had to place, not the anchored "
               "one (whose position the model is told); missing pieces are generated and not scored")

    def __init__(self, puzzle):
        self.p = puzzle
        self.anchored = puzzle.anchor        # the code of the first shuffled piece (a random cell) is given
        self.vae = None                      # image pieces are always diffused in pixels

    def table(self):
        """(rows * cols, 32): the 2D code of every grid position, raster order."""
        return grid_table(*self.p.grid)

    def puzzles(self, split, seed):
        return ImagePuzzles(self.p, split, seed)

    def score(self, positions, batch):
        """Piece and puzzle accuracy of predicted positions (B, N) over the pieces the model had to place."""
        true_pos, missing = batch["true_pos"].cpu().numpy(), batch["missing"].cpu().numpy()
        placed = ~missing & ~given_codes(batch, self.anchored).cpu().numpy()      # not the anchored piece
        return {"piece_acc": piece_accuracy(positions, true_pos, placed),
                "puzzle_acc": puzzle_accuracy(positions, true_pos, placed)}

    def summary(self, metrics):
        return f"piece accuracy {metrics['piece_acc']:.4f}, puzzle accuracy {metrics['puzzle_acc']:.4f}"

    def picture(self, batch, positions, content, k):
        """Puzzle k of a solved batch: shuffled input | solved | solved and inpainted | ground truth."""
        return image_row(batch, positions, content, grid=self.p.grid, k=k)

    def save_pictures(self, folder, rows):
        """examples.png of picture() rows; returns (path, what its columns show)."""
        path = os.path.join(folder, "examples.png")
        save_png(path, stack(rows, axis=0))
        return path, "shuffled input | solved | solved + inpainted | ground truth"


class Videos:
    """Temporal puzzles (train_video.py): a clip cut into pieces of consecutive frames; the first stays first."""
    network = UNet3D
    datasets = VIDEO_DATASETS
    inputs = ("video", "frames", "superres")
    reported = ("pieces", "frames_per_piece", "size", "frame_stride")
    pictured = 4
    solved = "exact"
    counted = ("kendall and exact compare every piece's slot, generated pieces included, each against the slot of the "
               "clip it replaced (strict); kendall_set and exact_set compare the slots of generated pieces as a set "
               "(they start as interchangeable noise); the anchor (first piece) counts in all four; kendall_rev is the "
               "authors' variant, the smaller of the strict distances of the predicted order and of its reverse (a "
               "fully reversed clip scores 0)")

    def __init__(self, puzzle):
        self.p = puzzle
        self.anchored = True                 # the first piece in time stays first and its code is given
        self.vae = puzzle.vae                # autoencoder folder: diffuse its latents (None: pixels)

    def table(self):
        """(pieces, 16): the 1D code of every time slot."""
        return sequence_table(self.p.pieces)

    def puzzles(self, split, seed):
        return VideoPuzzles(self.p, split, seed)

    def score(self, positions, batch):
        """Kendall distance and exact order of predicted slots (B, N), strict and with generated pieces as a set, and
        the authors' reversible Kendall distance."""
        true_pos, missing = batch["true_pos"].cpu().numpy(), batch["missing"].cpu().numpy()
        as_set = relabel_generated(positions, true_pos, missing)
        return {"kendall": float(np.mean(kendall_distance(positions, true_pos))),
                "exact": puzzle_accuracy(positions, true_pos),
                "kendall_set": float(np.mean(kendall_distance(positions, as_set))),
                "exact_set": puzzle_accuracy(positions, as_set),
                "kendall_rev": float(np.mean(kendall_reversible(positions, true_pos)))}

    def summary(self, metrics):
        return (f"mean Kendall distance {metrics['kendall']:.4f} (generated pieces as a set "
                f"{metrics['kendall_set']:.4f}), exactly ordered {metrics['exact']:.4f} ({metrics['exact_set']:.4f})")

    def picture(self, batch, positions, content, k):
        """Puzzle k of a solved batch (content decoded to pixels): shuffled | solved | ground truth clips."""
        return video_row(batch, positions, content, k=k)

    def save_pictures(self, folder, rows):
        """examples.gif of picture() rows; returns (path, what its columns show)."""
        path = write_rows(os.path.join(folder, "examples.gif"), rows, ["shuffled", "solved", "ground truth"])
        return path, "shuffled input | solved, generated frames in red | ground truth"


KINDS = {"image": Images, "video": Videos}


def of(config):
    """The kind of a Config or of its puzzle config, bound to that puzzle config."""
    puzzle = getattr(config, "puzzle", config)
    return KINDS[puzzle.kind](puzzle)
