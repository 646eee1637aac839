"""
Watch a model solve: the reverse diffusion moves every piece from a random positional code to its place (the
README's animated pictures). Run from the repository root:

    python -m solving.animate --ckpt checkpoints/image-photos-3x3.pt --image docs/photos/chelsea.jpg --out my_animation
    python -m solving.animate --ckpt checkpoints/video-mmnist-10x2.pt --dataset movingmnist --data-dir MNIST --out my_mm

The first cuts a photo into the checkpoint's puzzle, shuffles it, solves it and writes NAME_solved.png (shuffled |
solved | original, titled) and NAME_solving.gif; the second writes solving.gif of the first test puzzle. The README's
two GIFs are these commands' (docs/chelsea_solving.gif, docs/video-mmnist-10x2-solving.gif: bench/README.md).

Paper: Sec. 3.1, "Masked Jigsaw Transformer Diffusion": solving a puzzle is generating the positional codes of its
pieces. Every code starts as noise x_T and the sampler removes the noise step by step. What a GIF draws:
- the first frame: the shuffled bag, piece i in cell i (the order the pieces were passed in);
- then one frame for each of --gif-steps sampling steps (drawn_steps: spaced evenly in the state's noise level
  sqrt(1 - abar), so most fall near the end, where the codes settle): every piece drawn where its NOISY code x_t
  after that step points, the mean of the cells weighted by softmax(-|x_t - code of the cell|^2 / tau) over the
  position table (soft_cells). Early on x_t is mostly noise and the pieces jump between cells; as the noise shrinks
  they settle into theirs. Under them, faint (GHOST), every piece where the step's predicted clean code x0_hat
  points (an x0 model's prediction is right from the first step; an eps model's is derived from its noise);
- the last frame: the final assignment (every piece exactly in its cell), held for HOLD_MS.
Missing pieces show their content as it forms from noise (the sampling state x_t), outlined in red. Images are drawn
on their grid, videos as a strip of thumbnails along the time axis (a 1 x N grid, a piece's first frame each).
"""
import argparse
import io
import os
from dataclasses import replace

import numpy as np
import torch
from PIL import Image, ImageDraw

from config import load_checkpoint
from jpdvt import SampleOptions, piece_codes, score
from pictures import DISPLAY, assemble, column_titles, enlarge, font, mark_cells, outline, save_png, stack
from plumbing.cli import AUTOCAST, UserError, check_puzzle, resolve_device, user_errors
from puzzles import collate, cut_image, puzzle_set, shuffle_pieces
from sample import SUMMARY
from solving.own import MASKED_MODEL
from solving.solver import Solver
from sources.files import data_folder, find_data, fit_image
from sources.images import DATASETS
from sources.videos import VIDEO_DATASETS

BAG_MS, STEP_MS, HOLD_MS = 1000, 300, 1500   # GIF frame durations: the shuffled bag, a step, the result at the end
FRAMES = 8                            # sampling steps drawn (drawn_steps; each costs a whole photo's GIF bytes)
SHARPNESS = 4.0                       # tau = (squared distance between neighbouring cells' codes) / SHARPNESS
BACKGROUND, EMPTY, TEXT = 32, 56, (230, 230, 230)   # canvas and empty-cell greys, label colour
EDGE = (0.6, 0.6, 0.6)                # the edge of a given piece (generated ones: pictures.RED)
GHOST = 0.3                           # opacity of the faint layer: every piece where its predicted x0_hat points
HEADER = 24                           # px above the grid for the step counter
PHOTO_COLUMNS = ("shuffled", "solved", "original")   # NAME_solved.png's panels
GIF_PIECE = 64                        # images: a piece's side in the GIF, at most (a photo's; test pieces: about)
THUMB = 96                            # videos: thumbnail side in pixels (about: a whole multiple of the frames')
MAX_BYTES = 2 ** 19                   # a larger GIF is written again from smaller frames


class Recorder:
    """
    A jpdvt.solve / GaussianDiffusion.sample callback that keeps, at every step, puzzle k's noisy codes x_t (N, D) in
    `noisy`, its predicted clean codes x0_hat (N, D) in `codes` and its content state x_t (N, ...) in `content` (given
    pieces as passed, generated ones forming from noise; the result itself after the last step), on the CPU.
    """

    def __init__(self, k=0):
        self.k, self.noisy, self.codes, self.content = k, [], [], []

    def __call__(self, i, x, x0):
        self.noisy.append(x["code"][self.k].float().cpu())
        self.codes.append(x0["code"][self.k].float().cpu())
        self.content.append(x["content"][self.k].float().cpu())


