"""Moving MNIST (sources/mnist.py): IDX reading and its errors, finding the files, the bouncing-digit clips, and
`python mnist.py --download DIR` (the root mnist.py).

Every test writes its own tiny synthetic IDX files; real MNIST is never needed, and the download tests fetch from a
local HTTP server on 127.0.0.1 (nothing reaches the network).
"""
import functools
import gzip
import hashlib
import http.server
import os
import threading

import numpy as np
import pytest
from conftest import sample_run, train_video_run

import mnist as mnist_script
import sources.mnist as mnist
from plumbing.cli import UserError
from puzzles import VideoConfig, VideoPuzzles
from sources.mnist import find_idx, is_mnist_dir, mnist_digits, moving_mnist, read_idx


def fake_digits(n=12, value=200):
    """(n, 28, 28) uint8: a solid 1 px border (so a digit's bounding box is its full 28x28 square) + an index mark."""
    d = np.zeros((n, 28, 28), np.uint8)
    d[:, 0, :] = d[:, -1, :] = d[:, :, 0] = d[:, :, -1] = value
    for i in range(n):
        d[i, 5:5 + i + 1, 10:14] = 255
    return d


def write_idx(path, arr, gz=False):
    data = bytes([0, 0, 8, arr.ndim]) + np.array(arr.shape, ">u4").tobytes() + arr.astype(np.uint8).tobytes()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if gz else data)
    return str(path)


# ----------------------------------------------------------------------------- IDX files

@pytest.mark.parametrize("name,gz", [("a-idx3-ubyte", False), ("a-idx3-ubyte.gz", True), ("gzip-without-suffix", True)])
def test_read_idx_round_trip(tmp_path, name, gz):
    digits = fake_digits()
    back = read_idx(write_idx(tmp_path / name, digits, gz))
    assert back.dtype == np.uint8 and back.shape == (12, 28, 28)
    assert np.array_equal(back, digits)
    labels = np.arange(7, dtype=np.uint8)
    assert np.array_equal(read_idx(write_idx(tmp_path / "labels", labels, gz)), labels)  # 1-d files too


def test_read_idx_errors_name_the_file(tmp_path):
    missing = tmp_path / "nope-idx3-ubyte"
    with pytest.raises(UserError, match="nope-idx3-ubyte"):
        read_idx(str(missing))
    bad = tmp_path / "bad-magic"
    bad.write_bytes(bytes([0, 0, 9, 3]) + np.array([1, 28, 28], ">u4").tobytes() + bytes(784))  # type 0x09
    with pytest.raises(UserError, match="bad-magic.*magic"):
        read_idx(str(bad))
    bad.write_bytes(b"\x89PNG" + bytes(100))
    with pytest.raises(UserError, match="bad-magic"):
        read_idx(str(bad))
    short = tmp_path / "short-idx3-ubyte"
    full = open(write_idx(short, fake_digits(3)), "rb").read()
    short.write_bytes(full[:-10])                                    # 10 data bytes missing
    with pytest.raises(UserError, match="short-idx3-ubyte.*truncated"):
        read_idx(str(short))
    short.write_bytes(full[:10])                                     # cut inside the header
    with pytest.raises(UserError, match="short-idx3-ubyte.*truncated"):
        read_idx(str(short))
    corrupt = tmp_path / "corrupt.gz"
    corrupt.write_bytes(gzip.compress(full)[:40])
    with pytest.raises(UserError, match="corrupt.gz.*gzip"):
        read_idx(str(corrupt))


@pytest.mark.parametrize("rel,gz", [("train-images-idx3-ubyte", False), ("train-images-idx3-ubyte.gz", True),
                                    ("train-images.idx3-ubyte", False), ("MNIST/raw/train-images-idx3-ubyte.gz", True),
                                    ("raw/train-images-idx3-ubyte", False)])
def test_find_idx_layouts(tmp_path, rel, gz):
    assert find_idx(str(tmp_path), "train") is None and not is_mnist_dir(str(tmp_path))
    path = write_idx(tmp_path / rel, fake_digits(), gz)
    assert find_idx(str(tmp_path), "train") == path
    assert find_idx(str(tmp_path), "test") is None
    assert is_mnist_dir(str(tmp_path)) and not is_mnist_dir(str(tmp_path / "missing"))


