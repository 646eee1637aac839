"""
The diffusion vision transformer (DiT) that solves image jigsaw puzzles.

Paper: "Solving image jigsaw puzzles" (Sec. 3.2) and the supplement "Diffusion Vision Transformer architecture":
a ViT with adaLN-Zero timestep conditioning (Peebles & Xie 2023). Pieces are cut into ViT patches no larger
than a piece (a 64 px piece with 16 px patches is 16 tokens). The noisy positional codes go through an MLP and are
added to the tokens: with codes "piece" (the text) one D-d code per piece, added to all its tokens; with codes "token"
(the authors' released code) a copy per token, each noised on its own. There is no positional embedding over
pieces: the set is unordered and the network is permutation-equivariant over pieces. Outputs: the codes (pooled
per piece, or one per token) and the pixels of every piece (used for missing pieces: noised content in, denoised out).

    model = DiT(CONFIGS["tiny"])
    code_out, content_out = model(code, content, t, missing, given)   # (B, N, D) or (B, N, K, D), (B, N, 3, P, P)
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------- config

@dataclass
class DiTConfig:
    """The image network (dit.DiT): a ViT with adaLN-Zero; CONFIGS names its sizes."""
    piece_size: int = 16      # pixels per side of a piece
    patch_size: int = 8       # ViT patch; a piece is (piece_size / patch_size)^2 tokens
    in_channels: int = 3
    code_dim: int = 32         # the paper's 2D positional code (the authors' released code: 8)
    codes: str = "piece"       # CODES: one noisy code per piece, or the authors' copy on every token
    hidden: int = 128
    depth: int = 4
    heads: int = 4
    mlp_dim: int = 512


# How the network reads and writes the positional codes. "token" is the authors' released image code
# (image_model/diffusion/gaussian_diffusion.py): the piece's code is copied onto each of its K tokens, every copy is
# noised on its own, and the network reads and writes one code per token; the solver averages a piece's K codes.
CODES = {"piece": "one code per piece, added to all its tokens, pooled out (the paper's text)",
         "token": "a copy of the code on every token, each noised on its own (the authors' released code)"}

CONFIGS = {
    "tiny": DiTConfig(patch_size=16, hidden=128, depth=4, heads=4, mlp_dim=512),   # CPU minutes: a token per piece
    "small": DiTConfig(hidden=384, depth=8, heads=6, mlp_dim=1536),
    "base": DiTConfig(piece_size=64, patch_size=16, hidden=768, depth=12, heads=12, mlp_dim=3072),  # the paper
}


def modulate(x, shift, scale):
    """adaLN: x (B, L, D) normalized, then scaled and shifted per sample (B, D)."""
    return x * (1 + scale[:, None]) + shift[:, None]


# ----------------------------------------------------------------------------
# Embedding layers
# ----------------------------------------------------------------------------

class TimestepEmbedder(nn.Module):
    """Scalar timesteps (B,) -> freq_dim sinusoidal features (cos, sin) -> MLP -> (B, hidden); also the U-Net's."""

    def __init__(self, hidden, freq_dim=256):
        super().__init__()
        self.freq_dim = freq_dim
        self.mlp = nn.Sequential(nn.Linear(freq_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden))

    def forward(self, t):
        half = self.freq_dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
        args = t.float()[:, None] * freqs[None]
        return self.mlp(torch.cat([args.cos(), args.sin()], dim=-1))


# ----------------------------------------------------------------------------
# Core DiT model
# ----------------------------------------------------------------------------

class Attention(nn.Module):
    """Multi-head self-attention over the tokens of (B, L, dim); it adds no position embedding (DiT adds only a token's
    place inside its own piece, never the piece's place). Heads of head_dim (default dim / heads) channels; unet3d.py
    uses it too."""

    def __init__(self, dim, heads, head_dim=None):
        super().__init__()
        self.heads = heads
        inner = heads * (head_dim or dim // heads)
        self.qkv = nn.Linear(dim, 3 * inner)
        self.proj = nn.Linear(inner, dim)

    def forward(self, x):                                         # (B, L, dim)
        b, l, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, l, 3, self.heads, -1).permute(2, 0, 3, 1, 4)  # 3 x (B, heads, L, d)
        x = F.scaled_dot_product_attention(q, k, v)               # (B, heads, L, d)
        return self.proj(x.transpose(1, 2).reshape(b, l, -1))     # (B, L, dim)


class DiTBlock(nn.Module):
    """Transformer block with adaLN-Zero: shift/scale before, gate after attention and MLP."""

    def __init__(self, dim, heads, mlp_dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(approximate="tanh"), nn.Linear(mlp_dim, dim))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))

    def forward(self, x, c):
        shift1, scale1, gate1, shift2, scale2, gate2 = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + gate1[:, None] * self.attn(modulate(self.norm1(x), shift1, scale1))
        x = x + gate2[:, None] * self.mlp(modulate(self.norm2(x), shift2, scale2))
        return x


