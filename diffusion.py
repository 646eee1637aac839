"""
Conditional DDPM over several named parts at once, as JPDVT uses it.

Paper: Sec. 3.1, "Masked Jigsaw Transformer Diffusion", and the supplement "Conditional Diffusion Models".
A puzzle state is a dict of parts, e.g. {"code": L (B, N, D), "content": E (B, N, C, H, W)}: D is the image model's
code_dim (the text's 32, or the authors' 8 copied onto every token: (B, N, K, 8)) and 16 for videos. Each part has a
mask of the entries that are *generated*: positional codes of every piece (except an anchored one), and the content
of missing pieces. Unmasked entries are known and stay clean at every step, which is the paper's
q(L_t, E^m_t | L_0, E^m_0, E^g) and p(L_{t-1}, E^m_{t-1} | L_t, E^m_t, E^g), in its notation: L the positional
codes, E^m the missing pieces' content, E^g the given pieces' content.

- Forward process: linear betas (1e-4 .. 0.02), T = 1000;  q_sample(x0, t) = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps.
- The network predicts either eps, the noise (the paper's text), or x0, the clean target. Either way it is the same
  method, sampled the same way; only the output differs, and with it how the loss weighs the steps: an eps error is
  an x0 error times sqrt(SNR(t)), SNR = abar / (1 - abar). The loss is a weighted sum of per-part MSEs over
  generated entries only. The scripts predict x0 by default, as the authors' released code does (docs/choices.md).
- Sampling: ancestral DDPM (`p_sample`) or deterministic DDIM (`ddim_sample`, eta = 0), over all T steps or a
  respaced subset (`timesteps`), re-imposing the known (unmasked) entries after every step.

    diffusion = GaussianDiffusion(1000, prediction="x0")
    losses = diffusion.training_losses(model_fn, x0_parts, masks, weights={"code": 0.2, "content": 0.8})  # videos
    parts = diffusion.sample(model_fn, clean, masks, steps=50, sampler="ddpm")
    parts = diffusion.sample(model_fn, clean, masks, steps=50, callback=lambda i, x, x0: codes.append(x0["code"]))
"""
import numpy as np
import torch

PREDICTIONS = {"eps": "the noise added (the paper's text)", "x0": "the clean target directly"}
SAMPLERS = {"ddpm": "ancestral DDPM (default)", "ddim": "deterministic DDIM (eta=0)"}


def linear_betas(num_steps=1000, start=1e-4, end=0.02):
    """The linear beta schedule of Ho et al. (2020), as float64 for exact tables."""
    return torch.linspace(start, end, num_steps, dtype=torch.float64)


def extract(a, t, shape):
    """Gather a[t] for a batch of timesteps t (B,) and reshape to (B, 1, 1, ...) to broadcast against `shape`."""
    out = (a.float() if t.device.type == "mps" else a).to(t.device)[t].float()      # mps has no float64
    return out.reshape(t.shape[0], *([1] * (len(shape) - 1)))


def expand_mask(mask, x):
    """A (B, N) or full-shape mask of generated entries as a float tensor broadcastable to x; None = all."""
    if mask is None:
        return torch.ones_like(x)
    mask = mask.to(x.device, x.dtype)
    return mask.reshape(*mask.shape, *([1] * (x.dim() - mask.dim())))


