"""
Checkpoints: one `ckpt.pt` = {config, model, ema, opt, scaler, step, data}, plain types and tensors only (data:
which files of a folder dataset it trained on, sources.fingerprint; None for built-in and fixed-index data).

- `save_checkpoint` writes atomically (temp file + rename), so a kill never leaves a broken file.
- `load_checkpoint` reads with torch.load(weights_only=True), so a checkpoint can never run code, and turns its
  config dict back into a config.Config (refusing, in one sentence naming the file, one that does not fit).
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

import torch

from cli import UserError
from config import Config


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
