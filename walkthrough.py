"""
Lesson 0: one 3x3 puzzle through the whole method, printing every tensor and what it means.

A built-in picture is cut into 9 shuffled pieces; the shipped shapes model (checkpoints/image-shapes-3x3.pt) computes
one training loss on it, then solves it: the positional code of every piece starts as noise, 50 reverse diffusion
steps denoise it, and each piece goes to the cell whose true code is nearest. Then read posenc.py, diffusion.py,
jpdvt.py (README, "How to read this code").

    python walkthrough.py          # no flags, a few seconds on a CPU
"""
import torch

import kinds
from checkpoint import load_checkpoint
from diffusion import GaussianDiffusion
from jpdvt import SampleOptions, given_codes, model_fn, puzzle_loss, solve
from metrics import assign


def show(name, x, meaning):
    print(f"  {name:<13} {str(tuple(x.shape)):<16} {meaning}")


def main(ckpt_path="checkpoints/image-shapes-3x3.pt"):
    torch.manual_seed(0)                                        # the training noise below: the same every run
    ckpt = load_checkpoint(ckpt_path)
    config = ckpt["config"]
    kind = kinds.of(config)                                     # images: kinds.Images (what differs from videos)
    model = kind.network(config.model).eval()
    model.load_state_dict(ckpt["ema"])                          # the EMA weights are the ones to sample with
    diffusion = GaussianDiffusion(1000, config.prediction)      # linear betas, T = 1000

    print("1. A puzzle (puzzles.py): a built-in picture cut into a 3x3 grid, the pieces shuffled")
    batch = {k: v[None] for k, v in kind.puzzles("test", seed=0)[0].items()}   # a batch of one
    show("content", batch["content"], "(B, N, C, P, P): 9 shuffled pieces of 16x16 RGB pixels in [-1, 1]")
    show("true_pos", batch["true_pos"], f"(B, N): the cell each piece came from {batch['true_pos'][0].tolist()}")
    show("missing", batch["missing"], "(B, N): pieces whose content is missing (none here)")

    print("2. The codes the model generates (posenc.py): a 2D sinusoidal code per grid cell")
    table = kind.table()
    show("table", table, "(cells, 32): row r*3+c = [sin/cos code of column c, of row r]")
    x0 = table[batch["true_pos"]]
    show("x0", x0, "(B, N, 32): the code of each piece's true cell, the clean target")

    print("3. Training (jpdvt.puzzle_loss): noise the codes at a step t, predict them back from the pieces")
    t = torch.tensor([300])
    torch.manual_seed(0)                                        # the noise of x_t, drawn again by puzzle_loss below
    xt = diffusion.q_sample(x0, t)
    show("x_t", xt, f"(B, N, 32): sqrt(abar_t) x0 + sqrt(1 - abar_t) noise at t = {t.item()}")
    with torch.no_grad():
        pred, _ = model(xt, batch["content"], t, batch["missing"])
        torch.manual_seed(0)                                    # the same t and noise: the code part is this MSE
        loss = puzzle_loss(model, diffusion, batch, table=table, given=given_codes(batch, anchored=False),
                           weights={"code": 1.0, "content": 0.1}, t=t)
    show("prediction", pred, f"(B, N, 32): the network's x0 estimate; MSE {((pred - x0) ** 2).mean():.2e} at this t")
    print(f"  loss at t = {t.item()}: {loss['loss'].item():.2e} = 1.0 x code part {loss['code'].item():.2e}"
          f" + 0.1 x content part {loss['content'].item():.0f} (no missing piece)")

    print("4. Solving (jpdvt.solve): every code starts as noise, 50 reverse DDPM steps, then the nearest cells")
    generator = torch.Generator().manual_seed(0)
    given = {"code": torch.zeros_like(x0), "content": batch["content"]}       # the codes are unknown
    masks = {"code": torch.ones_like(batch["missing"]), "content": batch["missing"]}   # what is generated
    fn = model_fn(model, batch["missing"], torch.zeros_like(batch["missing"]))
    codes = diffusion.sample(fn, given, masks, steps=50, sampler="ddpm", generator=generator)["code"]
    show("codes", codes, "(B, N, 32): the generated code of every piece")
    dist = torch.cdist(codes, table[None])
    show("distances", dist, "(B, N, cells): from each generated code to each cell's true code")
    positions = assign(dist[0], "hungarian")
    print(f"  positions     {str(positions.shape):<16} one distinct cell per piece (Hungarian) {positions.tolist()}")
    opts = SampleOptions(steps=50, sampler="ddpm", generator=torch.Generator().manual_seed(0))
    again, _ = solve(model, diffusion, batch, table=table, opts=opts, given=given_codes(batch, anchored=False))
    assert (again[0] == positions).all()                        # solve() is exactly step 4's lines
    metrics = kind.score(positions[None], batch)
    print(f"5. Scoring (kinds.py): {metrics['piece_acc']:.0%} of the pieces in place, puzzle "
          f"{'solved' if metrics['puzzle_acc'] == 1 else 'not solved'}")
    return metrics


if __name__ == "__main__":
    main()
