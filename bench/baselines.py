"""
Classic non-learned puzzle solvers, on the puzzles the models are scored on (python -m bench baselines, baselines-val,
fresh-seed-baselines; tree-check: tree against exhaustive placement). Images: a pairwise cost of piece j right of
(`lr[i, j]`) or below (`tb[i, j]`) piece i, the squared difference of the touching borders (`edge_costs`) or the
Mahalanobis Gradient Compatibility (`mgc_costs`: A. Gallagher, "Jigsaw puzzles with pieces of unknown orientation",
CVPR 2012: how unlikely the step across the border is under the gradients just inside each piece), then the
arrangement of least summed cost over all arrangements (`place`, up to 3x3), or Gallagher's tree-based placement over
MGC ratios (bench/tree_solver.py's `place_tree`, any grid). Videos: `chain_video` links clips whose boundary frames
are nearest. Pieces: float (N, P, P, C) in [0, 1]; positions (N,) int64: the raster slot of each piece (-1 for a
missing one).
"""
import functools
import itertools
import math
import time

import numpy as np
from tqdm import tqdm

from bench.intervals import interval
from bench.recipes import TEST_PUZZLES
from bench.report import save_result
from bench.tree_solver import EMPTY_QUANTILE, place_tree, with_empty  # noqa: F401 (the empty slot's rule, shared)
from metrics import kendall_distance, piece_accuracy, puzzle_accuracy, relabel_generated
from puzzles import ImageConfig, VideoConfig, puzzle_set

IMAGE_SOLVERS = {
    "edge": "edge dissimilarity: squared difference of the touching borders",
    "mgc": "Mahalanobis gradient compatibility (Gallagher 2012) of the touching borders",
    "mgc-tree": "Gallagher's tree-based placement over MGC ratios, any grid",
}
PLACEMENT = {"edge": "exhaustive", "mgc": "exhaustive", "mgc-tree": "tree"}        # how each solver places
EXHAUSTIVE_CELLS = 9                              # exhaustive placement: grids of at most this many cells (9! boards)


# ----------------------------------------------------------------------------
# Pairwise costs
# ----------------------------------------------------------------------------

def edge_costs(pieces):
    """Squared difference of touching borders: lr[i, j] = piece j right of i; tb[i, j] = piece j below i."""
    p = np.asarray(pieces, dtype=np.float64)

    def ssd(a, b):                                                   # a, b: (N, L, C) borders
        return ((a[:, None] - b[None]) ** 2).sum((2, 3))
    return ssd(p[:, :, -1], p[:, :, 0]), ssd(p[:, -1], p[:, 0])


def _dummy_gradients(channels):
    """Gallagher's 9 dummy gradients for RGB (0, +-1, +-unit vectors), one grey level on a [0, 1] scale."""
    e = np.eye(channels)
    return np.concatenate([np.zeros((1, channels)), np.ones((1, channels)), -np.ones((1, channels)), e, -e]) / 255


def _mahalanobis(edge, inner, other, eps=1e-6):
    """
    One-sided MGC. edge, inner: (N, L, C) border and next-inner pixel lines of each piece; other: (N, L, C)
    the border lines that touch `edge`. D[i, j] = sum over the L border pixels of the Mahalanobis distance of
    the step edge_i -> other_j from the mean of piece i's own gradients inner_i -> edge_i.
    """
    n, _, c = edge.shape
    grad = edge - inner                                              # (N, L, C)
    mu = grad.mean(1)                                                # (N, C)
    dummies = _dummy_gradients(c)                                    # regularise: cov stays invertible
    samples = np.concatenate([grad, np.broadcast_to(dummies, (n,) + dummies.shape)], 1)
    centred = samples - samples.mean(1, keepdims=True)
    cov = centred.transpose(0, 2, 1) @ centred / (samples.shape[1] - 1) + eps * np.eye(c)
    inv = np.linalg.inv(cov)                                         # (N, C, C)
    d = other[None] - edge[:, None] - mu[:, None, None]              # (N, N, L, C): step minus mean gradient
    return ((d @ inv[:, None]) * d).sum((2, 3))


