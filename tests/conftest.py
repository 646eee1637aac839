"""Shared fixtures: run the scripts as a user would, and a tiny image checkpoint trained once per session."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TINY_IMAGE = ["--grid", "2", "--piece-size", "8", "--batch-size", "4", "--eval-puzzles", "4", "--eval-steps", "2",
              "--warmup", "0"]


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


@pytest.fixture(scope="session")
def image_ckpt(tmp_path_factory):
    out = tmp_path_factory.mktemp("image_run")
    py("train_image.py", *TINY_IMAGE, "--missing", "1", "--max-steps", "20", "--ckpt-every", "10",
       "--eval-every", "10", "--out", out)
    return out / "ckpt.pt"
