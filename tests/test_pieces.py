"""Solve your own pieces: the README's five lines, --pieces and --frames folders with any names, pins, the confidence
(calibration on val, reliability on test) and every bad input's one sentence, with nothing written half."""
import json
import os
import re
import shutil

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from conftest import COFFEE, ROOT, TINY_IMAGE, sample_run, train_image_run
from PIL import Image

from plumbing.cli import UserError
from puzzles import collate
from sources.files import fit_image
from sources.synthetic import moving_digits

PHOTOS_CKPT = os.path.join(ROOT, "checkpoints", "image-photos-3x3.pt")
DIGITS = os.path.join(ROOT, "checkpoints", "video-digits-5x4.pt")


def cut_into_files(folder, photo=COFFEE, side=90, seed=3, keep=9):
    """A photo cut into 3x3 piece files with random names (and random sizes around `side`); returns {name: (r, c)}."""
    img = fit_image(Image.open(photo), 3 * side, 3 * side)
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    truth = {}
    for k in rng.permutation(9)[:keep]:
        r, c = divmod(int(k), 3)
        tile = Image.fromarray((img[r * side:(r + 1) * side, c * side:(c + 1) * side] * 255).round().astype(np.uint8))
        name = f"{rng.integers(16 ** 8):08x}.png"
        tile.resize((int(rng.integers(60, 140)),) * 2).save(folder / name)
        truth[name] = (r, c)
    return truth


def test_readme_cuts_a_photo_and_solves_it_in_five_lines():
    """The README's two snippets, as a user runs them (in tmp_path, conftest): cut a photo, solve its pieces."""
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text[text.index("## Solve your own pieces"):text.index("## Training")]
    cut, solve = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(solve.strip().splitlines()) == 5
    exec(cut.replace("docs/", os.path.join(ROOT, "docs") + "/"), {})
    truth, rng = {}, np.random.default_rng(0)                  # new names, so that sorted names are shuffled pieces
    for name in sorted(os.listdir("my_pieces")):
        new = f"{rng.integers(16 ** 8):08x}.png"
        os.rename(os.path.join("my_pieces", name), os.path.join("my_pieces", new))
        truth[new] = [int(name[0]), int(name[1])]             # the cut's names: row, column
    names = {}
    exec(solve.replace("checkpoints/", os.path.join(ROOT, "checkpoints") + "/"), names)
    assert names["result"].positions.tolist() == [truth[n] for n in sorted(truth)]
    assert Image.open("solved.png").size[0] >= 3 * 100


def test_a_photo_cut_into_files_is_solved(tmp_path):
    truth = cut_into_files(tmp_path / "pieces")
    report = sample_run("--ckpt", PHOTOS_CKPT, "--pieces", tmp_path / "pieces", "--out", tmp_path / "out")
    assert {n: (p["row"], p["col"]) for n, p in report["pieces"].items()} == truth
    written = json.loads((tmp_path / "out" / "arrangement.json").read_text())
    assert written["pieces"] == report["pieces"]
    assert not {"not_a_puzzle", "seam_ratio", "ink_spread"} & set(written)      # the removed check's keys are gone
    side = int(np.median([Image.open(tmp_path / "pieces" / n).size[0] for n in truth]))   # the pieces' own size
    assert Image.open(tmp_path / "out" / "solved.png").size == (3 * side + 4, 3 * side + 4)   # 2 px borders


def test_missing_cells_are_generated_and_outlined(tmp_path):
    cut_into_files(tmp_path / "pieces", keep=7)
    report = sample_run("--ckpt", PHOTOS_CKPT, "--pieces", tmp_path / "pieces", "--steps", "2",
                        "--out", tmp_path / "out")
    assert len(report["pieces"]) == 7 and len(report["generated_cells"]) == 2
    cells = {(p["row"], p["col"]) for p in report["pieces"].values()} | {tuple(c) for c in report["generated_cells"]}
    assert cells == {(r, c) for r in range(3) for c in range(3)}                       # one-to-one


