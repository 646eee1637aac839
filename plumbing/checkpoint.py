"""
Checkpoints: one `ckpt.pt` = {config, model, ema, opt, scaler, step, data}, plain types and tensors only (data:
which files of a folder dataset it trained on, sources.files.fingerprint; None for built-in and fixed-index data),
and the run's settings they hold. Not in the paper.

- `Config`: puzzle (puzzles.ImageConfig / VideoConfig), model (dit.DiTConfig / unet3d.UNetConfig), train
  (`TrainConfig`) and prediction, what a checkpoint needs to rebuild its model and puzzles; `RunConfig`: how this
  process runs (output folder, device, workers), never stored.
- `save_checkpoint` writes atomically (temp file + rename), so a kill never leaves a broken file.
- `load_checkpoint` reads with torch.load(weights_only=True), so a checkpoint can never run code, and turns its
  config dict back into a Config (refusing, in one sentence naming the file, one that does not fit).
Shipped checkpoints hold the EMA weights only (model, opt and scaler empty, `export_checkpoint`): they can be sampled,
not resumed.

    save_checkpoint("out/run/ckpt.pt", {"config": config.to_dict(), "model": ..., "ema": ..., "opt": ...,
                                        "scaler": ..., "step": 100})
    ckpt = load_checkpoint("out/run/ckpt.pt", kind="image")        # ckpt["config"] is a Config
"""
import contextlib
import os
import pickle
import zipfile
from dataclasses import asdict, dataclass, field, fields
from typing import Optional, Union

import torch

from dit import DiTConfig
from plumbing.cli import UserError
from puzzles import ImageConfig, VideoConfig
from unet3d import UNetConfig


def save_checkpoint(path, ckpt):
    """
    Write atomically: a temp file in the same folder, then rename, so a kill never leaves a broken ckpt. Temp
    files that a killed run left behind are removed after the rename.
    """
    folder, name = os.path.split(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(ckpt, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    for stale in os.listdir(folder):                       # temp files of killed runs (not of live ones)
        pid = stale[len(f".{name}.tmp"):]
        if stale.startswith(f".{name}.tmp") and pid.isdigit() and not process_alive(int(pid)):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(folder, stale))


def process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def load_checkpoint(path, kind=None):
    """Load safely (weights_only: no code runs); kind = "image" | "video" checks what the checkpoint holds."""
    if not os.path.isfile(path):
        raise UserError(f"checkpoint {path} does not exist; pass the ckpt.pt written by a training run")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise UserError(f"checkpoint {path} holds objects other than tensors and plain types; refusing to load "
                        "it (it could run code)") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError):
        raise UserError(f"checkpoint {path} is truncated or not a PyTorch checkpoint; use an intact ckpt.pt") \
            from None
    if not isinstance(ckpt, dict) or not {"config", "model", "ema", "step"} <= set(ckpt):
        raise UserError(f"checkpoint {path} is not a jpdvt checkpoint (it lacks config/model/ema/step)")
    ckpt["config"] = Config.from_dict(ckpt["config"], path)
    if kind is not None and ckpt["config"].kind != kind:
        raise UserError(f"checkpoint {path} is a {ckpt['config'].kind} model, not a {kind} model; use "
                        f"train_{ckpt['config'].kind}.py's checkpoints with this command")
    return ckpt


def export_checkpoint(src, dst):
    """A shippable copy of checkpoint `src` at `dst`: config, EMA weights, step and data record (model, optimizer and
    grad scaler left empty). Returns dst's size in MiB."""
    ck = torch.load(src, map_location="cpu", weights_only=True)
    save_checkpoint(dst, {"config": ck["config"], "model": {}, "ema": ck["ema"], "opt": {}, "scaler": {},
                          "step": ck["step"], "data": ck.get("data")})
    return os.path.getsize(dst) / 2 ** 20


# ----------------------------------------------------------------------------
# What a checkpoint's config holds
# ----------------------------------------------------------------------------

PUZZLES = {"image": ImageConfig, "video": VideoConfig}
MODELS = {"image": DiTConfig, "video": UNetConfig}


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
            raise UserError(f"checkpoint {path} has no config of this jpdvt version; use a checkpoint written by "
                            "this version")
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
    """cls(**d), lists back to tuples, after checking that d's keys are cls's fields."""
    _check_keys(d, {f.name for f in fields(cls)}, where, path=path)
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
