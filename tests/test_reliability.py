"""Reliability: exact resume after SIGKILL, atomic and safe checkpoints, NaN stop, clean errors for bad input."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import ROOT, TINY_IMAGE, py
from jpdvt import build_model


def weights(path):
    ck = torch.load(path, weights_only=True)
    return ck["step"], ck["model"], ck["ema"]


def test_kill_and_resume_is_exact(tmp_path):
    flags = [*TINY_IMAGE, "--warmup", "3", "--max-steps", "12", "--ckpt-every", "4", "--eval-every", "0"]
    py("train_image.py", *flags, "--out", tmp_path / "a")
    # run b is killed with SIGKILL once it has written a checkpoint, then resumed
    b = tmp_path / "b"
    proc = subprocess.Popen([sys.executable, "train_image.py", *flags, "--out", str(b)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    deadline = time.time() + 120
    while not (b / "ckpt.pt").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = torch.load(b / "ckpt.pt", weights_only=True)["step"]     # the last good checkpoint is intact
    assert killed_at in (4, 8, 12)
    py("train_image.py", "--resume", b / "ckpt.pt", "--out", b)
    step_a, model_a, ema_a = weights(tmp_path / "a" / "ckpt.pt")
    step_b, model_b, ema_b = weights(b / "ckpt.pt")
    assert step_a == step_b == 12
    for k in model_a:
        assert torch.allclose(model_a[k], model_b[k], atol=1e-5), k
        assert torch.allclose(ema_a[k], ema_b[k], atol=1e-5), k
    assert not [f for f in os.listdir(b) if ".tmp" in f]                 # no temp file left behind


def test_init_fine_tunes_from_a_checkpoint(image_ckpt, tmp_path):
    src = torch.load(image_ckpt, weights_only=True)["ema"]
    py("train_image.py", *TINY_IMAGE, "--missing", "1", "--init", image_ckpt, "--lr", "1e-9", "--max-steps", "1",
       "--eval-every", "0", "--out", tmp_path)
    step, model, ema = weights(tmp_path / "ckpt.pt")
    assert step == 1                                                     # a fresh run: step and optimizer restart
    for k in src:
        assert torch.allclose(model[k], src[k], atol=1e-6), k           # ... from the other run's EMA weights
    other = py("train_image.py", *TINY_IMAGE, "--piece-size", "12", "--init", image_ckpt, "--max-steps", "1",
               "--out", tmp_path / "b", check=False)
    assert_clean_error(other, "--init")
    shallower = py("train_image.py", *TINY_IMAGE, "--depth", "2", "--init", image_ckpt, "--max-steps", "1",
                   "--out", tmp_path / "d", check=False)
    assert_clean_error(shallower, "--init")
    wider = py("train_image.py", *TINY_IMAGE, "--width", "192", "--init", image_ckpt, "--max-steps", "1",
               "--out", tmp_path / "w", check=False)
    assert_clean_error(wider, "--init")


def test_init_grows_a_deeper_model_that_starts_as_the_source(image_ckpt, tmp_path):
    """--depth above the source's: the extra adaLN-Zero blocks start as the identity, so the function is kept."""
    py("train_image.py", *TINY_IMAGE, "--depth", "6", "--init", image_ckpt, "--lr", "1e-9", "--max-steps", "1",
       "--eval-every", "0", "--out", tmp_path)
    src, grown = torch.load(image_ckpt, weights_only=True), torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert src["config"]["model"]["depth"] == 4 and grown["config"]["model"]["depth"] == 6
    nets = []
    for ck in (src, grown):
        model, _ = build_model(ck["config"])
        model.load_state_dict(ck["ema"])
        nets.append(model.eval())
    g = torch.Generator().manual_seed(0)
    pos, content = torch.randn(2, 4, 32, generator=g), torch.rand(2, 4, 3, 8, 8, generator=g) * 2 - 1
    t, missing = torch.tensor([10, 700]), torch.zeros(2, 4, dtype=torch.bool)
    with torch.no_grad():
        a, b = (net(pos, content, t, missing) for net in nets)
    assert torch.allclose(a[0], b[0], atol=1e-5) and torch.allclose(a[1], b[1], atol=1e-5)


