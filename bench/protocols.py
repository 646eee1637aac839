"""
The shipped image rows under both scoring protocols (`python -m bench.protocols`): anchored (one piece's cell told
and not counted: the paper's text, Sec. 3.2) and all pieces (none told, every piece with content counted: the authors'
released code). Each row is `sample.py` on the README's test puzzles with the checkpoint's estimator and no judge
(`--judge none`), so that it compares with the paper's; `--anchor` or `--no-anchor` picks the protocol. An anchored
run of a model trained without an anchor pins the told piece in the assignment only (it keeps its true cell and is not
counted): the network itself is told nothing, as it never learned to read a told code.

    python -m bench.protocols [--only image-shapes-3x3] [--protocol anchored]
"""
import argparse
import json
import os
import subprocess
import sys

from bench.recipes import PHOTOS, REPEATS
from bench.report import ROOT, save_result

# checkpoint -> the flags of its README row (the photo rows: the 39 test photos, 8 shuffles each, seed 1)
ROWS = {
    "image-photos-3x3": ["--seed", "1", *REPEATS],
    "image-photos-3x3-gap": ["--seed", "1", "--missing", "0", *REPEATS],
    "image-shapes-3x3": ["--seed", "1"],
    **{f"image-photos-3x3-missing missing {k}": ["--seed", "1", "--missing", str(k), *REPEATS] for k in range(4)},
    "image-shapes-3x3-anchor-missing": ["--split", "val", "--seed", "1", "--missing", "1"],
}


def score(name, flags, anchor, out):
    """Run sample.py for one protocol; returns its metrics.json."""
    ckpt = f"checkpoints/{name.split()[0]}.pt"
    cmd = ["sample.py", "--ckpt", ckpt, *flags, "--judge", "none", "--anchor" if anchor else "--no-anchor",
           "--data-dir", PHOTOS, "--out", out]
    if "shapes" in name:
        cmd = cmd[:-4] + cmd[-2:]                        # built-in data: no --data-dir
    print("$ python", " ".join(cmd), flush=True)
    subprocess.run([sys.executable, *cmd], cwd=ROOT, check=True)
    with open(os.path.join(ROOT, out, "metrics.json")) as f:
        return " ".join(cmd), json.load(f)


def main(args):
    for name, flags in ROWS.items():
        if args.only and name != args.only:
            continue
        for anchor in {"both": (True, False), "anchored": (True,), "all": (False,)}[args.protocol]:
            protocol = "anchored" if anchor else "all pieces"
            command, metrics = score(name, flags, anchor, f"runs/protocols/{name.replace(' ', '-')}-{protocol[:3]}")
            save_result(f"protocol {name} {metrics['split']}: {protocol}",
                        {"command": "python " + command, "group": "protocol", "metrics": metrics, "train_minutes": 0})


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", help="one row of ROWS")
    p.add_argument("--protocol", choices=("both", "anchored", "all"), default="both",
                   help="score under both protocols, or one (where the other's row already stands)")
    main(p.parse_args())
