"""
torch.hub entries: one per shipped checkpoint, each a Solver ready for a bag of your own pieces (solving.load).

    solver = torch.hub.load("/path/to/jpdvt", "photos", source="local")     # from any folder
    result = solver.solve(pieces)          # pieces: PIL images or arrays, any order; .positions, .confidence, .image
"""
import os

dependencies = ["torch", "numpy", "PIL", "imageio"]

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKPOINTS = {                                  # entry -> checkpoints/NAME.pt
    "photos": "image-photos-3x3",                # 3x3 photo pieces
    "photos_missing": "image-photos-3x3-missing",   # 3x3 photos, up to 3 pieces missing (drawn)
    "photos_gap": "image-photos-3x3-gap",        # 3x3 photo pieces cut with 8 px gaps between them
    "shapes": "image-shapes-3x3",                # built-in pictures of shapes
    "shapes_anchor_missing": "image-shapes-3x3-anchor-missing",   # shapes, one piece pinned, one missing
    "digits_5x4": "video-digits-5x4",            # built-in moving digits: 5 pieces of 4 frames
    "mmnist_5x4": "video-mmnist-5x4",            # Moving MNIST: 5 pieces of 4 frames
    "mmnist_10x2": "video-mmnist-10x2",          # 10 pieces of 2 frames
    "mmnist_20x1": "video-mmnist-20x1",          # 20 single frames
}


def _entry(name):
    def load(device="auto", precision="fp32"):
        import sys
        if sys.path.count(HERE) < 2:             # the repository's modules stay importable after torch.hub takes
            sys.path.append(HERE)                # its own entry of this folder off sys.path (solving imports lazily)
        import solving
        return solving.load(os.path.join(HERE, "checkpoints", f"{CHECKPOINTS[name]}.pt"), device, precision)
    load.__name__ = name
    load.__doc__ = f"A Solver of checkpoints/{CHECKPOINTS[name]}.pt: torch.hub.load(REPO, {name!r}, source='local')"
    return load


for _name in CHECKPOINTS:
    globals()[_name] = _entry(_name)
