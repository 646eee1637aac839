"""The benchmark's records stay runnable: every command in bench/results.json and every recipe parses with today's
scripts (a flag that was removed must take its rows and recipes with it, to git history: bench/README.md)."""
import json
import os
import runpy
import shlex
import sys
import warnings

import numpy as np
import pytest
import torch

import sample
import train_image
import train_video
from bench.recipes import RECIPES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARSERS = {"train_image.py": train_image.get_parser, "train_video.py": train_video.get_parser,
           "sample.py": sample.get_parser}


def script_args(command):
    """'OMP_NUM_THREADS=1 python sample.py --ckpt x' (or torchrun ... sample.py ...) -> ('sample.py', ['--ckpt', 'x']);
    None for a command that runs no .py file (`python -m`, `python -c`, a clone's size)."""
    tokens = shlex.split(command)
    if "python" in tokens and tokens[tokens.index("python") + 1] in ("-m", "-c"):
        return None
    scripts = [i for i, t in enumerate(tokens) if t.endswith(".py")]
    return (tokens[scripts[0]], tokens[scripts[0] + 1:]) if scripts else None


def recorded_commands():
    with open(os.path.join(ROOT, "bench", "results.json")) as f:
        rows = json.load(f)
    # rows of a removed flag stay as measurements ("removed" says which flag and why), their commands no longer run
    return sorted({row[k] for row in rows.values() for k in ("command", "eval") if row.get(k) and "removed" not in row})


def parses(script, args):
    try:
        PARSERS[script]().parse_args(args)
    except SystemExit:                                  # argparse's error: a flag that no longer exists
        return False
    return True


def test_recorded_commands_parse():
    stale = [c for c in recorded_commands() if (parsed := script_args(c)) and not parses(*parsed)]
    assert not stale, f"results.json rows whose commands no longer run: {stale}"


def test_recipes_parse():
    for name, (script, flags, evals) in RECIPES.items():
        assert parses(script, flags + ["--out", "x"]), name
        assert all(parses("sample.py", ["--ckpt", "x"] + extra) for extra in evals), name


BENCH = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "bench")) if f.endswith(".py") and f != "__init__.py")


@pytest.mark.parametrize("name", BENCH)
def test_every_bench_module_answers_help(name, monkeypatch, capsys):
    """`python -m bench.X --help` works: each module imports with today's API and reads its flags before any work (a
    module without a command line just imports)."""
    module = "bench" if name == "__main__" else f"bench.{name}"
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    threads = torch.get_num_threads()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)          # runpy: the module was imported already
            runpy.run_module(module, run_name="__main__")
    except SystemExit as e:
        assert e.code in (0, None), capsys.readouterr().err
        assert "usage:" in capsys.readouterr().out
    finally:
        torch.set_num_threads(threads)


def test_report_tables_keep_their_columns():
    """bench/report.py: every line of a table has its header's cells, whether the rows share one machine (said once,
    under the table, after a blank line) or not (a machine column), recipes' repeated evaluations included."""
    from bench.report import table
    row = {"group": "recipes", "command": "python train_video.py", "train_minutes": 2.0,
           "metrics": {"kendall": 0.1, "exact": 0.5, "num_puzzles": 200}}
    gpu = {**row, "machine": "1 NVIDIA H200 + 16 CPU cores"}
    for rows, one in [({"r": {**row, "machine": "2 CPU cores"}, "r--split val": {**row, "machine": "2 CPU cores"}},
                       True), ({"r": {**row, "machine": "2 CPU cores"}, "r--split val": gpu}, False)]:
        lines = table(rows, "recipe", recipes=True)
        body = [line for line in lines if line.startswith("|")]
        assert len({line.count("|") for line in body}) == 1, lines
        assert ("machine" in body[0]) is not one
        assert one is (lines[-3:] == ["", "Machine: 2 CPU.", ""])