class FinalLayer(nn.Module):
    """adaLN, then two heads: pixels per token (linear) and a positional code per piece (tokens pooled, an MLP)."""

    def __init__(self, dim, patch_pixels, code_dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))
        self.pixels = nn.Linear(dim, patch_pixels)
        self.code = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, code_dim))

    def forward(self, x, c, n, per_token):
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
        x = modulate(self.norm(x), shift, scale)                  # (B, N*K, D), K tokens per piece
        b, l, d = x.shape
        x = x.view(b, n, l // n, d)                               # (B, N, K, D)
        code = self.code(x) if per_token else self.code(x.mean(2))  # (B, N, K, code_dim) or (B, N, code_dim)
        return code, self.pixels(x.flatten(1, 2))


class DiT(nn.Module):
    """Denoiser of (positional codes, pixels) of an image puzzle's pieces; see the module docstring."""

    def __init__(self, config):
        super().__init__()
        cfg = self.config = config
        p, d = cfg.patch_size, cfg.hidden
        self.tokens_per_side = cfg.piece_size // p
        self.patch_embed = nn.Linear(cfg.in_channels * p * p, d)
        self.token_pos = nn.Parameter(torch.zeros(1, 1, self.tokens_per_side ** 2, d))  # token's place in its piece
        self.code_embed = nn.Sequential(nn.Linear(cfg.code_dim, d), nn.SiLU(), nn.Linear(d, d))  # noisy code -> token
        self.flag_embed = nn.Embedding(4, d)                      # missing + 2 * anchored (an anchor is never
        # missing, so row 3 is never used: jpdvt.told_and_pinned never tells a missing piece; the row stays so that
        # the shipped checkpoints' weights keep their shape)
        self.t_embed = TimestepEmbedder(d)
        self.blocks = nn.ModuleList([DiTBlock(d, cfg.heads, cfg.mlp_dim) for _ in range(cfg.depth)])
        self.final = FinalLayer(d, cfg.in_channels * p * p, cfg.code_dim)
        self.initialize_weights()

    def initialize_weights(self):
        def _basic_init(m):
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        self.apply(_basic_init)
        nn.init.normal_(self.token_pos, std=0.02)
        nn.init.normal_(self.flag_embed.weight, std=0.02)
        for lin in (self.t_embed.mlp[0], self.t_embed.mlp[2]):
            nn.init.normal_(lin.weight, std=0.02)
        # adaLN-Zero: every block starts as the identity, and both heads output zero
        for blk in self.blocks:
            nn.init.zeros_(blk.adaLN_modulation[-1].weight)
            nn.init.zeros_(blk.adaLN_modulation[-1].bias)
        for lin in (self.final.adaLN_modulation[-1], self.final.pixels, self.final.code[-1]):
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)

    def patchify(self, content):
        # b n c (h p1) (w p2) -> b (n h w) (c p1 p2)
        b, n, c, s, _ = content.shape
        p, k = self.config.patch_size, self.tokens_per_side
        x = content.reshape(b, n, c, k, p, k, p).permute(0, 1, 3, 5, 2, 4, 6)
        return x.reshape(b, n * k * k, c * p * p)

    def unpatchify(self, x, n):
        # b (n h w) (c p1 p2) -> b n c (h p1) (w p2)
        b = x.shape[0]
        p, k, c = self.config.patch_size, self.tokens_per_side, self.config.in_channels
        x = x.reshape(b, n, k, k, c, p, p).permute(0, 1, 4, 2, 5, 3, 6)
        return x.reshape(b, n, c, k * p, k * p)

    def forward(self, code, content, t, missing, given):
        """
        code (B, N, code_dim) noisy positional codes, or (B, N, K, code_dim) with codes="token"; content (B, N, C,
        P, P); t (B,); missing, given (B, N) bool (given: the pieces whose code is told, the anchor:
        jpdvt.anchor_pieces). Returns the predicted codes (the shape of `code`) and content (B, N, C, P, P). K = tokens
        per piece.
        """
        b, n = code.shape[:2]
        k = self.tokens_per_side ** 2
        flags = missing.long() + 2 * given.long()                                # (B, N) in 0..3
        per_token = self.config.codes == "token"
        assert code.dim() == 3 + per_token, f"codes={self.config.codes!r} reads codes of {code.dim() - 1} dims"
        codes = self.code_embed(code if per_token else code[:, :, None])         # (B, N, K or 1, D)
        piece = codes + self.flag_embed(flags)[:, :, None]                       # (B, N, K or 1, D)
        x = self.patch_embed(self.patchify(content)).view(b, n, k, -1)           # (B, N, K, D)
        x = (x + self.token_pos + piece).flatten(1, 2)                           # (B, N*K, D)
        c = self.t_embed(t)                                                      # (B, D)
        for blk in self.blocks:
            x = blk(x, c)
        code_out, pixels = self.final(x, c, n, per_token)
        return code_out, self.unpatchify(pixels, n)
