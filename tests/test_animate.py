"""The README's animated pictures (solving/animate.py: a photo cut, shuffled, solved and animated; the first test
puzzle), the diffusion callback they read, and the codes picture (bench/codes_picture.py)."""
from dataclasses import replace

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from conftest import DIGITS_CKPT, SHAPES_CKPT
from PIL import Image

import jpdvt
from bench.codes_picture import save_codes_picture
from config import load_checkpoint
from diffusion import GaussianDiffusion
from dit import DiT
from jpdvt import SampleOptions, anchor_pieces, solve
from pictures import TITLE_INK, column_titles, save_png
from plumbing.cli import UserError
from posenc import grid_table
from puzzles import collate, puzzle_set
from solving.animate import BAG_MS, HEADER, HOLD_MS, drawn_steps, get_parser, noise_levels, soft_cells
from solving.animate import main as animate
from sources.synthetic import shapes_image

PIECE, BORDER = 40, 2       # the 120 x 160 test photo on a 3x3 grid: 40 px pieces, 2 px apart (as test_image.py)


def red_ring(img, y, x, side=PIECE, width=BORDER):
    """Is the `width` px ring just inside the side x side square at (y, x) red (a generated piece's outline)?"""
    ring = np.concatenate([img[y:y + width, x:x + side].reshape(-1, 3), img[y + side - width:y + side, x:x + side]
                           .reshape(-1, 3), img[y:y + side, x:x + width].reshape(-1, 3),
                           img[y:y + side, x + side - width:x + side].reshape(-1, 3)]).astype(int)
    return bool(((ring[:, 0] > 200) & (ring[:, 1] < 60) & (ring[:, 2] < 60)).all())


@pytest.fixture
def photo(tmp_path):
    path = tmp_path / "photo.jpg"
    Image.fromarray((shapes_image(np.random.default_rng(5), 120, 160) * 255).astype(np.uint8)).save(path)
    return path


def run_animate(*flags):
    animate(get_parser().parse_args([str(f) for f in flags]))


def test_photo_with_missing_pieces_and_its_animation(photo, tmp_path, capsys):
    """--image --missing 2: 2 pieces generated (red in the solution only), and a GIF of the shuffled bag, one frame
    per step (5, fewer than --gif-steps) and the held result, whose last frame is the solution's layout."""
    run_animate("--ckpt", SHAPES_CKPT, "--image", photo, "--missing", "2", "--steps", "5", "--out", tmp_path)
    out = capsys.readouterr().out                   # the shapes model never trained with missing pieces: it says so
    assert out.startswith("note: --missing 2, and ") and "cannot draw them (their cells stay grey)" in out
    assert out.splitlines()[1].startswith("piece accuracy ")
    picture = np.asarray(Image.open(tmp_path / "photo_solved.png"))      # input | solution | original, 8 px apart
    panel = 3 * (PIECE + BORDER) - BORDER
    title = picture.shape[0] - panel                                     # the titles' strip above the panels
    assert 12 < title < 40 and (picture[:title] == 255).mean() > 0.8
    picture = picture[title:]
    cells = [(r * (PIECE + BORDER), c * (PIECE + BORDER)) for r in range(3) for c in range(3)]
    solution = picture[:, panel + 8:2 * panel + 8]
    generated = [red_ring(solution, y, x) for y, x in cells]
    assert sum(generated) == 2
    assert not any(red_ring(picture[:, p:p + panel], y, x) for p in (0, 2 * panel + 16) for y, x in cells)

    gif = iio.imread(tmp_path / "photo_solving.gif", index=None)
    assert gif.shape == (1 + 5 + 1, HEADER + 3 * (PIECE + BORDER), 3 * (PIECE + BORDER) + BORDER, 3)
    with Image.open(tmp_path / "photo_solving.gif") as im:
        assert im.info["duration"] == BAG_MS
        im.seek(im.n_frames - 1)
        assert im.info["duration"] == HOLD_MS
    first, last = (g[HEADER:, BORDER:].astype(int) for g in (gif[0], gif[-1]))   # the grids, from cell (0, 0)
    assert np.abs(first - last).mean() > 10
    for (y, x), made in zip(cells, generated):     # the held frame: every piece in its assigned cell
        assert red_ring(last, y, x) == made
        if not made:                                # given pieces: the photo's pixels, as in the solution
            inner = (slice(y + 2, y + PIECE - 2), slice(x + 2, x + PIECE - 2))
            assert np.abs(last[inner] - solution[inner]).mean() < 8


