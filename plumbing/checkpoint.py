"""
Reading a checkpoint, `ckpt.pt` = {format, config, model, ema, opt, step} (train.py writes it), and starting a run from
one with --init (fine-tuning its EMA weights; --resume is train.resume). Not in the paper.

Loads run no code (weights_only). A setting the checkpoint lacks takes its dataclass default; one this version does
not know is refused, named. Shipped checkpoints hold the EMA weights only (model and opt empty) and may carry the
sampling chosen for them on val ("sampling"): they can be sampled and fine-tuned, not resumed.

    ckpt = load_checkpoint("out/run/ckpt.pt", kind="image")        # ckpt["config"] is a Config
"""
import os
import pickle
import zipfile
from dataclasses import dataclass, fields
from typing import Any, Union

import torch

from dit import DiTConfig
from plumbing.cli import UserError
from puzzles import ImageConfig, VideoConfig
from unet3d import UNetConfig

FORMAT = 3                                   # 1 had no "format" key; 3 dropped the training files' record



@dataclass
class Config:
    """A run's settings, stored in its checkpoint: the puzzles, the network, the training and the network's target.
    `train` is a train.TrainConfig; read from a checkpoint, the dict stored (train.resume types it)."""
    puzzle: Union[ImageConfig, VideoConfig]
    model: Union[DiTConfig, UNetConfig]
    train: Any
    prediction: str = "x0"                   # eps (the paper's text) or x0 (the authors' code)


PARTS = {"image": (ImageConfig, DiTConfig), "video": (VideoConfig, UNetConfig)}


def load_checkpoint(path, kind=None):
    """Load safely (weights_only: no code runs), ckpt["config"] a train.Config; kind = "image" | "video" checks what
    the checkpoint holds."""
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
    if ckpt.get("format", 1) > FORMAT:
        raise UserError(f"checkpoint {path} has format {ckpt['format']}, newer than this version's {FORMAT}; update "
                        "jpdvt (git pull) to read it")
    d = ckpt["config"]
    if not all(isinstance(d.get(part), dict) for part in ("puzzle", "model", "train")):
        raise UserError(f"checkpoint {path} has no config of this jpdvt version (puzzle, model and train settings); "
                        "use a checkpoint written by this version")
    puzzle, model = PARTS[d["kind"]]
    ckpt["config"] = Config(puzzle=typed(puzzle, d["puzzle"], path), model=typed(model, d["model"], path),
                            train=d["train"], prediction=d.get("prediction", "x0"))
    if kind is not None and d["kind"] != kind:
        raise UserError(f"checkpoint {path} holds the {d['kind']} model, not the {kind} model; pass it to "
                        f"train_{d['kind']}.py, or give this command a train_{kind}.py checkpoint")
    return ckpt


def typed(cls, d, path):
    """cls(**d): a field d lacks takes its default; a key cls does not have is refused, named; lists back to tuples
    (the grid)."""
    unknown = set(d) - {f.name for f in fields(cls)}
    if unknown:
        raise UserError(f"checkpoint {path} has settings this version of jpdvt does not know ({', '.join(unknown)}); "
                        "use a checkpoint written by this version")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def init_weights(path, config):
    """--init: the checkpoint at `path` as a start for train.train (its EMA weights, a fresh optimizer, step 0), after
    checking that its network has this run's settings."""
    src = load_checkpoint(path, config.puzzle.kind)
    if src["config"].model != config.model:
        diff = [f.name for f in fields(config.model) if getattr(src["config"].model, f.name) !=
                getattr(config.model, f.name)]
        raise UserError(f"--init {path} holds a model with other settings ({', '.join(diff)}); fine-tuning needs the "
                        "same --model, --piece-size, --patch-size, --codes and --code-dim (or frame settings) as that "
                        "run")
    if src["config"].prediction != config.prediction:
        raise UserError(f"--init {path} predicts {src['config'].prediction} and this run {config.prediction}; pass "
                        f"--prediction {src['config'].prediction} to fine-tune it")
    return {"model": None, "ema": src["ema"], "opt": None, "step": 0}
