"""The README's own-pieces recipe ("Solve your own pieces"): a photo cut into files whose names carry no position,
solved, and the answer printed in the same form as the cut's truth, so that a user can compare the two lines."""
import contextlib
import io
import os
import re

import pytest
from conftest import ROOT

CUT = '''\
import os, random
from PIL import Image
photo, side = Image.open("docs/photos/chelsea.jpg"), 100     # 3 x 100 px fits in its 451 x 300 px
x0, y0 = (photo.width - 3 * side) // 2, (photo.height - 3 * side) // 2                      # a centred square
cells = [(r, c) for r in range(3) for c in range(3)]
random.Random(0).shuffle(cells)                       # piece k is cut from cell cells[k]: its name says nothing
os.makedirs("my_pieces", exist_ok=True)
for k, (r, c) in enumerate(cells):
    x, y = x0 + c * side, y0 + r * side
    photo.crop((x, y, x + side, y + side)).save(f"my_pieces/piece{k}.png")
print("expected:", cells)                             # (row, col) of piece0.png, piece1.png, ...
'''

SOLVE = '''\
import glob, solving
from PIL import Image
solver = solving.load("checkpoints/image-photos-3x3.pt")
files = sorted(glob.glob("my_pieces/*.png"))              # piece0.png ... piece8.png
result = solver.solve([Image.open(f) for f in files])
print("found:   ", [tuple(p) for p in result.positions.tolist()])
print(result.confidence, result.puzzle_confidence); result.image.save("solved.png")
'''


def run_snippet(code):
    """exec `code` as the README's reader runs it (from a folder holding the repository's docs/ and checkpoints/);
    returns what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {})
    return out.getvalue()


@pytest.fixture
def checkout(tmp_path):
    """tmp_path (the tests' working folder) with the repository's docs/ and checkpoints/ in it, as a clone has."""
    for name in ("docs", "checkpoints"):
        os.symlink(os.path.join(ROOT, name), tmp_path / name)
    return tmp_path


def printed_cells(text, label):
    """The [(row, col), ...] printed after `label` in text."""
    line = next(s for s in text.splitlines() if s.startswith(label))
    return [tuple(map(int, pair)) for pair in re.findall(r"\((\d+), (\d+)\)", line)]


def test_the_recipe_solves_pieces_whose_names_carry_no_position(checkout):
    expected = printed_cells(run_snippet(CUT), "expected:")
    assert sorted(expected) == [(r, c) for r in range(3) for c in range(3)]
    assert expected != sorted(expected)                        # the files are not in the photo's order
    assert sorted(os.listdir("my_pieces")) == [f"piece{k}.png" for k in range(9)]
    found = printed_cells(run_snippet(SOLVE), "found:")
    assert found == expected
    assert os.path.getsize("solved.png") > 0


def readme_snippets():
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text[text.index("## Solve your own pieces"):]
    section = section[:section.index("\n## ")] if "\n## " in section else section
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


@pytest.mark.skipif("expected:" not in "".join(readme_snippets()[:2]), reason="the README has the older recipe")
def test_the_readme_holds_this_recipe():
    assert readme_snippets()[:2] == [CUT, SOLVE]
