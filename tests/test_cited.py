"""Every figure the pages cite has its row, and the row's command still runs something of this repository.

A page cites rows in backticks after the word "row" or "rows" (`rows `a`, `b` and `c``). A cited name may hold
placeholders: NAME, N, S, W, ... stand for any text, `...` for anything, and `[x]` for an optional x (a span that is a
file's path points to a page, not a row). Each must name at least one row of bench/results.json, and each row it names
must have a command whose script (`python X.py`) or module (`python -m X`; `python -m bench NAME`: a recipe or group of
bench) exists: a row whose script left bench/ leaves with it, or its page stops citing it. And every bench/ or solving/
file a page names exists (outside `git show` commands).
"""
import ast
import glob
import importlib.util
import json
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md", *sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))),
         "bench/README.md"]
PLACEHOLDERS = {"NAME", "RUN", "PREDICTION", "S", "N", "W", "BATCH", "PRECISION", "SAMPLER", "ESTIMATOR", "FILL",
                "SOLVER", "ENERGY"}
CITE = re.compile(r"\b[Rr]ows?:?\s+(`[^`]+`(?:(?:\s*[,;]\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+)`[^`]+`)*)")


def page(name):
    with open(os.path.join(ROOT, name)) as f:
        return f.read()


def cited(text):
    """The row names a page cites, whitespace (line breaks) made single spaces."""
    return [" ".join(s.split()) for m in CITE.finditer(text) for s in re.findall(r"`([^`]+)`", m.group(1))]


def pattern(name):
    """A cited row name as a regular expression over row names."""
    out = []
    for tok in re.findall(r"\.\.\.|\[|\]|[A-Z]+(?![a-z])|[A-Za-z]?[a-z0-9_]+|.", name):
        out.append({"...": ".*", "[": "(?:", "]": ")?"}.get(tok) or (".+?" if tok in PLACEHOLDERS else re.escape(tok)))
    return re.compile("".join(out))


with open(os.path.join(ROOT, "bench", "results.json")) as f:
    ROWS = json.load(f)
CITED = sorted({(p, name) for p in PAGES for name in cited(page(p))
                if not os.path.exists(os.path.join(ROOT, name))})       # `row: `docs/x.md``: a page, not a row


def bench_names():
    """The names `python -m bench NAME` runs: recipes.py's RECIPES and __main__.py's GROUPS (read, not imported)."""
    names = set()
    for file, var in (("recipes.py", "RECIPES"), ("__main__.py", "GROUPS")):
        tree = ast.parse(page(os.path.join("bench", file)))
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == var for t in node.targets):
                names |= set(ast.literal_eval(node.value) if var == "GROUPS" else
                             [k.value for k in node.value.keys])
    return names


BENCH = bench_names()


def missing_script(command):
    """What a row's command runs that is not here (None if all is): the first `python X.py` or `python -m X`."""
    m = re.search(r"\bpython3?\s+(?:-m\s+([\w.]+)(?:\s+([\w-]+))?|(\S+\.py)\b)", command)
    if not m:
        return None                                          # `python -c ...`, `git clone ...`: no file to name
    module, arg, script = m.groups()
    if script:
        return None if os.path.exists(os.path.join(ROOT, script)) else script
    path = os.path.join(ROOT, *module.split("."))
    if module == "bench":
        return None if arg is None or arg.startswith("-") or arg in BENCH else f"python -m bench {arg}"
    if os.path.exists(path + ".py") or os.path.exists(os.path.join(path, "__main__.py")):
        return None
    here = os.path.exists(os.path.join(ROOT, module.split(".")[0])) or \
        os.path.exists(os.path.join(ROOT, module.split(".")[0] + ".py"))
    return module if here or importlib.util.find_spec(module) is None else None


def test_the_pages_cite_rows():
    assert len(CITED) > 50, CITED                            # the citation format is still the pages' own


@pytest.mark.parametrize("where, name", CITED)
def test_each_cited_row_is_recorded_with_a_command_that_exists(where, name):
    rows = [k for k in ROWS if pattern(name).fullmatch(k)]
    assert rows, f"{where} cites row `{name}`, which bench/results.json does not hold"
    for key in rows:
        for command in (ROWS[key]["command"], ROWS[key].get("eval", "")):
            assert not missing_script(command), f"{where}: row {key!r} runs {missing_script(command)}, not here"


def test_the_check_catches_a_missing_row_and_a_removed_script():
    assert cited("rows `a b`, `c NAME` and `d`; row `e`, from `f`") == ["a b", "c NAME", "d", "e"]
    assert pattern("judge NAME test ...: K N, model alone").fullmatch("judge x test seed 1 (9 clips): K 4, model alone")
    assert pattern("baseline 24px[ gap 8], mgc").fullmatch("baseline 24px, mgc")
    assert not pattern("throughput dit-base bBATCH bf16").fullmatch("throughput dit-base b64 fp32")
    assert missing_script("OMP_NUM_THREADS=1 python -m bench.eps_curves runs/eps") == "bench.eps_curves"
    assert missing_script("python -m bench no-such-group") == "python -m bench no-such-group"
    assert missing_script("python gone.py --x 1") == "gone.py"
    assert not missing_script("python -m bench baselines") and not missing_script("python -m pytest -q tests")
    assert not missing_script("python sample.py --ckpt a.pt") and not missing_script("python -m bench.judge --ckpt a")


PATHS = re.compile(r"(?<![\w/.:-])((?:bench|solving)/[\w./-]*\w)|python -m ((?:bench|solving)\.\w+)")


@pytest.mark.parametrize("where", PAGES)
def test_every_bench_or_solving_file_a_page_names_exists(where):
    text = re.sub(r"git show \w+:\S+", "", page(where))
    named = {p or m.replace(".", "/") + ".py" for p, m in PATHS.findall(text)}
    assert not [p for p in named if not os.path.exists(os.path.join(ROOT, p))], where
