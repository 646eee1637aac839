"""
Where a clip solver's Kendall distance comes from (issue 83): each wrong order is classed as an adjacent swap, a swap,
a reversed run, one piece moved, or other; and a picture of a few clips one estimator gets wrong, each estimator's
order in a row, the frames of misplaced pieces outlined in red. Used by bench/judge.py (`--picture`).

    kinds = error_kinds(positions, true_pos)                         # {"adjacent swap": 7, ...} over wrong clips
    draw_failed("docs/judge-clips.png", batch, {"truth": true, "judge": picked}, wrong_in="judge")
"""
from collections import Counter

import numpy as np
from PIL import Image

from pictures import display_hwc, outline, save_png, stack, titled

KINDS = ("adjacent swap", "swap", "reversed run", "one piece moved", "other")


def error_kind(order):
    """The class of a wrong order (the true slot of the piece in each slot, (N,)), or None if it is right. A run of
    three reversed keeps its middle piece in place: it counts as a swap."""
    o, n = list(order), len(order)
    wrong = [i for i in range(n) if o[i] != i]
    if not wrong:
        return None
    if len(wrong) == 2:
        return "adjacent swap" if wrong[1] == wrong[0] + 1 else "swap"
    lo, hi = wrong[0], wrong[-1]
    if o[lo:hi + 1] == list(range(hi, lo - 1, -1)):
        return "reversed run"
    for x in wrong:                               # one piece taken out and put back elsewhere
        if [y for y in o if y != x] == [y for y in range(n) if y != x]:
            return "one piece moved"
    return "other"


def orders(positions, true):
    """(B, N): the true slot of the piece each predicted slot holds (positions, true: (B, N) slots of each piece)."""
    return np.take_along_axis(np.asarray(true), np.argsort(positions, 1), 1)


def error_kinds(positions, true):
    """{kind: clips} over the clips positions (B, N) orders wrongly (KINDS, zeros kept)."""
    found = Counter(error_kind(o) for o in orders(positions, true))
    return {k: int(found[k]) for k in KINDS}


def strip(content, order, wrong):
    """One clip's frames (N, F, C, H, W) laid out in order (the piece in each slot), 2 px apart; the frames of pieces
    in wrong slots outlined red."""
    frames = display_hwc(content)[order]                                        # (N, F, H, W, C)
    frames = np.broadcast_to(frames, (*frames.shape[:-1], 3)).copy() if frames.shape[-1] == 1 else frames.copy()
    for slot in np.flatnonzero(wrong):
        for f in frames[slot]:
            outline(f, 0, 0, f.shape[0], 1)
    return stack(list(frames.reshape(-1, *frames.shape[2:])), axis=1, gap=2)


def draw_failed(path, batch, picks, wrong_in, limit=4):
    """Save a picture of up to `limit` clips of batch that picks[wrong_in] orders wrongly: per clip, a title and a row
    per estimator of picks ({name: positions (B, N)}), in that order. Returns the clips drawn."""
    true = batch["true_pos"].numpy()
    bad = np.flatnonzero((picks[wrong_in] != true).any(1))[:limit]
    blocks = []
    for b in bad:
        rows = []
        for name, pos in picks.items():
            order = np.argsort(pos[b])                                          # the piece in each slot
            rows.append(strip(batch["content"][b], order, true[b][order] != np.arange(len(order))))
        panel = Image.fromarray((stack(rows, axis=0, gap=3) * 255).round().astype(np.uint8))
        title = f"clip {b}; rows: " + " | ".join(picks)
        blocks.append(np.asarray(titled(panel, [(title, 0, panel.width)])) / 255.0)
    if blocks:
        save_png(path, stack(blocks, axis=0, gap=10), min_width=2 * blocks[0].shape[1])
    return [int(b) for b in bad]
