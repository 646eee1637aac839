"""
The benchmark's record: rows in bench/results.json (one per recipe evaluation, baseline or measurement, each with
its command, machine, date, training minutes and metrics) and the log written from them, bench/BENCHMARKS.md: a
compact table per group (the command that reproduces a group is written once, above its table; every row's exact
command stays in results.json). `python -m bench` with no names only rewrites the log. The notes behind the rows are
bench/notes.md, the headline tables bench/README.md.
"""
import json
import os
import re
import time

from bench.recipes import RECIPES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))      # the repository root, parent of bench/
RESULTS = os.path.join(ROOT, "bench", "results.json")
RETIRED = re.compile(r" \[retired[^\]]*\]$")   # rows of a replaced model: `NAME [retired]`, `NAME [retired WHICH]`
HISTORY = "2038b60"           # the last commit whose BENCHMARKS.md lists every row's command and appends the notes


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


def save_result(key, row):
    results = load_results()
    row.setdefault("machine", machine())
    row["date"] = time.strftime("%Y-%m-%d")
    results[key] = row
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
        f.write("\n")


KEYS = ["piece_acc", "puzzle_acc", "kendall", "exact", "kendall_set", "exact_set", "kendall_rev", "sec_per_puzzle",
        "steps_per_s", "gflop_per_step", "tflop_per_s", "mfu", "puzzles_per_s_ddim50", "images_per_s", "workers",
        "batch", "params_M", "auroc_sampled", "auroc_mean", "ms_per_batch64", "ms_per_batch32", "ms_per_step",
        "threads", "puzzles",
        "loss_first", "loss_last", "real_gated", "mixed_at_most_0.05", "noise_at_most_0.05", "auroc_mixed",
        "auroc_noise", "auroc_seam_mixed", "auroc_seam_noise", "auroc_ink_mixed", "auroc_ink_noise",
        "mean_puzzle_confidence", "puzzle_above_weakest_piece",
        "mixed_mean_confidence", "noise_mean_confidence", "git_MiB", "checkpoints_MiB", "params_M_min", "params_M_max",
        "statements", "statements_missed", "statement_coverage",
        "lines", "root_lines", "read_first_lines", "sources_lines", "solving_lines", "plumbing_lines", "configs_lines"]


def seconds(x):
    """2 significant digits, whole seconds from 10 on (not 1e+02)."""
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def values(m):
    """A row's metrics as printed: 4 significant digits (integers whole; seconds a puzzle 2: timings on a shared
    machine are noisy), the confidence's ECE (piece, puzzle) 3 decimals."""
    conf = m.get("confidence") or {}
    shown = {k: str(m[k]) if type(m[k]) is int else seconds(m[k]) if k == "sec_per_puzzle" else f"{m[k]:.4g}"
             for k in KEYS if k in m}
    ece = {part: conf[part]["ece"] for part in ("piece", "puzzle") if part in conf} | m.get("ece", {})
    if "chosen" in m:               # cross-fit rows: the choice and its held-out val ECE (the lowest of the candidates)
        shown["chosen"] = " ".join(map(str, m["chosen"])) + " (val {:.3f} / {:.3f})".format(*m["chosen_ece"])
    if "bootstrap" in m:                                  # ece-bootstrap rows: 2.5-97.5% over the pictures
        shown["ECE 95% range"] = " / ".join(f"{m['bootstrap'][p][0]:.3f}-{m['bootstrap'][p][2]:.3f}"
                                            for p in ("piece", "puzzle"))
    return shown | {f"{part} ECE": f"{e:.3f}" for part, e in ece.items()}