def mgc_costs(pieces):
    """Mahalanobis gradient compatibility, symmetric over both pieces: (lr, tb) as in `edge_costs`."""
    p = np.asarray(pieces, dtype=np.float64)
    assert p.shape[1] >= 2 and p.shape[2] >= 2, "MGC needs pieces of at least 2x2 pixels"
    left, right = (p[:, :, 0], p[:, :, 1]), (p[:, :, -1], p[:, :, -2])      # (border, next inner) columns
    top, bottom = (p[:, 0], p[:, 1]), (p[:, -1], p[:, -2])                  # rows
    # D_LR(i, j): from i's right-border gradients; D_RL(j, i): from j's left-border gradients, transposed
    lr = _mahalanobis(*right, left[0]) + _mahalanobis(*left, right[0]).T
    tb = _mahalanobis(*bottom, top[0]) + _mahalanobis(*top, bottom[0]).T
    return lr, tb


# ----------------------------------------------------------------------------
# Placement
# ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=4)
def all_arrangements(n):
    """Every assignment of n pieces to n slots: (n!, n) int64, perms[k, slot] = piece (read-only, cached)."""
    flat = itertools.chain.from_iterable(itertools.permutations(range(n)))
    perms = np.fromiter(flat, dtype=np.int64, count=n * math.factorial(n)).reshape(-1, n)
    perms.flags.writeable = False
    return perms


def _neighbours(rows, cols):
    """Touching slot pairs (a, b, horizontal): b right of a if horizontal, else b below a."""
    return ([(r * cols + c, r * cols + c + 1, True) for r in range(rows) for c in range(cols - 1)]
            + [(r * cols + c, (r + 1) * cols + c, False) for r in range(rows - 1) for c in range(cols)])


def place(lr, tb, grid):
    """
    Arrangement of least summed pair cost for the k <= rows*cols pieces of the (k, k) costs `lr`, `tb`, trying every
    arrangement (with k < n pieces, slot entries >= k are empty and a pair with an empty slot costs a low constant).
    Returns positions (k,).
    """
    rows, cols = grid
    n, k = rows * cols, len(lr)
    assert k <= n <= EXHAUSTIVE_CELLS, (f"{k} pieces, a {rows}x{cols} grid: exhaustive placement covers at most "
                                        f"{EXHAUSTIVE_CELLS} cells")
    lr, tb = with_empty(lr), with_empty(tb)
    perms = all_arrangements(n)
    arr = perms if k == n else np.minimum(perms, k)                   # pieces >= k -> the empty index k
    total = np.zeros(len(arr))
    for a, b, horizontal in _neighbours(rows, cols):
        total += (lr if horizontal else tb)[arr[:, a], arr[:, b]]
    slots = arr[int(np.argmin(total))]
    positions = np.full(k, -1, dtype=np.int64)
    placed = slots < k
    positions[slots[placed]] = np.flatnonzero(placed)
    return positions


_COSTS = {"edge": edge_costs, "mgc": mgc_costs, "mgc-tree": mgc_costs}


def image_solvers(grid):
    """The IMAGE_SOLVERS that apply to a rows x cols grid: the exhaustive ones up to EXHAUSTIVE_CELLS cells only."""
    small = grid[0] * grid[1] <= EXHAUSTIVE_CELLS
    return [name for name in IMAGE_SOLVERS if small or PLACEMENT[name] != "exhaustive"]


def solve_image(pieces, grid, method, given=None):
    """
    Solve an image puzzle with one of IMAGE_SOLVERS. pieces: (N, P, P, C) in [0, 1]; given: (N,) bool mask of
    the pieces present (default all). Only given pieces are placed; missing ones get position -1.
    """
    if method not in IMAGE_SOLVERS:
        raise ValueError(f"unknown solver {method!r}; choose from {sorted(IMAGE_SOLVERS)}")
    pieces = np.asarray(pieces)
    given = np.ones(len(pieces), dtype=bool) if given is None else np.asarray(given, dtype=bool)
    lr, tb = _COSTS[method](pieces[given])
    positions = np.full(len(pieces), -1, dtype=np.int64)
    positions[given] = (place_tree if PLACEMENT[method] == "tree" else place)(lr, tb, grid)
    return positions


# ----------------------------------------------------------------------------
# Videos
# ----------------------------------------------------------------------------

