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
    mse = re.search(r"; MSE (\S+) at this t$", out, flags=re.M)
    loss = re.search(r"^  loss at t = 300: (\S+) = 1\.0 x code part (\S+) \+ 0\.1 x content part 0 ", out, flags=re.M)
    assert mse and loss, out
    assert float(loss[1]) > 1e-6 and loss[1] == loss[2] == mse[1]     # shown, not rounded to 0: the MSE above
    assert set(metrics) == {"piece_acc", "puzzle_acc"}
    assert metrics["puzzle_acc"] == 1.0                                   # the shipped model solves the lesson's puzzle
    assert out.rstrip().endswith(f"{metrics['piece_acc']:.0%} of the pieces in place, puzzle solved")
