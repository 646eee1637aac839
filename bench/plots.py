"""
Pictures of bench rows, drawn with PIL:
- python -m bench missing-curve: the Moving MNIST 8 x 4 model trained with up to 4 missing pieces (recipe
  video-mmnist-8x4-missing), scored at 0 .. 4 missing pieces: normalized Kendall distance (strict, and with generated
  pieces compared as a set) and the share of clips exactly in order, as docs/video-mmnist-8x4-missing.png, the
  counterpart of the paper's Figure 4(b).
- python -m bench reliability-plot: the shipped checkpoints' confidence on test (the `confidence NAME test` rows):
  in each bin of predicted probability, the mean predicted against the share right, per piece and per puzzle, as
  docs/reliability.png (on the diagonal: calibrated; below it: overconfident; bins of under 10 as rings).
"""
import functools

from PIL import Image, ImageDraw, ImageFont

CURVE = "video-mmnist-8x4-missing"
SERIES = {"strict": (200, 40, 40), "as a set": (40, 90, 200)}


@functools.lru_cache(maxsize=8)
def font(size):
    """Pillow's built-in font at `size` px (its small bitmap font where FreeType is missing)."""
    try:
        return ImageFont.load_default(size=size)
    except (ImportError, TypeError):
        return ImageFont.load_default()


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


PART_COLOURS = {"piece": (40, 90, 200), "puzzle": (200, 40, 40)}


def reliability_points(results, names):
    """[(name, {"piece": (rows, ece), "puzzle": (rows, ece)})] of each checkpoint's test row: its `fresh-seed NAME
    test ...` row (the video models: new clips, its estimator), else its `confidence NAME test` row; rows: (low, high,
    count, mean predicted, observed) per bin (solving/confidence.py: reliability)."""
    out = []
    for name in names:
        fresh = [v for k, v in sorted(results.items()) if k.startswith(f"fresh-seed {name} test")]
        row = fresh[0] if fresh else results.get(f"confidence {name} test")
        if row:
            conf = row["metrics"]["confidence"]
            out.append((name, {part: (conf[part]["rows"], conf[part]["ece"]) for part in ("piece", "puzzle")}))
    return out


def reliability_panel(draw, box, rows, colour, few=10):
    """One checkpoint's bins in `box`: a dot at (mean predicted, share right), larger for a larger share of the pieces
    or puzzles; a bin of at least `few` has a line from the diagonal (dashed) to it (below the diagonal:
    overconfident), a smaller one is a ring with its count: one puzzle right or wrong says little."""
    x0, y0, x1, y1 = box
    sx = lambda v: x0 + (x1 - x0) * v                                                          # noqa: E731
    sy = lambda v: y1 - (y1 - y0) * v                                                          # noqa: E731
    draw.rectangle([x0, y0, x1, y1], outline=(0, 0, 0))
    for i in range(0, 20, 2):
        draw.line([(sx(i / 20), sy(i / 20)), (sx((i + 1) / 20), sy((i + 1) / 20))], fill=(160, 160, 160))
    total = sum(r[2] for r in rows)
    for _, _, count, predicted, observed in rows:
        x, y, r = sx(predicted), sy(observed), 2 + 5 * (count / total) ** 0.5
        if count >= few:
            draw.line([(x, sy(predicted)), (x, y)], fill=colour)
            draw.ellipse([x - r, y - r, x + r, y + r], fill=colour)
        else:
            draw.ellipse([x - 3, y - 3, x + 3, y + 3], outline=colour)
            draw.text((x + 4, y - 6 if observed < 0.5 else y), str(count), fill=colour, font=font(10))


CAPTION = ["share right (y) against predicted probability (x) in bins of the test split: a dot grows with its bin's "
           "share; dashed: calibrated; below it: overconfident; a ring: a bin of under 10 (its count)",
           "photos: 39 photos x 8 passes (not independent); set after seeing test: the gap model's tables; "
           "videos: new test clips (seed 20261202), each model's own estimator"]


def reliability_plot(results, names, path):
    """Draw the reliability of the checkpoints `names` into `path`: a column each, pieces above, puzzles below, with
    their test ECE; returns the points drawn."""
    points = reliability_points(results, names)
    if not points:
        raise SystemExit("no rows 'confidence NAME test' yet: run python -m bench confidence")
    size, gap, f = 140, 40, font(12)
    img = Image.new("RGB", (70 + (size + gap) * len(points), 80 + 2 * (size + gap)), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    for k, line in enumerate(CAPTION):
        draw.text((10, 6 + 16 * k), line, fill=(0, 0, 0), font=f)
    for i, (name, parts) in enumerate(points):
        x0 = 60 + (size + gap) * i
        draw.text((x0, 44), name.replace("image-", "").replace("video-", ""), fill=(0, 0, 0), font=f)
        for j, part in enumerate(("piece", "puzzle")):
            y0 = 84 + (size + gap) * j
            reliability_panel(draw, (x0, y0, x0 + size, y0 + size), parts[part][0], PART_COLOURS[part])
            draw.text((x0, y0 - 16), f"{part} ECE {parts[part][1]:.3f}", fill=PART_COLOURS[part], font=f)
            for v in (0, 1):
                draw.text((x0 + size * v - 3, y0 + size + 3), f"{v}", fill=(0, 0, 0), font=f)
                if i == 0:
                    draw.text((x0 - 20, y0 + size * (1 - v) - 7), f"{v}", fill=(0, 0, 0), font=f)
    img.save(path)
    return points