def test_mnist_digits_picks_split(tmp_path):
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", fake_digits(12, value=100), gz=True)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", fake_digits(5, value=50))
    train, test = mnist_digits(str(tmp_path), "train"), mnist_digits(str(tmp_path), "test")
    assert train.shape == (12, 28, 28) and train[0, 0, 0] == 100
    assert test.shape == (5, 28, 28) and test[0, 0, 0] == 50
    assert mnist_digits(str(tmp_path), "train") is train               # cached: the file is read once


def test_mnist_digits_errors(tmp_path):
    with pytest.raises(UserError, match="--data-dir.*t10k-images-idx3-ubyte"):
        mnist_digits(str(tmp_path), "test")
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((4, 28, 27), np.uint8))
    with pytest.raises(UserError, match=r"train-images-idx3-ubyte.*\(N, 28, 28\)"):
        mnist_digits(str(tmp_path), "train")


# ----------------------------------------------------------------------------- clips

def corners(clip):
    """Top-left (row, col) of the nonzero box of each frame: the digit's position when one full-border digit moves."""
    out = []
    for f in clip:
        rows, cols = np.nonzero(f.any(1))[0], np.nonzero(f.any(0))[0]
        assert rows[-1] - rows[0] == 27 and cols[-1] - cols[0] == 27  # the whole 28x28 digit is inside the frame
        out.append((rows[0], cols[0]))
    return np.array(out)


def test_moving_mnist_shape_range_determinism():
    digits = fake_digits()
    clip = moving_mnist(digits, np.random.default_rng([3, 0, 7]))
    assert clip.shape == (20, 64, 64) and clip.dtype == np.float32
    assert clip.min() >= 0.0 and clip.max() <= 1.0 and clip.max() == 1.0
    assert np.array_equal(clip, moving_mnist(digits, np.random.default_rng([3, 0, 7])))
    assert not np.array_equal(clip, moving_mnist(digits, np.random.default_rng([3, 0, 8])))
    assert not np.array_equal(clip[0], clip[-1])                       # it moves
    assert moving_mnist(digits, np.random.default_rng(0), num_frames=5).shape == (5, 64, 64)


def test_one_digit_stays_inside_and_bounces():
    digits = fake_digits()
    reversed_somewhere = False
    for seed in range(10):
        clip = moving_mnist(digits, np.random.default_rng(seed), num_digits=1)
        mass = clip.sum(axis=(1, 2))
        masses = digits.reshape(12, -1).sum(1) / 255.0
        assert np.any(np.isclose(masses, mass[0], atol=1e-3))           # the frame holds one whole digit ...
        assert np.allclose(mass, mass[0], atol=1e-3)                    # ... in every frame
        pos = corners(clip)
        assert pos.min() >= 0 and pos.max() <= 36
        step = np.diff(pos, axis=0)
        assert np.abs(step).max() <= 5 and np.hypot(*step.T).mean() > 2  # ~3.6 px/frame
        reversed_somewhere |= bool(np.any(step[1:] * step[:-1] < 0))     # a velocity component flipped at a wall
    assert reversed_somewhere


def test_two_digits_max_composite():
    digits = np.full((3, 28, 28), 100, np.uint8)                        # solid squares: overlaps are easy to see
    overlapped = 0
    for seed in range(20):
        clip = moving_mnist(digits, np.random.default_rng(seed), num_digits=2)
        assert np.allclose(clip[clip > 0], 100 / 255)                   # max, not sum, where the digits overlap
        overlapped += int(((clip > 0).sum(axis=(1, 2)) < 2 * 28 * 28).any())
    assert overlapped > 0


def test_size_32_is_half_size_clip():
    digits = fake_digits()
    big = moving_mnist(digits, np.random.default_rng(5))
    small = moving_mnist(digits, np.random.default_rng(5), size=32)
    assert small.shape == (20, 32, 32) and small.dtype == np.float32
    assert np.allclose(small, big.reshape(20, 32, 2, 32, 2).mean((2, 4)), atol=1e-5)  # 2x2 box average


# ----------------------------------------------------------------------------- as a video dataset

def mnist_dir(tmp_path):
    write_idx(tmp_path / "mnist" / "train-images-idx3-ubyte.gz", fake_digits(12), gz=True)
    write_idx(tmp_path / "mnist" / "t10k-images-idx3-ubyte", np.full((6, 28, 28), 90, np.uint8))
    return tmp_path / "mnist"


