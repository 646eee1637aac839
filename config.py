"""
The settings of a run, typed, and everything that differs between image and video puzzles.

A checkpoint's "config" is `Config.to_dict()`: plain types only (no command line travels with it). It holds
- `puzzle`: what the puzzles are (ImageConfig or VideoConfig): grid or pieces, piece size, missing pieces, the
  dataset and its folder (sample.py reads the test split from there by default), and how training puzzles are drawn;
- `model`: the network's hyperparameters (dit.DiTConfig for images, unet3d.UNetConfig for videos);
- `train`: the training hyperparameters (TrainConfig), so that `--resume` continues the same run;
- `prediction`: what the network predicts (eps, the paper's, or x0).
`Config.from_dict(d, path)` reads it back and refuses an unknown or missing key in one sentence naming the file.

The kind of puzzle is chosen once, by the class of `config.puzzle`; its methods hold the per-kind behaviour: the
table of true codes (posenc.py), the network, the puzzle stream (puzzles.py) and the test metrics (metrics.py).

    config = Config(puzzle=ImageConfig(grid=(3, 3)), model=DiTConfig(), train=TrainConfig())
    config.puzzle.table()                                   # (9, 32): the code of every position
    test = config.puzzle.puzzles("test", seed=0)            # puzzles.ImagePuzzles
    metrics = config.puzzle.score(positions, batch)         # {"piece_acc": ..., "puzzle_acc": ...}
"""
import os
from dataclasses import asdict, dataclass, field, fields
from typing import ClassVar, Optional, Tuple, Union

import numpy as np

from cli import UserError
from dit import DiT, DiTConfig
from jpdvt import known_codes
from metrics import kendall_distance, kendall_reversible, piece_accuracy, puzzle_accuracy, relabel_generated
from pictures import image_row, save_png, stack, video_row, write_rows
from posenc import grid_table, sequence_table
from puzzles import DATASETS, VIDEO_DATASETS, ImagePuzzles, VideoPuzzles
from unet3d import UNet3D, UNetConfig

# ----------------------------------------------------------------------------
# Images
# ----------------------------------------------------------------------------

@dataclass
class ImageConfig:
    """Image puzzles (train_image.py): an R x C grid of square pieces, each cut from a cell of piece_size + gap px."""
    dataset: str = "shapes"                  # where images come from (puzzles.DATASETS)
    data_dir: Optional[str] = None           # image folder of folder/imagenet/jpwleg3
    grid: Tuple[int, int] = (3, 3)           # rows, cols
    piece_size: int = 16                     # piece side in pixels
    gap: int = 0                             # erosion: extra pixels per cell around each piece
    missing: int = 0                         # missing pieces: 0..K at random in training, exactly K when scoring
    anchor: bool = False                     # the true code of the first shuffled piece is given (paper's anchoring)
    crop_scale: Tuple[float, float] = (0.3, 1.0)  # folder, training: side of a random view, of the largest box
    mix_shapes: float = 0.0                  # folder/imagenet, training: this fraction of puzzles are built-in shapes

    kind: ClassVar[str] = "image"
    model_config: ClassVar[type] = DiTConfig
    network: ClassVar[type] = DiT
    vae: ClassVar[Optional[str]] = None      # image pieces are always diffused in pixels
    datasets: ClassVar[dict] = DATASETS
    inputs: ClassVar[tuple] = ("image", "pieces")   # sample.py flags that take your own data
    reported: ClassVar[tuple] = ("grid", "piece_size", "gap", "anchor")   # copied into sample.py's metrics.json
    pictured: ClassVar[int] = 8              # test puzzles pictured by sample.py
    solved: ClassVar[str] = "puzzle_acc"     # the metric of fully solved puzzles
    counted: ClassVar[str] = (
        "piece_acc and puzzle_acc count the pieces the model had to place: given pieces, not the anchored one "
        "(whose position the model is told); missing pieces are generated and not scored")

    def check(self):
        """Refuse (UserError) a --missing that leaves no piece to place."""
        rows, cols = self.grid
        check_missing(self.missing, rows * cols, kept=int(self.anchor),
                      what=f"a {rows}x{cols} grid{' with an anchor' if self.anchor else ''}")

    def table(self):
        """(rows * cols, 32): the 2D code of every grid position, raster order."""
        return grid_table(*self.grid)

    def puzzles(self, split, seed):
        return ImagePuzzles(self, split, seed)

    def score(self, positions, batch):
        """Piece and puzzle accuracy of predicted positions (B, N) over the pieces the model had to place."""
        true_pos, missing = batch["true_pos"].cpu().numpy(), batch["missing"].cpu().numpy()
        placed = ~missing & ~known_codes(batch, self.anchor).cpu().numpy()      # not the anchored piece
        return {"piece_acc": piece_accuracy(positions, true_pos, placed),
                "puzzle_acc": puzzle_accuracy(positions, true_pos, placed)}

    def summary(self, metrics):
        return f"piece accuracy {metrics['piece_acc']:.4f}, puzzle accuracy {metrics['puzzle_acc']:.4f}"

    def picture(self, batch, positions, content, k):
        """Puzzle k of a solved batch: shuffled input | solved | solved and inpainted | ground truth."""
        return image_row(batch, positions, content, grid=self.grid, k=k)

    def save_pictures(self, folder, rows):
        """examples.png of picture() rows; returns (path, what its columns show)."""
        path = os.path.join(folder, "examples.png")
        save_png(path, stack(rows, axis=0))
        return path, "shuffled input | solved | solved + inpainted | ground truth"


