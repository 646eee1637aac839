"""
Checkpoints: one `ckpt.pt` = {config, model, ema, opt, scaler, step, data}, plain types and tensors only (data:
which files of a folder dataset it trained on, sources.files.fingerprint; None for built-in and fixed-index data),
and the run's settings they hold. Not in the paper.

Writes are atomic and loads run no code (weights_only); a config from before a setting was added loads with its
default (FORMAT, ADDED). Shipped checkpoints hold the EMA weights only (model, opt and scaler empty, bench/export.py):
they can be sampled, not resumed.

    save_checkpoint("out/run/ckpt.pt", {"config": config.to_dict(), "model": ..., "ema": ..., "opt": ...,
                                        "scaler": ..., "step": 100})
    ckpt = load_checkpoint("out/run/ckpt.pt", kind="image")        # ckpt["config"] is a Config
"""
import os
import pickle
import zipfile
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, Union

import torch

from dit import DiTConfig
from plumbing.cli import UserError
from puzzles import ImageConfig, VideoConfig
from sources.files import VIEW_SCALE, fingerprint
from sources.vae import folder_digest
from unet3d import UNetConfig


def save_checkpoint(path, ckpt):
    """Write atomically: a temporary file in the same folder, then a rename, so a kill never leaves a broken ckpt."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp"
    torch.save(ckpt, tmp)
    os.replace(tmp, path)


def load_checkpoint(path, kind=None):
    """Load safely (weights_only: no code runs); kind = "image" | "video" checks what the checkpoint holds."""
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
    if not isinstance(ckpt, dict) or not {"config", "model", "ema", "step"} <= set(ckpt):
        raise UserError(f"checkpoint {path} is not a jpdvt checkpoint (it lacks config/model/ema/step)")
    if ckpt.get("format", 1) > FORMAT:
        raise UserError(f"checkpoint {path} has format {ckpt['format']}, newer than this version's {FORMAT}; update "
                        "jpdvt (git pull) to read it")
    ckpt["removed"] = removed_settings(ckpt["config"])
    ckpt["config"] = Config.from_dict(ckpt["config"], path)
    if kind is not None and ckpt["config"].kind != kind:
        have = ckpt["config"].kind
        raise UserError(f"checkpoint {path} holds the {have} model, not the {kind} model; pass "
                        f"it to train_{have}.py, or give this command a train_{kind}.py checkpoint")
    return ckpt


def training_files(train_set, puzzle, before, resuming):
    """The checkpoint's "data": which files of a folder dataset the weights trained on (sources.files.fingerprint; None
    for built-in streams and Moving MNIST, split by construction) and, for latent models, which autoencoder made the
    latents ("vae": sources.vae.folder_digest), with the record of the run they continue ("before": --init's) when it
    differs. A resumed run must train on the files and the autoencoder it trained on, and keeps its record."""
    files, data_dir, vae = getattr(train_set, "files", None), puzzle.data_dir, getattr(puzzle, "vae", None)
    data = fingerprint(files, data_dir, splits=["train"]) if files else None
    if vae:
        data = {**(data or {"splits": [], "files": 0, "digest": None}), "vae": folder_digest(vae)}
        if resuming and before and before.get("vae", data["vae"]) != data["vae"]:
            raise UserError(f"--vae {vae} holds another autoencoder than the one the checkpoint trained with: a "
                            "resumed run keeps its training stream; pass that autoencoder's folder, or start a new run "
                            "from its weights with --init")
    if resuming and before and data and before.get("digest") == data["digest"]:
        return {**before, **({"vae": data["vae"]} if vae else {})}   # the same files: the record as it was
    if resuming and before and data:
        raise UserError(f"--data-dir {data_dir} holds other training files ({data['files']}) than the checkpoint "
                        f"trained on ({before.get('files')}): a resumed run keeps its training stream; pass the folder "
                        "it trained on, or start a new run from its weights with --init")
    if before is not None and before != data:
        data = {**(data or {"splits": [], "files": 0, "digest": None}), "before": before}
    return data


# ----------------------------------------------------------------------------
# What a checkpoint's config holds
# ----------------------------------------------------------------------------

PUZZLES = {"image": ImageConfig, "video": VideoConfig}
MODELS = {"image": DiTConfig, "video": UNetConfig}
# the fields of train.TrainConfig (a test keeps them equal), checked here so that loading needs no training code;
# ADDED: the settings added after the first checkpoints, with the default that an older checkpoint loads with
TRAIN_KEYS = ("batch_size", "lr", "warmup", "schedule", "max_steps", "ema_decay", "weight_code", "weight_content",
              "precision", "seed", "ckpt_every", "eval_every", "eval_puzzles", "eval_steps", "accum")
ADDED = {"train": {"accum": 1}, "puzzle": {}, "model": {"codes": "piece"}}
# settings that were removed, with the value whose behaviour is now the only one: dropped when an older checkpoint
# loads (a checkpoint that had another value samples as before, but cannot be resumed: its stream is gone)
REMOVED = {"paired_pictures": False, "crop_scale": VIEW_SCALE}
# the checkpoint format: 1 had no "format" key; 2 may lack the settings added later (they load with their defaults)
FORMAT = 2


@dataclass
class Config:
    """Everything a checkpoint needs to rebuild its model and its puzzles, the settings it trained with, and how this
    process runs. `train` is a train.TrainConfig while training; loaded from a checkpoint it is the plain dict stored
    (only a resumed run reads it, as a TrainConfig); `run` is a plumbing.flags.RunConfig, never stored."""
    puzzle: Union[ImageConfig, VideoConfig]
    model: Union[DiTConfig, UNetConfig]
    train: Any                               # train.TrainConfig, or its stored dict
    prediction: str = "x0"                   # network target: eps (the paper's text) or x0
    run: Any = field(default=None, compare=False)   # plumbing.flags.RunConfig: this process only, not stored

    @property
    def kind(self):
        return self.puzzle.kind

    def to_dict(self):
        return {"kind": self.kind, "prediction": self.prediction, "puzzle": asdict(self.puzzle),
                "model": asdict(self.model),
                "train": asdict(self.train) if is_dataclass(self.train) else dict(self.train)}

    @classmethod
    def from_dict(cls, d, path):
        """Read a checkpoint's config dict back, refusing (one sentence naming `path`) unknown or missing keys."""
        if not isinstance(d, dict) or d.get("kind") not in PUZZLES or "puzzle" not in d:
            raise UserError(f"checkpoint {path} has no config of this jpdvt version; use a checkpoint written by "
                            "this version")
        parts = {"puzzle": PUZZLES[d["kind"]], "model": MODELS[d["kind"]]}
        check_keys(d, {"kind", "prediction", "train", *parts}, "config", path=path)
        typed = {k: typed_part(c, d[k], f"config.{k}", path=path) for k, c in parts.items()}
        train = d["train"]
        if isinstance(train, dict):
            train = {**ADDED["train"], **{k: v for k, v in train.items() if k not in REMOVED}}
        check_keys(train, set(TRAIN_KEYS), "config.train", path=path)
        return cls(prediction=d["prediction"], train=train, **typed)


def check_keys(d, want, where, path):
    if not isinstance(d, dict) or set(d) != set(want):
        have = set(d) if isinstance(d, dict) else set()
        problems = [f"unknown {', '.join(sorted(have - want))}"] if have - want else []
        problems += [f"missing {', '.join(sorted(want - have))}"] if want - have else []
        raise UserError(f"checkpoint {path} has a {where} that does not fit this jpdvt version "
                        f"({'; '.join(problems) or 'not a dict'}); use a checkpoint written by this version")


def removed_settings(config):
    """{name: value} of the REMOVED settings a stored config holds with another value than today's behaviour."""
    parts = [v for v in config.values() if isinstance(v, dict)] if isinstance(config, dict) else []
    return {k: v for part in parts for k, v in part.items() if k in REMOVED and as_stored(v) != REMOVED[k]}


def as_stored(value):
    """A setting as a config holds it: lists (a pickled or JSON tuple may come back as one) back to tuples."""
    return tuple(value) if isinstance(value, list) else value


def typed_part(cls, d, where, path):
    """cls(**d), lists back to tuples, after checking that d's keys are cls's fields: a field added after the
    checkpoint was written (ADDED) takes its default, a removed one (REMOVED) is dropped."""
    part, names = where.split(".")[-1], {f.name for f in fields(cls)}
    if isinstance(d, dict):
        added = {k: v for k, v in ADDED.get(part, {}).items() if k in names}   # (an image model's, not a video's)
        d = {**added, **{k: v for k, v in d.items() if k not in REMOVED}}
    check_keys(d, names, where, path=path)
    return cls(**{k: as_stored(v) for k, v in d.items()})