class GaussianDiffusion:
    """DDPM tables and the forward/reverse processes over a dict of parts."""

    def __init__(self, num_steps, prediction):
        if prediction not in PREDICTIONS:
            raise ValueError(f"prediction must be one of {sorted(PREDICTIONS)}, got {prediction!r}")
        self.num_steps = num_steps
        self.prediction = prediction
        self.betas = linear_betas(num_steps)
        self.alphas_cumprod = torch.cumprod(1.0 - self.betas, dim=0)
        # abar at index -1 is 1 (t = 0 has nothing before it); append it at the end for t_prev = -1 lookups
        self.abar_ext = torch.cat([self.alphas_cumprod, torch.ones(1, dtype=torch.float64)])

    # ------------------------------------------------------------------
    # Forward process
    # ------------------------------------------------------------------

    def q_sample(self, x0, t, noise=None):
        """Sample x_t ~ q(x_t | x_0) = N(sqrt(abar_t) x0, (1 - abar_t) I)."""
        if noise is None:
            noise = torch.randn_like(x0)
        abar = extract(self.alphas_cumprod, t, x0.shape)
        return abar.sqrt() * x0 + (1 - abar).sqrt() * noise

    def noise_parts(self, x0, masks, t, noise):
        """q_sample every part, keeping the unmasked entries clean."""
        xt = {}
        for k, v in x0.items():
            m = expand_mask(masks.get(k), v)
            xt[k] = m * self.q_sample(v, t, noise[k]) + (1 - m) * v
        return xt

    # ------------------------------------------------------------------
    # Training
    # ------------------------------------------------------------------

    def draw(self, x0, t=None, noise=None):
        """The random draws of a training batch, those not passed: t (B,) uniform over 0 .. T-1, then the noise of
        every part. Returns (t, noise)."""
        v = next(iter(x0.values()))
        if t is None:
            t = torch.randint(0, self.num_steps, (v.shape[0],), device=v.device)
        if noise is None:           # contiguous whatever x's layout: the draws depend on the shapes alone
            noise = {k: torch.randn(x.shape, dtype=x.dtype, device=x.device) for k, x in x0.items()}
        return t, noise

    def training_losses(self, model_fn, x0, masks, weights=None, t=None, noise=None):
        """
        Weighted MSE over generated entries. x0: {name: clean tensor (B, ...)}; masks: {name: (B, N) bool or
        None for all}; weights: {name: float} (default 1). model_fn(xt_dict, t) -> {name: prediction}.
        t (B,) and noise {name: tensor}: the draws (default: drawn here, as `draw`). Returns {"loss": scalar, name:
        per-part scalar}.
        """
        t, noise = self.draw(x0, t, noise)
        out = model_fn(self.noise_parts(x0, masks, t, noise), t)
        target = x0 if self.prediction == "x0" else noise
        losses, total = {}, 0.0
        for k in x0:
            m = expand_mask(masks.get(k), x0[k]).expand_as(x0[k])
            err = (out[k].float() - target[k]) ** 2 * m
            losses[k] = err.sum() / m.sum().clamp(min=1.0)
            total = total + (1.0 if weights is None else weights.get(k, 1.0)) * losses[k]
        losses["loss"] = total
        return losses

    # ------------------------------------------------------------------
    # Reverse process
    # ------------------------------------------------------------------

    def predict_x0_eps(self, xt, t, out, clip=True):
        """Turn a model output into (x0_hat, clipped to [-1, 1] when `clip`, and eps_hat consistent with it)."""
        abar = extract(self.alphas_cumprod, t, xt.shape)
        if self.prediction == "x0":
            x0 = out.float()
        else:
            x0 = (xt - (1 - abar).sqrt() * out.float()) / abar.sqrt()
        if clip:
            x0 = x0.clamp(-1, 1)
        eps = (xt - abar.sqrt() * x0) / (1 - abar).sqrt()
        return x0, eps

    def p_sample(self, xt, x0, t, t_prev, noise):
        """One ancestral step x_t -> x_{t_prev} from the posterior q(x_{t_prev} | x_t, x0_hat) (t_prev = -1 ends)."""
        abar = extract(self.alphas_cumprod, t, xt.shape)
        abar_prev = extract(self.abar_ext, t_prev, xt.shape)
        beta = 1 - abar / abar_prev                       # effective beta of this (possibly respaced) step: the
        # jump t_prev -> t is itself one Gaussian step with alpha = abar / abar_prev, so DDPM's posterior applies to it
        # with that beta (alpha_t = 1 - beta, abar_{t-1} = abar_prev): mean = c0 x0 + ct x_t, as in Ho et al. (7)
        mean = (abar_prev.sqrt() * beta * x0 + (1 - beta).sqrt() * (1 - abar_prev) * xt) / (1 - abar)
        var = beta * (1 - abar_prev) / (1 - abar)         # posterior variance, 0 at the last step
        return mean + var.sqrt() * noise

    def ddim_sample(self, x0, eps, t_prev):
        """One deterministic DDIM step (eta = 0): x_{t_prev} = sqrt(abar_prev) x0_hat + sqrt(1 - abar_prev) eps_hat."""
        abar_prev = extract(self.abar_ext, t_prev, x0.shape)
        return abar_prev.sqrt() * x0 + (1 - abar_prev).sqrt() * eps

    def timesteps(self, steps):
        """`steps` evenly spaced timesteps from T-1 down to 0 (all T for steps >= T). One step is [T-1]: a single
        network call on pure noise, whose x0 prediction (of an x0-prediction model) is the average of every generated
        entry over all the values it could take, given the clean ones."""
        steps = max(1, min(int(steps), self.num_steps))
        if steps == 1:
            return [self.num_steps - 1]
        ts = np.unique(np.round(np.linspace(0, self.num_steps - 1, steps)).astype(np.int64))
        return ts[::-1].tolist()

    @torch.no_grad()
    def sample(self, model_fn, clean, masks, steps=None, sampler="ddpm", generator=None, latent=(), callback=None):
        """
        Generate every masked entry. clean: {name: tensor} holding the clean value of every unmasked entry (masked
        entries are placeholders, ignored); masks as in training_losses. Predicted x0 is clipped to [-1, 1] (the
        range of codes and pixels) except for the parts named in `latent` (autoencoder latents, about unit variance).
        Returns {name: x0} with unmasked entries exactly as passed.
        callback(i, x, x0), if given, is called after step i (0 .. len(timesteps(steps)) - 1) with the new state x
        ({name: x_{t_prev}}, the result itself after the last step) and the step's prediction x0 ({name: x0_hat}),
        both with unmasked entries as passed. It must not change them in place; it draws nothing from `generator`, so
        the result is the same with or without it (for pictures: sampling animations).
        """
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {sorted(SAMPLERS)}, got {sampler!r}")
        ts = self.timesteps(steps or self.num_steps)
        m = {k: expand_mask(masks.get(k), v) for k, v in clean.items()}

        def randn(v):
            return torch.randn(v.shape, generator=generator, device=v.device, dtype=v.dtype)

        x = {k: m[k] * randn(v) + (1 - m[k]) * v for k, v in clean.items()}
        b = next(iter(clean.values())).shape[0]
        device = next(iter(clean.values())).device
        for i, step in enumerate(ts):
            t = torch.full((b,), step, device=device, dtype=torch.long)
            t_prev = torch.full((b,), ts[i + 1] if i + 1 < len(ts) else -1, device=device, dtype=torch.long)
            out, pred = model_fn(x, t), {}
            for k, v in x.items():
                x0, eps = self.predict_x0_eps(v, t, out[k], clip=k not in latent)
                if sampler == "ddim":
                    new = self.ddim_sample(x0, eps, t_prev)
                else:
                    new = self.p_sample(v, x0, t, t_prev, randn(v))
                x[k] = m[k] * new + (1 - m[k]) * clean[k]          # known entries stay clean, as in training
                if callback is not None:
                    pred[k] = m[k] * x0 + (1 - m[k]) * clean[k]
            if callback is not None:
                callback(i, dict(x), pred)
        return x