# ----------------------------------------------------------------------------
# Videos
# ----------------------------------------------------------------------------

@dataclass
class VideoConfig:
    """Temporal puzzles (train_video.py): a clip cut into pieces of consecutive frames; the first stays first."""
    dataset: str = "digits"                  # where videos come from (puzzles.VIDEO_DATASETS)
    data_dir: Optional[str] = None           # movingmnist: MNIST IDX folder or .npy file; videos: a folder
    pieces: int = 5                          # pieces per puzzle, the first one the anchor
    frames_per_piece: int = 4                # consecutive frames in each piece
    size: int = 32                           # frame side in pixels
    channels: int = 1                        # pixel channels of the frames (1 grey, 3 RGB)
    frame_stride: int = 1                    # keep every N-th frame
    missing: int = 0                         # missing pieces: 0..K at random in training, exactly K when scoring
    vae: Optional[str] = None                # autoencoder folder: diffuse its latents instead of pixels
    curriculum: Optional[Tuple[int, int, int]] = None  # training: (first pieces, steps to all, stream items a step)

    kind: ClassVar[str] = "video"
    model_config: ClassVar[type] = UNetConfig
    network: ClassVar[type] = UNet3D
    datasets: ClassVar[dict] = VIDEO_DATASETS
    inputs: ClassVar[tuple] = ("video", "frames", "superres")
    reported: ClassVar[tuple] = ("pieces", "frames_per_piece", "size", "frame_stride")
    pictured: ClassVar[int] = 4
    solved: ClassVar[str] = "exact"
    anchor: ClassVar[bool] = True            # the first piece stays first and its code is given
    counted: ClassVar[str] = (
        "kendall and exact compare every piece's slot, generated pieces included, each against the slot of the clip it "
        "replaced (strict); kendall_set and exact_set compare the slots of generated pieces as a set (they start as "
        "interchangeable noise); the anchor (first piece) counts in all four; kendall_rev is the authors' variant, the "
        "smaller of the strict distances of the predicted order and of its reverse (a fully reversed clip scores 0)")

    def check(self):
        """Refuse (UserError) piece counts, --missing or --frame-stride that cannot make a puzzle."""
        check_video(self.pieces, self.frames_per_piece, self.missing, frame_stride=self.frame_stride)

    def table(self):
        """(pieces, 16): the 1D code of every time slot."""
        return sequence_table(self.pieces)

    def puzzles(self, split, seed):
        return VideoPuzzles(self, split, seed)

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


def check_missing(missing, pieces, kept, what):
    """--missing must leave the `kept` always-given pieces (the anchor) and at least one more piece to place."""
    if not 0 <= missing < pieces - kept:
        raise UserError(f"--missing must be between 0 and {pieces - 1 - kept} for {what}, got {missing}")