def test_test_set_animations_of_images_and_videos(tmp_path, capsys):
    """solving.gif of the first test puzzle: image pieces enlarged to about GIF_PIECE px on their grid, video
    pieces as a strip of 5 thumbnails of about THUMB px, the generated one outlined in red in every frame."""
    run_animate("--ckpt", SHAPES_CKPT, "--steps", "2", "--out", tmp_path / "i")
    pitch = 64 + 2                                  # 16 px pieces x 4, 2 px apart
    assert iio.imread(tmp_path / "i" / "solving.gif", index=None).shape == (4, HEADER + 3 * pitch, 3 * pitch + 2, 3)

    run_animate("--ckpt", DIGITS_CKPT, "--steps", "3", "--missing", "1", "--out", tmp_path / "v")
    gif = iio.imread(tmp_path / "v" / "solving.gif", index=None).astype(int)
    pitch = 96 + 2                                  # 32 px frames x 3, 2 px apart
    assert gif.shape == (1 + 3 + 1, HEADER + pitch, 5 * pitch + 2, 3)
    red = (gif[..., 0] > 200) & (gif[..., 1] < 60) & (gif[..., 2] < 60)
    assert (red.sum(axis=(1, 2)) >= 4 * 96).all()   # the grey digits are never red: only the outline is


def test_callback_sees_every_step_and_changes_no_result():
    """SampleOptions(callback=...): called once per step of the first sample, with the result as the last state; the
    same positions and content as without it (it draws nothing from the generator)."""
    ckpt = load_checkpoint(SHAPES_CKPT)
    config = ckpt["config"]
    model = DiT(config.model).eval()
    model.load_state_dict(ckpt["ema"])
    diffusion, table = GaussianDiffusion(1000, config.prediction), jpdvt.position_table(config)
    test = puzzle_set(replace(config.puzzle, missing=1), "test", 0)
    batch, opts = collate([test[0], test[1]]), SampleOptions(steps=4, samples=2)
    given = anchor_pieces(batch, False)
    plain = solve(model, diffusion, batch, table, replace(opts, generator=torch.Generator().manual_seed(0)), given)
    seen = []
    watched = solve(model, diffusion, batch, table, replace(opts, generator=torch.Generator().manual_seed(0),
                                                            callback=lambda i, x, x0: seen.append((i, x, x0))), given)
    assert np.array_equal(plain[0], watched[0]) and torch.equal(plain[1], watched[1])
    assert [i for i, _, _ in seen] == [0, 1, 2, 3]                      # the first of the 2 samples only
    assert torch.equal(seen[-1][1]["content"], watched[1])
    assert seen[0][2]["code"].shape == (2, 9, 32) and seen[0][2]["content"].shape == batch["content"].shape


def test_soft_cells_put_a_code_where_it_points():
    table = grid_table(3, 3)
    mid = (table[0] + table[1]) / 2                                      # halfway between cells (0,0) and (0,1)
    cells = soft_cells(torch.stack([table[5], mid]), table, (3, 3))
    assert np.allclose(cells[0], [1, 2], atol=0.1) and np.allclose(cells[1], [0, 0.5], atol=0.1)


def grey(frame):
    """A GIF frame (H, W, 3) as grey levels, as PIL's "L" mode weighs the channels."""
    return frame.astype(float) @ np.array([0.299, 0.587, 0.114])


