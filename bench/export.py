"""
A shippable checkpoint: the config, the EMA weights, the step and the sampling record of a training run's ckpt.pt, with
the model, optimizer and grad scaler left empty (`python -m bench --export SRC DST`).
"""
import os

import torch

from config import FORMAT
from plumbing.cli import UserError


def export_checkpoint(src, dst):
    """A shippable copy of checkpoint `src` at `dst`: config, EMA weights, step and sampling record (model and
    optimizer gone; a stored judge left out: the judge is an option of each solve, never a checkpoint's). Returns
    dst's size in MiB."""
    ck = torch.load(src, map_location="cpu", weights_only=True)
    if ck.get("format", 1) > FORMAT:
        raise UserError(f"checkpoint {src} has format {ck['format']}, newer than this version's {FORMAT}; update "
                        "jpdvt (git pull) to export it")
    torch.save({"format": FORMAT, "config": ck["config"], "model": {}, "ema": ck["ema"], "opt": {},
                "step": ck["step"], "sampling": {k: v for k, v in ck.get("sampling", {}).items() if k != "judge"}},
               dst)
    return os.path.getsize(dst) / 2 ** 20
