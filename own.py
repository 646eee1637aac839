"""
Solving your own data with a trained checkpoint (sample.py's flags): a photo cut into a puzzle (--image), a clip cut
into a temporal puzzle (--video), a folder of pieces nobody has solved (--pieces, --frames), and temporal
super-resolution (--superres). The loaded checkpoint is a solver.Solver.

    python sample.py --ckpt checkpoints/image-photos-3x3.pt --image photo.jpg --animate
    python sample.py --ckpt checkpoints/image-photos-3x3.pt --pieces my_pieces/          # solved.png, arrangement.json
    python sample.py --ckpt checkpoints/video-mmnist-10x2.pt --frames my_clips/          # order.json
"""
import os
from dataclasses import replace

import numpy as np
import torch

from animate import DISPLAY, Recorder, enlarge, puzzle_animation, solving_gif
from cli import UserError
from pictures import mark_cells, save_png, stack, video_row, write_rows
from puzzles import assemble, cut_image, make_video_puzzle, shuffle_pieces, video_item, video_tensor
from sources import fit_channels, fit_image, open_photo, read_video

# ----------------------------------------------------------------------------
# Your own photo or clip
# ----------------------------------------------------------------------------

def solve_photo(args, solver):
    """
    Cut --image to the checkpoint's grid at the model's resolution, shuffle it and remove --missing pieces (seeded),
    solve it (the model generates the missing pieces); draw input | solution | original with pieces cut from the
    photo's own pixels (up to DISPLAY px a side), generated ones enlarged from the model's resolution and
    outlined in red. --animate: <name>_solving.gif of the sampling at the same resolution.
    """
    puzzle, device = solver.config.puzzle, solver.device
    grid, piece, gap = puzzle.grid, puzzle.piece_size, puzzle.gap
    photo = open_photo(args.image, grid, piece + gap)
    pieces = cut_image(fit_image(photo, grid[0] * (piece + gap), grid[1] * (piece + gap)), grid, piece, gap=gap)
    true_pos, miss = shuffle_pieces(len(pieces), np.random.default_rng(args.seed), puzzle.missing, anchor=puzzle.anchor)
    batch = {"content": torch.from_numpy(pieces[true_pos]).permute(0, 3, 1, 2)[None].float().to(device) * 2 - 1,
             "true_pos": torch.from_numpy(true_pos)[None].to(device),
             "missing": torch.from_numpy(miss)[None].to(device)}
    rec = Recorder() if args.animate else None
    pos, generated = solver.solve_batch(batch, callback=rec)
    acc = puzzle.score(pos, batch)
    # the same cut at display resolution: as large as the photo allows, up to DISPLAY px per piece
    k = max(1.0, min(DISPLAY / piece, min(photo.width / grid[1], photo.height / grid[0]) / (piece + gap)))
    big_piece, big_gap = round(piece * k), round(gap * k)
    big = cut_image(fit_image(photo, grid[0] * (big_piece + big_gap), grid[1] * (big_piece + big_gap)), grid,
                    big_piece, gap=big_gap)
    n, border, gone = len(big), max(2, big_piece // 40), miss[:, None, None, None]
    given = big[true_pos]                                                  # (N, S, S, 3) in shuffled order
    solved = np.where(gone, enlarge(generated[0], big_piece, smooth=True), given)
    solution = mark_cells(assemble(solved, pos[0], grid, border=border, fill=1.0), pos[0][miss], grid, side=big_piece,
                          border=border)
    out = os.path.join(args.out, stem(args.image) + "_solved.png")
    save_png(out, stack([assemble(np.where(gone, 0.5, given), np.arange(n), grid, border=border, fill=1.0), solution,
                         assemble(big, np.arange(n), grid, border=border, fill=1.0)], gap=4 * border))
    kept = n - puzzle.missing
    placed = round(acc["piece_acc"] * (kept - int(puzzle.anchor))) + int(puzzle.anchor)
    print(f"{'solved' if acc['puzzle_acc'] == 1.0 else 'not solved'}: {placed}/{kept} given pieces in place, "
          f"{puzzle.missing} generated; wrote {out} (input | solution | original)")
    if rec:
        gif = solving_gif(os.path.join(args.out, stem(args.image) + "_solving.gif"), rec, solver.table, grid=grid,
                          tiles_at=lambda i: np.where(gone, enlarge(rec.content[i], big_piece), given), marked=miss,
                          final=pos[0])
        print(f"wrote {gif} (the sampling, generated pieces in red)")
    return acc


def read_clip(args, puzzle, num_frames):
    """The centre num_frames frames of --video, at the checkpoint's size and channels: (L, H, W, C) in [0, 1]."""
    clip = fit_channels(read_video(args.video, puzzle.frame_stride, puzzle.size), puzzle.channels)
    if len(clip) < num_frames:
        fpp = puzzle.frames_per_piece
        raise UserError(f"--video {args.video} has {len(clip)} frames at --frame-stride {puzzle.frame_stride}, fewer "
                        f"than the {num_frames} ({num_frames // fpp} pieces x {fpp} frames) needed; pass a longer clip "
                        "or a smaller --frame-stride")
    start = (len(clip) - num_frames) // 2
    return clip[start:start + num_frames]


def stem(path):
    """clip.mp4 or frames/ -> "clip" or "frames": the name output files are derived from."""
    return os.path.splitext(os.path.basename(os.path.normpath(path)))[0]


def order_clip(args, solver):
    """Cut --video into the checkpoint's pieces (centre window), shuffle it (seeded), solve, and picture it."""
    puzzle = solver.config.puzzle
    pieces, fpp = puzzle.pieces, puzzle.frames_per_piece
    clip = read_clip(args, puzzle, pieces * fpp)
    cut = make_video_puzzle(clip, pieces, fpp, rng=np.random.default_rng(args.seed), missing=puzzle.missing, start=0)
    batch = {k: v[None].to(solver.device) for k, v in video_item(cut).items()}   # a batch of one
    rec = Recorder() if args.animate else None
    pos, generated = solver.solve_batch(batch, callback=rec)
    scores = puzzle.score(pos, batch)
    gif = write_rows(os.path.join(args.out, f"{stem(args.video)}_solved.gif"),
                     [video_row(batch, pos, solver.pixels(generated), k=0)], ["shuffled", "solved", "original"])
    print(f"predicted positions of the shuffled pieces {pos[0].tolist()} (true {cut['true_pos'].tolist()}): "
          f"Kendall distance {scores['kendall']:.3f}, {'in order' if scores['exact'] == 1 else 'not in order'}; "
          f"wrote {gif} (shuffled | solved | original)")
    if rec:
        path = puzzle_animation(os.path.join(args.out, f"{stem(args.video)}_solving.gif"), rec, solver, batch=batch,
                              positions=pos)
        print(f"wrote {path} (the sampling, generated pieces in red)")
    return scores


# ----------------------------------------------------------------------------
# Temporal super-resolution (supplement, "Downstream Task: Temporal Super-resolution")
# ----------------------------------------------------------------------------

def superres(args, solver):
    """
    The pieces at positions 0, K+1, 2(K+1), ... are given, the K pieces between each pair are missing content
    generated at known positions (every positional code is given). Input: the clip of --video (its frames are
    the low-rate video), else test clips of the dataset (every (K+1)-th piece kept, the ground truth shown next
    to the result).
    """
    puzzle, device = solver.config.puzzle, solver.device
    pieces, fpp, k = puzzle.pieces, puzzle.frames_per_piece, args.superres
    valid = [j for j in range(1, pieces - 1) if (pieces - 1) % (j + 1) == 0]
    if k not in valid:
        raise UserError(f"--superres {k} does not fit this {pieces}-piece checkpoint (given pieces at 0, K+1, ... "
                        f"up to {pieces - 1}); use {' or '.join(map(str, valid)) or 'a checkpoint with more pieces'}")
    keep = np.arange(pieces) % (k + 1) == 0                   # time slots of the given (low-rate) pieces
    if args.video:
        low = read_clip(args, puzzle, int(keep.sum()) * fpp)
        low = low.reshape(-1, fpp, *low.shape[1:])           # (m f) h w c -> m f h w c
        full = np.zeros((pieces, *low.shape[1:]), np.float32)
        full[keep] = low
        content = video_tensor(full)[None]
    else:                                                      # test clips in time order: (B, N, F, C, H, W)
        test = replace(puzzle, missing=0).puzzles("test", args.seed)
        items = [test[i] for i in range(min(args.num_puzzles, puzzle.pictured, len(test)))]
        content = torch.stack([it["content"][torch.argsort(it["true_pos"])] for it in items])
    b = content.shape[0]
    batch = {"content": content.to(device), "true_pos": torch.arange(pieces, device=device).expand(b, -1),
             "missing": torch.from_numpy(~keep).to(device).expand(b, -1)}
    _, generated = solver.solve_batch(batch, known=torch.ones_like(batch["missing"]))
    generated = solver.pixels(generated)
    rows = [video_row(batch, np.arange(pieces)[None].repeat(b, 0), generated, k=i) for i in range(b)]
    if args.video:                                             # no ground truth for the user's clip
        rows = [(clips[:2], marks[:2]) for clips, marks in rows]
    name = f"{stem(args.video)}_superres.gif" if args.video else "superres.gif"
    gif = write_rows(os.path.join(args.out, name), rows, ["input", "super-resolved", "ground truth"][:len(rows[0][0])])
    print(f"wrote {gif}: {int(keep.sum())} given pieces of {fpp} frames, {k} generated piece(s) between each pair "
          "(in red)")
    return gif


