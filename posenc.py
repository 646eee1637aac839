"""
Sinusoidal positional encodings used as the diffusion targets of JPDVT.

Paper: "Positional Encoding" (Sec. 3.2 of the paper):

    gamma(l, 2i)   = sin(l / 1000^(2i/16))
    gamma(l, 2i+1) = cos(l / 1000^(2i/16))          i = 0 .. 7: a 16-d code

The base is the paper's 1000 (a transformer's is usually 10000). The formula is written for the paper's 16-d code;
any even size d works the same way (i = 0 .. d/2 - 1, 16 replaced by d).
Videos use the 1D code (16-d) of a piece's index in time; images use the 2D code (the text's 32-d; the authors' code
8-d) gamma_2D(x, y) = [gamma_1D(x), gamma_1D(y)]: first half the column (x), second half the row (y).
All values lie in [-1, 1], the range the diffusion model works in.

    >>> grid_table(3, 3).shape      # raster order: index = r * cols + c
    torch.Size([9, 32])
"""
import torch


def encode_1d(positions, dim=16, base=1000.0):
    """Encode positions (a tensor or number of any shape) as [..., dim] sin/cos codes, sin on even channels."""
    if dim % 2 != 0 or dim < 2:
        raise ValueError(f"positional code dimension must be even and >= 2, got {dim}")
    l = torch.as_tensor(positions, dtype=torch.float64)
    i = torch.arange(dim // 2, dtype=torch.float64)
    freq = base ** (2 * i / dim)                        # (dim/2,)
    angles = l[..., None] / freq                        # (..., dim/2)
    out = torch.stack([angles.sin(), angles.cos()], -1)  # (..., dim/2, 2): sin at 2i, cos at 2i+1
    return out.flatten(-2).float()                       # (..., dim)


def encode_2d(rows, cols, dim=32):
    """Encode (row, col) positions as [..., dim] codes: first half encodes the column, second half the row."""
    if dim % 4 != 0:
        raise ValueError(f"2D positional code dimension must be a multiple of 4, got {dim}")
    return torch.cat([encode_1d(cols, dim // 2), encode_1d(rows, dim // 2)], dim=-1)


def grid_table(rows, cols, dim=32):
    """All codes of an R x C grid, [rows*cols, dim], in raster order (index = r*cols + c)."""
    r, c = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    return encode_2d(r.flatten(), c.flatten(), dim)


def sequence_table(n, dim=16):
    """All codes of a sequence of n positions, [n, dim]."""
    return encode_1d(torch.arange(n), dim)

