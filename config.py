"""
A run's settings, as its checkpoint stores them, nanoGPT style: dataclasses with their defaults (the tiny CPU recipe).

- Config: the puzzles (puzzles.ImageConfig or VideoConfig), the network (dit.DiTConfig or unet3d.UNetConfig), the
  training (TrainConfig) and the network's target (x0 or eps). train.py stores it in ckpt.pt as plain dicts, with
  "kind" (image or video) beside them, so that sample.py and the readers in plumbing/ and solving/ rebuild it.
- RunConfig: how this process runs a training (device, data workers, logging); never stored.
- FORMAT: the version of the checkpoints train.py writes, {format, config, model, ema, opt, step}.

The training scripts fill these from the paper's table (configs/paper.py) and their flags (train_image.make_config).
"""
from dataclasses import dataclass
from typing import Union

from puzzles import ImageConfig, VideoConfig

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
