"""
Pseudo-3D U-Net that denoises temporal jigsaw puzzles (video JPDVT).

Paper: "Solving temporal jigsaw puzzles" (Sec. 3.2 of the paper), the supplement's "Video Experiments" and
Table "Hyperparameters in the downsampling blocks": a Make-A-Video style U-Net (4 down blocks, a middle block,
4 up blocks; "3 P-3D conv layers" per block, 8 heads x 64). How the supplement's blocks map to this code:
- a block (`Level`) holds `layers_per_block` resnet blocks of two 3x3 convs each (paper config 3: the table's
  "3 P-3D conv layers");
- every resnet block is followed by its own 2D+1D attention layer (at the levels in `attn_levels`), so a block has 3
  attention layers where the text says "a pseudo-3D attention layer": a deviation;
- the middle block is resnet, attention, resnet.
As in the paper (Sec. 3.2),
- the convolutions are only 2D spatial ones, applied to every frame on its own (no temporal convolution), and
- the 2D+1D attention has no temporal position embedding,
so that the model is equivariant to a permutation of the (shuffled) pieces: the pieces' order is carried only by
their noisy 16-d positional codes. An MLP turns them into extra input channels concatenated to the frames; they
also enter every frame's conditioning vector and the code head (below).

A puzzle of N pieces of F frames is processed as one video of L = N*F frames. Besides the frames, every frame
gets a conditioning vector = timestep embedding + positional-code embedding + "missing piece" embedding +
"anchored piece" embedding (its code is given clean) + frame-in-piece embedding (index 0..F-1 inside its piece,
the same for every piece, so the piece equivariance holds). It scales/shifts the features of every resnet block.
Two heads: frames -> a conv back to C channels per frame; positional codes -> one token per piece (the feature
layout and pooled pixels of its first and last frames, its noisy code) -> a small transformer over the set of
pieces -> code_dim. Reading the pieces' ends directly is a deviation from the paper's description: a piece's place
in time shows at its ends, where it meets its neighbours, and a mean over its features blurs them.
Both heads are zero-initialised, so an untrained model outputs zeros. For CPU-sized pixel models, `patch_size`
> 1 adds a lossless space-to-depth stem (pixel_unshuffle in, pixel_shuffle out), so the U-Net starts at H/p x W/p
like the paper's latent models (the paper config works on 32x32x4 latents with patch_size 1).

    model = UNet3D(CONFIGS["tiny"])
    code_out, content_out = model(code, content, t, missing, given)
    # code (B, N, 16), content (B, N, F, C, H, W), t (B,) long, missing, given (B, N) bool (given: the pieces
    # whose code is told, the anchor)
    #  -> (B, N, 16), (B, N, F, C, H, W): eps or x0, whichever the diffusion is trained to predict
"""
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from dit import Attention, DiTBlock, TimestepEmbedder

# ----------------------------------------------------------------------------- config

@dataclass
class UNetConfig:
    """The video network (unet3d.UNet3D): a pseudo-3D U-Net; CONFIGS names its sizes."""
    channels: tuple = (64, 128, 256, 512)  # width of each resolution level; H, W halve between levels
    layers_per_block: int = 3              # resnet blocks (2D convs, each followed by 2D+1D attention) per level
    attn_levels: tuple = (0, 1, 2, 3)      # levels (0 = full resolution) with 2D+1D attention; mid always has it
    heads: int = 8
    head_dim: int = 64
    in_channels: int = 4                   # frame channels: 1 digits, 3 RGB, 4 VAE latents
    frames_per_piece: int = 1
    code_dim: int = 16                      # size of the 1D positional code (posenc.sequence_table)
    code_channels: int = 4                  # channels of the positional-code map concatenated to every frame
    patch_size: int = 1                    # >1: space-to-depth stem (p x p pixels -> p*p channels) and back
    norm_groups: int = 32                  # GroupNorm groups (must divide every width)
    head_hidden: int = 128                 # width of the transformer over pieces that reads out positional codes
    head_depth: int = 3
    head_heads: int = 4
    layout_channels: int = 8               # the positional head reads, of a piece's first and last frames, the
    layout_pool: int = 8                   # U-Net features reduced to layout_channels and pooled to this side,
    pixel_pool: int = 16                   # and the frame's pixels pooled to this side


