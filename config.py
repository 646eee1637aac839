"""
A run's settings, as its checkpoint stores them, nanoGPT style: dataclasses with their defaults (the tiny CPU recipe).

- Config: the puzzles (puzzles.ImageConfig or VideoConfig), the network (dit.DiTConfig or unet3d.UNetConfig), the
  training (TrainConfig) and the network's target (x0 or eps). train.py stores it in ckpt.pt as plain dicts, with
  "kind" (image or video) beside them; PARTS names the classes of each kind.
- RunConfig: how this process runs a training (device, data workers, logging); never stored.
- FORMAT: the version of the checkpoints train.py writes, {format, config, model, ema, opt, step}; a shipped
  checkpoint keeps the EMA alone and adds "sampling", the sampling chosen for it on val (sample.py reads it).
- load_checkpoint: the one way a checkpoint is read back (sample.py, solving.load, --init, --resume), its config
  typed as a Config.

The training scripts fill these from the paper's table (configs/paper.py) and their flags (train_image.make_config).

    ckpt = load_checkpoint("checkpoints/image-shapes-3x3.pt")        # ckpt["config"] is a Config
    model = PARTS[ckpt["config"].puzzle.kind].network(ckpt["config"].model)
"""
import os
import pickle
import zipfile
from dataclasses import dataclass, fields
from typing import NamedTuple, Union

import torch

from dit import DiT, DiTConfig
from plumbing.cli import UserError
from puzzles import ImageConfig, VideoConfig
from unet3d import UNet3D, UNetConfig

FORMAT = 3                                   # of the checkpoints train.py writes


@dataclass
class TrainConfig:
    """How a run trains (the flags of the same names). The defaults are the tiny CPU image recipe."""
    batch_size: int = 64                     # puzzles per step, over all processes (each of W takes B / W)
    lr: float = 2e-3                         # AdamW learning rate (weight decay 0)
    warmup: int = 100                        # linear warm-up steps
    schedule: str = "constant"               # constant (the paper states none) or cosine to 0 at max_steps
    max_steps: int = 3000                    # total training steps
    ema_decay: float = 0.999                 # the largest decay of the EMA of the weights used for sampling
    weight_code: float = 1.0                 # loss weight of the positional codes
    weight_content: float = 0.1              # loss weight of missing pieces' content (the paper's videos: 0.8)
    precision: str = "auto"                  # autocast: auto (bf16 on CUDA, fp32 on CPU and mps), fp32, bf16, fp16
    seed: int = 0                            # data stream, noise and initial weights
    ckpt_every: int = 500                    # write ckpt.pt every N steps
    eval_every: int = 500                    # held-out check every N steps (0: only at the end)
    eval_puzzles: int = 64                   # puzzles of the held-out check
    eval_steps: int = 20                     # DDIM steps of the held-out check
    accum: int = 1                           # micro-batches per process and step (gradient accumulation)
    clip: float = 1.0                        # the gradient's largest norm (the paper states none; 0: no clipping)


@dataclass
class Config:
    """A run's settings, stored in its checkpoint: the puzzles, the network, the training and the network's target."""
    puzzle: Union[ImageConfig, VideoConfig]
    model: object                            # a dit.DiTConfig or an unet3d.UNetConfig
    train: TrainConfig
    prediction: str = "x0"                   # eps (the paper's text) or x0 (the authors' code)


@dataclass
class RunConfig:
    """How this process runs a training (the flags of the same names); never stored."""
    out: str = "out/run"                     # ckpt.pt and log.txt
    device: str = "auto"                     # auto (cuda, else mps, else cpu), cpu, cuda, cuda:N or mps
    workers: int = 1                         # data-loading processes
    compile: bool = False                    # torch.compile the model
    log_every: int = 50                      # read and log the losses every N steps


class Parts(NamedTuple):
    """The classes of one kind of puzzle: its settings, its network's settings and its network."""
    puzzle: type
    model: type
    network: type


PARTS = {"image": Parts(ImageConfig, DiTConfig, DiT), "video": Parts(VideoConfig, UNetConfig, UNet3D)}

# ----------------------------------------------------------------------------
# Reading a checkpoint back
# ----------------------------------------------------------------------------

def load_checkpoint(path, kind=None):
    """ckpt.pt as train.py wrote it, {format, config, model, ema, opt, step}, with ckpt["config"] a Config. Loaded
    safely (weights_only: tensors and plain types, no code runs); a missing, unsafe, truncated, newer or foreign file
    is refused in one sentence, and so is a setting this version does not know (a field the checkpoint lacks takes its
    default). kind = "image" | "video" checks which network it holds."""
    ckpt = read(path)
    d = ckpt["config"]
    if kind is not None and d["kind"] != kind:
        raise UserError(f"checkpoint {path} holds the {d['kind']} model, not the {kind} model; pass it to "
                        f"train_{d['kind']}.py, or give this command a train_{kind}.py checkpoint")
    if ckpt.get("format", 1) > FORMAT:
        raise UserError(f"checkpoint {path} has format {ckpt['format']}, newer than this version's {FORMAT}; update "
                        "jpdvt (git pull) to read it")
    if not all(isinstance(d.get(part), dict) for part in ("puzzle", "model", "train")):
        raise UserError(f"checkpoint {path} has no config of this jpdvt version (puzzle, model and train settings); "
                        "use a checkpoint written by this version")
    parts = PARTS[d["kind"]]
    ckpt["config"] = Config(puzzle=typed(parts.puzzle, d["puzzle"], path), model=typed(parts.model, d["model"], path),
                            train=typed(TrainConfig, d["train"], path), prediction=d.get("prediction", "x0"))
    return ckpt


def read(path):
    """The checkpoint's dict, loaded with weights_only; refused in one sentence unless it is a jpdvt checkpoint."""
    if not os.path.isfile(path):
        raise UserError(f"checkpoint {path} does not exist; pass the ckpt.pt written by a training run")
    if not zipfile.is_zipfile(path):
        raise UserError(f"checkpoint {path} is truncated or not a PyTorch checkpoint; pass the ckpt.pt of a training "
                        "run or one of checkpoints/*.pt")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise UserError(f"checkpoint {path} holds objects other than tensors and plain types; refusing to load "
                        "it (it could run code)") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError):
        raise UserError(f"checkpoint {path} is truncated or not a PyTorch checkpoint; use an intact ckpt.pt") \
            from None
    if not isinstance(ckpt, dict) or not {"config", "ema", "step"} <= set(ckpt) or \
            not isinstance(ckpt["config"], dict) or ckpt["config"].get("kind") not in PARTS:
        raise UserError(f"checkpoint {path} is not a jpdvt checkpoint (it lacks config/ema/step)")
    return ckpt


def typed(cls, d, path):
    """cls(**d): a field d lacks takes its default; a key cls does not have is refused, named; lists back to tuples
    (the grid)."""
    unknown = sorted(set(d) - {f.name for f in fields(cls)})
    if unknown:
        raise UserError(f"checkpoint {path} has settings this version of jpdvt does not know ({', '.join(unknown)}); "
                        "use a checkpoint written by this version")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