def test_hand_run_rows_print_their_commands_short():
    """bench/report.py: a hand-run row's thread setting goes to the machine column, and its scoring command on the
    run's own checkpoint reads `sample.py ...`; another checkpoint's command is printed whole."""
    from bench.report import seconds, short_machine, shown_command
    row = {"machine": "2 CPU cores", "command": "OMP_NUM_THREADS=1 python train_image.py --out runs/qs",
           "eval": "python sample.py --ckpt runs/qs/ckpt.pt --split val"}
    assert shown_command(row) == "`python train_image.py --out runs/qs`<br>`sample.py --split val`"
    assert short_machine(row) == "2 CPU, 1 thr"
    other = {**row, "eval": "python sample.py --ckpt runs/other/ckpt.pt"}
    assert shown_command(other).endswith("<br>`python sample.py --ckpt runs/other/ckpt.pt`")
    assert shown_command({"command": "python sample.py --ckpt a.pt"}) == "`python sample.py --ckpt a.pt`"
    threads = {"command": "python train_image.py --out=runs/qs/",
               "eval": "OMP_NUM_THREADS=2 python sample.py --ckpt runs/qs/ckpt.pt"}   # --out=DIR/, its threads
    assert shown_command(threads).endswith("<br>`sample.py`")
    for near in ("runs/qs/ckpt.pt.bak", "runs/qXs/ckpt.pt"):                              # not the run's checkpoint
        row = {"command": "python train_image.py --out runs/q.s", "eval": f"python sample.py --ckpt {near}"}
        assert shown_command(row).endswith(f"`python sample.py --ckpt {near}`")
    assert [seconds(x) for x in (0.0006312, 3.391, 123.4)] == ["0.00063", "3.4", "123"]


def test_candidate_val_scores_more_clips_beside_the_shipped_model(monkeypatch, tmp_path):
    """`candidate-val --clips N --estimator E`: the candidate and the shipped model of its name, on the same N val
    clips, with E only (of --seed: its own rows); without --clips, the candidate alone on 200 clips with every
    estimator."""
    import argparse

    import bench.__main__ as bench_main
    calls = []
    monkeypatch.setattr(bench_main, "finished", lambda recipe, out: recipe == "video-mmnist-10x2-batch32-lr5e-4-18k")
    monkeypatch.setattr(bench_main, "scored", lambda group, key, command: calls.append((key, command)))
    monkeypatch.setattr(bench_main, "render", lambda: None)
    args = argparse.Namespace(export=None, list=False, names=["candidate-val"], only=None, out=str(tmp_path),
                              clips=1000, estimator=["ddpm-50 x4"], seed=1)
    bench_main.main(args)
    assert [key for key, _ in calls] == [
        "candidate-val video-mmnist-10x2-batch32-lr5e-4-18k ddpm-50 x4 (1000 clips)",
        "candidate-val video-mmnist-10x2 (shipped) ddpm-50 x4 (1000 clips)"]
    for _, command in calls:
        assert command[command.index("--num-puzzles") + 1] == "1000" and command.count("--num-puzzles") == 1
        assert command[command.index("--samples") + 1] == "4" and "val" in command
    assert calls[1][1][calls[1][1].index("--ckpt") + 1] == "checkpoints/video-mmnist-10x2.pt"
    calls.clear()
    bench_main.main(argparse.Namespace(**{**vars(args), "seed": 2}))      # fresh clips: the seed in the rows and runs
    assert [key for key, _ in calls] == [
        "candidate-val video-mmnist-10x2-batch32-lr5e-4-18k ddpm-50 x4 (1000 clips, seed 2)",
        "candidate-val video-mmnist-10x2 (shipped) ddpm-50 x4 (1000 clips, seed 2)"]
    assert all(c[c.index("--seed") + 1] == "2" and "seed-2" in c[-1] for _, c in calls)
    calls.clear()
    bench_main.main(argparse.Namespace(**{**vars(args), "clips": None, "estimator": None}))
    assert len(calls) == 3 and all(c[c.index("--num-puzzles") + 1] == "200" for _, c in calls)
    assert not any("(shipped)" in key for key, _ in calls)


