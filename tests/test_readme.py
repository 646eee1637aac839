"""The README and the pages of docs/ as a user reads them: every command they print parses with its script's own
parser, points at nothing beside the checkout (no ../shared), every page they link is there, and the README's test
line is the one CI runs. The commands' behaviour is tested where it is built: the Quickstart (test_image.py), the
paper commands (test_paper.py), your own pieces (test_pieces.py)."""
import importlib
import os
import re
import shlex

import pytest
from conftest import ROOT

README = open(os.path.join(ROOT, "README.md")).read()
DOCS = {f"docs/{f}": open(os.path.join(ROOT, "docs", f)).read()
        for f in sorted(os.listdir(os.path.join(ROOT, "docs"))) if f.endswith(".md")}   # the pages commands moved to
PACKAGES = ("solving", "bench", "sources")           # the project's folders whose modules run with python -m


def bash_commands(text):
    """(script, flags) for every `python X.py ...` / `torchrun ... X.py ...` / `python -m X.Y ...` (script X/Y.py;
    `-m X`: X/__main__.py) in the bash blocks of a page's text."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
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


def readme_commands():
    """(script, flags) of the README's bash blocks."""
    return bash_commands(README)


def docs_commands():
    """(page, script, flags) of the bash blocks of docs/*.md."""
    return [(page, script, flags) for page, text in DOCS.items() for script, flags in bash_commands(text)]


def command_id(x):
    return x if isinstance(x, str) else " ".join(x[:4])[:60]


def check_parses(script, flags, page):
    assert os.path.exists(os.path.join(ROOT, script)), f"{page} runs {script}, which is not at the root"
    module = importlib.import_module(script[:-3].replace("/", "."))
    if flags:
        module.get_parser().parse_args(flags)        # argparse exits (a failed test) on an unknown flag or value


def check_needs_nothing_beside_the_checkout(text, commands, page):
    assert "../shared" not in text, page
    for _, flags in commands:
        for f in flags:
            if f.startswith(("docs/", "checkpoints/")):
                assert os.path.exists(os.path.join(ROOT, f)), f"{page} names {f}, which the repository lacks"


def check_scoring_commands_name_their_data(text):
    """A shipped checkpoint scored on a dataset folder: the command passes --data-dir, or says what it needs."""
    from config import load_checkpoint
    for line in text.splitlines():
        if not line.startswith("python sample.py --ckpt checkpoints/"):
            continue
        words = shlex.split(line.split("#")[0].split("&&")[0])
        ckpt = load_checkpoint(os.path.join(ROOT, words[words.index("--ckpt") + 1]))
        own = {"--data-dir", "--video", "--pieces", "--frames"} & set(words)
        if ckpt["config"].puzzle.data_dir and not own:
            assert "# needs" in line or "# same" in line, line


def test_readme_and_docs_have_commands_for_every_script():
    scripts = {script for script, _ in readme_commands()} | {script for _, script, _ in docs_commands()}
    assert {"sample.py", "train_image.py", "train_video.py", "mnist.py", "solving/own.py"} <= scripts, scripts
    assert {"sample.py", "solving/own.py"} <= {script for script, _ in readme_commands()}


@pytest.mark.parametrize("script,flags", readme_commands(), ids=command_id)
def test_readme_command_parses(script, flags):
    check_parses(script, flags, "the README")


@pytest.mark.parametrize("page,script,flags", docs_commands(), ids=command_id)
def test_docs_command_parses(page, script, flags):
    check_parses(script, flags, page)


def test_readme_needs_nothing_beside_the_checkout():
    check_needs_nothing_beside_the_checkout(README, readme_commands(), "the README")


@pytest.mark.parametrize("page", DOCS)
def test_docs_need_nothing_beside_the_checkout(page):
    check_needs_nothing_beside_the_checkout(DOCS[page], bash_commands(DOCS[page]), page)


def test_readme_scoring_commands_name_their_data():
    check_scoring_commands_name_their_data(README)


@pytest.mark.parametrize("page", DOCS)
def test_docs_scoring_commands_name_their_data(page):
    check_scoring_commands_name_their_data(DOCS[page])


@pytest.mark.parametrize("page", ["README.md", *DOCS])
def test_pages_link_only_to_files_that_exist(page):
    """Every relative link of the README and of docs/*.md ([text](path) or ![alt](path)) reaches a file."""
    text = README if page == "README.md" else DOCS[page]
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue                                              # http(s) links, anchors within the page
        path = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), target.split("#")[0]))
        assert os.path.exists(path), f"{page} links {target}, which the repository lacks"


def test_ci_runs_the_readme_test_line():
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    assert "grep -m1 -E '^python3 -m venv .*python -m pytest' README.md" in ci
    assert re.search(r"^python3 -m venv .*python -m pytest -q tests$", README, flags=re.M)
