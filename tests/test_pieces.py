"""Solve your own pieces: the README's five lines, --pieces and --frames folders with any names, pins, the confidence
(the agreement between samples) and every bad input's one sentence, with nothing written half."""
import json
import os
import re
import shutil
from dataclasses import replace

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from conftest import (
    COFFEE,
    ROOT,
    SHAPES_CKPT,
    TINY_IMAGE,
    own_run,
    sample_run,
    train_image_run,
)
from PIL import Image

from plumbing.cli import UserError
from solving.bag import CONFIDENCE_SAMPLES, agreement
from sources.files import fit_image
from sources.synthetic import moving_digits

PHOTOS_CKPT = os.path.join(ROOT, "checkpoints", "image-photos-3x3.pt")
PHOTOS_5X5 = os.path.join(ROOT, "checkpoints", "image-photos-5x5.pt")
DIGITS = os.path.join(ROOT, "checkpoints", "video-digits-5x4.pt")


def cut_into_files(folder, photo=COFFEE, side=90, seed=3, keep=9, grid=3):
    """A photo cut into grid x grid piece files with random names (and random sizes around `side`); returns
    {name: (r, c)}."""
    img = fit_image(Image.open(photo), grid * side, grid * side)
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    truth = {}
    for k in rng.permutation(grid * grid)[:keep]:
        r, c = divmod(int(k), grid)
        tile = Image.fromarray((img[r * side:(r + 1) * side, c * side:(c + 1) * side] * 255).round().astype(np.uint8))
        name = f"{rng.integers(16 ** 8):08x}.png"
        tile.resize((int(rng.integers(60, 140)),) * 2).save(folder / name)
        truth[name] = (r, c)
    return truth


def test_a_photo_cut_into_files_is_solved(tmp_path):
    truth = cut_into_files(tmp_path / "pieces")
    report = own_run("--ckpt", PHOTOS_CKPT, "--pieces", tmp_path / "pieces", "--out", tmp_path / "out")
    assert {n: (p["row"], p["col"]) for n, p in report["pieces"].items()} == truth
    written = json.loads((tmp_path / "out" / "arrangement.json").read_text())
    assert written["pieces"] == report["pieces"]
    assert not {"not_a_puzzle", "seam_ratio", "ink_spread"} & set(written)      # the removed check's keys are gone
    side = int(np.median([Image.open(tmp_path / "pieces" / n).size[0] for n in truth]))   # the pieces' own size
    assert Image.open(tmp_path / "out" / "solved.png").size == (3 * side + 4, 3 * side + 4)   # 2 px borders


def test_a_photo_cut_into_25_files_is_solved_by_the_5x5_model_with_the_judge(tmp_path):
    truth = cut_into_files(tmp_path / "pieces", side=60, keep=25, grid=5)
    report = own_run("--ckpt", PHOTOS_5X5, "--pieces", tmp_path / "pieces", "--judge", "classic",
                     "--out", tmp_path / "out")
    assert {n: (p["row"], p["col"]) for n, p in report["pieces"].items()} == truth


