"""A new user's machine: --device auto on a Mac, a seeded solve, the command line and solving.load agreeing on a bag of
pieces, and a test folder scored when no val split can be formed."""
import contextlib
import json
import os
import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import CHELSEA, COFFEE, ROOT, own_run, sample_run
from PIL import Image

import plumbing.cli as cli
import solving
from config import load_checkpoint
from jpdvt import SampleOptions
from plumbing.cli import UserError, autocast, resolve_device
from solving.bag import CONFIDENCE_SAMPLES
from solving.solver import Solver
from sources.files import fit_image

PHOTOS_CKPT = os.path.join(ROOT, "checkpoints", "image-photos-3x3.pt")


def pieces_of(photo, side=48, seed=0):
    """A photo cut into 3x3 pieces, shuffled: {name: PIL image}, names in the shuffled order."""
    img = fit_image(Image.open(photo), 3 * side, 3 * side)
    tiles = [img[r * side:(r + 1) * side, c * side:(c + 1) * side] for r in range(3) for c in range(3)]
    order = np.random.default_rng(seed).permutation(9)
    return {f"piece{i}.png": Image.fromarray((tiles[k] * 255).round().astype(np.uint8)) for i, k in enumerate(order)}


def test_device_auto_prefers_cuda_then_mps_then_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(cli, "mps_available", lambda: True)
    assert resolve_device("auto").type == "mps"
    assert resolve_device("mps").type == "mps"
    monkeypatch.setattr(cli, "mps_available", lambda: False)
    assert resolve_device("auto").type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cli, "mps_available", lambda: True)
    assert resolve_device("auto").type == "cuda"


def test_device_mps_without_a_mac_gpu_is_one_sentence(monkeypatch):
    monkeypatch.setattr(cli, "mps_available", lambda: False)
    with pytest.raises(UserError, match=r"^--device mps was asked for but this machine has no Apple GPU"):
        resolve_device("mps")
    with pytest.raises(UserError, match="auto, cpu, cuda, cuda:N or mps"):
        resolve_device("metal")


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_auto_precision_is_fp32_on_cpu_and_mps_bf16_on_cuda():
    assert isinstance(autocast(torch.device("mps"), "auto"), contextlib.nullcontext)
    assert isinstance(autocast(torch.device("cpu"), "auto"), contextlib.nullcontext)
    assert autocast(torch.device("cuda"), "auto").fast_dtype == torch.bfloat16


def test_solve_with_a_seed_repeats_itself():
    solver = solving.load(PHOTOS_CKPT, device="cpu")
    pieces = pieces_of(COFFEE)
    first, again = solver.solve(pieces, seed=7), solver.solve(pieces, seed=7)
    assert np.array_equal(first.positions, again.positions)
    assert np.array_equal(first.confidence, again.confidence)
    assert first.puzzle_confidence == again.puzzle_confidence
    gap = solving.load(os.path.join(ROOT, "checkpoints", "image-photos-3x3-gap.pt"), device="cpu")
    gap.opts = replace(gap.opts, samples=2, steps=10)   # its recommended 32 x 50 take 20x the time (8 samples)
    seven = dict(list(pieces_of(CHELSEA).items())[:7])                 # sampled: the noise matters
    calls = [gap.solve(seven) for _ in range(2)]                       # no seed: the solver's (0 from solving.load)
    assert np.array_equal(calls[0].positions, calls[1].positions)
    assert calls[0].image.tobytes() == calls[1].image.tobytes()        # the two generated cells too
    assert np.array_equal(calls[0].positions, gap.solve(seven, seed=0).positions)
    ckpt = load_checkpoint(os.path.join(ROOT, "checkpoints", "image-photos-3x3-gap.pt"))
    bare = Solver(ckpt, ckpt["config"], torch.device("cpu"), SampleOptions(steps=2))   # no generator: one is made
    assert bare.solve(seven, seed=3).positions.shape == (7, 2)
    assert np.array_equal(bare.solve(seven, seed=3).confidence, bare.solve(seven, seed=3).confidence)


def test_command_line_solves_a_bag_as_solving_load_does(tmp_path):
    pieces = pieces_of(CHELSEA, seed=1)
    folder = tmp_path / "bag"
    folder.mkdir()
    for name, im in pieces.items():
        im.save(folder / name)
    report = own_run("--ckpt", PHOTOS_CKPT, "--pieces", folder)
    result = solving.load(PHOTOS_CKPT, device="cpu").solve({n: Image.open(folder / n).convert("RGB")
                                                           for n in sorted(pieces)})
    sampling = torch.load(PHOTOS_CKPT, weights_only=True)["sampling"]            # the checkpoint's recommendation
    assert (report["sampler"], report["steps"]) == (sampling["sampler"], sampling["steps"])
    assert report["samples"] == max(sampling["samples"], CONFIDENCE_SAMPLES) and result.confidence.shape == (9,)
    for (name, got), (row, col), conf in zip(sorted(report["pieces"].items()), result.positions, result.confidence):
        assert (got["row"], got["col"]) == (row, col), name
        assert got["confidence"] == pytest.approx(float(conf), abs=0)
    assert report["puzzle_confidence"] == pytest.approx(result.puzzle_confidence, abs=0)
    saved = json.load(open(tmp_path / "bag_solved" / "arrangement.json"))
    assert saved["puzzle_confidence"] == report["puzzle_confidence"]


def test_a_test_folder_is_scored_when_no_val_split_can_be_formed(tmp_path, capsys):
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    shutil.copy(COFFEE, tmp_path / "train" / "only.jpg")
    shutil.copy(COFFEE, tmp_path / "test" / "a.jpg")
    shutil.copy(CHELSEA, tmp_path / "test" / "b.jpg")
    metrics = sample_run("--ckpt", PHOTOS_CKPT, "--dataset", "folder", "--data-dir", tmp_path, "--num-puzzles", 2,
                         "--steps", 2, "--out", tmp_path / "out")
    assert metrics["num_puzzles"] == 2 and metrics["split"] == "test" and metrics["dataset"] == "folder"
    out = capsys.readouterr().out
    assert "sampling: ddim, 2 steps, " in out and "hungarian assignment" in out and "2 test puzzles x 1 pass(es)" in out
