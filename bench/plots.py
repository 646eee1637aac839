"""Pillow's font for the text in bench's pictures (the animations, docs/codes.png, docs/eps-vs-x0.png)."""
import functools

from PIL import ImageFont


@functools.lru_cache(maxsize=8)
def font(size):
    """Pillow's built-in font at `size` px (its small bitmap font where FreeType is missing)."""
    try:
        return ImageFont.load_default(size=size)
    except (ImportError, TypeError):
        return ImageFont.load_default()