# group -> (title, the command that reproduces its rows; None: each row's own command, hand-run rows)
GROUPS = {
    "recipes": ("Recipes (train + score)",
                "`python -m bench RECIPE` trains a recipe (`bench/recipes.py`), then scores it with `sample.py "
                "--num-puzzles 200 --seed 1 --sampler ddim` and the evaluation's flags (`--score-only`: scores again)"),
    "baselines": ("Non-learned baselines (the recipes' puzzles)",
                  "`python -m bench baselines` (`val` rows: `baselines-val`); MGC and edge: exhaustive placement"),
    "sampler": ("Sampler: one call and DDIM steps against DDPM-1000 (shipped shapes model)",
                "`python -m bench sampler` (the steps-1 row: `python -m bench one-call`)"),
    "one-call": ("One call (`--steps 1`) on the shipped video models' recipe clips",
                 "`python -m bench one-call`"),
    "confidence": ("Confidence: val fit, test ECE (README settings; older rows: 583ecc8)",
                   "`python -m bench confidence own-photos confidence-evidence`"),
    "one-call val": ("Samplers on val: one call, DDIM-50, DDPM-50 (images 8 passes; photo rows trained on val)",
                     "`python -m bench one-call-val`"),
    "assign": ("Assignment: Hungarian against the paper's greedy rule",
               "`python -m bench assign`"),
    "ensemble": ("Ensembles: K samples a puzzle, assigned on their mean",
                 "`python -m bench ensemble` (the README row alone: `python -m bench ensemble-readme`; the steps-1 "
                 "rows: `python -m bench one-call`)"),
    "estimator-val": ("Estimator on val: K samples a clip of the shipped 10 x 2 (the 5000-step model's: retired)",
                      "`python -m bench estimator-val`"),
    "candidate-val": ("Candidates: val clips (200 unless marked)",
                      "`python -m bench candidate-val`"),
    "transfer": ("The photo gap model on built-in shapes (24 px pieces)",
                 "`python -m bench transfer`"),
    "throughput": ("Throughput",
                   "`python -m bench throughput` (`--device cuda`: the (cuda) rows; the (NVIDIA H200) rows: "
                   "`bench/gpu.py`, recorded by `python -m bench gpu-record`)"),
    "loader": ("Data loading (images/s; ms a batch)",
               "`python -m bench loader`, `loader-quickstart`, `loader-mmnist`, `pace-mmnist`, `loader-imagenet`"),
    "symmetry": ("Symmetries: the removed `--symmetries` against as many samples", None),
    "eps-vs-x0": ("eps against x0: held-out val checks, per-t probes, crossed variants",
                  "`python -m bench.eps_curves runs/eps`, `python -m bench.eps_probe CKPT --record NAME`"),
    "quickstart": ("Quickstart levers: one change each, 200 val puzzles, DDPM-50", None),
    "compute": ("Compute: photo models trained on an H200, scored here",
                "`python -m bench compute-val` (the checkpoints: `bench/gpu.py`)"),
    "paper-table": ("The paper's Moving MNIST protocol (Table 5): shipped checkpoints, 1000 test clips of seed 1 "
                    "(anchored; the sampler of each row)",
                    "`python -m bench paper-table`"),
    "walkthrough": ("The walkthrough's model (`checkpoints/image-shapes-3x3-anchor-missing.pt`)", None),
    "fresh-seed": ("The README's video figures: each shipped video model once, its own estimator, test clips of a "
                   "seed no choice has seen", "`python -m bench fresh-seed` (frame chaining: `fresh-seed-baselines`)"),
    "lines": ("Lines of Python outside tests/ and bench/ (read first: README, 'How to read this code', steps 1-7)",
              "`python -m bench lines`"),
    "gpu": ("The lent GPU: training runs",
            "on the device `python -m bench.gpu --photos .photos --out $OUT --runs /tmp/runs --photo-seconds 200 "
            "--gap-seconds 60`, then `python -m bench gpu-record` here"),
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


def table(rows, first, recipes=None, own_commands=False):
    """One table of `rows`, a column per metric they report; `first` heads the column of row names. With `recipes`
    (recipe rows, named RECIPE--FLAGS), a recipe's evaluations share its name, training minutes and machine, given on
    its first line; with own_commands, each row's command (the hand-run rows)."""
    shown = {k: values(v["metrics"]) for k, v in rows.items()}
    cols = [c for c in KEYS + ["chosen", "piece ECE", "puzzle ECE", "ECE 95% range"]
            if any(c in s for s in shown.values())]
    trained = any(v["train_minutes"] for v in rows.values())
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
        one_pass = " (1 pass)" if m.get("dataset") == "folder" and m.get("repeats", 1) == 1 else ""   # photo rows
        cells = ["" if again else name] + [(("--" + extra) if extra else "") + one_pass] * bool(recipes)
        cells = [c.strip() for c in cells] + [shown[key].get(c, "") for c in cols]
        cells += [str(m.get("num_puzzles", "-"))] * counted
        cells += ([""] * (trained + (one is None)) if again else
                  [minutes(v["train_minutes"])] * trained + [short_machine(v)] * (one is None))
        cells += [shown_command(v)] * own_commands
        lines.append("| " + " | ".join(cells) + " |")
        previous = name
    return lines + (["", f"Machine: {one}.", ""] if one else [""])


def group_tables(group, rows, recipes, own_commands):
    """A group's tables: image rows, video rows and others apart; baselines one line per setting and solver; rows of
    recipes since removed from bench/recipes.py (`recipes`) and rows of replaced models (`... [retired ...]`) left out,
    counted."""
    if group == "baselines":
        return baseline_rows(rows)
    retired = {k for k in rows if RETIRED.search(k)}
    removed = {k for k in rows if group == "recipes" and k.partition("--")[0] not in recipes} - retired
    shown = {k: v for k, v in rows.items() if k not in removed | retired}
    lines = []
    for part in ("image", "video", "other"):
        some = {k: v for k, v in shown.items() if kind(v["metrics"]) == part}
        # the confidence group's rows measure different things: a table per row kind (the words before the name)
        sort = (lambda k: re.split(r" (?=image-|video-)", k)[0]) if group == "confidence" else (lambda k: "")
        for prefix in sorted({sort(k) for k in some}):
            lines += table({k: v for k, v in some.items() if sort(k) == prefix}, "recipe" if group == "recipes"
                           else "row", recipes if group == "recipes" else None, own_commands)
    n_removed, n_retired = len(removed), len(retired)
    note = f"({n_removed} row{'s' * (n_removed != 1)} of recipes since removed from `bench/recipes.py` left out.)"
    gone = (f"({n_retired} row{'s' * (n_retired != 1)} of models since replaced, named `... [retired ...]`: "
            "`bench/results.json` only.)")
    return lines + ([note, ""] if removed else []) + ([gone, ""] if retired else [])


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
             f"The full log before this one: `git show {HISTORY}:bench/BENCHMARKS.md`.",
             "",
             "Written by `python -m bench` from `bench/results.json` (each row's command, machine, date). Test "
             "puzzles: fresh seeds (`--seed 1` unless said), disjoint from training; photo rows: 8 passes over the "
             "39 test photos unless marked (1 pass). Fractions; Kendall distances strict; n: puzzles per pass; "
             "train min: wall minutes. Machine: CPU cores or GPU (under a table when its rows share it); thr: "
             "`OMP_NUM_THREADS`; hand-run rows' `sample.py`: `python sample.py --ckpt OUT/ckpt.pt`, OUT the run's "
             "`--out`. One run each. "
             "Headlines: `bench/README.md`; notes: `bench/notes.md`.", ""]
    groups = list(GROUPS) + sorted({v["group"] for v in results.values()} - set(GROUPS))
    for group in groups:
        rows = {k: v for k, v in results.items() if v["group"] == group}
        if not rows:
            continue
        title, how = GROUPS.get(group, (group, None))
        lines += [f"## {title}", ""] + ([f"Reproduce: {how}.", ""] if how else [])
        lines += group_tables(group, rows, RECIPES, how is None)
    with open(os.path.join(ROOT, "bench", "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(lines))
