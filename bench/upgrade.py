"""
Convert a checkpoint written before the typed configs (jpdvt up to commit 690c079) to this version's format:
the config dict becomes {kind, prediction, puzzle, model, train} and positional-code layers are named "code"
instead of "pos". The shipped checkpoints were converted with it once.

    python -m bench.upgrade OLD.pt NEW.pt
"""
import sys
from dataclasses import asdict, fields

import torch

from checkpoint import load_checkpoint, save_checkpoint
from config import MODELS, TrainConfig

# old state-dict key prefixes -> new ones (DiT, then the video U-Net)
RENAMES = [("pos_embed.", "code_embed."), ("final.pos.", "final.code."), ("pos_mlp.", "code_map."),
           ("pos_reduce.", "code_reduce."), ("pos_in.", "code_in."), ("pos_cond.", "code_cond."),
           ("pos_out.", "code_out.")]


def rename(state):
    out = {}
    for key, value in state.items():
        for old, new in RENAMES:
            if key.startswith(old):
                key = new + key[len(old):]
        out[key] = value
    return out


def convert_config(old):
    args = old["args"]
    model = asdict(MODELS[old["kind"]]())         # fields added since the checkpoint: their defaults
    renamed = {"pos_dim": "code_dim", "pos_channels": "code_channels"}
    model.update({renamed.get(k, k): v for k, v in old["model"].items()})
    args = {**args, "weight_code": args["weight_pos"]}
    train = {f.name: args.get(f.name, f.default) for f in fields(TrainConfig)}
    if old["kind"] == "image":
        puzzle = {k: old[k] for k in ("dataset", "grid", "piece_size", "gap", "missing", "anchor")}
        puzzle.update(data_dir=args.get("data_dir"), crop_scale=tuple(args.get("crop_scale", (0.3, 1.0))),
                      mix_shapes=args.get("mix_shapes", 0.0), grid=tuple(old["grid"]))
    else:
        puzzle = {k: old[k] for k in ("dataset", "pieces", "frames_per_piece", "size", "channels", "frame_stride",
                                      "missing", "vae")}
        curriculum = args.get("curriculum")
        puzzle.update(data_dir=args.get("data_dir"),
                      curriculum=(*curriculum, args["batch_size"]) if curriculum else None)
    return {"kind": old["kind"], "prediction": old["prediction"], "puzzle": puzzle, "model": model, "train": train}


def upgrade(src, dst):
    old = torch.load(src, map_location="cpu", weights_only=True)
    new = {"config": convert_config(old["config"]), "model": rename(old["model"]), "ema": rename(old["ema"]),
           "opt": old["opt"], "scaler": {}, "step": old["step"]}
    save_checkpoint(dst, new)
    load_checkpoint(dst)                                      # refuses a config that does not fit
    print(f"wrote {dst} (step {new['step']})")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m bench.upgrade OLD.pt NEW.pt")
    upgrade(*sys.argv[1:])
