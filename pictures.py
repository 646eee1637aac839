"""
Pictures of puzzles, for people who would rather look than read: PNG grids of image puzzles and animated GIFs
of video puzzles (written by sample.py), and the pieces put back in place for them (`assemble` a grid of pieces,
`unshuffle_video` a clip's pieces in time order; a solved bag's picture too, solving/bag.py). Not in the paper.

- Image rows: shuffled input (missing pieces grey) | solved | solved and inpainted | ground truth (the paper's
  JPDVT-S and JPDVT-SI columns), titled IMAGE_COLUMNS above them.
- Video rows: shuffled input | solved (generated frames outlined in red) | ground truth, one puzzle per row.
The sampling animations are in solving/animate.py; the picture of the codes (docs/codes.png) in bench/codes_picture.py.

    save_png("examples.png", stack([image_row(batch, positions, content, grid, k) for k in range(4)], axis=0))
    write_gif("examples.gif", [[clip, solved_clip]], labels=["shuffled", "solved"])
"""
import functools
import os

import imageio.v3 as iio
import numpy as np
import torch.nn.functional as F
from PIL import Image, ImageDraw, ImageFont

from sources.files import fit_channels

RED = (1.0, 0.0, 0.0)                  # outline of generated (missing) pieces
DISPLAY = 160                          # a solved bag's piece side in pixels, at most the pieces' own
IMAGE_COLUMNS = ("shuffled", "solved", "with missing drawn", "ground truth")   # image_row's panels
TITLE_PX, TITLE_INK = 13, (40, 40, 40)  # column titles: font size in the saved picture's pixels, colour

# ----------------------------------------------------------------------------
# Putting pieces back
# ----------------------------------------------------------------------------

def assemble(pieces, positions, grid, border=0, fill=0.5):
    """
    Place pieces (N, P, P, C) at grid positions (N,) (raster index; -1 = leave out) and return the image
    (rows*(P+border) - border, ...). Cells that get no piece are filled with `fill`.
    """
    rows, cols = grid
    n, p = pieces.shape[0], pieces.shape[1]
    s = p + border
    img = np.full((rows * s - border, cols * s - border, pieces.shape[-1]), fill, dtype=np.float32)
    for i in range(n):
        if positions[i] < 0:
            continue
        r, c = divmod(int(positions[i]), cols)
        img[r * s:r * s + p, c * s:c * s + p] = pieces[i]
    return img


def unshuffle_video(pieces, positions):
    """Put shuffled pieces (P, F, ...) back in time order: piece i goes to slot positions[i]. Returns (P*F, ...)."""
    positions = np.asarray(positions)
    p = len(pieces)
    if sorted(positions.tolist()) != list(range(p)):
        raise ValueError(f"positions must be a permutation of 0..{p - 1}, got {positions.tolist()}")
    out = np.empty_like(pieces)
    out[positions] = pieces
    return out.reshape(-1, *pieces.shape[2:])                  # p f ... -> (p f) ...


# ----------------------------------------------------------------------------
# Images
# ----------------------------------------------------------------------------

def to_uint8(img):
    return (np.clip(img, 0, 1) * 255).round().astype(np.uint8)


