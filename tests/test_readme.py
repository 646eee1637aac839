"""The README as a user reads it: every command it prints parses with its script's own parser, points at nothing
beside the checkout (no ../shared), and its test line is the one CI runs. The commands' behaviour is tested where
it is built: the Quickstart (test_image.py), the paper commands (test_paper.py), your own pieces (test_pieces.py)."""
import importlib
import os
import re
import shlex

import pytest
from conftest import ROOT

README = open(os.path.join(ROOT, "README.md")).read()
PACKAGES = ("solving", "bench", "sources")           # the project's folders whose modules run with python -m


def readme_commands():
    """(script, flags) for every `python X.py ...` / `torchrun ... X.py ...` / `python -m X.Y ...` (script X/Y.py;
    `-m X`: X/__main__.py) in the README's bash blocks."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split("#")[0].split("&&"):
                words = shlex.split(part)
                while words and re.fullmatch(r"\w+=\S*", words[0]):        # OMP_NUM_THREADS=1 python ...
                    words = words[1:]
                if words[:1] == ["torchrun"]:
                    words = ["python", *words[next(i for i, w in enumerate(words) if w.endswith(".py")):]]
                if words[:1] == ["python"] and words[1:2] and words[1].endswith(".py"):
                    commands.append((words[1], words[2:]))
                elif words[:2] == ["python", "-m"] and len(words) > 2 and words[2].split(".")[0] in PACKAGES:
                    module = words[2].replace(".", "/")                 # a package runs its __main__.py
                    commands.append((module + (".py" if "/" in module else "/__main__.py"), words[3:]))
    return commands


def test_readme_has_commands_for_every_script():
    scripts = {script for script, _ in readme_commands()}
    assert {"sample.py", "train_image.py", "train_video.py", "mnist.py", "solving/own.py"} <= scripts, scripts


@pytest.mark.parametrize("script,flags", readme_commands(), ids=lambda x: x if isinstance(x, str) else
                         " ".join(x[:4])[:60])
def test_readme_command_parses(script, flags):
    assert os.path.exists(os.path.join(ROOT, script)), f"the README runs {script}, which is not at the root"
    module = importlib.import_module(script[:-3].replace("/", "."))
    if flags:
        module.get_parser().parse_args(flags)        # argparse exits (a failed test) on an unknown flag or value


def test_readme_needs_nothing_beside_the_checkout():
    assert "../shared" not in README
    for _, flags in readme_commands():
        for f in flags:
            if f.startswith(("docs/", "checkpoints/")):
                assert os.path.exists(os.path.join(ROOT, f)), f"the README names {f}, which the repository lacks"


def test_readme_scoring_commands_name_their_data():
    """A shipped checkpoint scored on a dataset folder: the command passes --data-dir, or says what it needs."""
    from plumbing.checkpoint import load_checkpoint
    for line in README.splitlines():
        if not line.startswith("python sample.py --ckpt checkpoints/"):
            continue
        words = shlex.split(line.split("#")[0].split("&&")[0])
        ckpt = load_checkpoint(os.path.join(ROOT, words[words.index("--ckpt") + 1]))
        own = {"--data-dir", "--video", "--pieces", "--frames"} & set(words)
        if ckpt["config"].puzzle.data_dir and not own:
            assert "# needs" in line or "# same" in line, line


def test_ci_runs_the_readme_test_line():
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    assert "grep -m1 -E '^python3 -m venv .*python -m pytest' README.md" in ci
    assert re.search(r"^python3 -m venv .*python -m pytest -q tests$", README, flags=re.M)