def test_video_puzzles_generate_moving_mnist_per_split(tmp_path):
    cfg = VideoConfig(dataset="movingmnist", data_dir=str(mnist_dir(tmp_path)), pieces=10, frames_per_piece=2, size=32)
    train, val, test, again = (VideoPuzzles(cfg, split, 0) for split in ("train", "val", "test", "test"))
    a, b = test[3], again[3]
    assert a["content"].shape == (10, 2, 1, 32, 32) and a["true_pos"][0] == 0
    assert np.array_equal(a["content"], b["content"]) and np.array_equal(a["true_pos"], b["true_pos"])  # pure function
    assert not np.array_equal(a["content"], test[4]["content"])
    # test clips are made of the t10k digits (all 90), training clips of the training digits (up to 255)
    assert abs(float(a["content"].max()) - (90 / 255 * 2 - 1)) < 0.2 < abs(float(train[3]["content"].max()) -
                                                                           (90 / 255 * 2 - 1))
    assert float(val[3]["content"].max()) > 0.5                              # val clips: training digits too
    assert not np.array_equal(val[3]["content"], train[3]["content"])
    assert len(test) == 10000 and len(train) > 10 ** 9


def test_train_video_on_mnist_idx_files(tmp_path):
    root = mnist_dir(tmp_path)
    flags = ["--dataset", "movingmnist", "--data-dir", root, "--size", "16", "--pieces", "3", "--frames-per-piece", "2"]
    train_video_run(*flags, "--batch-size", "2", "--max-steps", "1", "--eval-puzzles", "2", "--eval-steps", "1",
                    "--warmup", "0", "--workers", "0", "--out", tmp_path / "run")
    m = sample_run("--ckpt", tmp_path / "run" / "ckpt.pt", "--num-puzzles", "2", "--steps", "1",
                   "--out", tmp_path / "s")
    assert (m["dataset"], m["num_puzzles"]) == ("movingmnist", 2) and (tmp_path / "s" / "examples.gif").exists()
    broken = mnist_dir(tmp_path / "broken")                     # a fresh folder: sources/mnist.py caches what it read
    (broken / "t10k-images-idx3-ubyte").write_bytes(b"\x00\x00\x08\x03" + b"\x00" * 5)     # truncated header
    with pytest.raises(UserError, match="t10k-images-idx3-ubyte.*truncated"):   # the test split is read by sample.py
        sample_run("--ckpt", tmp_path / "run" / "ckpt.pt", "--data-dir", broken, "--out", tmp_path / "s2")


# ----------------------------------------------------------------------------- python mnist.py --download DIR

GZ = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
      "t10k-labels-idx1-ubyte.gz"]


def fake_mnist(folder):
    """The four MNIST .gz names in folder as tiny fake IDX files; returns {name: md5 of the IDX content}."""
    write_idx(folder / GZ[0], fake_digits(12), gz=True)
    write_idx(folder / GZ[1], np.arange(12, dtype=np.uint8) % 10, gz=True)
    write_idx(folder / GZ[2], fake_digits(5, value=90), gz=True)
    write_idx(folder / GZ[3], np.arange(5, dtype=np.uint8), gz=True)
    return {n: hashlib.md5(gzip.decompress((folder / n).read_bytes())).hexdigest() for n in GZ}


@pytest.fixture
def server(tmp_path):
    """A local HTTP server over tmp_path/www: (base URL, list of the paths asked for)."""
    www = tmp_path / "www"
    www.mkdir()
    asked = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            super().do_GET()

        def log_message(self, fmt, *args):  # quiet
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(www)))
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)  # quick shutdown
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", asked
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture
def local_mirrors(tmp_path, server, monkeypatch):
    """Good fake files at BASE/good/, the same with a corrupt train-images at BASE/bad/, nothing at BASE/none/; the
    module's md5 table and built-in mirrors point at them. Returns (base URL, asked paths)."""
    base, asked = server
    md5 = fake_mnist(tmp_path / "www" / "good")
    fake_mnist(tmp_path / "www" / "bad")
    (tmp_path / "www" / "bad" / GZ[0]).write_bytes(gzip.compress(b"not the MNIST digits"))
    monkeypatch.setattr(mnist, "MD5", md5)
    monkeypatch.setattr(mnist, "MIRRORS", (base + "none/", base + "good/"))
    return base, asked