def chain_video(clips, missing=None):
    """
    Order video pieces (N, F, ...) in time: piece 0 first, then repeatedly the unused piece whose first frame is
    nearest (squared difference) the chain's last frame. Returns positions (N,), positions[i] = time slot. Missing
    pieces (missing (N,) bool) have no frames: the given pieces are chained alone into the first slots, and the
    missing ones take the slots left over, the last ones (a choice: a chain could also look for the largest jump
    between neighbours to place a gap, which would do better).
    """
    c = np.asarray(clips, dtype=np.float64)
    n = len(c)
    missing = np.zeros(n, bool) if missing is None else np.asarray(missing, bool)
    first, last = c[:, 0].reshape(n, -1), c[:, -1].reshape(n, -1)
    dist = ((last[:, None] - first[None]) ** 2).sum(-1)            # dist[i, j]: j right after i
    chain, free = [0], [i for i in range(1, n) if not missing[i]]
    while free:
        j = free[int(np.argmin(dist[chain[-1], free]))]
        chain.append(j)
        free.remove(j)
    positions = np.empty(n, dtype=np.int64)
    positions[chain + list(np.flatnonzero(missing))] = np.arange(n)
    return positions


# ----------------------------------------------------------------------------
# The classic solvers on the puzzles the models are scored on
# ----------------------------------------------------------------------------

def image_puzzles(dataset, data_dir, grid, piece, gap, missing, repeats, split="test"):
    """The puzzles of `split` that sample.py scores, those of seeds 1 .. repeats (sample.py --seed 1 --repeats R):
    yields (pieces (N, P, P, C) in [0, 1], given (N,) bool, true positions (N,)) and, first, the puzzles a pass."""
    for seed in range(1, repeats + 1):
        puzzles = puzzle_set(ImageConfig(dataset, data_dir, grid, piece, gap, missing), split, seed)
        count = min(int(TEST_PUZZLES), len(puzzles))
        if seed == 1:
            yield count
        for i in tqdm(range(count), desc=f"{dataset} {grid[0]}x{grid[1]} (seed {seed})"):
            it = puzzles[i]
            pieces = ((it["content"].numpy() + 1) / 2).transpose(0, 2, 3, 1)         # (N, P, P, C) in [0, 1]
            yield pieces, ~it["missing"].numpy(), it["true_pos"].numpy()


def setting_label(dataset, grid, piece, gap, missing, repeats, split="test"):
    """'folder [val ]3x3 24px[ gap G][ missing K][, R passes]': the setting as the rows name it."""
    where = "val " if split == "val" else ""
    return (f"{dataset} {where}{grid[0]}x{grid[1]} {piece}px" + (f" gap {gap}" if gap else "") +
            (f" missing {missing}" if missing else "") + (f", {repeats} passes" if repeats > 1 else ""))


def image_baselines(dataset, data_dir, grid, piece, gap, missing, repeats, split="test"):
    """The IMAGE_SOLVERS that apply to the grid (image_solvers: exhaustive ones up to 9 cells) on the puzzles of
    `split` that sample.py scores (image_puzzles), each pass weighing the same; a row per solver, its command naming
    the placement (exhaustive or tree)."""
    solvers = image_solvers(grid)
    puzzles = image_puzzles(dataset, data_dir, grid, piece, gap, missing, repeats, split)
    count, preds, true, given = next(puzzles), {name: [] for name in solvers}, [], []
    for pieces, g, t in puzzles:
        for name in solvers:
            preds[name].append(solve_image(pieces, grid, name, g))
        true.append(t)
        given.append(g)
    label = setting_label(dataset, grid, piece, gap, missing, repeats, split)
    for name, pred in preds.items():
        save_result(f"baseline image {label}: {name}", {
            "group": "baselines", "train_minutes": 0.0,
            "command": f"python -m bench baselines{'-val' * (split == 'val')} ({name}, {PLACEMENT[name]})",
            "metrics": {"piece_acc": piece_accuracy(pred, true, given),
                        "puzzle_acc": puzzle_accuracy(pred, true, given), "num_puzzles": count, "repeats": repeats,
                        **photo_intervals(pred, true, given, repeats)}})


def photo_intervals(pred, true, given, repeats):
    """{piece_acc_95, puzzle_acc_95}: 95% intervals over the photos (puzzle i of every pass is cut from photo i), as
    bench.intervals gives the models' figures."""
    rng, out = np.random.default_rng(0), {}
    for key, score in (("piece_acc", piece_accuracy), ("puzzle_acc", puzzle_accuracy)):
        per = [score(p[None], t[None], g[None]) for p, t, g in zip(pred, true, given)]
        _, lo, hi = interval(np.reshape(per, (repeats, -1)), rng)
        out[f"{key}_95"] = [lo, hi]
    return out


