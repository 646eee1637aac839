"""
Which half of "predict eps" keeps the eps model at chance: the loss's weighting over t, or the network having to
output eps? Trains train_image.py with one of two crossed variants of the loss (everything else as the flags say):

- x0-snr: the network outputs x0 (as --prediction x0), but its loss is the eps loss written in x0: each puzzle's
  squared x0 error times SNR(t) = abar / (1 - abar), since ||eps_hat - eps||^2 = SNR(t) ||x0_hat - x0||^2.
- eps-x0w: the network outputs eps (as --prediction eps), but its loss is the x0 loss written in eps: each puzzle's
  squared eps error divided by SNR(t) (capped at 1e4 where t is near T).

    python -m bench.eps_variants x0-snr --max-steps 3000 --out runs/eps/x0-snr
"""
import sys

import train
import train_image
from diffusion import GaussianDiffusion, expand_mask, extract
from plumbing.cli import run_cli

VARIANTS = {"x0-snr": "x0", "eps-x0w": "eps"}


class Weighted(GaussianDiffusion):
    """GaussianDiffusion whose per-puzzle squared error is multiplied by a weight of t (see the module docstring)."""
    variant = None

    def weight(self, t, shape):
        snr = extract(self.alphas_cumprod / (1 - self.alphas_cumprod), t, shape)
        return snr if self.variant == "x0-snr" else (1 / snr).clamp(max=1e4)

    def training_losses(self, model_fn, x0, masks, weights=None, t=None, noise=None):
        t, noise = self.draw(x0, t, noise)
        out = model_fn(self.noise_parts(x0, masks, t, noise), t)
        target = x0 if self.prediction == "x0" else noise
        losses, total = {}, 0.0
        for k in x0:
            m = expand_mask(masks.get(k), x0[k]).expand_as(x0[k])
            err = (out[k].float() - target[k]) ** 2 * m * self.weight(t, x0[k].shape)
            losses[k] = err.sum() / m.sum().clamp(min=1.0)
            total = total + (1.0 if weights is None else weights.get(k, 1.0)) * losses[k]
        losses["loss"] = total
        return losses


if __name__ == "__main__":
    variant, rest = sys.argv[1], sys.argv[2:]
    if variant not in VARIANTS:
        sys.exit(f"the first argument must be one of {sorted(VARIANTS)}, got {variant!r}")
    Weighted.variant = variant
    train.GaussianDiffusion = Weighted
    run_cli(train_image.main, train_image.get_parser().parse_args(rest + ["--prediction", VARIANTS[variant]]))
