"""
The benchmark's record: rows in bench/results.json (one per recipe evaluation, baseline or measurement, each with
its command, machine, date, training minutes and metrics) and the report written from them, bench/BENCHMARKS.md
(a table per group, then bench/notes.md). `python -m bench` with no names only rewrites the report.
"""
import json
import os
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))      # the repository root, parent of bench/
RESULTS = os.path.join(ROOT, "bench", "results.json")


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


def fmt(m):
    conf = m.get("confidence") or {}
    eces = "".join(f", {part} ECE {conf[part]['ece']:.3f}" for part in ("piece", "puzzle") if part in conf)
    keys = ["piece_acc", "puzzle_acc", "kendall", "exact", "kendall_set", "exact_set", "kendall_rev", "sec_per_puzzle",
            "steps_per_s", "gflop_per_step", "tflop_per_s", "mfu", "puzzles_per_s_ddim50", "images_per_s", "workers",
            "batch", "params_M", "auroc_sampled", "auroc_mean", "ms_per_batch64", "ms_per_step", "threads"]
    return ", ".join(f"{k} {m[k]:.4g}" for k in keys if k in m) + eces


def render():
    results = load_results()
    lines = ["# Benchmarks", "", "Written by `python -m bench` from `bench/results.json`. Test puzzles: fresh "
             "seeds (test split, `--seed 1` unless the command says otherwise), disjoint from the training stream; "
             "rows on the 39 test photos are the mean of 8 passes over them (`--repeats 8`: seeds 1-8), except those "
             "marked (1 pass), scored before `--repeats` existed. Wall minutes include the end-of-training accuracy "
             "check. Machines are noisy: one run each.", ""]
    titles = {"recipes": "Recipes (train + score)",
              "baselines": "Non-learned baselines (the recipes' test puzzles; `val` rows: their val puzzles)",
              "sampler": "Sampler: one call and DDIM steps against DDPM-1000 (image-3x3 checkpoint, shipped as "
                         "`checkpoints/image-shapes-3x3.pt`)",
              "one-call": "One network call (`--steps 1`) on the video recipe rows' test clips (shipped checkpoints)",
              "confidence": "Confidence (issue 28.3): tables fitted on val (`--calibrate`; the photo models trained "
                            "on val), then reliability and ECE on test, each shipped checkpoint's README settings",
              "one-call val": "sample.py's default chosen on val: one call, DDIM-50, DDPM-50 (val split, `--seed 1`; "
                              "image rows 8 passes; photo rows trained on val)",
              "assign": "Assignment: Hungarian (default) against the paper's greedy rule, same sampled codes",
              "ensemble": "Ensembles: K samples of the codes per puzzle, assigned on their mean distance",
              "transfer": "The shipped photo gap model on built-in shapes (24 px pieces in 32 px cells)",
              "throughput": "Throughput (DiT on 3x3 puzzles, U-Net on 5 x 4 or 8 x 4 pieces; batch as listed)",
              "loader": "Data loading (the ImageNet protocol on the photo folder, images per second; the Quickstart's "
                        "data worker against its model step, ms)",
              "symmetry": "Symmetries at solve time (issue 29, lever 3): `--symmetries` against as many samples",
              "quickstart": "Quickstart levers (issue 29, lever 5): one change each, 200 val puzzles, DDPM-50",
              "compute": "Compute (issue 29, lever 4): photo models trained on a lent H200, scored here",
              "gpu": "The lent-GPU session (`bench/gpu.py`, issue 30): training runs on the device"}
    for group, title in titles.items():
        rows = {k: v for k, v in results.items() if v["group"] == group}
        if not rows:
            continue
        lines += [f"## {title}", "", "| row | metrics | train min | machine | command |",
                  "| --- | --- | --- | --- | --- |"]
        for k, v in rows.items():
            cmd = f"`{v['command']}`" + (f"<br>`{v['eval']}`" if v.get("eval") else "")
            one_pass = v["metrics"].get("dataset") == "folder" and v["metrics"].get("repeats", 1) == 1   # photos
            lines.append(f"| {k}{' (1 pass)' if one_pass else ''} | {fmt(v['metrics'])} "
                         f"(n={v['metrics'].get('num_puzzles', '-')}) | "
                         f"{v['train_minutes']:.1f} | {v['machine']} | {cmd} |")
        lines.append("")
    notes = os.path.join(ROOT, "bench", "notes.md")
    if os.path.exists(notes):
        lines += [open(notes).read()]
    with open(os.path.join(ROOT, "bench", "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(lines))
