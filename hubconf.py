"""
torch.hub entries: one per shipped checkpoint, each a Solver ready for a bag of your own pieces (solving.load).

    solver = torch.hub.load("/path/to/jpdvt", "photos", source="local")     # from any folder
    result = solver.solve(pieces)          # pieces: PIL images or arrays, any order; .positions, .confidence, .image

The repository's modules have plain names (config, metrics, train, ...) that your own modules may share: an entry
imports ours in a window of their own (sys.modules and sys.path as this folder needs them) and leaves sys.modules as
it found it; the Solver's methods run in that window again, for the modules they import when called.
"""
import contextlib
import functools
import os
import sys

dependencies = ["torch", "numpy", "PIL", "imageio"]

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKPOINTS = {                                  # entry -> checkpoints/NAME.pt
    "photos": "image-photos-3x3",                # 3x3 photo pieces
    "photos_missing": "image-photos-3x3-missing",   # 3x3 photos, up to 3 pieces missing (drawn)
    "photos_gap": "image-photos-3x3-gap",        # 3x3 photo pieces cut with 8 px gaps between them
    "photos_5x5": "image-photos-5x5",            # 5x5 photo pieces (25)
    "photos_5x5_gap": "image-photos-5x5-gap",    # 5x5 photo pieces cut with 8 px gaps
    "shapes": "image-shapes-3x3",                # built-in pictures of shapes
    "shapes_anchor_missing": "image-shapes-3x3-anchor-missing",   # shapes, one piece pinned, one missing
    "digits_5x4": "video-digits-5x4",            # built-in moving digits: 5 pieces of 4 frames
    "mmnist_5x4": "video-mmnist-5x4",            # Moving MNIST: 5 pieces of 4 frames
    "mmnist_10x2": "video-mmnist-10x2",          # 10 pieces of 2 frames
    "mmnist_20x1": "video-mmnist-20x1",          # 20 single frames
    "mmnist_8x4_missing": "video-mmnist-8x4-missing",   # 8 pieces of 4 frames, up to 2 missing (drawn)
    "mmnist_7x4_superres": "video-mmnist-7x4-superres",   # 7 pieces of 4 frames: every other one drawn
}


def _top_names():
    """The repository's top-level module names: its .py files and its packages (hubconf, which torch.hub imports under
    that name without sys.modules, aside)."""
    names = {f[:-3] for f in os.listdir(HERE) if f.endswith(".py")}
    names |= {d for d in os.listdir(HERE) if os.path.isfile(os.path.join(HERE, d, "__init__.py"))}
    return names - {"hubconf"}


def _take(names):
    """Remove from sys.modules every entry of these top-level names (packages with their submodules); returns them."""
    return {k: sys.modules.pop(k) for k in list(sys.modules) if k.partition(".")[0] in names}


@contextlib.contextmanager
def _our_modules(ours):
    """Inside: the repository's names in sys.modules are ours (the dict `ours`, which gains what the block imports)
    and this folder leads sys.path; after: the entries of those names that were there before, and no others."""
    names = _top_names()
    theirs = _take(names)
    sys.modules.update(ours)
    sys.path.insert(0, HERE)
    try:
        yield
    finally:
        sys.path.remove(HERE)
        ours.update(_take(names))
        sys.modules.update(theirs)


def _in_window(method, ours):
    """method, run inside _our_modules(ours) at each call."""
    @functools.wraps(method)
    def call(*args, **kwargs):
        with _our_modules(ours):
            return method(*args, **kwargs)
    return call


def _methods(obj):
    """The names of the public methods of obj's class."""
    return [m for m in dir(type(obj)) if not m.startswith("_") and callable(getattr(type(obj), m))]


def _entry(name):
    def load(device="auto", precision="fp32"):
        ours = {}
        with _our_modules(ours):
            import solving
            import solving.bag  # noqa: F401  (Solver.solve imports it when called)
            solver = solving.load(os.path.join(HERE, "checkpoints", f"{CHECKPOINTS[name]}.pt"), device, precision)
        for method in _methods(solver):
            setattr(solver, method, _in_window(getattr(solver, method), ours))
        return solver
    load.__name__ = name
    load.__doc__ = f"A Solver of checkpoints/{CHECKPOINTS[name]}.pt: torch.hub.load(REPO, {name!r}, source='local')"
    return load


for _name in CHECKPOINTS:
    globals()[_name] = _entry(_name)
