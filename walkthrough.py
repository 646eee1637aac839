"""
Lesson 0: one 3x3 puzzle through the whole method, printing every tensor and every mask and what it means.
Paper: Sec. 3.1, "Masked Jigsaw Transformer Diffusion", and the supplement's "Predicted position encodings".

A built-in picture is cut into 9 shuffled pieces, one of them missing, and shuffled piece 0 is anchored (its code is
told). A tiny model trained on such puzzles (checkpoints/image-shapes-3x3-anchor-missing.pt: up to one missing piece
and an anchor) computes one training loss on it, then solves it. The steps: the positional code of every other piece
starts as noise, 50 reverse diffusion steps denoise it (and the missing piece's pixels), and the pieces get cells
one to one by code distance (Hungarian), the anchor on its own. The model predicts the clean codes (x0), where the
paper predicts the noise (eps), which did not learn here (docs/choices.md). The anchor's cell
is pinned in the assignment (metrics.pin). Then read posenc.py, diffusion.py, jpdvt.py (README, "How to read this
code").

    python walkthrough.py          # no flags
"""
import torch

from config import load_checkpoint
from diffusion import GaussianDiffusion
from dit import DiT
from jpdvt import SampleOptions, anchor_pieces, model_fn, pinned_cells, position_table, puzzle_loss, score, solve
from metrics import assign, pin
from puzzles import puzzle_set


def show(name, x, meaning):
    print(f"  {name:<13} {str(tuple(x.shape)):<16} {meaning}")