def test_init_refuses_an_absent_file(tmp_path):
    absent = py("train_image.py", *TINY_IMAGE, "--init", tmp_path / "nothing.pt", "--max-steps", "1",
                "--out", tmp_path / "c", check=False)
    assert_clean_error(absent, "--init")


def assert_clean_error(proc, needle=None):
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "error" in last, proc.stderr
    if needle:
        assert needle in last, last


class Evil:
    """Pickles into a call that creates a file: loading must never run it."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_malicious_checkpoint_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    bad = tmp_path / "evil.pt"
    torch.save({"config": {"kind": "image"}, "model": Evil(str(marker)), "ema": {}, "step": 0}, bad)
    proc = py("sample.py", "--ckpt", bad, check=False)
    assert_clean_error(proc, "refusing")
    assert not marker.exists()


def test_truncated_and_wrong_kind_checkpoints(image_ckpt, tmp_path):
    cut = tmp_path / "cut.pt"
    data = image_ckpt.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    assert_clean_error(py("sample.py", "--ckpt", cut, check=False), "truncated")
    video = tmp_path / "video.pt"
    torch.save({"config": {"kind": "video", "args": {}}, "model": {}, "ema": {}, "opt": {}, "step": 0}, video)
    assert_clean_error(py("train_image.py", "--resume", video, check=False), "video model")
    assert_clean_error(py("sample.py", "--ckpt", video, "--image", image_ckpt, check=False), "image checkpoint")
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    assert_clean_error(py("sample.py", "--ckpt", other, check=False), "not a jpdvt checkpoint")


def test_nan_loss_stops_and_keeps_checkpoint(tmp_path):
    proc = py("train_image.py", *TINY_IMAGE, "--lr", "1e30", "--max-steps", "50", "--ckpt-every", "1",
              "--eval-every", "0", "--out", tmp_path, check=False)
    assert_clean_error(proc, "loss became")
    ck = torch.load(tmp_path / "ckpt.pt", weights_only=True)              # last good one is readable
    assert 1 <= ck["step"] < 50


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "empty").mkdir()
    (d / "notes.txt").write_text("not an image")
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(d / "tiny.png")
    return d


IMAGE_BAD = [
    (["--grid", "1"], "--grid"),
    (["--grid", "3x"], "--grid"),
    (["--missing", "-1"], "--missing"),
    (["--missing", "9"], "--missing"),
    (["--batch-size", "0"], "--batch-size"),
    (["--max-steps", "0"], "--max-steps"),
    (["--lr", "-1"], "--lr"),
    (["--weight-content", "-0.5"], "--weight-content"),
    (["--device", "tpu"], "--device"),
    (["--dataset", "imagenet"], "--data-dir"),
    (["--dataset", "folder", "--data-dir", "/nonexistent/photos"], "--data-dir"),
    (["--dataset", "folder", "--data-dir", "{bad}/empty"], "--data-dir"),
    (["--piece-size", "0"], "--piece-size"),
    (["--patch-size", "5"], "--patch-size"),
    (["--width", "50"], "--width"),
    (["--mix-shapes", "0.5"], "--mix-shapes"),
    (["--resume", "{bad}/missing.pt"], "does not exist"),
]


@pytest.mark.parametrize("flags,needle", IMAGE_BAD)
def test_train_image_bad_input(flags, needle, bad_files):
    flags = [f.replace("{bad}", str(bad_files)) for f in flags]
    assert_clean_error(py("train_image.py", *flags, "--out", bad_files / "out", check=False), needle)


@pytest.mark.parametrize("flags,needle", [
    (["--image", "{bad}/notes.txt"], "--image"),
    (["--image", "{bad}/tiny.png"], "too small"),
    (["--image", "{bad}/nothing.png"], "--image"),
    (["--missing", "4"], "--missing"),
    (["--dataset", "folder", "--data-dir", "{bad}/empty"], "--data-dir"),
    (["--device", "gpu"], "--device"),
])
def test_sample_bad_input(flags, needle, bad_files, image_ckpt):
    flags = [f.replace("{bad}", str(bad_files)) for f in flags]
    assert_clean_error(py("sample.py", "--ckpt", image_ckpt, "--out", bad_files / "s", *flags, check=False), needle)