def soft_cells(code, table, grid):
    """
    Where codes (N, D) (noisy x_t or predicted x0_hat) point on an R x C grid whose cells have the codes table
    (R*C, D), raster order: (N, 2) float (row, col), the mean of the cells weighted by softmax(-squared distance /
    tau). A code equal to a cell's code lands (almost) on that cell; one between two cells, between them.
    """
    code, table = piece_codes(code.float().cpu()[None], table.float().cpu())  # a code per token: its piece's mean
    d2 = torch.cdist(code[0], table) ** 2                                      # (N, R*C)
    gaps = torch.cdist(table, table) ** 2
    tau = gaps[gaps > 0].min() / SHARPNESS                                     # neighbours' squared distance / 4
    rows, cols = torch.meshgrid(torch.arange(grid[0]), torch.arange(grid[1]), indexing="ij")
    cells = torch.stack([rows.flatten(), cols.flatten()], 1).float()          # (R*C, 2)
    return (torch.softmax(-d2 / tau, dim=1) @ cells).numpy()


def draw_frame(tiles, cells, grid, marked, label, ghosts=None):
    """
    One frame (H, W, 3) uint8: the empty cells of the grid (border px apart, as assemble() draws them), every tile
    (N, S, S, 3) in [0, 1] with its corner at its (row, col) in cells (N, 2) float and a thin grey edge, marked
    ones (N,) bool drawn last and outlined in red; `label` (the step counter) in the top-left corner. ghosts (N, 2)
    float, if given: a faint copy of every tile (GHOST opaque) at those cells, under the others.
    """
    n, side = len(tiles), tiles.shape[1]
    border = max(2, side // 40)
    pitch, (rows, cols) = side + border, grid
    img = np.full((HEADER + rows * pitch, cols * pitch + border, 3), BACKGROUND / 255, np.float32)
    y0, x0 = HEADER, border
    for r in range(rows):
        for c in range(cols):
            img[y0 + r * pitch:y0 + r * pitch + side, x0 + c * pitch:x0 + c * pitch + side] = EMPTY / 255
    for i in range(n if ghosts is not None else 0):                           # the prediction x0_hat, faint
        y, x = (int(round(v * pitch)) for v in ghosts[i])
        cell = img[y0 + y:y0 + y + side, x0 + x:x0 + x + side]
        cell[:] = (1 - GHOST) * cell + GHOST * tiles[i]
    for i in sorted(range(n), key=lambda i: bool(marked[i])):                   # generated pieces on top
        y, x = (int(round(v * pitch)) for v in cells[i])
        img[y0 + y:y0 + y + side, x0 + x:x0 + x + side] = tiles[i]
        if marked[i]:
            outline(img, y0 + y, x0 + x, side=side, width=border)
        else:                                       # a thin edge, so that overlapping pieces stay apart
            outline(img, y0 + y, x0 + x, side=side, width=1, color=EDGE)
    im = Image.fromarray((np.clip(img, 0, 1) * 255).round().astype(np.uint8))
    ImageDraw.Draw(im).text((border + 2, 4), label, font=font(14), fill=TEXT)
    return np.asarray(im)


def encode_gif(frames, durations):
    """Frames (H, W, 3) uint8 -> the bytes of a looping GIF, durations in ms, all frames on one 256-colour palette
    made from a few of them, without dithering."""
    sample = np.concatenate([frames[i] for i in np.linspace(0, len(frames) - 1, 4).round().astype(int)])
    palette = Image.fromarray(sample).quantize(256, method=Image.Quantize.MEDIANCUT)
    images = [Image.fromarray(f).quantize(palette=palette, dither=Image.Dither.NONE) for f in frames]
    out = io.BytesIO()
    images[0].save(out, "GIF", save_all=True, append_images=images[1:], duration=list(durations), loop=0)
    return out.getvalue()


def write_frames(path, frames, durations):
    """
    Write frames as a GIF (encode_gif) of at most about MAX_BYTES: a larger one is made again from frames scaled
    down to fit (a 3x3 photo puzzle of 50 steps fits at 128 px pieces; one whose pieces all wander over the
    canvas until the end may not at 160). Returns path.
    """
    data = encode_gif(frames, durations)
    if len(data) > MAX_BYTES:
        scale = 0.95 * (MAX_BYTES / len(data)) ** 0.5             # the size goes about with the pixel count
        h, w = (round(n * scale) for n in frames[0].shape[:2])
        data = encode_gif([np.asarray(Image.fromarray(f).resize((w, h), Image.LANCZOS)) for f in frames], durations)
    with open(path, "wb") as f:
        f.write(data)
    return path


def raster_cells(cells, grid):
    """Raster indices (N,) -> (N, 2) float (row, col), as draw_frame places tiles."""
    return np.stack(np.divmod(np.asarray(cells), grid[1]), axis=1).astype(np.float32)


def noise_levels(diffusion, steps):
    """(steps,): the noise std sqrt(1 - abar) of the state x_t after each sampling step of `steps` (0 after the
    last)."""
    ts = diffusion.timesteps(steps)
    abar = torch.cat([diffusion.alphas_cumprod[ts[1:]].float(), torch.ones(1)])
    return (1 - abar).sqrt().numpy()


def drawn_steps(levels, frames):
    """
    The indices of the `frames` sampling steps a GIF draws, of the steps whose states have noise levels `levels`
    (decreasing; noise_levels): the first step whose level is at most each of `frames` levels evenly spaced from
    the first step's to 0, so that the frames fall where the noise shrinks most, near the end. Every step when frames
    is 0 or at least their number.
    """
    if not 0 < frames < len(levels):
        return list(range(len(levels)))
    targets = np.linspace(levels[0], 0, frames)
    return sorted({int(np.argmax(levels <= t + 1e-6)) for t in targets})


def steps_shown(solver, rec, frames):
    """drawn_steps of a solve recorded by `rec` with the solver's diffusion."""
    return drawn_steps(noise_levels(solver.diffusion, len(rec.codes)), frames)


def solving_gif(path, rec, table, grid, tiles_at, marked, final, shown):
    """
    The GIF of a recorded solve (a Recorder): the shuffled bag (piece i in cell i, tiles_at(0)); then the sampling
    steps `shown` (drawn_steps), each step i's tiles tiles_at(i) ((N, S, S, 3)) drawn where its noisy codes x_t
    point (soft_cells), over a faint layer where its predicted clean codes x0_hat point; then the final assignment
    `final` (N,) (each piece's cell, raster index) held for HOLD_MS. marked (N,) bool: pieces outlined in red
    (generated). Returns path.
    """
    steps, bag = len(rec.codes), raster_cells(np.arange(len(marked)), grid)
    images = [draw_frame(tiles_at(0), bag, grid, marked=marked, label="shuffled")]
    images += [draw_frame(tiles_at(i), soft_cells(rec.noisy[i], table, grid), grid, marked=marked,
                          label=f"step {i + 1}/{steps}: x_t",
                          ghosts=soft_cells(rec.codes[i], table, grid)) for i in shown]
    images.append(draw_frame(tiles_at(steps - 1), raster_cells(final, grid), grid, marked=marked,
                             label=f"step {steps}/{steps}: placed"))
    return write_frames(path, images, [BAG_MS] + [STEP_MS] * len(shown) + [HOLD_MS])


def puzzle_gif(path, rec, batch, positions, table, grid, size, pixels, shown):
    """
    solving_gif of puzzle 0 of a solved batch (content in pixels, positions (B, N)), its steps recorded by `rec`:
    every piece (a clip: its first frame) enlarged by a whole factor (nearest) to about `size` px; the generated
    ones show their sampling state, turned into pixels by `pixels` (the autoencoder's decoder of a latent model).
    """
    content, missing = batch["content"][0], batch["missing"][0].cpu().numpy()
    side = content.shape[-1] * max(1, round(size / content.shape[-1]))
    given = enlarge(content, side)                                             # (N, side, side, 3)

    def tiles_at(i):
        if not missing.any():
            return given
        made = enlarge(pixels(rec.content[i][None].to(content.device))[0], side)
        return np.where(missing[:, None, None, None], made, given)
    return solving_gif(path, rec, table, grid=grid, tiles_at=tiles_at, marked=missing, final=positions[0],
                       shown=shown)


def puzzle_animation(path, rec, solver, batch, positions, frames):
    """The GIF of puzzle 0 of a solved batch (puzzle_gif), image pieces at about GIF_PIECE px,
    video pieces as thumbnails of about THUMB px; returns path."""
    puzzle = solver.config.puzzle
    image = puzzle.kind == "image"
    return puzzle_gif(path, rec, batch, positions=positions, table=solver.table,
                      grid=puzzle.grid if image else (1, puzzle.pieces), size=GIF_PIECE if image else THUMB,
                      pixels=lambda c: solver.codec.decode(c) if solver.codec else c,
                      shown=steps_shown(solver, rec, frames))


# ----------------------------------------------------------------------------
# The hero pictures: a photo cut, shuffled and solved; the first test puzzle of a dataset
# ----------------------------------------------------------------------------

def open_photo(path, grid, cell):
    """The photo at `path` (PIL, loaded), refused in one sentence if missing, unreadable or much smaller than the
    grid."""
    if not os.path.isfile(path):
        raise UserError(f"--image {path} does not exist; pass the path of a JPEG or PNG file")
    try:
        with Image.open(path) as im:
            photo = im.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError):
        raise UserError(f"--image {path} could not be read as an image; pass a JPEG or PNG file") from None
    if photo.width < grid[1] * cell // 2 or photo.height < grid[0] * cell // 2:
        raise UserError(f"--image {path} is {photo.width}x{photo.height} px, too small for this checkpoint's grid")
    return photo


