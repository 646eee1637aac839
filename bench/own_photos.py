"""
The confidence as a user meets it (python -m bench own-photos): photos cut into 3 x 3 files each and solved one bag
at a time through `jpdvt.load(ckpt).solve(pieces)`, the pieces shuffled; then bags that are no puzzle, solved the
same way: nine centre pieces of nine different photos, and nine pieces of noise. Rows: pieces and puzzles placed,
the puzzle confidence against its accuracy, how often the puzzle confidence exceeds the least sure piece's (never,
by construction), and the share of each kind of bag whose puzzle confidence is at most 0.05.
"""
import numpy as np
from PIL import Image
from tqdm import tqdm

import jpdvt


def cut(path, grid=3, side=64):
    """A photo's centre square, resized to grid x side px, as grid * grid (side, side, 3) uint8 pieces in raster
    order (what a user would save as files)."""
    img = Image.open(path).convert("RGB")
    s = min(img.size)
    left, top = (img.width - s) // 2, (img.height - s) // 2
    arr = np.asarray(img.crop((left, top, left + s, top + s)).resize((grid * side, grid * side), Image.BICUBIC))
    return [arr[r * side:(r + 1) * side, c * side:(c + 1) * side] for r in range(grid) for c in range(grid)]


def own_photos(ckpt, split, seed=0):
    """The rows' metrics of checkpoint `ckpt` on every photo of its photo folder's `split` (one bag each, shuffled
    with `seed`) and on as many bags of each not-a-puzzle kind."""
    solver = jpdvt.load(ckpt, device="cpu")
    rng = np.random.default_rng(seed)
    photos = [cut(p) for p in jpdvt.kind_of(solver.config).puzzles(split, seed).files]
    placed, solved, conf, incoherent = [], [], [], 0
    for pieces in tqdm(photos, desc="own photos"):
        order = rng.permutation(len(pieces))
        r = solver.solve([pieces[i] for i in order])
        true = np.stack(divmod(order, 3), axis=1)
        ok = (r.positions == true).all(1)
        placed.append(ok.mean())
        solved.append(ok.all())
        if r.puzzle_confidence is not None:
            conf.append(r.puzzle_confidence)
            incoherent += int(r.puzzle_confidence > r.confidence.min() + 1e-12)
    bags = {"mixed": [], "noise": []}
    for b in tqdm(range(len(photos)), desc="bags that are no puzzle"):
        mixed = [photos[(b + k) % len(photos)][4] for k in range(9)]          # nine photos' centre pieces
        noise = list(rng.integers(0, 256, (9, 64, 64, 3), dtype=np.uint8))
        for kind, pieces in (("mixed", mixed), ("noise", noise)):
            bags[kind].append(solver.solve(pieces).puzzle_confidence)
    out = {"num_puzzles": len(photos), "piece_acc": float(np.mean(placed)), "puzzle_acc": float(np.mean(solved))}
    if conf:
        out |= {"mean_puzzle_confidence": float(np.mean(conf)), "puzzle_above_weakest_piece": incoherent,
                **{f"{k}_at_most_0.05": float(np.mean(np.array(v) <= 0.05)) for k, v in bags.items()},
                **{f"{k}_mean_confidence": float(np.mean(v)) for k, v in bags.items()}}
    return out
