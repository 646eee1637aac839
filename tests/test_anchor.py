"""The anchor's table (jpdvt.py, "The anchor"): jpdvt.told_and_pinned decides which pieces the network is told and
which the assignment pins, for training, sample.py, solving.Solver and super-resolution alike; the network is only
ever told what training showed it: at most one code, a piece with content, and only if it trained with an anchor."""
import ast
import pathlib
import sys

import numpy as np
import pytest
import torch
from conftest import DIGITS_CKPT, own_run, sample_run, train_video_run

import bench.superres
import solving
from jpdvt import anchor_pieces, pinned_pieces, told_and_pinned
from plumbing.cli import UserError
from puzzles import ImageConfig, VideoConfig, VideoPuzzles
from unet3d import UNet3D

T, F = True, False


def test_told_is_the_first_pin_with_content_and_only_for_a_model_trained_with_an_anchor():
    pinned = torch.tensor([[T, F, T, T], [F, F, F, F], [F, T, F, T], [T, F, T, F]])
    batch = {"missing": torch.tensor([[F, F, F, F], [F, F, F, F], [F, F, F, F], [T, F, F, F]])}
    told, kept = told_and_pinned(batch, pinned, ImageConfig(anchor=True))
    assert told.tolist() == [[T, F, F, F], [F, F, F, F], [F, T, F, F], [F, F, T, F]]   # a missing pin is never told
    assert torch.equal(kept, pinned)                                        # every pin holds in the assignment
    told, kept = told_and_pinned(batch, pinned, ImageConfig(anchor=False))
    assert not told.any() and torch.equal(kept, pinned)
    told, kept = told_and_pinned(batch, pinned, VideoConfig(pieces=5, superres=1))   # super-resolution: every pin
    assert torch.equal(told, pinned & ~batch["missing"]) and torch.equal(kept, pinned)


def test_anchored_test_puzzles_tell_the_anchor_alone():
    batch = {"missing": torch.tensor([[F, T, F], [F, F, T]])}
    told, pinned = told_and_pinned(batch, anchor_pieces(batch, True), ImageConfig(anchor=True))
    assert told.tolist() == pinned.tolist() == [[T, F, F], [T, F, F]]


def test_superres_puzzles_miss_the_pieces_between_every_other_one_in_training_and_test():
    for split in ("train", "test"):
        puzzles = VideoPuzzles(VideoConfig(pieces=5, frames_per_piece=1, size=16, superres=1), split)
        for i in range(3):
            item = puzzles[i]
            assert torch.equal(item["missing"], item["true_pos"] % 2 == 1)
            assert torch.equal(pinned_pieces(item_batch(item), puzzles.cfg)[0], ~item["missing"])


def item_batch(item):
    return {k: v[None] for k, v in item.items()}


def patterns(calls):
    """The (told and given, told and missing, untold and given, untold and missing) piece counts of each puzzle the
    network saw in `calls` [(missing, told) (B, N) bool], as a set."""
    out = set()
    for missing, told in calls:
        for m, g in zip(missing.tolist(), told.tolist()):
            pairs = list(zip(g, m))
            out.add(tuple(pairs.count(p) for p in ((T, F), (T, T), (F, F), (F, T))))
    return out


@pytest.mark.parametrize("pattern", [["--missing", "1"], ["--superres", "1"]])
def test_superres_tells_the_network_only_what_training_showed_it(tmp_path, monkeypatch, pattern):
    """Super-resolution (3 pieces: 0 and 2 given, 1 generated) feeds the network only the told / missing combinations
    its training did: a model trained with a piece missing at random is told the anchor alone, one trained on the
    super-resolution pattern every given piece."""
    seen, forward = [], UNet3D.forward

    def spy(self, code, content, t, missing, given):
        seen.append((missing.clone(), given.clone()))
        return forward(self, code, content, t, missing, given)

    monkeypatch.setattr(UNet3D, "forward", spy)
    train_video_run("--pieces", "3", "--frames-per-piece", "2", "--size", "16", "--batch-size", "8", "--eval-puzzles",
                    "4", "--eval-steps", "2", "--warmup", "0", "--workers", "0", "--max-steps", "2", "--out",
                    tmp_path / "run", *pattern)
    trained, seen[:] = patterns(seen), []
    own_run("--ckpt", tmp_path / "run" / "ckpt.pt", "--superres", "1", "--num-puzzles", "2", "--steps", "2", "--out",
            tmp_path)
    assert seen and patterns(seen) <= trained, (patterns(seen), trained)
    for missing, given in seen:
        assert missing[:, 1].all() and not missing[:, [0, 2]].any()      # pieces 0 and 2 given, 1 generated
        assert given[:, 0].all() and given[:, 2].eq(pattern[0] == "--superres").all()
    final = (tmp_path / "run" / "log.txt").read_text().splitlines()[-1]       # the held-out check: every given piece
    assert final.startswith("final step 2 psnr " if pattern[0] == "--superres" else "final step 2 kendall ")  # pinned


@pytest.fixture
def superres_ckpt(tmp_path):
    """The shipped 5-piece digits model's checkpoint marked as trained on the super-resolution pattern (K = 1): what
    is refused is refused before anything is sampled, so the weights need not have learned it."""
    ckpt = torch.load(DIGITS_CKPT, map_location="cpu", weights_only=True)
    ckpt["config"]["puzzle"]["superres"] = 1
    torch.save(ckpt, tmp_path / "superres.pt")
    return tmp_path / "superres.pt"


def test_a_super_resolution_model_orders_no_bag_of_clips(superres_ckpt):
    """Told every given piece's place, it would keep the input order of python -m solving.own --frames."""
    clips = [np.zeros((4, 32, 32, 1), np.float32) for _ in range(5)]
    with pytest.raises(UserError, match=r"^a bag of clips cannot be ordered by a super-resolution model \(trained "
                                        r"with --superres 1.*python -m solving.own --superres 1, or .* without"):
        solving.load(str(superres_ckpt), "cpu").solve(clips, pins={0: 0})


def test_sample_refuses_a_super_resolution_model_and_bench_superres_any_other(superres_ckpt):
    """sample.py's order would measure nothing (every given piece is pinned): bench.superres measures its frames,
    and refuses a model without the super-resolution pattern."""
    with pytest.raises(UserError, match=r"is a super-resolution model, .*; measure its generated frames' PSNR with "
                                        r"python -m bench.superres --ckpt .*superres.pt$"):
        sample_run("--ckpt", superres_ckpt, "--missing", "1")
    args = bench.superres.get_parser().parse_args(["--ckpt", DIGITS_CKPT])
    with pytest.raises(UserError, match=r"was not trained for super-resolution.*train_video.py --superres K$"):
        bench.superres.main(args)


def test_plumbing_imports_nothing_of_the_method():
    """plumbing/ is what every script shares and depends on no project file: the standard library and torch only."""
    root = pathlib.Path(__file__).resolve().parents[1]
    for path in (root / "plumbing").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for name in names:
                top = name.split(".")[0]
                assert top == "torch" or top in sys.stdlib_module_names, f"{path.name} imports {name}"
