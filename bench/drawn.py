"""
The pieces a masked-puzzle model draws, measured: on the val photos with K missing pieces, the per-pixel error of each
generated piece against the truth of the cell where the solution shows it, beside two simple fills of the missing
pieces' true cells: the mean colour of the picture's given pieces, and the mean colour of the borders that the true
neighbours turn to the cell (an oracle of where the piece was). And a picture of a few solved val puzzles: input
(the missing cells grey) | solution | truth.

    python -m bench.drawn checkpoints/image-photos-3x3-missing.pt --missing 2     # rows `drawn NAME missing K (val)`
    python -m bench.drawn CKPT --missing 1 --picture docs/photos-missing.png

Errors are in pixel values of [0, 1]: mae the mean absolute error, rmse the root mean squared error, over every pixel
and channel of every generated piece (8 passes over the 22 val photos: puzzles and sampling noise of seeds 1-8, as
sample.py --repeats 8 --seed 1). With several samples a puzzle, the drawn pieces are the first sample's and the cells
all samples' (jpdvt.follow_cells shows each drawing in the cell it was drawn for); this measures what the solution
shows, a drawn piece that won a given piece's cell included.
"""
import argparse
import os
from dataclasses import replace

import numpy as np
import torch

import solving
from bench.report import save_result
from pictures import assemble, save_png, stack
from puzzles import collate, puzzle_set


def border_fill(content, true_pos, missing, grid):
    """(N, C, P, P): each missing piece filled with the mean colour of the edges its true neighbours turn to it (given
    pieces only; the picture's mean where it has none)."""
    rows, cols = grid
    at = {int(c): i for i, c in enumerate(true_pos) if not missing[i]}
    fill = content.clone()
    mean = content[~missing].mean(dim=(0, 2, 3))
    for i in np.flatnonzero(missing):
        r, c = divmod(int(true_pos[i]), cols)
        edges = []
        for dr, dc, edge in ((-1, 0, lambda p: p[:, -1]), (1, 0, lambda p: p[:, 0]), (0, -1, lambda p: p[:, :, -1]),
                             (0, 1, lambda p: p[:, :, 0])):
            j = at.get((r + dr) * cols + c + dc) if 0 <= r + dr < rows and 0 <= c + dc < cols else None
            if j is not None:
                edges.append(edge(content[j]).reshape(content.shape[1], -1))      # (C, P) pixels of that edge
        colour = torch.cat(edges, 1).mean(1) if edges else mean
        fill[i] = colour[:, None, None].expand_as(content[i])
    return fill


def measure(solver, missing, passes=8):
    """{"model", "picture mean", "border mean": (mae, rmse)} over the generated pieces of the val puzzles, and the
    first pass's (batch, positions, content) for the picture."""
    err, first = {"model": [], "picture mean": [], "border mean": []}, None
    puzzle = replace(solver.config.puzzle, missing=missing)
    for seed in range(1, passes + 1):
        data = puzzle_set(puzzle, "val", seed)
        batch = {k: v.to(solver.device) for k, v in collate([data[i] for i in range(len(data))]).items()}
        solver.opts.generator.manual_seed(seed)
        positions, content = solver.solve_batch(batch)
        if first is None:
            first = (batch, positions, content)
        for b in range(len(content)):
            miss = batch["missing"][b].cpu()
            truth, true_pos = batch["content"][b].cpu(), batch["true_pos"][b].cpu()
            at_cell = truth[torch.argsort(true_pos)]                          # (cells, C, P, P): the truth of each cell
            shown = at_cell[torch.as_tensor(positions[b])[miss]]              # where the solution shows each drawing
            err["model"].append(((content[b].float().cpu().clamp(-1, 1)[miss] - shown) / 2).flatten())
            fills = {"picture mean": truth[~miss].mean(dim=(0, 2, 3))[None, :, None, None].expand_as(truth),
                     "border mean": border_fill(truth, true_pos.numpy(), miss.numpy(), puzzle.grid)}
            for name, fill in fills.items():                               # [-1, 1] -> pixel values of [0, 1]
                err[name].append(((fill[miss] - truth[miss]) / 2).flatten())
    out = {}
    for name, e in err.items():
        e = torch.cat(e)
        out[name] = (float(e.abs().mean()), float(e.pow(2).mean().sqrt()))
    return out, first


def picture(first, grid, path, count=4):
    """input (shuffled, generated cells empty) | solution (generated pieces in place) | truth, for `count` puzzles."""
    batch, positions, content = first
    rows = []
    for b in range(min(count, len(content))):
        miss = batch["missing"][b].cpu().numpy()
        truth = ((batch["content"][b].cpu().numpy() + 1) / 2).transpose(0, 2, 3, 1)
        made = ((content[b].float().cpu().clamp(-1, 1).numpy() + 1) / 2).transpose(0, 2, 3, 1)
        given = np.where(miss[:, None, None, None], 0.5, truth)
        shown = np.where(miss[:, None, None, None], made, truth)
        rows.append(stack([assemble(given, np.arange(len(given)), grid, border=1),
                           assemble(shown, positions[b], grid, border=1),
                           assemble(truth, batch["true_pos"][b].cpu().numpy(), grid, border=1)]))
    save_png(path, stack(rows, axis=0))


def main(args):
    if args.missing < 1:
        raise SystemExit("error: --missing must be 1 or more: the drawn pieces are those of missing pieces")
    solver = solving.load(args.ckpt, device="cpu")
    name = os.path.splitext(os.path.basename(args.ckpt))[0]
    errors, first = measure(solver, args.missing)
    for fill, (mae, rmse) in errors.items():
        save_result(f"drawn {name} missing {args.missing} (val): {fill}", {
            "group": "drawn", "train_minutes": 0.0, "command": f"python -m bench.drawn {args.ckpt} --missing "
                                                              f"{args.missing}",
            "metrics": {"mae": mae, "rmse": rmse, "split": "val", "missing": args.missing, "passes": 8}})
        print(f"{fill}: mae {mae:.4f}, rmse {rmse:.4f}")
    if args.picture:
        picture(first, solver.config.puzzle.grid, args.picture)
        print(f"wrote {args.picture}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ckpt", help="an image checkpoint trained with missing pieces")
    p.add_argument("--missing", type=int, default=2, help="missing pieces per puzzle (default 2)")
    p.add_argument("--picture", help="also write a picture of 4 solved val puzzles here")
    main(p.parse_args())
