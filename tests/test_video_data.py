"""Video data: glyphs and moving digits (sources/synthetic.py), file readers (sources/files.py), puzzles, the GIF
writer."""
import imageio.v3 as iio
import numpy as np
import pytest
from PIL import Image

from pictures import unshuffle_video, write_gif
from plumbing.cli import UserError
from puzzles import make_video_puzzle
from sources.files import list_videos, read_video
from sources.mnist import load_movingmnist
from sources.synthetic import draw_digit_glyphs, moving_digits

# ----------------------------------------------------------------------------- synthetic digits

def test_digit_glyphs():
    g = draw_digit_glyphs(28)
    assert g.shape == (10, 28, 28) and g.dtype == np.uint8
    assert g.max() == 255 and (g[:, 0, :] == 0).all()               # drawn, with an empty border
    flat = g.reshape(10, -1).astype(np.float32)
    dist = ((flat[:, None] - flat[None]) ** 2).sum(-1)
    assert (dist + np.eye(10) * 1e9).min() > 0                      # ten different glyphs
    assert draw_digit_glyphs(14).shape == (10, 14, 14)


@pytest.mark.parametrize("size", [64, 32])
def test_moving_digits(size):
    v = moving_digits(np.random.default_rng(0), num_frames=20, size=size)
    assert v.shape == (20, size, size) and v.dtype == np.float32
    assert v.min() >= 0 and v.max() <= 1 and v.max() > 0.5
    assert all(np.abs(v[t + 1] - v[t]).sum() > 0 for t in range(19))  # the digits move every frame
    assert np.array_equal(v, moving_digits(np.random.default_rng(0), num_frames=20, size=size))
    assert not np.array_equal(v, moving_digits(np.random.default_rng(1), num_frames=20, size=size))
    one = moving_digits(np.random.default_rng(0), num_frames=5, size=size, num_digits=1)
    assert one.shape == (5, size, size)


# ----------------------------------------------------------------------------- puzzles

def test_make_video_puzzle_and_unshuffle():
    rng = np.random.default_rng(0)
    frames = np.arange(30)[:, None, None] * np.ones((1, 4, 4))     # frame t is filled with t
    for _ in range(5):
        pz = make_video_puzzle(frames, num_pieces=5, frames_per_piece=4, rng=rng, missing=2)
        pieces, order, missing = pz["pieces"], pz["true_pos"], pz["missing"]
        assert pieces.shape == (5, 4, 4, 4) and order[0] == 0 and sorted(order) == list(range(5))
        assert missing.sum() == 2 and not missing[0]
        start = pieces[0, 0, 0, 0]
        for i in range(5):                                          # piece i holds frames of its true index
            assert pieces[i, :, 0, 0].tolist() == [start + 4 * order[i] + k for k in range(4)]
        solved = unshuffle_video(pieces, order)
        assert np.array_equal(solved, frames[int(start):int(start) + 20])
    fixed = make_video_puzzle(frames, 5, 4, rng, start=0)
    assert fixed["pieces"][0, 0, 0, 0] == 0 and not fixed["missing"].any()
    with pytest.raises(ValueError):
        unshuffle_video(pieces, [0, 0, 1, 2, 3])


# ----------------------------------------------------------------------------- files

def test_load_movingmnist(tmp_path):
    good = tmp_path / "mnist_test_seq.npy"
    np.save(good, np.zeros((20, 3, 64, 64), np.uint8))
    data = load_movingmnist(good)
    assert data.shape == (3, 20, 64, 64) and data.dtype == np.uint8
    assert load_movingmnist(tmp_path).shape == data.shape                # the folder holding the file
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((3, 20, 32, 32), np.uint8))
    with pytest.raises(UserError, match="20, 10000, 64, 64"):
        load_movingmnist(bad)
    with pytest.raises(UserError, match="neither the MNIST IDX files"):
        load_movingmnist(tmp_path / "missing.npy")
    with pytest.raises(UserError, match="needs --data-dir"):
        load_movingmnist(None)
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(UserError, match=".npy"):
        load_movingmnist(tmp_path / "x.txt")