def test_frames_orders_clips_with_any_names(tmp_path):
    """Video: a built-in digits clip cut into 5 clips of 4 frames, saved as GIFs with random names, in order."""
    clip = (moving_digits(np.random.default_rng(11), 20, 32) * 255).astype(np.uint8)
    names = [f"{n:06x}.gif" for n in np.random.default_rng(0).integers(16 ** 6, size=5)]
    (tmp_path / "clips").mkdir()
    for k, name in enumerate(names):
        iio.imwrite(tmp_path / "clips" / name, clip[4 * k:4 * k + 4], duration=100, loop=0)
    with pytest.raises(UserError, match=r"a video model is told which piece comes first, its anchor: pin it"):
        sample_run("--ckpt", DIGITS, "--frames", tmp_path / "clips", "--out", tmp_path / "out")
    report = sample_run("--ckpt", DIGITS, "--frames", tmp_path / "clips", "--pin", f"{names[0]}=0")
    assert report["order"] == names and [report["pieces"][n]["slot"] for n in names] == [0, 1, 2, 3, 4]
    assert json.loads((tmp_path / "clips_solved" / "order.json").read_text())["order"] == names   # next to it
    sure = [report["pieces"][n]["confidence"] for n in names]       # the shipped table, fitted on val clips
    assert report["calibrated"] and sure[0] == 1.0 and all(0 < p < 1 for p in sure[1:])
    assert report["puzzle_confidence"] <= min(sure)


@pytest.mark.parametrize("case", ["empty", "not an image", "too many", "not square", "pin no file", "pin unanchored"])
def test_bad_pieces_get_one_sentence_and_nothing_is_written(case, tmp_path):
    folder = tmp_path / "pieces"
    cut_into_files(folder)
    flags = []
    if case == "empty":
        shutil.rmtree(folder)
        folder.mkdir()
    elif case == "not an image":
        (folder / "notes.txt").write_text("the pieces of my puzzle")
    elif case == "too many":
        flags = ["--grid", "2"]
    elif case == "not square":
        os.remove(folder / sorted(os.listdir(folder))[0])
        Image.new("RGB", (120, 40)).save(folder / "strip.png")
    else:
        flags = ["--pin", "nothing.png=0,0" if case == "pin no file" else f"{sorted(os.listdir(folder))[0]}=0,0"]
    expected = {"empty": "is empty; put the piece files in it", "not an image": "notes.txt in",
                "too many": "9 pieces do not fit a 2x2 grid", "pin unanchored": "trained without --anchor",
                "not square": "piece strip.png is 120x40 px, not roughly square",
                "pin no file": "--pin nothing.png=0,0 names no file"}
    with pytest.raises(UserError, match=re.escape(expected[case])) as e:
        sample_run("--ckpt", PHOTOS_CKPT, "--pieces", folder, *flags, "--out", tmp_path / "out")
    assert "\n" not in str(e.value) and not (tmp_path / "out" / "arrangement.json").exists()
    assert not (tmp_path / "out" / "solved.png").exists()


