"""
The benchmark's record: rows in bench/results.json (one per evaluation, baseline or measurement, each with its
command, machine, date, training minutes and metrics) and the log written from them, bench/BENCHMARKS.md: a table per
group (the command that reproduces a group written once, above its table; every row's exact command stays in
results.json). `python -m bench` with no names only rewrites the log. results.json keeps the rows that the pages
cite (README.md, docs/, bench/README.md; tests/test_cited.py checks them); the decisions they carry are docs/choices.md.
"""
import fcntl
import json
import os
import re
import shlex
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))      # the repository root, parent of bench/
RESULTS = os.path.join(ROOT, "bench", "results.json")
HISTORY = "39cc19a"           # the last commit whose results.json holds the rows no page cites (bench/README.md)


def load_results():
    if os.path.exists(RESULTS):
        with open(RESULTS) as f:
            return json.load(f)
    return {}


def machine():
    """What a row ran on: the GPU when one is visible (training scripts pick it by default), else the CPU."""
    import torch
    cpu = f"{os.cpu_count()} CPU cores"
    return f"1 {torch.cuda.get_device_name()} + {cpu}" if torch.cuda.is_available() else cpu


def ckpt_name(path):
    """A row's name for checkpoint `path`: its file's name; a training run's ckpt.pt: its run folder's."""
    name = os.path.splitext(os.path.basename(path))[0]
    return os.path.basename(os.path.dirname(os.path.abspath(path))) if name == "ckpt" else name


def with_threads(command):
    """A row's command as a user would type it: after the thread setting it ran under, if one was set."""
    threads = os.environ.get("OMP_NUM_THREADS")
    return (f"OMP_NUM_THREADS={threads} " if threads else "") + command


def this_command(module):
    """The command of this run of `python -m module`, its arguments quoted, with its thread setting."""
    return with_threads(f"python -m {module} " + shlex.join(sys.argv[1:]))


