"""
Built-in procedural data, so that everything runs with no download: images ("shapes") and moving digits ("digits").
Not in the paper (its datasets are Sec. 4.1's); stand-ins for photos and Moving MNIST that train on a CPU.

- shapes_image: a natural-looking picture (colour gradient, overlapping shapes, lines, a patch of stripes) whose
  content crosses piece borders, so a puzzle needs matching across edges (train_image.py --dataset shapes).
- moving_digits: a MovingMNIST-like clip of digits drawn with PIL strokes bouncing in a frame
  (train_video.py --dataset digits). Real Moving MNIST from the original digits is in sources/mnist.py.

Both are pure functions of a numpy Generator, which is how every sample stays a function of (seed, split, index).

    img = shapes_image(np.random.default_rng(0), 48, 48)                    # (48, 48, 3) in [0, 1]
    clip = moving_digits(np.random.default_rng(0), num_frames=20, size=32)  # (20, 32, 32) in [0, 1]
"""
import functools

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

# ----------------------------------------------------------------------------
# Images: "shapes"
# ----------------------------------------------------------------------------

def _colour(rng):
    return tuple(int(v) for v in rng.integers(0, 256, 3))


def shapes_image(rng, height, width):
    """
    A natural-looking procedural image (H, W, 3) float32 in [0, 1]: a smooth two-colour gradient field, several
    overlapping filled shapes, a few lines and a patch of stripes, lightly blurred and with mild noise. Shapes
    cross piece borders, so solving a puzzle needs to match content across edges.
    """
    s = 2  # draw at 2x and downsample: anti-aliased edges
    h, w = height * s, width * s
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    ang = rng.uniform(0, 2 * np.pi)
    ramp = (np.cos(ang) * xx / w + np.sin(ang) * yy / h)
    ramp = (ramp - ramp.min()) / max(np.ptp(ramp), 1e-6)
    c0, c1 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    field = c0 + ramp[..., None] * (c1 - c0)
    bump = np.sin(xx / w * rng.uniform(1, 4) * np.pi + rng.uniform(0, 6)) * np.sin(
        yy / h * rng.uniform(1, 4) * np.pi + rng.uniform(0, 6))
    field = field + 40 * bump[..., None] * rng.uniform(-1, 1, 3)
    img = Image.fromarray(np.clip(field, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(rng.integers(3, 7)):
        kind = rng.integers(0, 3)
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        rx, ry = rng.uniform(0.1, 0.35) * w, rng.uniform(0.1, 0.35) * h
        box = [cx - rx, cy - ry, cx + rx, cy + ry]
        if kind == 0:
            draw.ellipse(box, fill=_colour(rng))
        elif kind == 1:
            draw.rectangle(box, fill=_colour(rng))
        else:
            k = rng.integers(3, 6)
            a = np.sort(rng.uniform(0, 2 * np.pi, k))
            draw.polygon([(cx + rx * np.cos(t), cy + ry * np.sin(t)) for t in a], fill=_colour(rng))
    for _ in range(rng.integers(1, 4)):
        pts = rng.uniform(0, 1, 4) * [w, h, w, h]
        draw.line(list(pts), fill=_colour(rng), width=int(rng.integers(1, 4) * s))
    arr = np.asarray(img, dtype=np.float32)
    # a patch of stripes (texture) in a random box
    y0, x0 = rng.integers(0, h // 2), rng.integers(0, w // 2)
    y1, x1 = y0 + rng.integers(h // 4, h // 2), x0 + rng.integers(w // 4, w // 2)
    period = rng.uniform(3, 8) * s
    stripes = (np.sin((xx[y0:y1, x0:x1] * np.cos(ang) + yy[y0:y1, x0:x1] * np.sin(ang)) / period * 2 * np.pi) > 0)
    arr[y0:y1, x0:x1] = np.where(stripes[..., None], arr[y0:y1, x0:x1], 255 - arr[y0:y1, x0:x1])
    img = Image.fromarray(arr.astype(np.uint8)).filter(ImageFilter.GaussianBlur(0.6 * s))
    img = img.resize((width, height), Image.BILINEAR)
    out = np.asarray(img, dtype=np.float32) / 255.0
    out = out + rng.normal(0, 0.015, out.shape).astype(np.float32)
    return np.clip(out, 0, 1)


# ----------------------------------------------------------------------------
# Videos: "digits"
# ----------------------------------------------------------------------------

def _arc(cx, cy, rx, ry, a0, a1, n=24):
    """Points along an ellipse arc; angles in degrees, 0 = right, 90 = down (image coordinates)."""
    a = np.radians(np.linspace(a0, a1, n))
    return list(zip(cx + rx * np.cos(a), cy + ry * np.sin(a)))


# Each digit is a list of strokes (polylines) in a unit box, drawn with round ends.
DIGIT_STROKES = {
    0: [_arc(0.5, 0.5, 0.22, 0.34, 0, 360, 48)],
    1: [[(0.36, 0.28), (0.53, 0.15), (0.53, 0.85)]],
    2: [_arc(0.5, 0.33, 0.21, 0.18, 190, 385) + [(0.28, 0.85), (0.74, 0.85)]],
    3: [_arc(0.49, 0.32, 0.19, 0.16, 205, 450) + _arc(0.49, 0.66, 0.22, 0.19, 270, 515)],
    4: [[(0.63, 0.85), (0.63, 0.15), (0.25, 0.63), (0.78, 0.63)]],
    5: [[(0.72, 0.16), (0.35, 0.16), (0.32, 0.48)] + _arc(0.5, 0.64, 0.21, 0.2, 220, 520)],
    6: [[(0.66, 0.15), (0.33, 0.56)], _arc(0.5, 0.65, 0.2, 0.19, 0, 360, 40)],
    7: [[(0.26, 0.16), (0.74, 0.16), (0.43, 0.85)]],
    8: [_arc(0.5, 0.32, 0.17, 0.16, 0, 360, 40), _arc(0.5, 0.67, 0.21, 0.18, 0, 360, 40)],
    9: [_arc(0.5, 0.35, 0.2, 0.19, 0, 360, 40), [(0.7, 0.37), (0.64, 0.85)]],
}


def draw_digit_glyphs(size=28, thickness=0.11):
    """Digits 0-9 drawn with anti-aliased PIL strokes: uint8 (10, size, size), white on black."""
    s = 4 * size                                               # draw 4x larger, then downsample (anti-aliasing)
    width = max(1, int(round(thickness * s)))
    out = np.zeros((10, size, size), np.uint8)
    for d, strokes in DIGIT_STROKES.items():
        img = Image.new("L", (s, s), 0)
        draw = ImageDraw.Draw(img)
        for stroke in strokes:
            pts = [(x * s, y * s) for x, y in stroke]
            draw.line(pts, fill=255, width=width, joint="curve")
            for x, y in (pts[0], pts[-1]):                     # round caps
                draw.ellipse([x - width / 2, y - width / 2, x + width / 2, y + width / 2], fill=255)
        img = img.filter(ImageFilter.GaussianBlur(s / 56)).resize((size, size), Image.Resampling.BOX)
        out[d] = np.asarray(img)
    return out


@functools.lru_cache(maxsize=None)
def _glyph_bank(glyph_size):
    """Glyphs at three stroke thicknesses, float32 (3, 10, g, g) in [0, 1]; cached per size."""
    return np.stack([draw_digit_glyphs(glyph_size, th) for th in (0.08, 0.11, 0.14)]).astype(np.float32) / 255


def _random_digit(rng, glyph_size):
    """One glyph with a random digit, stroke thickness, scale (0.8-1.1) and small rotation: float32 (g', g')."""
    glyph = _glyph_bank(glyph_size)[rng.integers(3), rng.integers(10)]
    g = max(4, int(round(glyph_size * rng.uniform(0.8, 1.1))))
    img = Image.fromarray(glyph).rotate(rng.uniform(-12, 12), resample=Image.Resampling.BILINEAR)
    return np.clip(np.asarray(img.resize((g, g), Image.Resampling.BILINEAR)), 0, 1)


def moving_digits(rng, num_frames=20, size=64, num_digits=2, glyph_size=28):
    """
    A MovingMNIST-like clip, float32 (num_frames, size, size) in [0, 1]: `num_digits` digits with random start and
    constant velocity (2-4 px/frame at 64 px), bouncing off the walls, composited with max. Glyphs (and speeds)
    are scaled by size/64, so size=32 gives a half-size version of the same motion.
    """
    scale = size / 64
    video = np.zeros((num_frames, size, size), np.float32)
    for _ in range(num_digits):
        glyph = _random_digit(rng, max(4, int(round(glyph_size * scale))))
        g = glyph.shape[0]
        lim = size - g                                         # top-left corner lives in [0, lim]^2
        p = rng.uniform(0, lim, 2)
        angle = rng.uniform(0, 2 * np.pi)
        v = rng.uniform(2, 4) * scale * np.array([np.cos(angle), np.sin(angle)])
        for t in range(num_frames):
            y, x = np.round(p).astype(int)
            np.maximum(video[t, y:y + g, x:x + g], glyph, out=video[t, y:y + g, x:x + g])
            p = p + v
            for k in range(2):                                 # reflect off the walls
                if p[k] < 0:
                    p[k], v[k] = -p[k], -v[k]
                elif p[k] > lim:
                    p[k], v[k] = 2 * lim - p[k], -v[k]
    return video