def download_run(*flags):
    return mnist_script.main(mnist_script.get_parser().parse_args([str(f) for f in flags]))


def test_download_tries_mirrors_in_order_and_checks_md5(tmp_path, local_mirrors, capsys):
    base, asked = local_mirrors
    out = tmp_path / "data" / "mnist"                                   # created, parents too
    got = download_run("--download", out)
    assert got == {n: base + "good/" + n for n in GZ}                     # the first mirror 404s, the second serves
    assert asked == [p for n in GZ for p in ("/none/" + n, "/good/" + n)]
    assert sorted(os.listdir(out)) == sorted(GZ)                          # no temp files left
    assert all((out / n).read_bytes() == (tmp_path / "www" / "good" / n).read_bytes() for n in GZ)
    assert mnist_digits(str(out), "train").shape == (12, 28, 28)          # ready for --data-dir
    assert mnist_digits(str(out), "test").shape == (5, 28, 28)
    assert "HTTP 404" in capsys.readouterr().out                          # the failed mirror is reported


def test_download_refuses_a_corrupt_file_and_keeps_none(tmp_path, local_mirrors):
    base, asked = local_mirrors
    out = tmp_path / "mnist"
    with pytest.raises(UserError, match=rf"{GZ[0]}.*corrupt.*not kept.*md5.*--mirror") as e:
        download_run("--download", out, "--mirror", base + "bad")         # no trailing slash: one is added
    assert "\n" not in str(e.value)
    assert os.listdir(out) == []                                          # neither the file nor a temp file
    assert asked == ["/bad/" + GZ[0]]                                     # --mirror replaces the built-in list
    mnist.MIRRORS = (base + "bad/", base + "good/")                       # (monkeypatch restores it)
    assert download_run("--download", out)[GZ[0]] == base + "good/" + GZ[0]   # corrupt at one: the next one
    assert sorted(os.listdir(out)) == sorted(GZ)


def test_download_keeps_good_files_and_replaces_bad_ones(tmp_path, local_mirrors):
    base, asked = local_mirrors
    out = tmp_path / "mnist"
    out.mkdir()
    good = (tmp_path / "www" / "good" / GZ[0]).read_bytes()
    (out / GZ[0]).write_bytes(good)
    (out / GZ[2]).write_bytes(b"truncated")                               # wrong md5: fetched again, replaced
    got = download_run("--download", out, "--mirror", base + "good/")
    assert got[GZ[0]] is None and got[GZ[2]] == base + "good/" + GZ[2]
    assert asked == ["/good/" + n for n in GZ[1:]]                        # the good one is not fetched again
    assert (out / GZ[2]).read_bytes() == (tmp_path / "www" / "good" / GZ[2]).read_bytes()
    del asked[:]
    assert set(download_run("--download", out).values()) == {None} and asked == []   # all there: nothing fetched


def test_download_errors_are_one_sentence(tmp_path, local_mirrors, capsys):
    base, asked = local_mirrors
    with pytest.raises(UserError, match=rf"{GZ[0]}.*HTTP 404.*network.*--mirror"):
        download_run("--download", tmp_path / "a", "--mirror", base + "none/")
    with pytest.raises(UserError, match="--mirror must be a base URL"):
        download_run("--download", tmp_path / "a", "--mirror", "example.org/mnist")
    with pytest.raises(UserError, match="--mirror needs --download"):
        download_run("--mirror", base)
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="is a file, not a folder"):
        download_run("--download", tmp_path / "file")
    assert download_run() is None and "--download DIR" in capsys.readouterr().out   # no flags: the help
    assert asked == ["/none/" + GZ[0]]
    help_text = mnist_script.get_parser().format_help()
    assert "--download DIR" in help_text and "--mirror URL" in help_text and mnist.MIRRORS[0] in help_text


def test_download_takes_a_mirror_that_compressed_the_same_digits_anew(tmp_path, local_mirrors):
    """The check is the md5 of the IDX content, so a .gz made again from the same digits is MNIST."""
    base, _ = local_mirrors
    good = tmp_path / "www" / "good"
    for name in GZ:
        raw = gzip.decompress((good / name).read_bytes())
        (good / name).write_bytes(gzip.compress(raw, compresslevel=1, mtime=123))   # other .gz bytes
    assert all(mnist.download(tmp_path / "out", mirrors=[base + "good/"]).values())
