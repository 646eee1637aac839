"""
Pictures of bench rows (python -m bench missing-curve): the Moving MNIST 8 x 4 model trained with up to 4 missing
pieces (recipe video-mmnist-8x4-missing), scored at 0 .. 4 missing pieces: normalized Kendall distance (strict, and
with generated pieces compared as a set) and the share of clips exactly in order, drawn with PIL as
docs/video-mmnist-8x4-missing.png, the counterpart of the paper's Figure 4(b).
"""
from PIL import Image, ImageDraw

from solving.pictures import font

CURVE = "video-mmnist-8x4-missing"
SERIES = {"strict": (200, 40, 40), "as a set": (40, 90, 200)}


def curve_points(results, recipe=CURVE, counts=range(5)):
    """[(missing, {metric: value})] of the recipe's rows `RECIPE--missing K` that exist."""
    out = []
    for k in counts:
        row = results.get(f"{recipe}--missing {k}")
        if row:
            out.append((k, row["metrics"]))
    return out


def panel(draw, box, points, series, title, scale):
    """One chart in `box` (x0, y0, x1, y1): each of `series` {label: (metric key, colour)} against the number of
    missing pieces, values times `scale`, the axis from 0 to the largest value."""
    x0, y0, x1, y1 = box
    f = font(13)
    draw.text((x0, y0 - 22), title, fill=(0, 0, 0), font=f)
    draw.line([(x0, y1), (x1, y1)], fill=(0, 0, 0))
    draw.line([(x0, y0), (x0, y1)], fill=(0, 0, 0))
    top = max([m[key] * scale for _, m in points for key, _ in series.values()] + [1e-9]) * 1.1
    ks = [k for k, _ in points]
    sx = lambda k: x0 + 20 + (x1 - x0 - 40) * (k - min(ks)) / max(1, max(ks) - min(ks))      # noqa: E731
    sy = lambda v: y1 - (y1 - y0) * v / top                                                     # noqa: E731
    for k in ks:
        draw.text((sx(k) - 4, y1 + 6), str(k), fill=(0, 0, 0), font=f)
    for frac in (0, 0.5, 1):
        draw.text((x0 - 48, sy(top * frac / 1.1) - 7), f"{top * frac / 1.1:.3g}", fill=(0, 0, 0), font=f)
    for i, (label, (key, colour)) in enumerate(series.items()):
        pts = [(sx(k), sy(m[key] * scale)) for k, m in points]
        draw.line(pts, fill=colour, width=2)
        for x, y in pts:
            draw.ellipse([x - 3, y - 3, x + 3, y + 3], fill=colour)
        draw.text((x1 - 90, y0 + 4 + 16 * i), label, fill=colour, font=f)
    draw.text(((x0 + x1) // 2 - 50, y1 + 24), "missing pieces", fill=(0, 0, 0), font=f)


def missing_curve(results, path):
    """Draw the curve of the recipe's rows into `path`; returns the points drawn."""
    points = curve_points(results)
    if not points:
        raise SystemExit(f"no rows {CURVE}--missing K yet: run python -m bench {CURVE}")
    img = Image.new("RGB", (760, 300), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    panel(draw, (70, 40, 360, 240), points, {"strict": ("kendall", SERIES["strict"]),
                                             "as a set": ("kendall_set", SERIES["as a set"])},
          "Kendall distance x 1e-3 (lower is better)", 1000)
    panel(draw, (450, 40, 740, 240), points, {"strict": ("exact", SERIES["strict"]),
                                              "as a set": ("exact_set", SERIES["as a set"])},
          "% of clips exactly in order", 100)
    img.save(path)
    return points