CONFIGS = {
    # Paper table: 64/128/256/512 wide, feature maps 32/16/8/4 on 32x32x4 latents, 3 P-3D layers, 8 x 64 heads.
    "paper": UNetConfig(),
    # CPU-sized model for 32x32 grayscale digits: a 4x4 space-to-depth stem, then levels at 8/4/2 px with
    # attention at 4x4 and 2x2 (and the middle block).
    "tiny": UNetConfig(channels=(16, 32, 64), layers_per_block=1, attn_levels=(1, 2), heads=2, head_dim=16,
                       in_channels=1, frames_per_piece=4, code_channels=4, patch_size=4, norm_groups=8),
}
CONFIGS["tiny-head6"] = replace(CONFIGS["tiny"], head_depth=6)  # a 6-block head over pieces (video-mmnist-20x1.pt)

# ----------------------------------------------------------------------------- embeddings

def mlp(d_in, d_hidden, d_out):
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.SiLU(), nn.Linear(d_hidden, d_out))


# ----------------------------------------------------------------------------- P-3D building blocks
# Every block below sees frames as a batch of images x: ((B L), C, H, W), and a per-frame conditioning
# vector emb: ((B L), D). Only the temporal attention regroups frames by puzzle, which needs L.

class ResBlock(nn.Module):
    """GroupNorm-SiLU-Conv2d twice, with the frame's conditioning as a scale/shift between the two convs."""

    def __init__(self, c_in, c_out, emb_dim, groups):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, c_in)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.emb = nn.Sequential(nn.SiLU(), nn.Linear(emb_dim, 2 * c_out))
        self.norm2 = nn.GroupNorm(groups, c_out)
        # UNet3D.initialize_weights zeroes conv2: the residual branch starts at zero, so the block starts as its
        # skip: the identity when c_in == c_out, a 1x1 conv projection when the width changes
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1)
        self.skip = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

    def forward(self, x, emb):                                 # x ((B L), c_in, H, W), emb ((B L), D)
        h = self.conv1(F.silu(self.norm1(x)))
        scale, shift = self.emb(emb)[:, :, None, None].chunk(2, dim=1)
        h = self.norm2(h) * (1 + scale) + shift
        h = self.conv2(F.silu(h))
        return self.skip(x) + h                                # ((B L), c_out, H, W)