def test_seed_is_refused_where_no_row_would_carry_it():
    """`--seed` names the rows of `candidate-val --clips N` only: anywhere else it would be ignored, or would
    overwrite seed 1's rows, so it stops before anything runs."""
    import argparse

    import bench.__main__ as bench_main
    def bench(names, clips=None):       # --list: should the guard fail, nothing is scored
        return bench_main.main(argparse.Namespace(export=None, list=True, names=names, only=None, out="runs/bench",
                                                  clips=clips, estimator=None, seed=2))
    for names in (["fresh-seed"], ["candidate-val"]):
        with pytest.raises(SystemExit, match="--seed: only `candidate-val --clips N` reads it"):
            bench(names)
    assert bench(["candidate-val"], clips=5) is None


def test_training_minutes_count_a_resumed_run_from_its_resume_step(tmp_path, image_ckpt):
    """bench's logged_minutes reads the log lines train.py writes: a resume starts the count at its step; the flags
    bench --resume passes are all accepted by --resume (training.resume.resume)."""
    from bench.__main__ import RESUMABLE, logged_minutes
    from training.resume import resume
    log = tmp_path / "log.txt"
    log.write_text("step 100 loss 1.0 lr 1e-3 steps/s 10.00 data wait 0%\n"
                   "resuming at step 100\n"
                   "step 160 loss 0.5 lr 1e-3 steps/s 2.00 data wait 0%\n")
    assert logged_minutes(str(log)) == pytest.approx((100 / 10 + 60 / 2) / 60)
    values = {"--max-steps": "9", "--eval-every": "0", "--ckpt-every": "9", "--workers": "0", "--out": tmp_path}
    assert set(values) == set(RESUMABLE)                                # a value here for every flag bench passes
    flags = [str(v) for f in RESUMABLE for v in (f, values[f])]
    config, _ = resume(train_image.get_parser().parse_args(["--resume", str(image_ckpt), *flags]), kind="image")
    assert (config.train.max_steps, config.train.ckpt_every, config.train.eval_every) == (9, 9, 0)


def test_clip_errors_are_classed():
    from bench.clip_errors import error_kind, error_kinds
    assert error_kind([0, 1, 2, 3, 4, 5]) is None
    assert error_kind([0, 2, 1, 3, 4, 5]) == "adjacent swap"
    assert error_kind([0, 4, 2, 3, 1, 5]) == "swap"
    assert error_kind([0, 4, 3, 2, 1, 5]) == "reversed run"
    assert error_kind([0, 2, 3, 4, 1, 5]) == "one piece moved"
    assert error_kind([0, 2, 1, 4, 3, 5]) == "other"
    true = np.tile(np.arange(6), (2, 1))
    pred = np.array([[0, 2, 1, 3, 4, 5], [0, 1, 2, 3, 4, 5]])               # positions: slot of each piece
    assert error_kinds(pred, true) == {"adjacent swap": 1, "swap": 0, "reversed run": 0, "one piece moved": 0,
                                       "other": 0}


def test_superres_blend_is_exact_on_frames_that_change_linearly_and_psnr_scores_the_missing_frames_alone():
    from bench.superres import blend, in_slots, psnr
    t = torch.arange(5 * 2, dtype=torch.float32).view(1, 5, 2, 1, 1, 1) / 10 - 0.5     # 5 pieces x 2 frames, linear
    content = t.expand(1, 5, 2, 1, 3, 3).clone()
    keep = np.array([True, False, True, False, True])
    assert torch.allclose(blend(content, keep), content, atol=1e-6)
    wrong = content.clone()
    wrong[:, 0] += 1                                                  # a given piece: not scored
    assert psnr(wrong, content, keep).item() == pytest.approx(100.0)  # the 1e-10 floor: a perfect match
    wrong[:, 1] += 0.2                                                # a missing piece off by 0.1 of [0, 1]
    assert psnr(wrong, content, keep).item() == pytest.approx(10 * np.log10(1 / (0.1 ** 2 / 2)), rel=1e-4)
    swapped = in_slots(content[:, [0, 3, 2, 1, 4]], np.array([[0, 3, 2, 1, 4]]))    # each piece to its slot
    assert torch.equal(swapped, content)
