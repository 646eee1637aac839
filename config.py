"""
The settings of a run: dataclasses of plain fields, and nothing else (what differs between image and video puzzles in
behaviour is kinds.py; the networks, datasets and pictures import these settings, not the other way round).

A checkpoint's "config" is `Config.to_dict()`: plain types only (no command line travels with it). It holds
- `puzzle`: what the puzzles are (ImageConfig or VideoConfig): grid or pieces, piece size, missing pieces, the
  dataset and its folder (sample.py reads the test split from there by default), and how training puzzles are drawn;
- `model`: the network's hyperparameters (DiTConfig for images, UNetConfig for videos; their size tables are dit.CONFIGS
  and unet3d.CONFIGS);
- `train`: the training hyperparameters (TrainConfig), so that `--resume` continues the same run;
- `prediction`: what the network predicts (eps, the paper's, or x0).
`Config.from_dict(d, path)` reads it back and refuses an unknown or missing key in one sentence naming the file.
`Config.run` (RunConfig: output folder, device, workers, ...) is how this process runs, never stored.

    config = Config(puzzle=ImageConfig(grid=(3, 3)), model=DiTConfig(), train=TrainConfig())
    model = DiT(config.model)                     # or kinds.of(config).network(config.model)
"""
from dataclasses import asdict, dataclass, field, fields
from typing import ClassVar, Optional, Tuple, Union

from cli import UserError

# ----------------------------------------------------------------------------
# Puzzles
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
    paired_pictures: bool = False            # shapes, training: positions 2k, 2k+1 share a picture, mirrored

    kind: ClassVar[str] = "image"

    def check(self):
        """Refuse (UserError) a --missing that leaves no piece to place."""
        rows, cols = self.grid
        check_missing(self.missing, rows * cols, kept=int(self.anchor),
                      what=f"a {rows}x{cols} grid{' with an anchor' if self.anchor else ''}")


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

    def check(self):
        """Refuse (UserError) piece counts, --missing or --frame-stride that cannot make a puzzle."""
        check_video(self.pieces, self.frames_per_piece, self.missing, frame_stride=self.frame_stride)


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


# ----------------------------------------------------------------------------
# Networks
# ----------------------------------------------------------------------------

@dataclass
class DiTConfig:
    """The image network (dit.DiT): a ViT with adaLN-Zero; dit.CONFIGS names its sizes."""
    piece_size: int = 16      # pixels per side of a piece
    patch_size: int = 8       # ViT patch; a piece is (piece_size / patch_size)^2 tokens
    in_channels: int = 3
    code_dim: int = 32         # the paper's 2D positional code
    hidden: int = 128
    depth: int = 4
    heads: int = 4
    mlp_dim: int = 512


@dataclass
class UNetConfig:
    """The video network (unet3d.UNet3D): a pseudo-3D U-Net; unet3d.CONFIGS names its sizes."""
    channels: tuple = (64, 128, 256, 512)  # width of each resolution level; H, W halve between levels
    layers_per_block: int = 3              # P-3D resnet layers per level (down and up) in the U-Net
    attn_levels: tuple = (0, 1, 2, 3)      # levels (0 = full resolution) with 2D+1D attention; mid always has it
    heads: int = 8
    head_dim: int = 64
    in_channels: int = 4                   # frame channels: 1 digits, 3 RGB, 4 VAE latents
    frames_per_piece: int = 1
    code_dim: int = 16                      # size of the 1D positional code (posenc.sequence_table)
    code_channels: int = 4                  # channels of the positional-code map concatenated to every frame
    patch_size: int = 1                    # >1: space-to-depth stem (p x p pixels -> p*p channels) and back
    norm_groups: int = 32                  # GroupNorm groups (must divide every width)
    head_hidden: int = 128                 # width of the transformer over pieces that reads out positional codes
    head_depth: int = 3
    head_heads: int = 4
    layout_channels: int = 8               # the positional head reads, of a piece's first and last frames, the
    layout_pool: int = 8                   # U-Net features reduced to layout_channels and pooled to this side,
    pixel_pool: int = 16                   # and the frame's pixels pooled to this side


PUZZLES = {"image": ImageConfig, "video": VideoConfig}
MODELS = {"image": DiTConfig, "video": UNetConfig}
# training-only fields of levers since removed (bench/notes.md, "Removed levers"): checkpoints that have them load
# without them (sampling never read them)
RETIRED = {"color_jitter", "rotate", "mix_pictures"}
# fields added after checkpoints were written, with the value those checkpoints were trained with
ADDED = {"paired_pictures": False}


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
class RunConfig:
    """How this process runs a training (the scripts' run flags of the same names); never stored in a checkpoint."""
    out: str = "out/run"                     # ckpt.pt and log.txt
    device: str = "auto"                     # auto (cuda, else mps, else cpu), cpu, cuda, cuda:N or mps
    workers: int = 1                         # data-loading processes
    compile: bool = False                    # torch.compile the model
    init: Optional[str] = None               # fine-tune from this checkpoint's EMA weights
    log_every: int = 50                      # read and log the losses every N steps


@dataclass
class Config:
    """Everything a checkpoint needs to rebuild its model and its puzzles, and how this process runs."""
    puzzle: Union[ImageConfig, VideoConfig]
    model: Union[DiTConfig, UNetConfig]
    train: TrainConfig = field(default_factory=TrainConfig)
    prediction: str = "x0"                   # network target: eps (paper) or x0
    run: RunConfig = field(default_factory=RunConfig, compare=False)   # this process only: not in to_dict()

    @property
    def kind(self):
        return self.puzzle.kind

    def to_dict(self):
        return {"kind": self.kind, "prediction": self.prediction, "puzzle": asdict(self.puzzle),
                "model": asdict(self.model), "train": asdict(self.train)}

    @classmethod
    def from_dict(cls, d, path):
        """Read a checkpoint's config dict back, refusing (one sentence naming `path`) unknown or missing keys."""
        if not isinstance(d, dict) or d.get("kind") not in PUZZLES or "puzzle" not in d:
            raise UserError(f"checkpoint {path} has no config of this jpdvt version (written by an older one?); "
                            "convert it with `python -m bench.upgrade OLD.pt NEW.pt`")
        parts = {"puzzle": PUZZLES[d["kind"]], "model": MODELS[d["kind"]], "train": TrainConfig}
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
    """cls(**d), lists back to tuples, after checking that d's keys are cls's fields (RETIRED ones dropped, ADDED ones
    filled in)."""
    names = {f.name for f in fields(cls)}
    if isinstance(d, dict):
        d = {**{k: v for k, v in ADDED.items() if k in names},
             **{k: v for k, v in d.items() if k in names or k not in RETIRED}}
    _check_keys(d, names, where, path=path)
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