def check_video(pieces, frames_per_piece, missing, frame_stride):
    """Validate the video puzzle flags; raises UserError with a one-line fix."""
    if pieces < 2:
        raise UserError(f"--pieces must be at least 2 (the anchor and a piece to place), got {pieces}")
    if frames_per_piece < 1:
        raise UserError(f"--frames-per-piece must be at least 1, got {frames_per_piece}")
    check_missing(missing, pieces, kept=1, what=f"{pieces} pieces (the first, the anchor, stays given)")
    if frame_stride < 1:
        raise UserError(f"--frame-stride must be at least 1, got {frame_stride}")


KINDS = {"image": ImageConfig, "video": VideoConfig}
# training-only fields of levers since removed (bench/notes.md, "Removed levers"): checkpoints that have them load
# without them (sampling never read them)
RETIRED = {"color_jitter", "rotate"}


# ----------------------------------------------------------------------------
# Training, and the whole run
# ----------------------------------------------------------------------------

@dataclass
class TrainConfig:
    """How a run trains: the train_*.py flags of the same names (their defaults differ by script)."""
    batch_size: int = 32                     # puzzles per step, over all processes (each of W takes B / W)
    lr: float = 1e-3                         # AdamW learning rate (weight decay 0)
    warmup: int = 100                        # linear warmup steps
    schedule: str = "constant"               # constant (the paper states no schedule) or cosine from step 0 to
                                             # 0 at max_steps, either times the warm-up ramp
    max_steps: int = 2000                    # total training steps
    ema_decay: float = 0.999                 # EMA of the weights used for sampling
    weight_code: float = 1.0                 # loss weight of the positional codes
    weight_content: float = 0.1              # loss weight of missing pieces' content (a mean over the missing
                                             # entries of the batch, whatever their number)
    precision: str = "auto"                  # autocast: auto (bf16 on CUDA, fp32 on CPU), fp32, bf16 or fp16
    seed: int = 0                            # data stream, noise and initial weights
    ckpt_every: int = 500                    # write ckpt.pt every N steps
    eval_every: int = 500                    # held-out check every N steps (0: only at the end)
    eval_puzzles: int = 64                   # puzzles of the held-out check
    eval_steps: int = 20                     # DDIM steps of the held-out check


@dataclass
class Config:
    """Everything a checkpoint needs to rebuild its model and its puzzles."""
    puzzle: Union[ImageConfig, VideoConfig]
    model: Union[DiTConfig, UNetConfig]
    train: TrainConfig = field(default_factory=TrainConfig)
    prediction: str = "x0"                   # network target: eps (paper) or x0

    @property
    def kind(self):
        return self.puzzle.kind

    def build_network(self):
        return self.puzzle.network(self.model)

    def to_dict(self):
        return {"kind": self.kind, "prediction": self.prediction, "puzzle": asdict(self.puzzle),
                "model": asdict(self.model), "train": asdict(self.train)}

    @classmethod
    def from_dict(cls, d, path):
        """Read a checkpoint's config dict back, refusing (one sentence naming `path`) unknown or missing keys."""
        if not isinstance(d, dict) or d.get("kind") not in KINDS or "puzzle" not in d:
            raise UserError(f"checkpoint {path} has no config of this jpdvt version (written by an older one?); "
                            "convert it with `python -m bench.upgrade OLD.pt NEW.pt`")
        puzzle = KINDS[d["kind"]]
        parts = {"puzzle": puzzle, "model": puzzle.model_config, "train": TrainConfig}
        _check_keys(d, {"kind", "prediction", *parts}, "config", path=path)
        typed = {k: _typed(c, d[k], f"config.{k}", path=path) for k, c in parts.items()}
        return cls(prediction=d["prediction"], **typed)


def _check_keys(d, want, where, path):
    if not isinstance(d, dict) or set(d) != set(want):
        have = set(d) if isinstance(d, dict) else set()
        problems = [f"unknown {', '.join(sorted(have - want))}"] if have - want else []
        problems += [f"missing {', '.join(sorted(want - have))}"] if want - have else []
        raise UserError(f"checkpoint {path} has a {where} that does not fit this jpdvt version "
                        f"({'; '.join(problems) or 'not a dict'}); use a checkpoint written by this version")


def _typed(cls, d, where, path):
    """cls(**d), lists back to tuples, after checking that d's keys are cls's fields (RETIRED ones dropped)."""
    names = {f.name for f in fields(cls)}
    if isinstance(d, dict):
        d = {k: v for k, v in d.items() if k in names or k not in RETIRED}
    _check_keys(d, names, where, path=path)
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
