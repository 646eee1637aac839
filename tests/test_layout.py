"""
The repository's shape, as the design card states it: the method files at the root import nothing of the folders a
reader may skip (solving/, plumbing/, bench/) at module level (sample.py imports the judge only when asked), the data
sources depend on no other part of the project, the README keeps its order and writes nothing into docs/, and no
committed checkpoint carries a training state.
"""
import ast
import os
import re
import subprocess

import pytest
import torch
from conftest import ROOT

METHOD = ("posenc", "diffusion", "dit", "unet3d", "puzzles", "metrics", "jpdvt")
PROJECT = {*METHOD, "train", "train_image", "train_video", "sample", "walkthrough", "mnist", "sources", "solving",
           "plumbing", "configs", "bench", "config", "pictures", "hubconf"}
README = open(os.path.join(ROOT, "README.md")).read()


def module_imports(path, anywhere=False):
    """The project modules a file imports, as dotted names: at module level, or `anywhere` (inside functions too)."""
    tree = ast.parse(open(path).read())
    names = []
    for node in ast.walk(tree) if anywhere else tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module)
    return [n for n in names if n.split(".")[0] in PROJECT]


@pytest.mark.parametrize("name", METHOD)
def test_method_files_import_only_the_method_and_the_data_sources(name):
    for module in module_imports(os.path.join(ROOT, name + ".py")):
        assert module in METHOD or module.startswith("sources."), f"{name}.py imports {module} at module level"


def test_data_sources_depend_on_nothing_of_the_project_but_the_error_class():
    folder = os.path.join(ROOT, "sources")
    for file in sorted(f for f in os.listdir(folder) if f.endswith(".py")):
        for module in module_imports(os.path.join(folder, file)):
            assert module.startswith("sources") or module == "plumbing.cli", f"sources/{file} imports {module}"


def test_nothing_outside_bench_and_tests_imports_bench():
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    for file in files:
        if not file.startswith(("bench/", "tests/")):
            imported = module_imports(os.path.join(ROOT, file), anywhere=True)
            assert not any(n.split(".")[0] == "bench" for n in imported), f"{file} imports bench"


def test_readme_sections_in_the_order_a_newcomer_needs():
    sections = re.findall(r"^## (.+)$", README, flags=re.M)
    assert sections == ["Try it in a minute", "Quickstart", "Results", "How to read this code", "Solve your own pieces",
                        "Differences from the paper"], sections


def test_sample_py_reaches_the_judge_only_when_asked_and_plumbing_never_imports_train():
    """sample.py's module level imports nothing of solving/ (the judge, an option, is imported inside); no file of
    plumbing/ imports train.py (the settings a checkpoint stores live in config.py)."""
    tree = ast.parse(open(os.path.join(ROOT, "sample.py")).read())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = [a.name for n in top if isinstance(n, ast.Import) for a in n.names] + \
            [n.module for n in top if isinstance(n, ast.ImportFrom)]
    assert not [n for n in names if n.startswith("solving")], names
    for f in os.listdir(os.path.join(ROOT, "plumbing")):
        if f.endswith(".py"):
            src = open(os.path.join(ROOT, "plumbing", f)).read()
            assert not re.search(r"^\s*(from train import|import train\b)", src, flags=re.M), f


WRITES_DOCS = re.compile(r"(^|[\s;&|])(cp|mv|ln|rsync)\s.*\sdocs(/|\s|$)|--out[=\s]+docs\b|>\s*docs/"
                         r"|python -m bench\b|bench/\S+\.sh")  # bench's commands make the docs' pictures


def test_no_readme_command_writes_into_docs():
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S):
        for line in block.splitlines():
            assert not WRITES_DOCS.search(line.split("#")[0]), line


@pytest.mark.parametrize("line", ["cp out/a.gif docs/", "cp a docs/b.png && ls", "python x.py --out=docs/x",
                                  "python -m bench missing-curve", "bash bench/pictures.sh", "echo > docs/a",
                                  "python -m solving.animate --ckpt c.pt --out docs"])
def test_the_docs_check_catches_each_way_of_writing_there(line):
    assert WRITES_DOCS.search(line)
    assert not WRITES_DOCS.search("python -m solving.animate --ckpt c.pt --image docs/photos/a.jpg --out my_animation")


def test_no_committed_checkpoint_holds_a_training_state():
    """Shipped checkpoints hold the EMA weights only: no network weights to resume, no optimizer, no scaler."""
    files = subprocess.run(["git", "ls-files", "*.pt"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    for file in files:
        ckpt = torch.load(os.path.join(ROOT, file), map_location="cpu", weights_only=True)
        assert ckpt["ema"] and not ckpt.get("model") and not ckpt.get("opt") and not ckpt.get("scaler"), file
