"""walkthrough.py, lesson 0: one puzzle through the whole method with the shipped shapes model."""
import re

from conftest import ROOT

import walkthrough


def test_walkthrough_prints_every_stage_and_returns_the_metrics(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)                      # as `python walkthrough.py` runs: its checkpoint path is relative
    metrics = walkthrough.main()
    out = capsys.readouterr().out
    stages = [int(n) for n in re.findall(r"^(\d)\. ", out, flags=re.M)]
    assert stages == [1, 2, 3, 4, 5], out
    for name in ("content", "true_pos", "missing", "table", "x0", "x_t", "prediction", "codes", "distances",
                 "positions"):
        assert re.search(rf"^  {name} +\(", out, flags=re.M), name     # every tensor is shown with its shape
    assert re.search(r"^  loss at a random t: \d+\.\d{4} \(code part \d+\.\d{4}\)$", out, flags=re.M)
    assert set(metrics) == {"piece_acc", "puzzle_acc"}
    assert metrics["puzzle_acc"] == 1.0                                   # the shipped model solves the lesson's puzzle
    assert out.rstrip().endswith(f"{metrics['piece_acc']:.0%} of the pieces in place, puzzle solved")
