"""
The picture of the codes the model denoises (posenc.py), docs/codes.png: every cell's 2D code and every time slot's
1D code as coloured stripes, with the distances between neighbours.

    python -m bench.codes_picture docs/codes.png
"""
import argparse

import numpy as np
import torch
from PIL import Image, ImageDraw

from pictures import font
from posenc import grid_table, sequence_table

DIVERGING = np.array([[33, 102, 172], [247, 247, 247], [178, 24, 43]], np.float32)   # -1 blue, 0 white, +1 red


def diverging(values):
    """Values in [-1, 1] (any shape) -> uint8 RGB (..., 3): blue at -1, white at 0, red at +1."""
    v = np.clip(np.asarray(values, np.float32), -1, 1)[..., None]
    low = DIVERGING[1] + (DIVERGING[1] - DIVERGING[0]) * np.minimum(v, 0)
    high = DIVERGING[1] + (DIVERGING[2] - DIVERGING[1]) * np.maximum(v, 0)
    return np.where(v < 0, low, high).round().astype(np.uint8)


def _stripes(draw, code, x, y, width, height):
    """One code (D,) as D vertical stripes of `width` px from (x, y), outlined in grey."""
    for j, rgb in enumerate(diverging(code)):
        draw.rectangle([x + j * width, y, x + (j + 1) * width - 1, y + height - 1], fill=tuple(int(c) for c in rgb))
    draw.rectangle([x - 1, y - 1, x + len(code) * width, y + height], outline=(120, 120, 120))


def _centred(draw, text, cx, cy, fnt, fill=(40, 40, 40)):
    """Text centred on (cx, cy)."""
    left, top, right, bottom = draw.textbbox((0, 0), text, font=fnt)
    draw.text((cx - (right - left) / 2 - left, cy - (bottom - top) / 2 - top), text, font=fnt, fill=fill)


def draw_codes(grid=(3, 3), slots=10):
    """
    A picture (H, W, 3) uint8 of the codes JPDVT denoises (posenc.py): the 2D code (32 values) of every cell of
    `grid` laid out on the grid, and the 1D code (16 values) of each of `slots` time slots as a strip; one stripe
    per value, blue (-1) - white (0) - red (+1). Between neighbouring cells and slots: the distance between their
    codes: the same for every pair of neighbours, as the squared distance between the codes of positions d apart
    along an axis is sum_i (2 - 2 cos(d / 1000^(2i/16))), whatever the positions.
    """
    rows, cols = grid
    cells, times = grid_table(rows, cols), sequence_table(slots)            # (R*C, 32), (slots, 16)
    dist, tdist = torch.cdist(cells, cells), torch.cdist(times, times)
    big, small = font(16), font(13)
    sw, ch, gx, gy = 6, 56, 64, 44           # 2D: stripe px, code height, gaps between cells (distances go there)
    tw, th, tg = 4, 44, 40                   # 1D: stripe px, code height, gap between slots
    cw, bw, m = 32 * sw, 16 * tw, 24         # code widths, margin
    width = max(cols * cw + (cols - 1) * gx, slots * bw + (slots - 1) * tg) + 2 * m
    gy0 = 64                                                              # top of the grid
    ty0 = gy0 + rows * (ch + gy) + 70                                     # top of the time strip
    im = Image.new("RGB", (width, ty0 + th + 86), (255, 255, 255))
    draw = ImageDraw.Draw(im)
    draw.text((m, 12), f"2D codes of a {rows}x{cols} grid (images): 32 values per cell, the column's 1D code | the "
              "row's", font=big, fill=(0, 0, 0))
    draw.text((m, 34), "numbers between codes: the distance between them (pieces go to the cell of the nearest code)",
              font=small, fill=(90, 90, 90))
    x0 = (width - (cols * cw + (cols - 1) * gx)) // 2
    for i in range(rows * cols):
        r, c = divmod(i, cols)
        x, y = x0 + c * (cw + gx), gy0 + r * (ch + gy)
        _stripes(draw, cells[i].numpy(), x, y=y, width=sw, height=ch)
        draw.line([x + 16 * sw, y - 3, x + 16 * sw, y + ch + 2], fill=(0, 0, 0), width=2)   # column | row half
        _centred(draw, f"cell ({r},{c})", x + cw / 2, cy=y + ch + 10, fnt=small, fill=(90, 90, 90))
        if c + 1 < cols:                                   # to the right neighbour: a line with its length
            draw.line([x + cw + 6, y + ch / 2 + 6, x + cw + gx - 6, y + ch / 2 + 6], fill=(150, 150, 150), width=2)
            _centred(draw, f"{dist[i, i + 1]:.2f}", x + cw + gx / 2, cy=y + ch / 2 - 6, fnt=big)
        if r + 1 < rows:                                   # to the neighbour below
            draw.line([x + cw / 2 + 50, y + ch + 6, x + cw / 2 + 50, y + ch + gy - 6], fill=(150, 150, 150), width=2)
            _centred(draw, f"{dist[i, i + cols]:.2f}", x + cw / 2 + 76, cy=y + ch + gy / 2, fnt=big)
    far = ", ".join(f"({j // cols},{j % cols}) {dist[0, j]:.2f}" for j in (cols + 1, rows * cols - 1))
    draw.text((m, ty0 - 56), f"farther apart: cell (0,0) to {far}. Mostly the first stripes of each half differ: "
              "the slower sin/cos pairs (base 1000) barely turn over a few cells", font=small, fill=(90, 90, 90))
    draw.text((m, ty0 - 34), f"1D codes of {slots} time slots (videos): 16 values per slot", font=big, fill=(0, 0, 0))
    x0 = (width - (slots * bw + (slots - 1) * tg)) // 2
    for i in range(slots):
        x = x0 + i * (bw + tg)
        _stripes(draw, times[i].numpy(), x, y=ty0, width=tw, height=th)
        _centred(draw, f"slot {i}", x + bw / 2, cy=ty0 + th + 10, fnt=small, fill=(90, 90, 90))
        if i + 1 < slots:
            _centred(draw, f"{tdist[i, i + 1]:.2f}", x + bw + tg / 2, cy=ty0 + th / 2, fnt=big)
    far = " ".join(f"{d:.2f}" for d in tdist[0, 1:].tolist())
    draw.text((m, ty0 + th + 26), f"distance from slot 0: {far} (not monotone: the fastest sin/cos pair turns full "
              "circle every 6.3 slots)", font=small, fill=(90, 90, 90))
    bar = diverging(np.linspace(-1, 1, 200))[None].repeat(10, 0)           # colour scale, bottom right
    bx, by = width - m - 200, ty0 + th + 52
    im.paste(Image.fromarray(bar), (bx, by))
    for v, x in ((-1, bx), (0, bx + 100), (1, bx + 200)):
        _centred(draw, f"{v:+d}" if v else "0", x, cy=by + 22, fnt=small)
    return np.asarray(im)


def save_codes_picture(path, grid=(3, 3), slots=10):
    """Write draw_codes() as a PNG (docs/codes.png)."""
    Image.fromarray(draw_codes(grid, slots)).save(path, optimize=True)
    return path


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", nargs="?", default="docs/codes.png", help="the PNG to write (default docs/codes.png)")
    print(f"wrote {save_codes_picture(p.parse_args().path)}")
