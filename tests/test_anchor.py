"""The anchor's table (jpdvt.py, "The anchor"): jpdvt.told_and_pinned decides which pieces the network is told and
which the assignment pins, for training, sample.py, solving.Solver and super-resolution alike; the network is only
ever told what training showed it: at most one code, a piece with content, and only if it trained with an anchor."""
import ast
import pathlib
import sys

import torch
from conftest import own_run, tiny_run, train_video_run

from jpdvt import anchor_pieces, told_and_pinned
from unet3d import UNet3D

T, F = True, False


def test_told_is_the_first_pin_with_content_and_only_for_a_model_trained_with_an_anchor():
    pinned = torch.tensor([[T, F, T, T], [F, F, F, F], [F, T, F, T], [T, F, T, F]])
    batch = {"missing": torch.tensor([[F, F, F, F], [F, F, F, F], [F, F, F, F], [T, F, F, F]])}
    told, kept = told_and_pinned(batch, pinned, trained_anchor=True)
    assert told.tolist() == [[T, F, F, F], [F, F, F, F], [F, T, F, F], [F, F, T, F]]   # a missing pin is never told
    assert torch.equal(kept, pinned)                                        # every pin holds in the assignment
    told, kept = told_and_pinned(batch, pinned, trained_anchor=False)
    assert not told.any() and torch.equal(kept, pinned)


def test_anchored_test_puzzles_tell_the_anchor_alone():
    batch = {"missing": torch.tensor([[F, T, F], [F, F, T]])}
    told, pinned = told_and_pinned(batch, anchor_pieces(batch, True), trained_anchor=True)
    assert told.tolist() == pinned.tolist() == [[T, F, F], [T, F, F]]


def test_superres_tells_the_network_only_what_training_showed_it(tmp_path_factory, tmp_path, monkeypatch):
    """Super-resolution pins every given piece but tells only the anchor: the network never sees a told piece that
    is missing, nor more than one told piece (training never made either)."""
    ckpt = tiny_run(tmp_path_factory, train_video_run, ["--pieces", "3", "--frames-per-piece", "2", "--size", "16",
                                                        "--batch-size", "4", "--eval-puzzles", "4", "--eval-steps",
                                                        "2", "--warmup", "0", "--workers", "0"], steps=2)
    seen, forward = [], UNet3D.forward                 # 3 pieces: 0 and 2 given, 1 generated

    def spy(self, code, content, t, missing, given):
        seen.append((missing.clone(), given.clone()))
        return forward(self, code, content, t, missing, given)

    monkeypatch.setattr(UNet3D, "forward", spy)
    own_run("--ckpt", ckpt, "--superres", "1", "--num-puzzles", "2", "--steps", "2", "--out", tmp_path)
    assert seen
    for missing, given in seen:
        assert missing[:, 1].all() and not missing[:, [0, 2]].any()      # pieces 0 and 2 given, 1 generated
        assert given[:, 0].all() and given.sum(1).eq(1).all()           # told: the anchor alone
        assert not (missing & given).any()


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