def test_the_gif_shows_the_diffusion(photo, tmp_path):
    """The hero GIF's property (issue 79): the first frame is the shuffled bag, not the solved picture, and the
    pieces move: the middle frame differs from the first by at least 5 grey levels on average; the frames drawn are
    --gif-steps steps, most of them near the end, the last step's the last."""
    run_animate("--ckpt", SHAPES_CKPT, "--image", photo, "--steps", "20", "--gif-steps", "6", "--out", tmp_path)
    gif = iio.imread(tmp_path / "photo_solving.gif", index=None)
    assert len(gif) == 1 + 6 + 1
    first, middle, last = (grey(gif[i][HEADER:]) for i in (0, len(gif) // 2, -1))
    assert np.abs(first - middle).mean() >= 5
    assert np.abs(first - last).mean() >= 5                          # the bag is shuffled, the end solved
    solved = np.asarray(Image.open(tmp_path / "photo_solved.png").convert("L"), float)
    panel = 3 * (PIECE + BORDER) - BORDER
    solution = solved[-panel:, panel + 8:2 * panel + 8]                 # the solved panel, below its title
    bag = first[:panel, BORDER:BORDER + panel]
    assert np.abs(bag - solution).mean() >= 5


def test_the_frames_fall_where_the_noise_shrinks():
    levels = noise_levels(GaussianDiffusion(1000, "x0"), 50)
    assert levels[0] > 0.99 and levels[-1] == 0 and (np.diff(levels) <= 0).all()
    shown = drawn_steps(levels, 8)
    assert shown[0] == 0 and shown[-1] == 49 and len(shown) == 8
    assert sum(i >= 25 for i in shown) >= 6                          # the codes settle late: most frames there
    assert drawn_steps(levels, 0) == drawn_steps(levels, 50) == list(range(50))


def test_column_titles_above_a_picture(tmp_path):
    """save_png(titles=...): a white strip above the enlarged picture, each title's ink inside its own column."""
    img = np.zeros((20, 3 * 30 + 2 * 6, 3), np.float32)                 # 3 black panels 30 px wide, 6 px apart
    titles = column_titles(["shuffled", "with missing drawn", "ground truth"], img.shape[1])
    assert [(x0, x1) for _, x0, x1 in titles] == [(0, 30), (36, 66), (72, 102)]
    save_png(tmp_path / "t.png", img, min_width=240, titles=titles)     # enlarged 2x: 60 px columns
    out = np.asarray(Image.open(tmp_path / "t.png").convert("RGB")).astype(int)
    strip = out.shape[0] - 40
    assert out.shape[1] == 2 * img.shape[1] and 2 * 16 <= strip < 80  # the long titles wrapped onto more lines
    assert (out[strip:] == 0).all()
    ink = (np.abs(out[:strip] - TITLE_INK).sum(-1) < 60).any(0)        # (W,) columns with title ink
    inside = np.zeros(out.shape[1], bool)
    for _, x0, x1 in titles:
        inside[2 * x0:2 * x1] = True
        assert ink[2 * x0:2 * x1].any()
    assert not ink[~inside].any()


def test_a_photo_too_small_or_unreadable_is_refused(tmp_path):
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "tiny.png")
    (tmp_path / "notes.txt").write_text("not an image")
    with pytest.raises(UserError, match="tiny.png is 4x4 px, too small"):
        run_animate("--ckpt", SHAPES_CKPT, "--image", tmp_path / "tiny.png", "--out", tmp_path)
    with pytest.raises(UserError, match="nothing.png does not exist; pass the path of a JPEG or PNG file"):
        run_animate("--ckpt", SHAPES_CKPT, "--image", tmp_path / "nothing.png", "--out", tmp_path / "n")
    with pytest.raises(UserError, match="notes.txt could not be read as an image"):
        run_animate("--ckpt", SHAPES_CKPT, "--image", tmp_path / "notes.txt", "--out", tmp_path)


def test_codes_picture(tmp_path):
    im = Image.open(save_codes_picture(tmp_path / "codes.png"))
    assert im.width > im.height > 300
    colours = np.asarray(im.convert("RGB")).reshape(-1, 3)
    assert (colours == [178, 24, 43]).all(axis=1).any() and (colours == [33, 102, 172]).all(axis=1).any()   # +1, -1