def test_missing_cells_are_generated_and_outlined(tmp_path):
    cut_into_files(tmp_path / "pieces", keep=7)
    report = own_run("--ckpt", PHOTOS_CKPT, "--pieces", tmp_path / "pieces", "--steps", "2",
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
        own_run("--ckpt", DIGITS, "--frames", tmp_path / "clips", "--out", tmp_path / "out")
    report = own_run("--ckpt", DIGITS, "--frames", tmp_path / "clips", "--pin", f"{names[0]}=0")
    assert report["order"] == names and [report["pieces"][n]["slot"] for n in names] == [0, 1, 2, 3, 4]
    assert json.loads((tmp_path / "clips_solved" / "order.json").read_text())["order"] == names   # next to it
    sure = [report["pieces"][n]["confidence"] for n in names]       # the share of the 8 samples that agree
    assert report["samples"] == CONFIDENCE_SAMPLES and "calibrated" not in report
    assert sure[0] == 1.0 and all(0 <= p <= 1 and p * 8 == round(p * 8) for p in sure)   # the pinned first piece
    assert report["puzzle_confidence"] <= min(sure)


@pytest.mark.parametrize("case", ["empty", "not an image", "too many", "not square", "pin no file"])
def test_bad_pieces_get_one_sentence_and_nothing_is_written(case, tmp_path):
    folder = tmp_path / "pieces"
    cut_into_files(folder)
    flags = []
    if case == "empty":
        shutil.rmtree(folder)
        folder.mkdir()
    elif case == "not an image":
        (folder / "notes.txt").write_text("the pieces of my puzzle")
    elif case == "too many":                                   # a tenth piece for the 9 cells
        shutil.copy(folder / sorted(os.listdir(folder))[0], folder / "extra.png")
    elif case == "not square":
        os.remove(folder / sorted(os.listdir(folder))[0])
        Image.new("RGB", (120, 40)).save(folder / "strip.png")
    else:
        flags = ["--pin", "nothing.png=0,0"]
    expected = {"empty": "is empty; put the piece files in it", "not an image": "notes.txt in",
                "too many": "10 pieces do not fit the model's 3x3 grid",
                "not square": "piece strip.png is 120x40 px, not roughly square",
                "pin no file": "--pin nothing.png=0,0 names no file"}
    with pytest.raises(UserError, match=re.escape(expected[case])) as e:
        own_run("--ckpt", PHOTOS_CKPT, "--pieces", folder, *flags, "--out", tmp_path / "out")
    assert "\n" not in str(e.value) and not (tmp_path / "out" / "arrangement.json").exists()
    assert not (tmp_path / "out" / "solved.png").exists()


def test_a_bag_with_pins_gets_the_agreement_of_its_samples(tmp_path):
    """A tiny anchored noise-predicting model (the paper's text): solve(pieces) with a pin keeps the pinned piece on its
    cell (confidence 1), every confidence is a share of the 8 samples, the same seed gives the same answer, and bad
    pins and pixels are refused in one sentence."""
    import solving
    train_image_run(*TINY_IMAGE, "--anchor", "--prediction", "eps", "--max-steps", "2", "--eval-every", "0",
                    "--out", tmp_path / "run")
    solver = solving.load(str(tmp_path / "run" / "ckpt.pt"), device="cpu")
    solver.opts = replace(solver.opts, steps=2)
    pieces = [np.random.default_rng(i).random((8, 8, 3)) for i in range(4)]
    result = solver.solve(pieces, pins={0: (1, 1)}, seed=5)
    assert result.confidence.shape == (4,) and result.confidence[0] == 1.0 and tuple(result.positions[0]) == (1, 1)
    assert all(0 <= p <= 1 and p * 8 == round(p * 8) for p in result.confidence)
    assert result.puzzle_confidence <= result.confidence.min()         # all right is never likelier than one
    again = solver.solve(pieces, pins={0: (1, 1)}, seed=5)
    assert np.array_equal(again.positions, result.positions) and np.array_equal(again.confidence, result.confidence)
    three = solver.solve(pieces[:3], pins={0: (1, 1)})                  # a cell left empty: still a confidence each
    assert three.confidence.shape == (3,) and three.confidence[0] == 1.0 and len(three.generated) == 1
    for pins, message in [({0: (2, 0)}, "outside the 2x2 grid"), ({0: (0, 0), 1: (0, 0)}, "the same cell")]:
        with pytest.raises(UserError, match=message):
            solver.solve(pieces, pins=pins)
    with pytest.raises(UserError, match="float array with values outside"):
        solver.solve([p * 255 for p in pieces], pins={0: (1, 1)})


def test_sampling_defaults_to_the_checkpoints_recommendation(tmp_path):
    """sample.py and solving.load sample as the checkpoint's "sampling" says (chosen on val), else as
    SampleOptions' defaults; flags given win."""
    import solving
    train_image_run(*TINY_IMAGE, "--max-steps", "1", "--eval-every", "0", "--out", tmp_path / "run")
    ckpt = tmp_path / "run" / "ckpt.pt"
    assert "sampling" not in torch.load(ckpt, weights_only=True)              # a training run recommends nothing
    solver = solving.load(str(ckpt), device="cpu")
    recommended = {"steps": 2, "sampler": "ddim", "samples": 2, "assign": "greedy"}
    torch.save({**torch.load(ckpt, weights_only=True), "sampling": recommended}, tmp_path / "rec.pt")
    solver = solving.load(str(tmp_path / "rec.pt"), device="cpu")
    assert {k: getattr(solver.opts, k) for k in recommended} == recommended
    m = sample_run("--ckpt", tmp_path / "rec.pt", "--num-puzzles", "2", "--out", tmp_path / "s")
    assert {k: m[k] for k in recommended} == recommended
    m = sample_run("--ckpt", tmp_path / "rec.pt", "--num-puzzles", "2", "--samples", "1", "--out", tmp_path / "s")
    assert (m["steps"], m["sampler"], m["samples"], m["assign"]) == (2, "ddim", 1, "greedy")


def test_agreement_is_the_share_of_samples_that_agree():
    """A piece's confidence is the share of the samples that, each assigned on its own (pins kept), put it where the
    answer does; the puzzle's the share that agree on every piece, so never above its least sure piece's."""
    eye = np.eye(3) * -1 + 1                                             # piece i nearest cell i
    swap = eye[[1, 0, 2]]                                               # pieces 0 and 1 swapped
    costs = np.stack([eye, eye, eye, swap])                              # (S, N, P): 3 of 4 samples say the identity
    answer = np.arange(3)
    conf, whole = agreement(costs, answer, np.full(3, -1), "hungarian", 3)
    assert conf.tolist() == [0.75, 0.75, 1.0] and whole == 0.75
    conf, whole = agreement(costs, answer, np.array([0, -1, -1]), "hungarian", 3)   # piece 0 pinned to cell 0
    assert conf.tolist() == [1.0, 1.0, 1.0] and whole == 1.0
    conf, whole = agreement(costs, answer, np.full(3, -1), "hungarian", 2)        # only the first 2 have content
    assert conf.tolist() == [0.75, 0.75] and whole == 0.75


def test_solver_confidence_is_the_agreement_of_its_samples(monkeypatch):
    """Solver.solve samples at least CONFIDENCE_SAMPLES times and reports the agreement of those samples: with costs
    where 6 of 8 samples put pieces 1 and 2 where the answer does, their confidence is 0.75 (image bags) and the
    video bag's likewise."""
    import solving
    solver = solving.load(SHAPES_CKPT, device="cpu")
    solver.opts = replace(solver.opts, samples=1)           # below CONFIDENCE_SAMPLES, the mean decides
    seen = []
    cost = 1 - torch.eye(9)
    other = cost[[0, 2, 1, *range(3, 9)]]                                 # pieces 1 and 2 swapped

    def costs(batch, given=None, opts=None):
        seen.append(opts.samples)
        return torch.stack([cost] * 6 + [other] * 2)[:, None], batch["content"]
    monkeypatch.setattr(solver, "costs", costs)
    result = solver.solve([np.random.default_rng(k).random((16, 16, 3)) for k in range(9)])
    assert seen == [CONFIDENCE_SAMPLES] and result.positions.tolist() == [list(divmod(k, 3)) for k in range(9)]
    assert result.confidence.tolist() == [1.0, 0.75, 0.75, *[1.0] * 6] and result.puzzle_confidence == 0.75
    video = solving.load(DIGITS, device="cpu")
    clip_cost = 1 - torch.eye(5)
    monkeypatch.setattr(video, "costs", lambda batch, given, opts=None: (torch.stack(
        [clip_cost] * 7 + [clip_cost[[0, 1, 2, 4, 3]]])[:, None], None))
    clips = [np.random.default_rng(k).random((4, 32, 32, 1)) for k in range(5)]
    result = video.solve(clips, pins={0: 0})
    assert result.positions.tolist() == [0, 1, 2, 3, 4] and result.confidence.tolist() == [1, 1, 1, 0.875, 0.875]
    assert result.puzzle_confidence == 0.875


def test_the_empty_cells_note_names_only_models_trained_without_missing_pieces(tmp_path, capsys):
    cut_into_files(tmp_path / "pieces", keep=7)
    for ckpt, says in (("image-photos-3x3-gap.pt", False), ("image-photos-3x3-missing.pt", False),
                       ("image-photos-3x3.pt", True)):
        own_run("--ckpt", os.path.join(ROOT, "checkpoints", ckpt), "--pieces", tmp_path / "pieces", "--steps", "2",
                "--out", tmp_path / ckpt)
        out = capsys.readouterr().out
        assert ("this model never trained with missing pieces" in out) == says, ckpt
        use = "for photo pieces of a 3x3 grid with holes use checkpoints/image-photos-3x3-missing.pt"
        assert (use in out) == says, ckpt
        assert any(f"of the {k} samples agree on all of it" in out for k in (8, 16)), out    # at least 8, or stored


def test_a_pin_on_a_model_trained_without_an_anchor_holds_in_the_assignment_only(monkeypatch):
    """The photo model never saw a told code: a pinned piece keeps its cell in the assignment, and the network is told
    nothing (as sample.py --anchor on such a model)."""
    import solving
    from dit import DiT
    told, forward = [], DiT.forward

    def spy(self, code, content, t, missing, given):
        told.append(bool(given.any()))
        return forward(self, code, content, t, missing, given)
    monkeypatch.setattr(DiT, "forward", spy)
    solver = solving.load(SHAPES_CKPT, device="cpu")
    solver.opts = replace(solver.opts, steps=2)
    pieces = [np.random.default_rng(k).integers(0, 255, (16, 16, 3), dtype=np.uint8) for k in range(9)]
    assert solver.solve(pieces, pins={4: (2, 1)}).positions[4].tolist() == [2, 1]
    assert told and not any(told)


def test_the_judge_settles_a_bag_the_samples_all_get_wrong(monkeypatch):
    """solve(pieces, judge="classic"): every sample swaps two pieces of a smooth picture; the paper's assignment keeps
    the swap, the judge's search undoes it because the borders fit better, and the confidence says the samples
    disagreed with that answer."""
    import solving
    solver = solving.load(SHAPES_CKPT, device="cpu")
    y, x = np.mgrid[0:48, 0:48] / 47.0
    picture = np.stack([x, y, x * y], -1)                                # (48, 48, 3) in [0, 1], smooth
    pieces = [picture[r * 16:(r + 1) * 16, c * 16:(c + 1) * 16] for r in range(3) for c in range(3)]
    wrong = (1 - torch.eye(9))[[0, 2, 1, *range(3, 9)]]                  # every sample: pieces 1 and 2 swapped
    monkeypatch.setattr(solver, "costs", lambda batch, given=None, opts=None: (
        torch.stack([wrong] * CONFIDENCE_SAMPLES)[:, None], batch["content"]))
    truth = [list(divmod(k, 3)) for k in range(9)]
    assert solver.solve(pieces).positions.tolist() != truth
    judged = solver.solve(pieces, judge="classic")
    assert judged.positions.tolist() == truth and judged.confidence[1] == judged.confidence[2] == 0
