"""What users met (issue 89): the judge's confidence says what it measures and how many pieces the judge moved, a bag
that is no bag (paths, one image) and pieces far smaller than the model's are refused in one sentence, --out inside
the input is refused, a failed run leaves no output folder, the offline route to MNIST works as the README gives it,
and torch.hub leaves the user's own modules (config, metrics, ...) in sys.modules as it found them."""
import os
import pathlib
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import DIGITS_CKPT, ROOT, SHAPES_CKPT, own_run
from PIL import Image
from test_mnist import GZ, fake_mnist

import mnist as mnist_script
import solving
import sources.mnist as mnist
from plumbing.cli import UserError
from solving.bag import CONFIDENCE_SAMPLES
from solving.solver import Solver


def smooth_pieces():
    """A smooth 48 px picture cut into its 3x3 pieces of 16 px (the shapes model's size), in raster order."""
    y, x = np.mgrid[0:48, 0:48] / 47.0
    picture = np.stack([x, y, x * y], -1)
    return [picture[r * 16:(r + 1) * 16, c * 16:(c + 1) * 16] for r in range(3) for c in range(3)]


def every_sample_swaps_1_and_2(monkeypatch):
    """Every solver's costs: all CONFIDENCE_SAMPLES samples put pieces 1 and 2 in each other's cells."""
    wrong = (1 - torch.eye(9))[[0, 2, 1, *range(3, 9)]]
    monkeypatch.setattr(Solver, "costs", lambda self, batch, given=None, opts=None: (
        torch.stack([wrong] * CONFIDENCE_SAMPLES)[:, None], batch["content"]))


def test_the_judge_s_confidence_says_what_it_measures_and_how_many_pieces_it_moved(monkeypatch, tmp_path, capsys):
    """The samples all swap two pieces, the judge undoes the swap: a fully right board that no sample agrees with.
    The output says the judge moved 2 pieces and that the 0% is the samples' agreement with the judge's board."""
    every_sample_swaps_1_and_2(monkeypatch)
    solver = solving.load(SHAPES_CKPT, device="cpu")
    assert solver.solve(smooth_pieces()).moved is None                   # no judge: the model's own answer
    judged = solver.solve(smooth_pieces(), judge="classic")
    assert judged.positions.tolist() == [list(divmod(k, 3)) for k in range(9)] and judged.moved == 2
    folder = tmp_path / "pieces"
    folder.mkdir()
    for k, piece in enumerate(smooth_pieces()):
        Image.fromarray((piece * 255).round().astype(np.uint8)).save(folder / f"{k}.png")
    report = own_run("--ckpt", SHAPES_CKPT, "--pieces", folder, "--judge", "classic", "--samples", 8, "--out",
                     tmp_path / "out")
    assert report["judge_moved"] == 2 and report["puzzle_confidence"] == 0
    out = capsys.readouterr().out
    assert ("9 pieces solved by the judge, which moved 2 of them from the model's own answer; 0% of the 8 samples "
            "agree with the judge's board on all of it") in out, out
    report = own_run("--ckpt", SHAPES_CKPT, "--pieces", folder, "--samples", 8, "--out", tmp_path / "plain")
    assert report["judge_moved"] is None
    assert "9 pieces solved, 100% of the 8 samples agree on all of it;" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["paths", "path objects", "one image", "one array", "not a collection"])
def test_what_is_not_a_bag_of_pieces_is_refused_in_one_sentence(case):
    solver = solving.load(SHAPES_CKPT, device="cpu")
    given, says = {
        "paths": (["a.png", "b.png"], "piece 0 is a path ('a.png'), not a picture; solve takes the pieces themselves: "
                                      "open the files first (PIL.Image.open)"),
        "path objects": ({"a": pathlib.Path("a.png")}, "piece a is a path ('a.png')"),
        "one image": (Image.new("RGB", (48, 40)), "solve takes a list of pieces (PIL images or (H, W, 3) arrays), "
                                                  "not one image of 48x40 px; cut it into its pieces"),
        "one array": (np.zeros((48, 48, 3)), "not one array of shape (48, 48, 3); cut it into its pieces"),
        "not a collection": (7, "not an object of type int"),
    }[case]
    with pytest.raises(UserError, match=re.escape(says)) as e:
        solver.solve(given)
    assert "\n" not in str(e.value)


def test_pieces_under_half_the_model_s_size_are_refused_naming_the_sizes():
    solver = solving.load(SHAPES_CKPT, device="cpu")                    # 16 px pieces
    tiny = [np.random.default_rng(k).random((7, 8, 3)) for k in range(9)]
    with pytest.raises(UserError, match=re.escape("piece 0 is 8x7 px, less than half this model's 16 px pieces; "
                                                  "pass pieces at least 8 px a side")):
        solver.solve(tiny)
    solver.opts = replace(solver.opts, steps=1)                         # 8 px, half of 16: accepted
    assert solver.solve([np.random.default_rng(k).random((8, 8, 3)) for k in range(9)]).positions.shape == (9, 2)
    video = solving.load(DIGITS_CKPT, device="cpu")                     # 32 px frames
    clips = [np.random.default_rng(k).random((4, 12, 12, 1)) for k in range(5)]
    with pytest.raises(UserError, match=re.escape("piece 0 is 12x12 px, less than half this model's 32 px frames")):
        video.solve(clips, pins={0: 0})