def display_cut(photo, puzzle, most):
    """The photo cut as the puzzle is (fit to its grid, its gaps left out) at display resolution: pieces
    (N, S, S, 3) in [0, 1] as large as the photo allows, up to `most` px a side (never below the model's)."""
    grid, piece, gap = puzzle.grid, puzzle.piece_size, puzzle.gap
    k = max(1.0, min(most / piece, min(photo.width / grid[1], photo.height / grid[0]) / (piece + gap)))
    side, space = round(piece * k), round(gap * k)
    return cut_image(fit_image(photo, grid[0] * (side + space), grid[1] * (side + space)), grid, side, gap=space)


def solve_photo(path, solver, out, seed, frames):
    """
    Cut the photo at `path` to the checkpoint's grid at the model's resolution, shuffle it and remove the
    checkpoint's number of missing pieces (seeded), solve it; write NAME_solved.png (shuffled | solved | original,
    titled, the pieces cut from the photo's own pixels, up to DISPLAY px a side, generated ones outlined in red) and
    NAME_solving.gif (pieces up to GIF_PIECE px). Returns the scores.
    """
    puzzle, device = solver.config.puzzle, solver.device
    grid, piece, gap = puzzle.grid, puzzle.piece_size, puzzle.gap
    photo = open_photo(path, grid, piece + gap)
    pieces = cut_image(fit_image(photo, grid[0] * (piece + gap), grid[1] * (piece + gap)), grid, piece, gap=gap)
    true_pos, miss = shuffle_pieces(len(pieces), np.random.default_rng(seed), puzzle.missing, anchor=puzzle.anchor)
    batch = {"content": torch.from_numpy(pieces[true_pos]).permute(0, 3, 1, 2)[None].float().to(device) * 2 - 1,
             "true_pos": torch.from_numpy(true_pos)[None].to(device),
             "missing": torch.from_numpy(miss)[None].to(device)}
    rec = Recorder()
    pos, generated = solver.solve_batch(batch, opts=replace(solver.opts, callback=rec))
    big, gone = display_cut(photo, puzzle, DISPLAY), miss[:, None, None, None]
    n, side = len(big), big.shape[1]
    border = max(2, side // 40)
    given = big[true_pos]                                                  # (N, S, S, 3) in shuffled order
    solved = np.where(gone, enlarge(generated[0], side, smooth=True), given)
    solution = mark_cells(assemble(solved, pos[0], grid, border=border, fill=1.0), pos[0][miss], grid, side=side,
                          border=border)
    name = os.path.splitext(os.path.basename(path))[0]
    img = stack([assemble(np.where(gone, 0.5, given), np.arange(n), grid, border=border, fill=1.0), solution,
                 assemble(big, np.arange(n), grid, border=border, fill=1.0)], gap=4 * border)
    save_png(os.path.join(out, name + "_solved.png"), img,
             titles=column_titles(PHOTO_COLUMNS, img.shape[1], gap=4 * border))
    small = display_cut(photo, puzzle, GIF_PIECE)[true_pos]               # the GIF's tiles, in shuffled order
    solving_gif(os.path.join(out, name + "_solving.gif"), rec, solver.table, grid=grid,
                tiles_at=lambda i: np.where(gone, enlarge(rec.content[i], small.shape[1]), small), marked=miss,
                final=pos[0], shown=steps_shown(solver, rec, frames))
    return score(puzzle, pos, batch)


def first_test_puzzle(solver, out, seed, frames):
    """solving.gif of the first test puzzle of the solver's dataset. Returns the scores."""
    batch = collate([puzzle_set(solver.config.puzzle, "test", seed)[0]])
    batch = {k: v.to(solver.device) for k, v in batch.items()}
    rec = Recorder()
    pos, _ = solver.solve_batch(batch, opts=replace(solver.opts, callback=rec))
    puzzle_animation(os.path.join(out, "solving.gif"), rec, solver, batch=batch, positions=pos, frames=frames)
    return score(solver.config.puzzle, pos, batch)


def puzzle_from_flags(args, puzzle):
    """The checkpoint's puzzle settings with the flags that change a test puzzle, as sample.py reads them: --dataset,
    --data-dir (default: the training run's, sources.files.find_data), --missing (default: the checkpoint's) and, for
    a latent video model, its autoencoder's folder."""
    dataset = args.dataset or puzzle.dataset
    datasets = DATASETS if puzzle.kind == "image" else VIDEO_DATASETS
    if dataset not in datasets:
        raise UserError(f"--dataset {dataset} does not fit this {puzzle.kind} checkpoint; use one of "
                        f"{', '.join(datasets)}")
    changes = {"dataset": dataset, "data_dir": find_data(puzzle, args.ckpt, args.data_dir, dataset),
               "missing": puzzle.missing if args.missing is None else args.missing}
    if getattr(puzzle, "vae", None):                           # a latent video model: its autoencoder's folder
        changes["vae"] = data_folder(puzzle.vae, args.ckpt)
        if changes["vae"] is None:
            raise UserError(f"the autoencoder {puzzle.vae} of {args.ckpt} is not found from here nor next to the "
                            "checkpoint")
    puzzle = replace(puzzle, **changes)
    check_puzzle(puzzle)
    return puzzle


def main(args):
    ckpt, device = load_checkpoint(args.ckpt), resolve_device("auto")
    config = ckpt["config"]
    if args.image and config.puzzle.kind != "image":
        raise UserError(f"--image needs an image checkpoint, and {args.ckpt} is a video model; drop --image to "
                        "animate a test clip")
    if args.image:                                              # the photo's puzzle: no data folder needed
        puzzle = replace(config.puzzle, missing=0 if args.missing is None else args.missing)
        check_puzzle(puzzle)
    else:                                                       # a test puzzle, its data found as sample.py finds it
        puzzle = puzzle_from_flags(args, config.puzzle)
    if config.puzzle.kind == "image" and puzzle.missing and not config.puzzle.missing:
        print(f"note: --missing {puzzle.missing}, and {args.ckpt} never trained with missing pieces, so it cannot "
              f"draw them (their cells stay grey); for photo pieces of a 3x3 grid with holes use {MASKED_MODEL}")
    config = replace(config, puzzle=puzzle)
    opts = SampleOptions(steps=args.steps, sampler=args.sampler,
                         generator=torch.Generator(device).manual_seed(args.seed))
    solver = Solver(ckpt, config, device, opts, precision=args.precision)
    os.makedirs(args.out, exist_ok=True)
    scores = solve_photo(args.image, solver, args.out, args.seed, args.gif_steps) if args.image else \
        first_test_puzzle(solver, args.out, args.seed, args.gif_steps)
    means = {k: float(v.mean()) for k, v in scores.items()}                 # per puzzle -> the figure
    print(f"{SUMMARY[solver.config.puzzle.kind].format(**means)}; wrote {args.out}")


def get_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True, help="a checkpoint (ckpt.pt)")
    p.add_argument("--image", help="image checkpoints: the photo to cut, shuffle and solve (else: a test puzzle)")
    p.add_argument("--dataset", help="the test puzzle's dataset (default: the checkpoint's)")
    p.add_argument("--data-dir", help="the test puzzle's data folder (default: the checkpoint's)")
    p.add_argument("--missing", type=int, help="missing pieces, generated (default: 0 with --image, else the "
                                               "checkpoint's)")
    p.add_argument("--steps", type=int, default=50, help="sampling steps")
    p.add_argument("--gif-steps", type=int, default=FRAMES,
                   help=f"sampling steps drawn in the GIF, where the noise shrinks most (default {FRAMES}; 0: every "
                        "step)")
    p.add_argument("--sampler", default="ddpm", choices=("ddpm", "ddim"),
                   help="the sampler (default ddpm, one sample per puzzle, whatever the checkpoint's estimator)")
    p.add_argument("--precision", default="fp32", choices=AUTOCAST,
                   help="arithmetic: fp32 (the default), or bf16 or fp16 autocast on a GPU")
    p.add_argument("--seed", type=int, default=0, help="the shuffle, the test puzzles and the sampling noise")
    p.add_argument("--out", required=True, help="output folder")
    return p


if __name__ == "__main__":
    with user_errors():
        main(get_parser().parse_args())