def main(ckpt_path="checkpoints/image-shapes-3x3-anchor-missing.pt", seed=0):
    ckpt = load_checkpoint(ckpt_path)
    config = ckpt["config"]                                          # its puzzles: 1 missing piece, anchored
    model = DiT(config.model).eval()                                  # the image network (dit.py)
    model.load_state_dict(ckpt["ema"])     # the EMA (a running average of the trained weights) is what samples
    diffusion = GaussianDiffusion(1000, config.prediction)      # linear betas, T = 1000

    (rows, cols), side = config.puzzle.grid, config.puzzle.piece_size
    print(f"1. A puzzle (puzzles.py): a built-in picture cut into a {rows}x{cols} grid, the pieces shuffled, "
          f"{config.puzzle.missing} missing")
    batch = {k: v[None] for k, v in puzzle_set(config.puzzle, "test", seed=seed)[0].items()}   # a batch of one
    show("content", batch["content"], f"(B, N, C, P, P): {rows * cols} shuffled pieces of {side}x{side} RGB pixels "
                                      "in [-1, 1]")
    show("true_pos", batch["true_pos"], f"(B, N): the cell each piece came from {batch['true_pos'][0].tolist()}")
    show("missing", batch["missing"], f"(B, N): content missing, to generate {batch['missing'][0].int().tolist()}")
    given = anchor_pieces(batch, config.puzzle.anchor)
    anchor_cell = batch["true_pos"][0, 0].item()
    show("given", given, f"(B, N): code told, the anchor (piece 0; an image anchor sits at a random cell, here cell "
                         f"{anchor_cell}) {given[0].int().tolist()}")

    print("2. The codes the model generates (posenc.py): a 2D sinusoidal code per grid cell")
    table = position_table(config)
    dim = table.shape[1]                                        # the code's width: 16 per grid axis
    show("table", table, f"(cells, {dim}): row r*{cols}+c = [sin/cos code of column c, of row r]")
    x0 = table[batch["true_pos"]]
    show("x0", x0, f"(B, N, {dim}): the code of each piece's true cell, the clean target")

    print("3. Training (jpdvt.puzzle_loss): noise what is generated at a step t, predict it back from the rest")
    show("code mask", ~given, f"(B, N): codes noised and in the loss (not the anchor's) {(~given)[0].int().tolist()}")
    show("content mask", batch["missing"], "(B, N): pixels noised and in the loss: the missing piece's only "
                                           f"{batch['missing'][0].int().tolist()}")
    t = torch.tensor([300])                                     # one step here; training draws one per puzzle
    torch.manual_seed(0)                                        # the noise of x_t, drawn again by puzzle_loss below
    noise = {"code": torch.randn(x0.shape), "content": torch.randn(batch["content"].shape)}
    xt = torch.where(given[..., None], x0, diffusion.q_sample(x0, t, noise["code"]))      # the anchor's stays clean
    gone = batch["missing"][..., None, None, None]
    ct = torch.where(gone, diffusion.q_sample(batch["content"], t, noise["content"]), batch["content"])
    show("x_t", xt, f"(B, N, {dim}): sqrt(abar_t) x0 + sqrt(1 - abar_t) noise at t = {t.item()}, anchor clean")
    show("content_t", ct, "(B, N, C, P, P): the missing piece's pixels noised the same way, the rest clean")
    with torch.no_grad():
        pred, _ = model(xt, ct, t, batch["missing"], given)
        torch.manual_seed(0)            # diffusion.draw's first draws: t (given here), then the code's noise, then
        # the content's, as drawn above; so the code part of this loss is the MSE above
        # as trained (config.load_checkpoint types the stored settings: config.train is a TrainConfig)
        weights = {"code": config.train.weight_code, "content": config.train.weight_content}
        loss = puzzle_loss(model, diffusion, batch, table=table, given=given, weights=weights, t=t)
    mse = ((pred - x0) ** 2)[~given].mean()
    show("prediction", pred, f"(B, N, {dim}): the network's x0 estimate; MSE {mse:.2e} over the "
         f"{int((~given).sum())} generated codes")
    print(f"  loss at t = {t.item()}: {loss['loss'].item():.2e} = {weights['code']} x code part "
          f"{loss['code'].item():.2e} + {weights['content']} x content part {loss['content'].item():.2e} (the missing "
          "piece's pixels)")

    steps = 50
    print(f"4. Solving (jpdvt.solve): the untold codes and the missing pixels start as noise, {steps} reverse DDPM "
          "steps")
    generator = torch.Generator().manual_seed(0)
    start = {"code": x0 * given[..., None], "content": batch["content"] * ~batch["missing"][..., None, None, None]}
    masks = {"code": ~given, "content": batch["missing"]}       # what is generated; the rest is put back every step
    net = model_fn(model, batch["missing"], given)              # the network as a function of (x_t, t) -> x0 parts
    out = diffusion.sample(net, start, masks, steps=steps, generator=generator)
    show("codes", out["code"], f"(B, N, {dim}): the generated code of every piece (the anchor's as told)")
    dist = torch.cdist(out["code"], table[None])
    show("distances", dist, "(B, N, cells): from each generated code to each cell's true code")
    anchor_cells = pinned_cells(batch, given)[0].numpy()        # the anchor's true cell, -1 for the other pieces
    cost = pin(dist[0].numpy(), anchor_cells)                   # forbids every other cell to the anchor
    positions = assign(cost, "hungarian")                       # the one-to-one assignment of least total distance
    print(f"  positions     {str(positions.shape):<16} one distinct cell per piece (Hungarian; the anchor keeps "
          f"its cell) {positions.tolist()}")
    opts = SampleOptions(steps=steps, sampler="ddpm", generator=torch.Generator().manual_seed(0))
    again, _ = solve(model, diffusion, batch, table=table, opts=opts, given=given)
    assert (again[0] == positions).all()                        # solve() is exactly step 4's lines
    metrics = {k: v.mean() for k, v in score(config.puzzle, positions[None], batch).items()}
    placed = int((~batch["missing"] & ~given).sum())
    truth, gone = batch["true_pos"][0].tolist(), batch["missing"][0].tolist()
    missing_cells = {cell for cell, g in zip(truth, gone) if g}
    wrong = [i for i, cell in enumerate(truth) if positions[i] != cell]        # every piece off its cell
    for i in sorted(wrong, key=lambda i: not gone[i]):                          # the missing piece first
        why = (": its generated code is a guess, and it can take a real piece's cell" if gone[i] else
               ", the missing piece's cell" if positions[i] in missing_cells else "")
        print(f"  {'the missing piece' if gone[i] else 'piece'} {i} (from cell {truth[i]}) was given cell "
              f"{positions[i]}{why}")
    print(f"5. Scoring (jpdvt.score): of the {placed} pieces placed (not the anchor, not the "
          f"{int(batch['missing'].sum())} missing), "
          f"{metrics['piece_acc']:.0%} in place, puzzle {'solved' if metrics['puzzle_acc'] == 1 else 'not solved'}")
    return metrics


if __name__ == "__main__":
    main()
