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
from diffusion import GaussianDiffusion, extract
from plumbing.cli import run_cli

VARIANTS = {"x0-snr": "x0", "eps-x0w": "eps"}


class Weighted(GaussianDiffusion):
    """GaussianDiffusion whose per-puzzle squared error is multiplied by a weight of t (see the module docstring)."""
    variant = None

    def weight(self, t, shape):
        snr = extract(self.alphas_cumprod / (1 - self.alphas_cumprod), t, shape)
        return snr if self.variant == "x0-snr" else (1 / snr).clamp(max=1e4)

    def training_losses(self, model_fn, x0, masks, weights=None, t=None, noise=None):
        """The parent's loss, each puzzle's squared error times weight(t): the network's output is moved to
        target + sqrt(w) (output - target), whose squared error from the target is w times the output's."""
        t, noise = self.draw(x0, t, noise)
        target = x0 if self.prediction == "x0" else noise

        def weighted(xt, t_):
            out = model_fn(xt, t_)
            return {k: target[k] + self.weight(t_, v.shape).sqrt() * (v.float() - target[k]) for k, v in out.items()}
        return super().training_losses(weighted, x0, masks, weights=weights, t=t, noise=noise)

if __name__ == "__main__":
    variant, rest = sys.argv[1], sys.argv[2:]
    if variant not in VARIANTS:
        sys.exit(f"the first argument must be one of {sorted(VARIANTS)}, got {variant!r}")
    Weighted.variant = variant
    train.GaussianDiffusion = Weighted
    run_cli(train_image.main, train_image.get_parser().parse_args(rest + ["--prediction", VARIANTS[variant]]))
