"""The paper's method by default, and the mistakes a user's call could hit (issue 82's "found wrong"): the judge only
when asked and never on image pieces without their grid, the anchored protocol told to a network only if it trained
with one, an exact cosine curve on resume, fp32 solving, a solve that does not oversubscribe the cores, and a path
refused where pieces are expected."""
import os
import pathlib

import numpy as np
import pytest
import torch
from conftest import SHAPES_CKPT, TINY_IMAGE, sample_run, train_image_run

import sample
import solving
from dit import DiT
from plumbing.cli import UserError
from puzzles import ImageConfig, VideoConfig
from solving.judge import judge


def test_no_shipped_checkpoint_stores_the_judge():
    for name in sorted(os.listdir(os.path.join(os.path.dirname(SHAPES_CKPT)))):
        if name.endswith(".pt"):
            sampling = torch.load(os.path.join(os.path.dirname(SHAPES_CKPT), name), weights_only=True).get("sampling")
            assert "judge" not in (sampling or {}), name


def test_the_judge_refuses_image_pieces_without_their_grid():
    costs = torch.rand(2, 1, 4, 4)                                       # (S, B, N, P)
    content, missing, pinned = torch.rand(1, 4, 3, 8, 8), torch.zeros(1, 4, dtype=bool), torch.full((1, 4), -1)
    with pytest.raises(ValueError, match="needs the grid"):
        judge(costs, content, missing, pinned, "hungarian", VideoConfig())   # images read as clips: refused
    assert sorted(judge(costs, content, missing, pinned, "hungarian", ImageConfig(grid=(2, 2)))[0]) == [0, 1, 2, 3]


def test_anchored_scoring_of_a_model_trained_without_an_anchor_tells_the_network_nothing(monkeypatch, tmp_path):
    """--anchor on the shapes model (trained without one): no code is told to the network (it never saw one), the
    anchor keeps its true cell in the assignment and is not scored."""
    told, forward = [], DiT.forward

    def spy(self, code, content, t, missing, given):
        told.append(bool(given.any()))
        return forward(self, code, content, t, missing, given)
    monkeypatch.setattr(DiT, "forward", spy)
    m = sample_run("--ckpt", SHAPES_CKPT, "--num-puzzles", "4", "--steps", "2", "--samples", "1", "--anchor",
                   "--out", tmp_path)
    assert told and not any(told)
    assert m["anchor"] is True and m["anchor_told_to_network"] is False and 0 <= m["piece_acc"] <= 1


def test_resume_refuses_a_new_end_under_the_cosine_schedule(tmp_path):
    train_image_run(*TINY_IMAGE, "--max-steps", "2", "--schedule", "cosine", "--eval-every", "0", "--out", tmp_path)
    with pytest.raises(UserError, match="--max-steps 4 cannot change on --resume under --schedule cosine"):
        train_image_run("--resume", tmp_path / "ckpt.pt", "--max-steps", "4")


def test_solving_runs_in_fp32_unless_asked():
    assert sample.get_parser().parse_args(["--ckpt", "x.pt"]).precision == "fp32"
    assert solving.load(SHAPES_CKPT, device="cpu").precision == "fp32"


def test_a_solve_does_not_oversubscribe_the_cores_and_restores_the_count(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    solver = solving.load(SHAPES_CKPT, device="cpu")
    torch.set_num_threads(cores + 1)                                     # a process's own, busier setting
    inside = []
    pieces = [np.random.default_rng(k).integers(0, 255, (16, 16, 3), dtype=np.uint8) for k in range(9)]
    try:
        solver.solve(pieces, callback=lambda *a: inside.append(torch.get_num_threads()))
        assert set(inside) == {max(1, cores - 1)}                       # a core left free while solving
        assert torch.get_num_threads() == cores + 1                      # and the process's count back after
    finally:
        torch.set_num_threads(1)


def test_a_path_is_refused_where_pieces_are_expected():
    solver = solving.load(SHAPES_CKPT, device="cpu")
    for path in ("my_pieces/", pathlib.Path("my_pieces"), b"my_pieces"):
        with pytest.raises(UserError, match="solve takes the pieces themselves .* not a path"):
            solver.solve(path)


def test_torch_hub_serves_each_shipped_checkpoint_from_any_folder(monkeypatch, tmp_path):
    root = os.path.dirname(os.path.dirname(SHAPES_CKPT))
    monkeypatch.chdir(tmp_path)
    names = {f[:-3] for f in os.listdir(os.path.join(root, "checkpoints")) if f.endswith(".pt")}
    import hubconf
    assert {hubconf.CHECKPOINTS[e] for e in hubconf.CHECKPOINTS if callable(getattr(hubconf, e))} == names
    solver = torch.hub.load(root, "shapes", source="local", device="cpu")
    pieces = [np.random.default_rng(k).integers(0, 255, (16, 16, 3), dtype=np.uint8) for k in range(9)]
    assert sorted(map(tuple, solver.solve(pieces).positions.tolist())) == [(r, c) for r in range(3) for c in range(3)]
