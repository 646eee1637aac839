"""
Shared helpers: the scripts' main() run in-process (as `python script.py FLAGS` would run it, minus the process),
subprocesses for the few tests whose point is the process, and a tiny image checkpoint trained once per session.
"""
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import sample  # noqa: E402
import solving.own as own  # noqa: E402
import sources.files as sources  # noqa: E402
import train_image  # noqa: E402
import train_video  # noqa: E402

os.environ["OMP_NUM_THREADS"] = "1"   # tiny models on two shared cores: one intra-op thread is the fastest (and
torch.set_num_threads(1)              # train.cpu_threads keeps what OMP_NUM_THREADS says)

SHAPES_CKPT = os.path.join(ROOT, "checkpoints", "image-shapes-3x3.pt")     # shipped, trained: solves most puzzles
DIGITS_CKPT = os.path.join(ROOT, "checkpoints", "video-digits-5x4.pt")
# real photos shipped in docs/photos/ (sources and licences: docs/PHOTOS.md): the tests need no data folder beside
# the checkout
COFFEE = os.path.join(ROOT, "docs", "photos", "coffee.jpg")
CHELSEA = os.path.join(ROOT, "docs", "photos", "chelsea.jpg")
# a 2x2 grid of 8 px pieces (one DiT token each), data loaded in the training process itself
TINY_IMAGE = ["--grid", "2", "--piece-size", "8", "--batch-size", "4", "--eval-puzzles", "4", "--eval-steps", "2",
              "--warmup", "0", "--workers", "0"]


def main_of(module, *flags):
    """module.main(parsed flags) in this process, as `python module.py FLAGS` would run it; returns main's value."""
    args = module.get_parser().parse_args([str(f) for f in flags])
    return module.main(args)


def train_image_run(*flags):
    return main_of(train_image, *flags)


def train_video_run(*flags):
    return main_of(train_video, *flags)


def sample_run(*flags):
    return main_of(sample, "--device", "cpu", *flags)


def own_run(*flags):
    """python -m solving.own FLAGS (your own pieces, clips and super-resolution) on the CPU, in this process."""
    return main_of(own, "--device", "cpu", *flags)


def run(*args, check=True, timeout=300, env=None):
    """Run a command from the repo root; returns CompletedProcess with text stdout/stderr."""
    full_env = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    proc = subprocess.run([str(a) for a in args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=full_env)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc


def py(script, *args, **kw):
    return run(sys.executable, script, *args, **kw)


def assert_one_line_error(proc, needle):
    """A user mistake: exit code 2 and exactly one `error: ...` line on stderr naming `needle`, no traceback."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert needle in lines[0], lines[0]


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch, tmp_path):
    """In-process runs share a process: each test starts in its own temporary folder (so that a default output
    folder never lands in the checkout) with the photo cache empty."""
    monkeypatch.chdir(tmp_path)
    sources.load_photo.cache_clear()


def tiny_run(factory, train_run, flags, steps):
    """A tiny model trained for `steps` steps with up to 1 missing piece, held-out checks and checkpoints halfway and
    at the end, in a fresh temporary folder; returns its ckpt.pt."""
    out = factory.mktemp("run")
    half = str(steps // 2)
    train_run(*flags, "--missing", "1", "--max-steps", str(steps), "--ckpt-every", half, "--eval-every", half,
              "--out", out)
    return out / "ckpt.pt"


@pytest.fixture(scope="session")
def image_ckpt(tmp_path_factory):
    """A 2x2 image model trained for 8 steps with up to 1 missing piece, a held-out check and a checkpoint at 4."""
    return tiny_run(tmp_path_factory, train_image_run, TINY_IMAGE, steps=8)