def save_result(key, row):
    """Add or replace one row; a lock file beside results.json lets several runs write rows at once."""
    row.setdefault("machine", machine())
    row["date"] = time.strftime("%Y-%m-%d")
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = load_results()
        results[key] = row
        with open(RESULTS + ".tmp", "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(RESULTS + ".tmp", RESULTS)


KEYS = ["piece_acc", "puzzle_acc", "kendall", "exact", "kendall_rev", "mae", "rmse", "sec_per_puzzle", "steps_per_s",
        "gflop_per_step", "tflop_per_s", "mfu", "puzzles_per_s_ddim50", "images_per_s", "workers", "batch", "params_M",
        "estimated_gib", "params_M_min", "params_M_max", "passed", "skipped", "test_suite_seconds",
        "wall_minutes_whole_command"]


def seconds(x):
    """2 significant digits, whole seconds from 10 on (not 1e+02)."""
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def values(m):
    """A row's metrics as printed: 4 significant digits (integers whole; seconds a puzzle 2: timings on a shared
    machine are noisy), the confidence's ECE (piece, puzzle) 3 decimals."""
    shown = {k: str(m[k]) if type(m[k]) is int else seconds(m[k]) if k == "sec_per_puzzle" else f"{m[k]:.4g}"
             for k in KEYS if k in m}
    conf = m.get("confidence") or {}
    return shown | {f"{part} ECE": f"{conf[part]['ece']:.3f}" for part in ("piece", "puzzle") if part in conf}


# group -> (title, the command that reproduces its rows; None: each row's own command, hand-run rows)
GROUPS = {
    "recipes": ("Recipes (train + score)",
                "`python -m bench RECIPE` trains a recipe (`bench/recipes.py`), then scores it with `sample.py "
                "--num-puzzles 200 --seed 1 --sampler ddim` and the evaluation's flags (`--score-only`: scores again)"),
    "intervals": ("The shipped checkpoints on test with 95% intervals (the README's Results, docs/)",
                  "`python -m bench.intervals DIR` on the folder of `python sample.py --ckpt checkpoints/NAME.pt "
                  "--seed 1 --out DIR` and the page's flags (bench/README.md)"),
    "judge": ("The judge over samples (docs/judge.md; its val choices: docs/choices.md)",
              "`python -m bench.judge --ckpt CKPT --split SPLIT ...`, one run per setting (each row's exact command: "
              "results.json)"),
    "confidence": ("The confidence of your own pieces (val), and the gap model with 32 samples (test)", None),
    "ensemble": ("The gap model with one sample a puzzle", "`python -m bench ensemble`"),
    "assign": ("Assignment: the Hungarian method against the paper's greedy rule", "`python -m bench assign`"),
    "drawn": ("The drawn pieces against simple fills (val)", "`python -m bench.drawn CKPT --missing K`"),
    "baselines": ("The classic solvers on the same puzzles",
                  "`python -m bench baselines` (`val` rows: `baselines-val`); exhaustive placement"),
    "tree-check": ("Gallagher's tree placement against exhaustive placement, both on MGC (photos, 3 x 3, test)",
                   "`python -m bench tree-check`"),
    "search-time": ("The judge's search: seconds per puzzle on real candidates",
                    "`OMP_NUM_THREADS=1 python -m bench.search_time --ckpt CKPT --data-dir DIR --num-puzzles 20`"),
    "superres": ("Temporal super-resolution: the generated frames' PSNR beside a blend of the given neighbours",
                 "`python -m bench.superres --ckpt CKPT --split SPLIT --seed SEED --clips 100`"),
    "fresh-seed": ("The README's video figures: each shipped video model once, its own estimator, test clips of a "
                   "seed no choice has seen", "`python -m bench fresh-seed` (frame chaining: `fresh-seed-baselines`)"),
    "one-call val": ("The sampler on val: DDIM-50 against DDPM-50", "`python -m bench one-call-val`"),
    "candidate-val": ("Moving MNIST candidates and their estimators on val clips",
                      "`python -m bench candidate-val` (`--clips 1000`, `--seed 2`: the rows that say so)"),
    "eps-vs-x0": ("eps against x0: held-out val checks of training runs", None),
    "throughput": ("Throughput", "`python -m bench throughput` (`--device cuda`: the (cuda) row; the (NVIDIA H200) "
                                 "rows: `bench/gpu.py`, recorded by `python -m bench gpu-record`), `memory-estimate`"),
    "loader": ("Data loading (pictures a second)", "`python -m bench loader-imagenet`, `loader-prepared`; the design "
                                                   "card's row: its own command, on a lent GPU"),
    "quickstart": ("The Quickstart and the tests, as the README runs them", None),
    "walkthrough": ("The walkthrough's model (`checkpoints/image-shapes-3x3-anchor-missing.pt`)", None),
    "pictures": ("The README's pictures", None),
    "repository": ("The repository", None),
}


def short_machine(row):
    """'2 CPU cores' -> '2 CPU', '1 NVIDIA H200 + 16 CPU cores (torch ...)' -> 'H200', with the command's thread
    setting (OMP_NUM_THREADS=N -> ', N thr')."""
    m = row["machine"]
    gpu = re.match(r"1 (.+?) \+", m)
    short = gpu.group(1).split()[-1] if gpu else m.replace(" CPU cores", " CPU")
    threads = re.match(r"OMP_NUM_THREADS=(\d+) ", row["command"])
    return short + (f", {threads.group(1)} thr" if threads else "")


def shown_command(row):
    """A hand-run row's commands as printed: the training's thread setting left to the machine column, and a scoring
    command on the run's own checkpoint (`[OMP_NUM_THREADS=N ]python sample.py --ckpt OUT/ckpt.pt ...`, OUT the
    training's --out) as `sample.py ...`; any other command is printed whole."""
    command = re.sub(r"^OMP_NUM_THREADS=\d+ ", "", row["command"])
    out = re.search(r"--out[ =](\S+?)/?(?=\s|$)", command)
    score = row.get("eval", "")
    if score and out:
        own = rf"^(?:OMP_NUM_THREADS=\d+ )?python sample\.py --ckpt {re.escape(out.group(1))}/ckpt\.pt(?=\s|$)"
        score = re.sub(own, "sample.py", score)
    historic = " (historic: it needs a removed flag or check)" if row.get("removed") else ""
    return f"`{command}`" + (f"<br>`{score}`" if score else "") + historic


def kind(m):
    return "image" if "piece_acc" in m and "puzzle_acc" in m else "video" if "kendall" in m else "other"


def minutes(m):
    """Training minutes as shown: one decimal, blank where a row did not record them."""
    return "" if m is None else f"{m:.1f}"


def table(rows, first, recipes=False, own_commands=False):
    """One table of `rows`, a column per metric they report; `first` heads the column of row names. With `recipes`
    (recipe rows, named RECIPE--FLAGS), a recipe's evaluations share its name, training minutes and machine, given on
    its first line; with own_commands, each row's command (the hand-run rows)."""
    shown = {k: values(v["metrics"]) for k, v in rows.items()}
    cols = [c for c in KEYS + ["piece ECE", "puzzle ECE"] if any(c in s for s in shown.values())]
    trained = any(v.get("train_minutes") for v in rows.values())       # rows that only score have none
    counted = any("num_puzzles" in v["metrics"] for v in rows.values())
    machines = {short_machine(v) for v in rows.values()}
    one = machines.pop() if len(machines) == 1 else None             # then said once, under the table
    head = [first] + ["evaluation"] * bool(recipes) + cols + ["n"] * counted + ["train min"] * trained
    head += ["machine"] * (one is None)
    head += ["command"] * own_commands
    lines, previous = ["| " + " | ".join(head) + " |", "| --- " * len(head) + "|"], None
    for key, v in sorted(rows.items()) if recipes else rows.items():
        name, _, extra = key.partition("--") if recipes else (key, "", "")
        m, again = v["metrics"], recipes and name == previous
        cells = ["" if again else name] + [("--" + extra) if extra else ""] * bool(recipes)
        cells = [c.strip() for c in cells] + [shown[key].get(c, "") for c in cols]
        cells += [str(m.get("num_puzzles", "-"))] * counted
        cells += ([""] * (trained + (one is None)) if again else
                  [minutes(v.get("train_minutes", 0))] * trained + [short_machine(v)] * (one is None))
        cells += [shown_command(v)] * own_commands
        lines.append("| " + " | ".join(cells) + " |")
        previous = name
    return lines + (["", f"Machine: {one}.", ""] if one else [""])


def group_tables(group, rows, own_commands):
    """A group's tables: image rows, video rows and others apart; baselines one line per setting and solver."""
    if group == "baselines":
        return baseline_rows(rows)
    lines = []
    for part in ("image", "video", "other"):
        some = {k: v for k, v in rows.items() if kind(v["metrics"]) == part}
        if some:
            lines += table(some, "recipe" if group == "recipes" else "row", group == "recipes", own_commands)
    return lines


def pair(m):
    return " / ".join(f"{m[k]:.4g}" for k in ("piece_acc", "puzzle_acc", "kendall", "exact") if k in m)


def baseline_rows(rows):
    """One line per puzzle setting, one column per solver (row `baseline SETTING: SOLVER`)."""
    grid, solvers = {}, []
    for key, v in rows.items():
        setting, _, solver = key.removeprefix("baseline ").rpartition(": ")
        solvers += [solver] if solver not in solvers else []
        grid.setdefault(setting, {})[solver] = v["metrics"]
    lines = ["| baseline SETTING | n | " + " | ".join(solvers) + " |", "| --- " * (len(solvers) + 2) + "|"]
    for setting, cells in sorted(grid.items()):
        n = next(iter(cells.values())).get("num_puzzles", "-")
        lines.append(f"| {setting} | {n} | " + " | ".join(pair(cells[s]) if s in cells else "" for s in solvers)
                     + " |")
    return lines + [""]


def render():
    results = load_results()
    lines = ["# Benchmarks", "",
             f"Older rows, and this log with all of them: `git show {HISTORY}:bench/BENCHMARKS.md`.", "",
             "Written by `python -m bench` from `bench/results.json` (each row's command, machine, date): the rows "
             "that the README, `docs/` and `bench/README.md` cite. Test puzzles: fresh seeds (`--seed 1` "
             "unless said), disjoint from training; photo rows: 8 passes over the 39 test photos (or the 22 val "
             "photos). Fractions; Kendall distances strict; n: puzzles per pass; train min: wall minutes. Machine: CPU "
             "cores or GPU (under a table when its rows share it); thr: `OMP_NUM_THREADS`; hand-run rows' "
             "`sample.py`: `python sample.py --ckpt OUT/ckpt.pt`, OUT the run's `--out`. One run each.", ""]
    groups = list(GROUPS) + sorted({v["group"] for v in results.values()} - set(GROUPS))
    for group in groups:
        rows = {k: v for k, v in results.items() if v["group"] == group}
        if not rows:
            continue
        title, how = GROUPS.get(group, (group, None))
        lines += [f"## {title}", ""] + ([f"Reproduce: {how}.", ""] if how else [])
        lines += group_tables(group, rows, how is None)
    with open(os.path.join(ROOT, "bench", "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(lines))
