"""
The judge (not in the paper): of the arrangements the model samples, keep the one whose pieces fit best by a classic
cue (pictures: after swaps that make it fit better). `sample.py --judge classic`, `python -m solving.own --judge
classic` and `solver.solve(pieces, judge="classic")` ask for it; without it, the paper's assignment decides
(jpdvt.solve).

The candidates come from the model only: the assignment of the samples' mean cost (the ensemble, jpdvt.arrange, which
wins ties) and each sample assigned on its own. Each is scored by an energy across the cuts between consecutive pieces
of a clip (solving/borders.py: the blurred last frame of one against the first of the next), or, for a picture,
improved by swaps of pieces while its border energy drops (solving/search.py: Gallagher's MGC across every border,
plus the model's own costs where gaps erode the borders). bench/judge.py measures it (docs/judge.md).

    opts = replace(opts, judge=judge_for("classic", puzzle))           # puzzle: its ImageConfig or VideoConfig
    positions, content = jpdvt.solve(model, diffusion, batch, table, opts, given)   # jpdvt.place calls the judge
"""
import numpy as np
import torch

from metrics import assign_batch
from plumbing.cli import UserError
from solving.borders import ENERGY, cut_energy, edge_energy
from solving.search import search

JUDGES = {"none": "the samples' mean distance decides the assignment (the paper's method, without a judge)",
          "classic": "of the samples' arrangements (each sample's and their mean's), keep the one whose pieces fit "
                     "best across their cuts (clips) or, improved by swaps, their borders (images: Gallagher's MGC); "
                     "not in the paper"}
PRIOR_WEIGHT = {False: 0.0, True: 4.0}   # the model's costs' weight in a picture's search, keyed by "the puzzles have
# gaps" (chosen on val on 3x3 photos with 0 to 3 missing, docs/choices.md)


def candidates(costs, pinned, method):
    """(1 + S, B, N) int64: the assignment of the mean cost of costs (S, B, N, P), then each sample's own."""
    own = [assign_batch(costs.mean(0), method, pinned=pinned)] + [assign_batch(c, method, pinned=pinned) for c in costs]
    return torch.from_numpy(np.stack(own))


def check_grid(content, grid):
    """Image pieces (B, N, C, H, W) are judged across the borders of their grid (rows, cols); clips (B, N, F, C, H, W)
    across their cuts, with no grid. Refuse the two mixed up (image content read as clips would compare colour
    channels as frames)."""
    if (grid is None) != (content.dim() == 6):
        raise ValueError(f"the judge needs the grid (rows, cols) of image pieces, and none for clips; got content of "
                         f"shape {tuple(content.shape)} with grid {grid}")


def pick(cands, content, missing, grid=None, energy=ENERGY):
    """(B, N) int64 numpy: of the candidates (K, B, N), each puzzle's lowest-energy one (ties: the first). Image
    content (B, N, C, H, W) needs its grid; clips (B, N, F, C, H, W) have none."""
    check_grid(content, grid)
    cands, missing = cands.to(content.device), missing.to(content.device)
    e = edge_energy(content, cands, missing, grid, energy) if grid else cut_energy(content, cands, missing, energy)
    return cands.gather(0, e.argmin(0)[None, :, None].expand(1, *cands.shape[1:]))[0].cpu().numpy()


def judge_for(name, puzzle):
    """SampleOptions.judge of a name of JUDGES: None (the assignment alone, as in the paper) or judge(costs, batch,
    cells, assign) bound to the puzzles' settings (jpdvt.place passes the assignment method)."""
    if name not in JUDGES:
        raise UserError(f"judge must be one of {', '.join(JUDGES)}, got {name!r}")
    if name == "none":
        return None
    return lambda costs, batch, cells, assign: judge(costs, batch["content"], batch["missing"], cells, assign, puzzle)


def judge(costs, content, missing, pinned, method, puzzle):
    """The judge over samples: positions (B, N) int64 numpy. Clips: the order of least cut energy among the ensemble's
    and each sample's. Pictures: the board of least energy that swaps reach from each of them (solving/search.py),
    the model's costs weighted in by PRIOR_WEIGHT. costs (S, B, N, P), content (B, N, ...), missing (B, N) bool, pinned
    (B, N) long: -1 or a told cell; method: metrics.assign_batch's; puzzle: the pieces' ImageConfig (its grid and gap)
    or VideoConfig. The costs and content in fp32, even inside autocast (fp16 would overflow the energies); the
    search sums its swaps' deltas and its final pick's energies in float64."""
    grid = tuple(puzzle.grid) if puzzle.kind == "image" else None
    check_grid(content, grid)
    costs, content = costs.float(), content.float()
    with torch.autocast(content.device.type, enabled=False):
        cands = candidates(costs, pinned, method)
        if grid is None:
            return pick(cands, content, missing) if len(costs) > 1 else cands[0].numpy()
        prior = search_prior(costs, puzzle)
        prior = None if prior is None else prior.to(content.device)
        return search(cands, content, missing, pinned, grid, prior).cpu().numpy()


def search_prior(costs, puzzle):
    """(B, N, P) or None: the model's costs (S, B, N, P) as a picture search's prior, the samples' mean weighted by
    PRIOR_WEIGHT (None where its weight is 0: puzzles without gaps)."""
    weight = PRIOR_WEIGHT[puzzle.gap > 0]
    return weight * costs.mean(0) if weight else None