def tree_check(dataset, data_dir, grid, piece, gap, missing, repeats):
    """Tree placement (place_tree) against exhaustive placement (place) over the same MGC costs on the test puzzles
    of image_baselines (grids of at most 9 cells): a row (group tree-check) with the tree's piece and puzzle accuracy,
    the exhaustive ones (exhaustive_*), the fraction of puzzles where the two boards agree and each placement's
    seconds a puzzle (the costs not counted)."""
    puzzles = image_puzzles(dataset, data_dir, grid, piece, gap, missing, repeats)
    count, preds, seconds, true, given = next(puzzles), {"tree": [], "exhaustive": []}, {}, [], []
    for pieces, g, t in puzzles:
        lr, tb = mgc_costs(pieces[g])
        for name, placer in (("tree", place_tree), ("exhaustive", place)):
            start, positions = time.perf_counter(), np.full(len(g), -1, dtype=np.int64)
            positions[g] = placer(lr, tb, grid)
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
            preds[name].append(positions)
        true.append(t)
        given.append(g)
    m = {f"{pre}{key}": fn(preds[name], true, given) for name, pre in (("tree", ""), ("exhaustive", "exhaustive_"))
         for key, fn in (("piece_acc", piece_accuracy), ("puzzle_acc", puzzle_accuracy))}
    m["agree"] = float(np.mean([(a == b).all() for a, b in zip(preds["tree"], preds["exhaustive"])]))
    m["sec_per_puzzle"], m["exhaustive_sec_per_puzzle"] = (seconds[n] / len(true) for n in ("tree", "exhaustive"))
    save_result(f"tree-check image {setting_label(dataset, grid, piece, gap, missing, repeats)}: mgc-tree against "
                "mgc exhaustive", {"group": "tree-check", "train_minutes": 0.0, "command": "python -m bench tree-check",
                                   "metrics": m | {"num_puzzles": count, "repeats": repeats}})
    return m


def video_baselines(dataset, data_dir, pieces, fpp, num, seed):
    """Nearest-neighbour frame chaining on the first `num` test clips of `seed` (32 px frames)."""
    test = puzzle_set(VideoConfig(dataset, data_dir, pieces, fpp, 32), "test", seed=seed)
    pred, true = [], []
    for i in tqdm(range(num), desc=f"baselines {dataset} {pieces}x{fpp}"):
        pred.append(chain_video(test[i]["content"].numpy()))
        true.append(test[i]["true_pos"].numpy())
    pred, true = np.stack(pred), np.stack(true)
    metrics = {"kendall": float(np.mean(kendall_distance(pred, true))), "exact": float(np.mean((pred == true).all(1))),
               "num_puzzles": num}
    save_result(f"baseline video {dataset} {pieces}x{fpp} 32px seed {seed} ({num} clips): nearest-neighbour chaining",
                {"group": "fresh-seed", "train_minutes": 0.0, "command": "python -m bench fresh-seed-baselines",
                 "metrics": metrics})


def masked_video_baselines(dataset, data_dir, pieces, fpp, num, seed, missing):
    """Frame chaining (chain_video: the given pieces chained nearest-first, the missing ones in the slots left over)
    on the first `num` test clips of `seed` with `missing` pieces missing, the clips sample.py --missing scores:
    strict and as-a-set Kendall distances and exact orders, each with its 95% interval over clips."""
    test = puzzle_set(VideoConfig(dataset, data_dir, pieces, fpp, 32, missing=missing), "test", seed=seed)
    items = [test[i] for i in tqdm(range(num), desc=f"chaining {pieces}x{fpp} missing {missing}")]
    true = np.stack([it["true_pos"].numpy() for it in items])
    gone = np.stack([it["missing"].numpy() for it in items])
    pred = np.stack([chain_video(it["content"].numpy(), m) for it, m in zip(items, gone)])
    as_set = relabel_generated(pred, true, gone)
    per_clip = {"kendall": kendall_distance(pred, true), "exact": (pred == true).all(1).astype(float),
                "kendall_set": kendall_distance(pred, as_set), "exact_set": (pred == as_set).all(1).astype(float)}
    rng, metrics = np.random.default_rng(0), {"num_puzzles": num, "missing": missing}
    for k, v in per_clip.items():
        metrics[k], *metrics[f"{k}_95"] = interval(v[None], rng)
    save_result(f"baseline video {dataset} {pieces}x{fpp} 32px missing {missing} seed {seed} ({num} clips): "
                "nearest-neighbour chaining", {"group": "masked-clips", "train_minutes": 0.0,
                                               "command": "python -m bench masked-clips-baselines",
                                               "metrics": metrics})
    return metrics