@pytest.mark.parametrize("where", ["the folder", "inside it"])
def test_out_in_the_pieces_folder_is_refused(where, tmp_path):
    folder = tmp_path / "pieces"
    folder.mkdir()
    for k, piece in enumerate(smooth_pieces()):
        Image.fromarray((piece * 255).round().astype(np.uint8)).save(folder / f"{k}.png")
    out = folder if where == "the folder" else folder / "solved"
    with pytest.raises(UserError, match=rf"^--out {re.escape(str(out))} is inside --pieces {re.escape(str(folder))}, "
                                        "where the next run would read what this one writes as input; pass an output "
                                        "folder outside it$"):
        own_run("--ckpt", SHAPES_CKPT, "--pieces", folder, "--out", out)
    assert sorted(os.listdir(folder)) == [f"{k}.png" for k in range(9)]


def test_a_failed_run_leaves_no_output_folder(tmp_path):
    folder = tmp_path / "pieces"
    folder.mkdir()
    for k, piece in enumerate(smooth_pieces() + smooth_pieces()[:1]):  # 10 pieces for the 9 cells
        Image.fromarray((piece * 255).round().astype(np.uint8)).save(folder / f"{k}.png")
    for out in ([], ["--out", tmp_path / "new" / "out"]):
        with pytest.raises(UserError, match="10 pieces do not fit the model's 3x3 grid"):
            own_run("--ckpt", SHAPES_CKPT, "--pieces", folder, *out)
    assert sorted(os.listdir(tmp_path)) == ["pieces"]                   # no pieces_solved/, no new/


def test_the_offline_route_to_mnist_is_in_the_readme_and_works(tmp_path, monkeypatch):
    """The README gives `--mirror file:///FOLDER/` for a machine without the network; it fetches from a local folder
    (md5-checked), and mnist/ is ignored by git."""
    readme = " ".join(open(os.path.join(ROOT, "README.md")).read().split())
    assert "`python mnist.py --download mnist` (offline: put the four MNIST .gz files in a folder, add " \
           "`--mirror file:///path/to/folder/`)" in readme
    monkeypatch.setattr(mnist, "MD5", fake_mnist(tmp_path / "copy"))
    monkeypatch.setattr(mnist, "MIRRORS", ())                           # no network: only the mirror given
    got = mnist_script.main(mnist_script.get_parser().parse_args(
        ["--download", str(tmp_path / "mnist"), "--mirror", (tmp_path / "copy").as_uri() + "/"]))
    assert sorted(got) == sorted(GZ) and sorted(os.listdir(tmp_path / "mnist")) == sorted(GZ)
    ignored = subprocess.run(["git", "check-ignore", "-q", "mnist/train-images-idx3-ubyte.gz"], cwd=ROOT)
    assert ignored.returncode == 0, "mnist/ is not ignored by git"


USER_SCRIPT = """
import sys
import numpy as np
import torch
from dataclasses import replace

import config, metrics                          # the user's own, imported before the load
names = set(NAMES)
def ours_left():
    return sorted(k for k in sys.modules if k.split(".")[0] in names)

solver = torch.hub.load(ROOT, "shapes", source="local", device="cpu")
assert sys.modules["config"] is config and sys.modules["metrics"] is metrics, "the load replaced the user's modules"
import train                                    # the user's own, imported after the load
assert (config.MINE, metrics.MINE, train.MINE) == ("config", "metrics", "train")
assert ours_left() == ["config", "metrics", "train"], ours_left()
solver.opts = replace(solver.opts, steps=2)
pieces = [np.random.default_rng(k).integers(0, 255, (16, 16, 3), dtype=np.uint8) for k in range(9)]
cells = sorted(map(tuple, solver.solve(pieces).positions.tolist()))
assert cells == [(r, c) for r in range(3) for c in range(3)], cells
assert ours_left() == ["config", "metrics", "train"], ours_left()
assert sys.modules["config"] is config and ROOT not in sys.path
import config as again
assert again is config
print("as found")
"""


def test_torch_hub_leaves_the_user_s_modules_as_it_found_them(tmp_path):
    """A user's own config.py and metrics.py imported before torch.hub.load, and train.py after: the load works, their
    modules stay theirs, none of ours is left in sys.modules, and the Solver solves after the restore."""
    for name in ("config", "metrics", "train"):
        (tmp_path / f"{name}.py").write_text(f"MINE = {name!r}\n")
    ours = [f[:-3] for f in os.listdir(ROOT) if f.endswith(".py") and f != "hubconf.py"]
    ours += [d for d in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, d, "__init__.py"))]
    script = f"ROOT = {ROOT!r}\nNAMES = {sorted(ours)!r}\n" + USER_SCRIPT
    (tmp_path / "mine.py").write_text(script)
    proc = subprocess.run([sys.executable, "mine.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0 and "as found" in proc.stdout, proc.stderr[-3000:]
