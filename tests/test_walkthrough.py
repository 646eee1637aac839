"""walkthrough.py, lesson 0: one anchored puzzle with a missing piece through the whole method, with a model trained
on such puzzles."""
import re

import pytest
from conftest import ROOT

import walkthrough


def test_walkthrough_prints_every_stage_and_returns_the_metrics(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)                      # as `python walkthrough.py` runs: its checkpoint path is relative
    metrics = walkthrough.main()
    out = capsys.readouterr().out
    stages = [int(n) for n in re.findall(r"^(\d)\. ", out, flags=re.M)]
    assert stages == [1, 2, 3, 4, 5], out
    for name in ("content", "true_pos", "missing", "given", "table", "x0", "code mask", "content mask", "x_t",
                 "content_t", "prediction", "codes", "distances", "positions"):
        assert re.search(rf"^  {name} +\(", out, flags=re.M), name     # every tensor is shown with its shape
    mse = re.search(r"; MSE (\S+) over the 8 generated codes$", out, flags=re.M)
    loss = re.search(r"^  loss at t = 300: (\S+) = 1\.0 x code part (\S+) \+ 0\.1 x content part (\S+) ", out,
                     flags=re.M)
    assert mse and loss, out
    assert float(loss[2]) > 1e-6 and loss[2] == mse[1]                   # shown, not rounded to 0: the MSE above
    assert float(loss[1]) == pytest.approx(float(loss[2]) + 0.1 * float(loss[3]), rel=0.02)
    assert "(B, N): code told, the anchor (piece 0" in out and "[0, 1, 1, 1, 1, 1, 1, 1, 1]" in out    # the masks
    assert set(metrics) == {"piece_acc", "puzzle_acc"}
    assert metrics["piece_acc"] >= 5 / 7                                  # far above chance (1/7)
    named = re.findall(r"^  piece \d+ \(from cell \d+\) was given cell \d+", out, flags=re.M)
    assert len(named) == round((1 - metrics["piece_acc"]) * 7)          # each placed piece off its cell is named
    assert out.rstrip().endswith(f"{metrics['piece_acc']:.0%} in place, puzzle "
                                 f"{'solved' if metrics['puzzle_acc'] == 1 else 'not solved'}")
