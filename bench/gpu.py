"""
The paper DiT's throughput on a lent GPU (bench/throughput.py at batch 256 and 64: fp32, bf16, bf16 + torch.compile),
written to OUT/gpu-rows.json after each setting; fetched into runs/gpu/, `python -m bench gpu-record` records the rows
`throughput dit-base bBATCH PRECISION (DEVICE)`.

    python -m bench.gpu --out $OUT        # on the device
"""
import argparse
import json
import os
import sys

import torch

from bench.throughput import measure


def main(args):
    os.makedirs(args.out, exist_ok=True)
    rows = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "command": "python -m bench.gpu " + " ".join(sys.argv[1:]), "throughput": {}}
    for name in ("dit-base b256", "dit-base b64"):
        rows["throughput"].update(measure(torch.device("cuda"), only=[name]))
        with open(os.path.join(args.out, "gpu-rows.json"), "w") as f:           # each setting kept as it is measured
            json.dump(rows, f, indent=1)
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for gpu-rows.json")
    main(p.parse_args())