def test_read_video_gif_and_folder(tmp_path):
    frames = (np.arange(6)[:, None, None, None] * 40 * np.ones((1, 16, 20, 3))).astype(np.uint8)
    iio.imwrite(tmp_path / "clip.gif", frames, duration=100, loop=0)
    v = read_video(tmp_path / "clip.gif")
    assert v.shape == (6, 16, 20, 3) and v.dtype == np.float32 and 0 <= v.min() and v.max() <= 1
    assert np.allclose(v[:, 0, 0, 0], frames[:, 0, 0, 0] / 255, atol=0.02)
    assert read_video(tmp_path / "clip.gif", frame_stride=2).shape[0] == 3
    assert read_video(tmp_path / "clip.gif", size=8).shape == (6, 8, 8, 3)

    folder = tmp_path / "frames"
    folder.mkdir()
    for t in range(12):                                             # natural order: 2 before 10
        Image.fromarray(np.full((10, 10), t * 20, np.uint8)).save(folder / f"f{t}.png")
    v = read_video(folder, frame_stride=3)
    assert v.shape == (4, 10, 10, 1)
    assert np.allclose(v[:, 0, 0, 0], np.array([0, 60, 120, 180]) / 255)

    (tmp_path / "broken.gif").write_bytes(b"not a gif")
    with pytest.raises(UserError, match="broken.gif"):
        read_video(tmp_path / "broken.gif")
    with pytest.raises(UserError, match="not found"):
        read_video(tmp_path / "nope.gif")


def test_list_videos(tmp_path):
    assert list_videos(tmp_path) == [] and list_videos(tmp_path / "nope") == []
    (tmp_path / "a" / "clip1").mkdir(parents=True)
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(tmp_path / "a" / "clip1" / "0001.png")
    (tmp_path / "b.mp4").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("x")
    assert list_videos(tmp_path) == sorted([str(tmp_path / "a" / "clip1"), str(tmp_path / "b.mp4")])


def test_write_gif(tmp_path):
    rng = np.random.default_rng(0)
    gray = rng.random((6, 16, 16)).astype(np.float32)
    rgb = rng.random((6, 16, 16, 3)).astype(np.float32) * [0.5, 1, 1]  # never red
    marks = np.array([0, 1, 0, 0, 1, 0], bool)
    write_gif(tmp_path / "out.gif", [[gray, rgb]], labels=["a", "b"], marks=[[marks, None]])
    out = iio.imread(tmp_path / "out.gif", index=None)
    assert out.shape[0] == 6 and out.shape[1] >= 96 and out.shape[2] >= 2 * 96
    red = (out[..., 0] > 200) & (out[..., 1] < 60) & (out[..., 2] < 60)
    assert red[1].sum() > 100 and red[0].sum() < red[1].sum() / 10  # border only on marked frames
    write_gif(tmp_path / "grid.gif", [[gray, rgb], [rgb, gray]], marks=[[None, None], [None, marks]])
    grid = iio.imread(tmp_path / "grid.gif", index=None)
    assert grid.shape[1] >= 2 * 96 and grid.shape[2] == out.shape[2]  # two rows of two columns
    red = (grid[..., 0] > 200) & (grid[..., 1] < 60) & (grid[..., 2] < 60)
    half = grid.shape[1] // 2
    assert red[1, half:].sum() > 100 and red[1, :half].sum() == 0    # only the marked clip (second row)
    with pytest.raises(ValueError):
        write_gif(tmp_path / "bad.gif", [[gray, gray[:3]]])


def test_read_mp4_without_backend_names_the_package(tmp_path, monkeypatch):
    import sources.files as sources
    monkeypatch.setattr(sources, "find_spec", lambda name: None)  # as if neither ffmpeg nor av is there
    (tmp_path / "clip.mp4").write_bytes(b"\x00" * 16)
    with pytest.raises(UserError, match="pip install imageio-ffmpeg"):
        read_video(tmp_path / "clip.mp4")