class Attention2Plus1D(nn.Module):
    """
    Pseudo-3D attention: spatial over the H*W pixels of each frame, then temporal over the L frames per pixel
    (dit.Attention, no position embedding: the frames form a set). UNet3D.initialize_weights zeroes each output
    projection.
    """

    def __init__(self, channels, heads, head_dim, groups):
        super().__init__()
        self.norm_s = nn.GroupNorm(groups, channels)
        self.spatial = Attention(channels, heads, head_dim)
        self.norm_t = nn.GroupNorm(groups, channels)
        self.temporal = Attention(channels, heads, head_dim)

    def forward(self, x, frames):                              # x ((B L), C, H, W), frames = L
        bt, c, h, w = x.shape
        # spatial: (b l) c h w -> (b l) (h w) c
        s = self.norm_s(x).flatten(2).transpose(1, 2)
        x = x + self.spatial(s).transpose(1, 2).reshape(bt, c, h, w)
        # temporal: (b l) c h w -> (b h w) l c   (no temporal position embedding: frames form a set)
        tk = self.norm_t(x).reshape(bt // frames, frames, c, h * w).permute(0, 3, 1, 2).reshape(-1, frames, c)
        out = self.temporal(tk)                                # ((B h w), L, C)
        # (b h w) l c -> (b l) c h w
        out = out.reshape(bt // frames, h * w, frames, c).permute(0, 2, 3, 1).reshape(bt, c, h, w)
        return x + out


class Level(nn.Module):
    """`layers` resnet blocks at one resolution, each followed by its own 2D+1D attention layer when `attn` is
    set (so `layers` attention layers per level, not the paper's one per block)."""

    def __init__(self, c_in, c_out, layers, emb_dim, cfg, attn):
        super().__init__()
        self.res = nn.ModuleList([ResBlock(c_in if i == 0 else c_out, c_out, emb_dim, groups=cfg.norm_groups)
                                  for i in range(layers)])
        self.attn = nn.ModuleList([Attention2Plus1D(c_out, cfg.heads, cfg.head_dim, groups=cfg.norm_groups)
                                   for _ in range(layers)]) if attn else None

    def forward(self, x, emb, frames):
        for i, res in enumerate(self.res):
            x = res(x, emb)
            if self.attn is not None:
                x = self.attn[i](x, frames)
        return x


class Downsample(nn.Module):
    """Halve H and W with a stride-2 conv, changing the width to the next level's."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


class Upsample(nn.Module):
    """Double H and W (nearest) and conv to the previous level's width."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2, mode="nearest"))


# ----------------------------------------------------------------------------- the U-Net

class UNet3D(nn.Module):
    """Denoiser of (positional codes, frames) of a temporal puzzle; see the module docstring."""

    def __init__(self, config):
        super().__init__()
        self.config = cfg = config
        ch = list(cfg.channels)
        self.levels = len(ch)
        emb_dim = 4 * ch[0]

        # conditioning: timestep, missing and code-given (anchor) flags, frame index in a piece -> a vector per frame
        self.t_embed = TimestepEmbedder(emb_dim, freq_dim=ch[0])
        self.missing_embed = nn.Embedding(2, emb_dim)
        self.anchor_embed = nn.Embedding(2, emb_dim)
        self.frame_embed = nn.Parameter(torch.zeros(cfg.frames_per_piece, emb_dim))
        # positional code of each piece -> code_channels, broadcast over H x W and concatenated to its frames
        self.code_map = mlp(cfg.code_dim, emb_dim, cfg.code_channels)
        # ... and into every resnet block's conditioning, so attention can read a piece's code from its features
        self.code_embed = mlp(cfg.code_dim, emb_dim, emb_dim)

        # encoder
        p2 = cfg.patch_size ** 2
        self.conv_in = nn.Conv2d(p2 * (cfg.in_channels + cfg.code_channels), ch[0], 3, padding=1)
        self.down = nn.ModuleList([Level(ch[i], ch[i], cfg.layers_per_block, emb_dim=emb_dim, cfg=cfg,
                                         attn=i in cfg.attn_levels) for i in range(self.levels)])
        self.downsample = nn.ModuleList([Downsample(ch[i], ch[i + 1]) for i in range(self.levels - 1)])
        # middle block: resnet, attention, resnet
        self.mid_res1 = ResBlock(ch[-1], ch[-1], emb_dim, groups=cfg.norm_groups)
        self.mid_attn = Attention2Plus1D(ch[-1], cfg.heads, cfg.head_dim, groups=cfg.norm_groups)
        self.mid_res2 = ResBlock(ch[-1], ch[-1], emb_dim, groups=cfg.norm_groups)
        # decoder: at level i, concat the encoder's level-i features (skip), then the level's blocks
        self.up = nn.ModuleList([Level(2 * ch[i], ch[i], cfg.layers_per_block, emb_dim=emb_dim, cfg=cfg,
                                       attn=i in cfg.attn_levels) for i in range(self.levels)])
        self.upsample = nn.ModuleList([Upsample(ch[i + 1], ch[i]) for i in range(self.levels - 1)])

        # heads
        self.content_out = nn.Sequential(nn.GroupNorm(cfg.norm_groups, ch[0]), nn.SiLU(),
                                         nn.Conv2d(ch[0], p2 * cfg.in_channels, 3, padding=1))
        # positional head: one token per piece made of the feature layout (layout_channels x layout_pool^2) and
        # the pooled pixels (in_channels x pixel_pool^2) of its first and last frames (what is where at a piece's
        # two ends is what orders pieces), its noisy code and its conditioning; the tokens then go through a small
        # transformer over the set of pieces (adaLN on the timestep, no position embedding) of DiT blocks
        d = cfg.head_hidden
        end_dim = cfg.layout_channels * cfg.layout_pool ** 2 + cfg.in_channels * cfg.pixel_pool ** 2
        self.code_reduce = nn.Conv2d(ch[0], cfg.layout_channels, 1)
        self.code_in = nn.Linear(2 * end_dim + cfg.code_dim, d)
        self.code_cond = nn.Linear(emb_dim, d)
        self.head_time = nn.Linear(emb_dim, d)
        self.piece_blocks = nn.ModuleList([DiTBlock(d, cfg.head_heads, 2 * d) for _ in range(cfg.head_depth)])
        self.code_out = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, cfg.code_dim))
        self.initialize_weights()

    def initialize_weights(self):
        """PyTorch defaults for convs, Xavier for linears, small embeddings; zero the residual branches' last
        layers (resnet conv2, attention proj) and both output layers, so the untrained model outputs zeros."""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.missing_embed.weight, std=0.02)
        nn.init.normal_(self.anchor_embed.weight, std=0.02)
        nn.init.normal_(self.frame_embed, std=0.02)
        zero = [self.content_out[-1], self.code_out[-1]]
        zero += [m.conv2 for m in self.modules() if isinstance(m, ResBlock)]
        zero += [a.proj for m in self.modules() if isinstance(m, Attention2Plus1D) for a in (m.spatial, m.temporal)]
        for blk in self.piece_blocks:                              # adaLN-Zero, as in dit.py
            nn.init.zeros_(blk.adaLN_modulation[-1].weight)
            nn.init.zeros_(blk.adaLN_modulation[-1].bias)
        for layer in zero:
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, code, content, t, missing, given):
        cfg = self.config
        b, n, f, c, h, w = content.shape
        frames = n * f

        # ---- per-frame conditioning vector
        temb = self.t_embed(t)                                                  # (B, D)
        emb = (temb[:, None]                                                    # (B, 1, D)
               + self.code_embed(code)
               + self.missing_embed(missing.long())
               + self.anchor_embed(given.long()))                              # (B, N, D) piece embedding
        frame_emb = (emb[:, :, None] + self.frame_embed).reshape(b * frames, -1)  # b n f d -> (b n f) d

        # ---- input: frames + positional-code map
        code_map = self.code_map(code)[:, :, None, :, None, None].expand(b, n, f, cfg.code_channels, h, w)
        x = torch.cat([content, code_map.to(content.dtype)], dim=3)              # (B, N, F, C + Cp, H, W)
        x = x.reshape(b * frames, c + cfg.code_channels, h, w)                   # b n f c h w -> (b n f) c h w
        x = self.conv_in(F.pixel_unshuffle(x, cfg.patch_size))  # (b l) c (h p) (w p) -> (b l) (c p p) h w

        # ---- U-Net
        skips = []
        for i in range(self.levels):
            x = self.down[i](x, frame_emb, frames)
            skips.append(x)
            if i < self.levels - 1:
                x = self.downsample[i](x)
        mid = self.mid_res2(self.mid_attn(self.mid_res1(x, frame_emb), frames), frame_emb)  # ((B L), C_last, h', w')
        x = mid
        for i in reversed(range(self.levels)):
            x = self.up[i](torch.cat([x, skips[i]], dim=1), frame_emb, frames)
            if i > 0:
                x = self.upsample[i - 1](x)

        # ---- heads
        content_out = F.pixel_shuffle(self.content_out(x), cfg.patch_size)  # (b l) (c p p) h w -> (b l) c (h p) (w p)
        content_out = content_out.reshape(b, n, f, c, h, w)                     # (b n f) c h w -> b n f c h w

        # (b n f) c h w -> b n f (c l l): the layout of every frame's features and its pooled input pixels or latents
        # (clean for pieces with content, the current noisy x_t of missing ones)
        layout = F.adaptive_avg_pool2d(self.code_reduce(x), cfg.layout_pool).reshape(b, n, f, -1)
        pixels = F.adaptive_avg_pool2d(content.reshape(b * frames, c, h, w), cfg.pixel_pool).reshape(b, n, f, -1)
        ends = torch.cat([layout[:, :, 0], pixels[:, :, 0], layout[:, :, -1], pixels[:, :, -1], code.to(x.dtype)],
                         dim=-1)                                                   # (B, N, 2 end_dim + code_dim)
        tokens = self.code_in(ends) + self.code_cond(F.silu(emb))                    # (B, N, D) piece tokens
        cond = self.head_time(F.silu(temb))                                        # (B, D)
        for blk in self.piece_blocks:
            tokens = blk(tokens, cond)                                             # attention across pieces
        return self.code_out(tokens), content_out                                  # (B, N, code_dim), frames
