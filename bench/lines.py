"""
How much Python a reader faces: the lines of the committed .py files outside tests/ and bench/, split into the method
files a student reads first (README, "How to read this code"), the rest of the root, and each folder.

    python -m bench lines          # a row "lines: Python outside tests/ and bench/ at COMMIT" in bench/results.json
"""
import subprocess

from bench.report import ROOT

READ_FIRST = ("walkthrough.py", "posenc.py", "diffusion.py", "jpdvt.py", "dit.py", "unet3d.py", "puzzles.py",
              "metrics.py")


def git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def count():
    """(commit, {lines, root_lines, read_first_lines, FOLDER_lines}) of HEAD's committed .py files outside tests/
    and bench/, each file as committed; read_first_lines: READ_FIRST, the files a student reads first (README, "How
    to read this code")."""
    commit = git("rev-parse", "--short", "HEAD").strip()
    parts = {"lines": 0, "root_lines": 0, "read_first_lines": 0}
    for path in git("ls-tree", "-r", "--name-only", "HEAD").split():
        if not path.endswith(".py") or path.startswith(("tests/", "bench/")):
            continue
        n = len(git("show", f"HEAD:{path}").splitlines())
        part = path.split("/")[0] + "_lines" if "/" in path else "root_lines"
        parts["lines"] += n
        parts[part] = parts.get(part, 0) + n
        parts["read_first_lines"] += n if path in READ_FIRST else 0
    return commit, parts