def save_png(path, img, min_width=480, titles=None):
    """Save a [0, 1] picture, enlarged by a whole factor (nearest) so small pieces stay visible; titles: (text, x0,
    x1) column titles (x in the picture's own pixels, before enlarging), written above it (titled)."""
    k = max(1, min_width // img.shape[1])
    big = Image.fromarray(to_uint8(img)).resize((img.shape[1] * k, img.shape[0] * k), Image.NEAREST)
    if titles:
        big = titled(big, [(text, x0 * k, x1 * k) for text, x0, x1 in titles])
    big.save(path)


@functools.lru_cache(maxsize=4)
def font(size):
    """Pillow's built-in font at `size` px (its small bitmap font where FreeType is missing)."""
    try:
        return ImageFont.load_default(size=size)
    except (ImportError, TypeError):
        return ImageFont.load_default()


def wrap(text, width, face):
    """The words of `text` in lines of at most `width` px in `face` (a word wider than that: a line of its own)."""
    lines = []
    for word in text.split():
        if lines and face.getlength(lines[-1] + " " + word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def titled(im, titles, size=TITLE_PX):
    """A copy of the picture `im` (PIL) with a white strip above it, each (text, x0, x1) of titles centred over the
    columns x0..x1, its words wrapped where the column is too narrow for them."""
    face = font(size)
    wrapped = [(wrap(text, x1 - x0, face), x0, x1) for text, x0, x1 in titles]
    line = size + 3
    out = Image.new("RGB", (im.width, line * max(len(w) for w, _, _ in wrapped) + 6), "white")
    draw = ImageDraw.Draw(out)
    for lines, x0, x1 in wrapped:
        for j, text in enumerate(lines):
            draw.text(((x0 + x1 - face.getlength(text)) / 2, 3 + j * line), text, font=face, fill=TITLE_INK)
    return Image.fromarray(np.concatenate([np.asarray(out), np.asarray(im.convert("RGB"))]))


def column_titles(texts, width, gap=6):
    """save_png's titles of len(texts) panels of one width, side by side `gap` px apart in a picture `width` px wide
    (as stack() puts them): [(text, x0, x1)]."""
    n = len(texts)
    panel = (width - gap * (n - 1)) / n
    return [(text, round(j * (panel + gap)), round(j * (panel + gap) + panel)) for j, text in enumerate(texts)]


def stack(panels, axis=1, gap=6):
    """Panels (H, W, 3) side by side (axis 1) or one above the other (axis 0), with white gaps between them."""
    shape = list(panels[0].shape)
    shape[axis] = gap
    sep = np.ones(shape, dtype=np.float32)
    return np.concatenate(sum(([p, sep] for p in panels), [])[:-1], axis=axis)


def outline(img, y, x, side, width, color=RED):
    """Paint a `width` px frame just inside the side x side square at (y, x) of img (H, W, 3), in place."""
    img[y:y + width, x:x + side] = color
    img[y + side - width:y + side, x:x + side] = color
    img[y:y + side, x:x + width] = color
    img[y:y + side, x + side - width:x + side] = color
    return img


def mark_cells(img, cells, grid, side, border):
    """Outline (red) the cells (raster indices) of an assemble()d picture of side px pieces and border px gaps."""
    for cell in cells:
        r, c = divmod(int(cell), grid[1])
        outline(img, r * (side + border), c * (side + border), side=side, width=border)
    return img


def enlarge(content, side, smooth=False):
    """
    Pieces (N, C, P, P) or clips (N, F, C, H, W) (a clip: its first frame) in [-1, 1] -> (N, side, side, 3)
    tiles in [0, 1], enlarged to side px: nearest, or bicubic when `smooth` (generated content shown next to a
    photo's own pixels). Grey becomes RGB.
    """
    x = content[:, 0] if content.dim() == 5 else content                       # (N, C, H, W)
    x = x.float().cpu().clamp(-1, 1)
    x = F.interpolate(x, size=(side, side), mode="bicubic" if smooth else "nearest").clamp(-1, 1)
    return ((x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x).permute(0, 2, 3, 1).numpy() + 1) / 2


def display_hwc(content):
    """Pieces (N, C, P, P) or clips (N, F, C, H, W) in [-1, 1] -> numpy (N, P, P, C) or (N, F, H, W, C) in [0, 1]."""
    return ((content.float().cpu() + 1) / 2).movedim(-3, -1).numpy()


def image_row(batch, positions, content, grid, k):
    """One picture row of puzzle k: shuffled input | solved (S) | solved and inpainted (SI) | ground truth."""
    n = grid[0] * grid[1]
    given = display_hwc(batch["content"][k])
    missing = batch["missing"][k].cpu().numpy()
    shown = np.where(missing[:, None, None, None], 0.5, given)        # missing pieces are grey in the input
    gen = display_hwc(content[k])
    placed = np.where(missing, -1, positions[k])
    return stack([assemble(shown, np.arange(n), grid, border=2, fill=1.0),
                  assemble(given, placed, grid, border=2, fill=1.0),
                  assemble(np.where(missing[:, None, None, None], gen, given), positions[k], grid, border=2, fill=1.0),
                  assemble(given, batch["true_pos"][k].cpu().numpy(), grid, border=2, fill=1.0)])


# ----------------------------------------------------------------------------
# Videos
# ----------------------------------------------------------------------------

def video_row(batch, positions, generated, k):
    """
    Clips of puzzle k, each (N*F, H, W, C): shuffled input (missing pieces grey) | solved (generated pieces put
    where the model placed them, marked) | ground truth; and the marks (per clip a (N*F,) bool or None).
    """
    real = display_hwc(batch["content"][k])                  # (N, F, H, W, C), missing pieces' true frames too
    missing = batch["missing"][k].cpu().numpy()
    f = real.shape[1]
    gone = missing[:, None, None, None, None]
    slot_generated = np.empty_like(missing)
    slot_generated[positions[k]] = missing                     # which time slots got a generated piece
    clips = [np.where(gone, 0.5, real).reshape(-1, *real.shape[2:]),   # n f h w c -> (n f) h w c
             unshuffle_video(np.where(gone, display_hwc(generated[k]), real), positions[k]),
             unshuffle_video(real, batch["true_pos"][k].cpu().numpy())]
    return clips, [None, np.repeat(slot_generated, f), None]


def picture(puzzle, batch, positions, content, k):
    """Puzzle k of a solved batch of `puzzle`'s puzzles (an ImageConfig or VideoConfig; content decoded to pixels):
    image_row or video_row."""
    if puzzle.kind == "image":
        return image_row(batch, positions, content, grid=puzzle.grid, k=k)
    return video_row(batch, positions, content, k=k)


def save_pictures(puzzle, folder, solved):
    """examples.png (images) or examples.gif (videos) of solved puzzles, [(batch, positions, content, k)] (picture());
    returns (path, what its columns show)."""
    rows = [picture(puzzle, *one) for one in solved]
    if puzzle.kind == "image":
        path, img = os.path.join(folder, "examples.png"), stack(rows, axis=0)
        save_png(path, img, titles=column_titles(IMAGE_COLUMNS, img.shape[1]))
        return path, " | ".join(IMAGE_COLUMNS)
    path = write_rows(os.path.join(folder, "examples.gif"), rows, ["shuffled", "solved", "ground truth"])
    return path, "shuffled input | solved, generated frames in red | ground truth"


def write_rows(path, rows, labels):
    """write_gif of video_row outputs; returns path."""
    write_gif(path, [clips for clips, _ in rows], labels, marks=[marks for _, marks in rows])
    return path


def _to_rgb_uint8(frames):
    """(L, H, W) or (L, H, W, 1|3) float in [0, 1] -> uint8 (L, H, W, 3)."""
    frames = np.asarray(frames, np.float32)
    if frames.ndim == 3:
        frames = frames[..., None]
    return (np.clip(fit_channels(frames, 3), 0, 1) * 255 + 0.5).astype(np.uint8)


def write_gif(path, rows, labels=None, fps=4, marks=None, min_size=96):
    """
    Animated GIF of a grid of clips: rows (e.g. one per puzzle) of clips side by side (e.g. shuffled | solved |
    ground truth). Each clip is an (L, H, W) or (L, H, W, 1|3) float array in [0, 1] (L frames), all of one shape;
    labels: a title per column; marks: nested like rows, per clip a bool (L,) (or None) of frames to outline in
    red (generated frames). Small frames are upscaled (nearest) to at least `min_size` pixels.
    """
    clips = [[_to_rgb_uint8(c) for c in row] for row in rows]
    shapes = {c.shape for row in clips for c in row}
    if len(shapes) != 1:
        raise ValueError(f"all clips must have the same (L, H, W), got {sorted(s[:3] for s in shapes)}")
    t, h, w, _ = shapes.pop()
    k = max(1, -(-min_size // min(h, w)))                      # ceil(min_size / min(h, w))
    h, w, border, gap, header = h * k, w * k, 3, 6, (14 if labels else 0)
    cols = max(len(row) for row in clips)
    red = np.array([255, 0, 0], np.uint8)

    canvas = np.full((t, header + len(clips) * (h + gap) + gap, cols * (w + gap) + gap, 3), 32, np.uint8)
    for r, row in enumerate(clips):
        y0 = header + gap + r * (h + gap)
        for c, clip in enumerate(row):
            x0 = gap + c * (w + gap)
            canvas[:, y0:y0 + h, x0:x0 + w] = clip.repeat(k, axis=1).repeat(k, axis=2)  # t h w c -> t (h k) (w k) c
            if marks is not None and marks[r][c] is not None:  # red frame around the marked time steps
                m = np.asarray(marks[r][c], bool)
                canvas[m, y0 - border:y0, x0 - border:x0 + w + border] = red
                canvas[m, y0 + h:y0 + h + border, x0 - border:x0 + w + border] = red
                canvas[m, y0:y0 + h, x0 - border:x0] = red
                canvas[m, y0:y0 + h, x0 + w:x0 + w + border] = red
    if labels:                                                 # titles in a strip above the columns
        strip = Image.fromarray(canvas[0, :header])
        draw = ImageDraw.Draw(strip)
        for c, label in enumerate(labels):
            draw.text((gap + c * (w + gap), 2), str(label), fill=(230, 230, 230))
        canvas[:, :header] = np.asarray(strip)
    iio.imwrite(path, canvas, extension=".gif", duration=int(round(1000 / fps)), loop=0)
