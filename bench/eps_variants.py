"""
Which half of "predict eps" keeps the eps model at chance: the loss's weighting over t, or the network having to
output eps? Trains train_image.py with one of two crossed variants of the loss (everything else as the flags say):

- x0-snr: the network outputs x0 (as --prediction x0), but its loss is the eps loss written in x0: each puzzle's
  squared x0 error times SNR(t) = abar / (1 - abar), since ||eps_hat - eps||^2 = SNR(t) ||x0_hat - x0||^2.
- eps-x0w: the network outputs eps (as --prediction eps), but its loss is the x0 loss written in eps: each puzzle's
  squared eps error divided by SNR(t) (capped at 1e4 where t is near T).
- v: the network outputs v = sqrt(abar) eps - sqrt(1 - abar) x0 (Salimans and Ho, 2022, "Progressive
  distillation"), its loss the squared v error: the x0 error times 1 + SNR(t), between the two. x0_hat =
  sqrt(abar) x_t - sqrt(1 - abar) v_hat; the checkpoint says x0, so only this module samples it correctly.

    python -m bench.eps_variants x0-snr --max-steps 3000 --out runs/eps/x0-snr
"""
import sys

import train
import train_image
from diffusion import GaussianDiffusion, extract
from plumbing.cli import run_cli

VARIANTS = {"x0-snr": "x0", "eps-x0w": "eps", "v": "x0"}


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


class VPrediction(GaussianDiffusion):
    """The network outputs v; the parent's x0 machinery runs on x0_hat = sqrt(abar) x_t - sqrt(1 - abar) v_hat."""

    def training_losses(self, model_fn, x0, masks, weights=None, t=None, noise=None):
        """The squared v error: x0_hat - x0 = -sqrt(1 - abar) (v_hat - v), so the output put in x0's place is
        x0 + (x0_hat - x0) / sqrt(1 - abar), whose squared error from x0 is v's."""
        t, noise = self.draw(x0, t, noise)

        def as_x0(xt, t_):
            out = {}
            for k, v in model_fn(xt, t_).items():
                abar = extract(self.alphas_cumprod, t_, v.shape)
                x0_hat = abar.sqrt() * xt[k] - (1 - abar).sqrt() * v.float()
                out[k] = x0[k] + (x0_hat - x0[k]) / (1 - abar).sqrt()
            return out
        return super().training_losses(as_x0, x0, masks, weights=weights, t=t, noise=noise)

    def predict_x0_eps(self, xt, t, out, clip=True):
        abar = extract(self.alphas_cumprod, t, xt.shape)
        return super().predict_x0_eps(xt, t, abar.sqrt() * xt - (1 - abar).sqrt() * out.float(), clip=clip)


if __name__ == "__main__":
    variant, rest = sys.argv[1], sys.argv[2:]
    if variant not in VARIANTS:
        sys.exit(f"the first argument must be one of {sorted(VARIANTS)}, got {variant!r}")
    Weighted.variant = variant
    train.GaussianDiffusion = VPrediction if variant == "v" else Weighted
    run_cli(train_image.main, train_image.get_parser().parse_args(rest + ["--prediction", VARIANTS[variant]]))