def test_calibration_on_val_then_confidence_on_test_and_pieces(tmp_path, capsys):
    """A tiny anchored model: --calibrate writes the tables into the checkpoint; a test score reports their
    reliability and ECE; solve(pieces) with a pin gives probabilities."""
    train_image_run(*TINY_IMAGE, "--anchor", "--max-steps", "2", "--eval-every", "0", "--out", tmp_path / "run")
    ckpt = tmp_path / "run" / "ckpt.pt"
    with pytest.raises(UserError, match=r"--calibrate needs at least 100 puzzles to fit on, and would solve 20; "):
        sample_run("--ckpt", ckpt, "--split", "val", "--calibrate", "--num-puzzles", "20", "--out", tmp_path / "few")
    assert not (tmp_path / "few" / "metrics.json").exists()              # refused before anything is solved
    m = sample_run("--ckpt", ckpt, "--split", "val", "--calibrate", "--num-puzzles", "20", "--repeats", "5",
                   "--steps", "2", "--out", tmp_path / "cal")
    calibration = torch.load(ckpt, weights_only=True)["calibration"]
    table = calibration["tables"][0]                                # fitted at 0 missing pieces
    assert calibration == m["calibration"] and calibration["split"] == "val" and table["puzzle"]["pieces"] == 100
    assert table["piece"]["pieces"] == 100 * 3                           # every piece but the anchor
    plain = sample_run("--ckpt", ckpt, "--split", "val", "--num-puzzles", "20", "--repeats", "5", "--steps", "2",
                       "--out", tmp_path / "plain")                     # the evidence had noise of its own
    assert (plain["piece_acc"], plain["passes"]) == (m["piece_acc"], m["passes"])
    assert all(a <= b for a, b in zip(table["piece"]["accuracy"], table["piece"]["accuracy"][1:]))
    with pytest.raises(UserError, match="--calibrate fits the confidence on the val split"):
        sample_run("--ckpt", ckpt, "--calibrate", "--out", tmp_path / "x")
    m = sample_run("--ckpt", ckpt, "--num-puzzles", "20", "--steps", "2", "--out", tmp_path / "test")
    assert 0 <= m["confidence"]["piece"]["ece"] <= 1 and sum(r[2] for r in m["confidence"]["piece"]["rows"]) == 60
    assert "piece confidence: expected calibration error" in capsys.readouterr().out
    import jpdvt
    solver = jpdvt.load(str(ckpt), device="cpu")                 # sampling as the table was fitted: 2 steps
    assert solver.opts.steps == 2 and solver.calibrated()
    pieces = [np.random.default_rng(i).random((8, 8, 3)) for i in range(4)]
    result = solver.solve(pieces, pins={0: (1, 1)})
    assert result.confidence.shape == (4,) and result.confidence[0] == 1.0 and tuple(result.positions[0]) == (1, 1)
    assert all(0 < p < 1 for p in result.confidence[1:]) and 0 < result.puzzle_confidence < 1   # smoothed: never 0/1
    assert result.puzzle_confidence <= result.confidence[1:].min()      # all right is never likelier than one
    assert solver.solve(pieces[:3], pins={0: (1, 1)}).confidence is None     # fitted with no empty cell
    (tmp_path / "three").mkdir()
    for k, p in enumerate(pieces[:3]):
        Image.fromarray((p * 255).astype(np.uint8)).save(tmp_path / "three" / f"{k}.png")
    capsys.readouterr()
    sample_run("--ckpt", ckpt, "--pieces", tmp_path / "three", "--pin", "0.png=1,1", "--out", tmp_path / "t")
    assert "tables describe puzzles with 0 missing pieces, and this one has 1 (sample.py --split val --calibrate " \
           "--missing 1 fits a table)" in capsys.readouterr().out
    sample_run("--ckpt", ckpt, "--split", "val", "--calibrate", "--num-puzzles", "20", "--repeats", "5", "--steps", "2",
               "--missing", "1", "--out", tmp_path / "cal1")               # a table for one missing piece, beside
    tables = torch.load(ckpt, weights_only=True)["calibration"]["tables"]
    assert sorted(tables) == [0, 1] and tables[0] == table
    assert jpdvt.load(str(ckpt), device="cpu").solve(pieces[:3], pins={0: (1, 1)}).confidence is not None
    for pins, message in [({0: (2, 0)}, "outside the 2x2 grid"), ({0: (0, 0), 1: (0, 0)}, "the same cell")]:
        with pytest.raises(UserError, match=message):
            solver.solve(pieces, pins=pins)
    with pytest.raises(UserError, match="float array with values outside"):
        solver.solve([p * 255 for p in pieces], pins={0: (1, 1)})
    m = sample_run("--ckpt", ckpt, "--num-puzzles", "4", "--steps", "3", "--out", tmp_path / "other")
    assert "confidence" not in m and "rerun --split val --calibrate" in capsys.readouterr().out
    m = sample_run("--ckpt", ckpt, "--num-puzzles", "4", "--out", tmp_path / "estimator")   # no sampling flag
    assert (m["steps"], m["sampler"], m["samples"]) == (2, "ddpm", 1) and "confidence" in m   # the table's estimator


def test_calibrate_refuses_a_split_the_model_trained_on(tmp_path, monkeypatch):
    import sample
    monkeypatch.setattr(sample, "split_seen", lambda *a, **k: (True, None))
    with pytest.raises(UserError, match="trained on the val split, so a confidence fitted on it would be optimistic"):
        sample_run("--ckpt", os.path.join(ROOT, "checkpoints", "image-shapes-3x3.pt"), "--split", "val",
                   "--calibrate", "--out", tmp_path / "cal")


def test_pieces_never_fall_below_their_puzzle():
    """P(piece right) = the piece table's value of its margin, raised to P(puzzle right): so the puzzle's never
    exceeds its least sure piece's; a table fitted with other settings or missing pieces gives none."""
    import jpdvt
    solver = jpdvt.load(os.path.join(ROOT, "checkpoints", "image-shapes-3x3.pt"), device="cpu")
    *sampling, (_, missing) = solver.settings().items()
    tables = {"piece": {"margin": [0.0, 1.0], "accuracy": [0.1, 0.9]},
              "puzzle": {"margin": [0.0, 1.0], "accuracy": [0.5, 0.95]}}
    solver.calibration = {"settings": dict(sampling), "split": "val", "tables": {missing: tables}}
    margins = np.array([[0.2, 1.0, 0.8], [0.9, 1.5, 1.2]])           # two puzzles of three pieces
    pieces, whole = solver.confidence(margins.ravel(), margins.min(1), owner=np.repeat([0, 1], 3))
    pieces = pieces.reshape(2, 3)
    assert np.all(whole <= pieces.min(1)) and whole == pytest.approx([0.59, 0.905])
    assert pieces[0] == pytest.approx([0.59, 0.9, 0.74]) and pieces[1] == pytest.approx([0.905, 0.905, 0.905])
    piece, _ = solver.confidence(np.array([0.0, 1.0]), 0.0)
    assert piece == pytest.approx([0.5, 0.9])
    tables["way"] = "unsolved"              # an earlier version's table, fitted on the pieces of unsolved puzzles
    piece, whole = solver.confidence(np.array([0.0, 1.0]), 1.0)
    assert whole == pytest.approx(0.95) and piece == pytest.approx([0.95 + 0.05 * 0.1, 0.95 + 0.05 * 0.9])
    assert solver.confidence([1.0], 1.0, settings={**solver.settings(), "missing": missing + 1}) == (None, None)
    assert solver.mismatch() == "" and solver.differs({**solver.settings(), "missing": 2})["missing"] == ([0], 2)


