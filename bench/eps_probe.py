"""
Where in t does a trained model know each piece's position? For one checkpoint, noise the true codes of val puzzles
to step t, call the EMA network once, turn its output into x0_hat (diffusion.predict_x0_eps), assign pieces to cells
by that x0_hat alone (Hungarian) and count the pieces placed right. A model that reads the content knows the answer
even at t = T - 1 (pure noise); one that only snaps noisy codes to the nearest true code knows it only where the
noisy code still says it. Also prints the x0 error weight of each loss at t (eps: SNR(t); x0: 1).

    python -m bench.eps_probe CKPT [--puzzles 200]
"""
import argparse
import json

import torch

import jpdvt
from diffusion import GaussianDiffusion
from dit import DiT
from jpdvt import given_codes, model_fn, piece_codes
from metrics import assign_batch
from plumbing.checkpoint import load_checkpoint
from puzzles import collate, puzzle_set

STEPS = (0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 999)


@torch.no_grad()
def probe(path, puzzles=200, seed=0):
    ckpt = load_checkpoint(path, kind="image")
    config = ckpt["config"]
    model = DiT(config.model)
    model.load_state_dict(ckpt["ema"])
    model.eval()
    diffusion = GaussianDiffusion(1000, config.prediction)
    val = puzzle_set(config.puzzle, "val", config.train.seed)
    batch = collate([val[i] for i in range(min(puzzles, len(val)))])
    table, given = jpdvt.position_table(config), given_codes(batch, config.puzzle.anchor)
    fn = model_fn(model, batch["missing"], given)
    x0 = {"code": table[batch["true_pos"]], "content": batch["content"]}
    masks = {"code": ~given, "content": batch["missing"]}
    rows = []
    for step in STEPS:
        g = torch.Generator().manual_seed(seed)
        t = torch.full((len(batch["missing"]),), step, dtype=torch.long)
        noise = {k: torch.randn(v.shape, generator=g) for k, v in x0.items()}
        noisy = diffusion.noise_parts(x0, masks, t, noise)
        out, xt = fn(noisy, t), noisy["code"]
        code, _ = diffusion.predict_x0_eps(xt, t, out["code"])
        (code, cells), (xt, _) = piece_codes(code.float(), table), piece_codes(xt.float(), table)
        positions = assign_batch(torch.cdist(code, cells[None].expand(len(code), -1, -1)), "hungarian")
        acc = float(jpdvt.score(config.puzzle, positions, batch)["piece_acc"].mean())
        noisy = assign_batch(torch.cdist(xt, cells[None].expand(len(code), -1, -1)), "hungarian")
        abar = float(diffusion.alphas_cumprod[step])
        rows.append({"t": step, "piece_acc_x0_hat": round(acc, 4),
                     "piece_acc_noisy_code": round(float(jpdvt.score(config.puzzle, noisy, batch)["piece_acc"].mean()),
                                                   4),
                     "snr": abar / (1 - abar)})
    return {"ckpt": path, "prediction": config.prediction, "step": ckpt["step"], "puzzles": len(batch["missing"]),
            "rows": rows}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ckpt", help="a train_image.py checkpoint")
    p.add_argument("--puzzles", type=int, default=200, help="val puzzles (default 200)")
    p.add_argument("--record", metavar="NAME", help="also write the rows 'eps-probe NAME t T' to bench/results.json")
    a = p.parse_args()
    r = probe(a.ckpt, a.puzzles)
    if a.record:
        from bench.report import save_result
        for row in r["rows"]:
            save_result(f"eps-probe {a.record} t {row['t']}", {
                "group": "eps-vs-x0", "train_minutes": 0.0, "metrics": {**row, "step": r["step"], "split": "val"},
                "command": f"python -m bench.eps_probe {a.ckpt} --puzzles {a.puzzles} --record {a.record}"})
    print(json.dumps({k: v for k, v in r.items() if k != "rows"}))
    print(f"{'t':>4} {'SNR':>9} {'x0_hat':>7} {'noisy code':>10}")
    for row in r["rows"]:
        print(f"{row['t']:>4} {row['snr']:>9.2e} {row['piece_acc_x0_hat']:>7.3f} {row['piece_acc_noisy_code']:>10.3f}")