def test_the_empty_cells_note_names_only_models_trained_without_missing_pieces(tmp_path, capsys):
    cut_into_files(tmp_path / "pieces", keep=7)
    for ckpt, says in (("image-photos-3x3-gap.pt", False), ("image-photos-3x3-missing.pt", False),
                       ("image-photos-3x3.pt", True)):
        steps = ["--steps", "2"] if not says else []                # the table's own 50 steps: only "missing" differs
        sample_run("--ckpt", os.path.join(ROOT, "checkpoints", ckpt), "--pieces", tmp_path / "pieces", *steps,
                   "--out", tmp_path / ckpt)
        out = capsys.readouterr().out
        assert ("this model never trained with missing pieces" in out) == says, ckpt
        use = "for photo pieces of a 3x3 grid with holes use checkpoints/image-photos-3x3-missing.pt"
        assert (use in out) == says, ckpt
        if says:                                        # its confidence tables are for puzzles with none missing
            assert "no confidence: the checkpoint's tables describe puzzles with 0 missing pieces, and this one " \
                   "has 2" in out


def test_an_eps_model_gets_its_evidence_halfway_down_a_ddim_path(tmp_path, monkeypatch):
    """The paper's noise-predicting models: the evidence is the x0 prediction at t = 444 of a DDIM-10 path (one call
    at t = T-1 would divide the noise error by sqrt(alphabar) = 0.0064); calibration and solve(pieces) work."""
    import jpdvt
    train_image_run(*TINY_IMAGE, "--prediction", "eps", "--max-steps", "2", "--eval-every", "0", "--out", tmp_path)
    ckpt = tmp_path / "ckpt.pt"
    solver = jpdvt.load(str(ckpt), device="cpu")
    calls = []
    monkeypatch.setattr(solver.model, "forward", lambda *a, real=solver.model.forward: calls.append(a[2][0].item())
                        or real(*a))
    batch = collate([solver.kind.puzzles("val", 0)[i] for i in range(2)])
    cost = solver.mean_costs(batch)
    assert calls == [999, 888, 777, 666, 555, 444] and torch.isfinite(cost).all()        # stopped once it is in
    monkeypatch.undo()
    whole = {}                                                  # the same x0 as the path run to its end gives there
    solver.costs(batch, callback=lambda i, x, x0: whole.update(code=x0["code"]) if i == 5 else None,
                 opts=jpdvt.SampleOptions(steps=10, sampler="ddim", generator=torch.Generator().manual_seed(0)))
    assert torch.equal(cost, torch.cdist(whole["code"].float(), solver.table[None].float().expand(2, -1, -1)))
    sample_run("--ckpt", ckpt, "--split", "val", "--calibrate", "--num-puzzles", "20", "--repeats", "5", "--steps", "2",
               "--out", tmp_path / "cal")
    result = jpdvt.load(str(ckpt), device="cpu").solve([np.random.default_rng(i).random((8, 8, 3)) for i in range(4)])
    assert result.confidence is not None and np.all((0 < result.confidence) & (result.confidence < 1))


def test_a_removed_result_field_says_what_to_read_instead():
    """The not-a-puzzle check (seam ratios, ink spreads and their gate) was removed: its Result fields name what to
    read instead, in one sentence; any other unknown name is a plain AttributeError."""
    import jpdvt
    result = jpdvt.load(os.path.join(ROOT, "checkpoints", "image-shapes-3x3.pt"), device="cpu").solve(
        [np.random.default_rng(k).random((16, 16, 3)) for k in range(9)])
    for name in ("seam", "ink", "not_one_puzzle", "evidence"):
        with pytest.raises(AttributeError, match=f"Result.{name} was removed with the not-a-puzzle check; "
                                                 "puzzle_confidence says"):
            getattr(result, name)
    assert not hasattr(result, "nothing") and 0 < result.puzzle_confidence < 1
