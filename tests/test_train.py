"""The training loop's machinery: gradient accumulation, the checkpoint format, the log."""
import os
import sys

import pytest
import torch
from conftest import ROOT, SHAPES_CKPT, TINY_IMAGE, run, sample_run, train_image_run

import jpdvt
import sample
import solving.own as own
import solving.solver
import train_image
import train_video
from config import FORMAT, load_checkpoint
from plumbing.cli import UserError
from puzzles import collate, puzzle_set


def weights_after(tmp_path, name, *flags):
    out = tmp_path / name
    train_image_run(*TINY_IMAGE, "--batch-size", "8", "--anchor", "--missing", "2", "--max-steps", "2",
                    "--eval-every", "0", "--precision", "fp32", "--out", out, *flags)
    return torch.load(out / "ckpt.pt", weights_only=True), (out / "log.txt").read_text()


def test_accumulation_is_the_unsplit_step(tmp_path):
    """--accum K splits each step into K micro-batches with the same draws: the same update to float tolerance, with
    an anchor and a varying number of missing pieces (each part's loss is a mean over its generated entries)."""
    one, log1 = weights_after(tmp_path, "k1")
    for k in ("2", "4"):
        split, log = weights_after(tmp_path, "k" + k, "--accum", k)
        for name, w in one["model"].items():
            # AdamW divides by the gradient's running RMS, so a weight whose gradient is near 0 moves by up to lr
            # on a rounding difference: compared to 1% of one step (lr 2e-3); the gradients are checked below
            torch.testing.assert_close(split["model"][name], w, rtol=1e-4, atol=2e-5)
        assert f"global batch 8 = 1 process(es) x {k} micro-batch(es) x {8 // int(k)}; step 0 -> 2" in log
    assert "global batch 8 = 1 process(es) x 1 micro-batch(es) x 8; step 0 -> 2" in log1


def test_micro_batch_gradients_sum_to_the_batch_gradient():
    """The micro-batch losses times their shares give the unsplit batch's gradient (anchor, 0-2 missing pieces)."""
    from diffusion import GaussianDiffusion
    from dit import DiT, DiTConfig
    from jpdvt import anchor_pieces, clean_parts, puzzle_loss
    from posenc import grid_table
    from puzzles import ImageConfig, ImagePuzzles
    from training.shares import micro_batches
    torch.manual_seed(0)
    puzzles = ImagePuzzles(ImageConfig(grid=(2, 2), piece_size=8, missing=2, anchor=True), "train", 0)
    batch, table = collate([puzzles[i] for i in range(8)]), grid_table(2, 2)
    assert len(set(batch["missing"].sum(1).tolist())) > 1                 # a varying number missing
    model, diffusion = DiT(DiTConfig(piece_size=8, patch_size=4)), GaussianDiffusion(1000, "x0")
    for p in model.parameters():                                            # adaLN-Zero starts at zero gradients
        torch.nn.init.normal_(p, std=0.05)
    given, weights = anchor_pieces(batch, True), {"code": 1.0, "content": 0.1}
    draws = diffusion.draw(clean_parts(batch, table))

    def grads(k):
        model.zero_grad()
        for part, share in micro_batches(batch, given, draws, k):
            out = puzzle_loss(model, diffusion, part["batch"], table, part["given"], weights, part["t"], part["noise"])
            sum(weights[n] * out[n] * share[n] for n in share).backward()
        return [p.grad.clone() for p in model.parameters()]

    whole = grads(1)
    for k in (2, 4, 8):
        for a, b in zip(grads(k), whole):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)


def test_accumulation_must_split_the_batch(tmp_path):
    with pytest.raises(UserError, match="--accum 3"):
        train_image_run(*TINY_IMAGE, "--accum", "3", "--max-steps", "1", "--out", tmp_path)


def test_accumulation_under_torchrun(tmp_path):
    proc = run(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "train_image.py", *TINY_IMAGE, "--batch-size", "8", "--accum", "2", "--max-steps", "2",
               "--eval-every", "0", "--out", tmp_path, "--device", "cpu")
    assert "global batch 8 = 2 process(es) x 2 micro-batch(es) x 2; step 0 -> 2" in proc.stdout
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["step"] == 2


def test_log_shows_the_data_wait(tmp_path):
    train_image_run(*TINY_IMAGE, "--max-steps", "2", "--log-every", "1", "--eval-every", "0", "--out", tmp_path)
    steps = [x for x in (tmp_path / "log.txt").read_text().splitlines() if x.startswith("step ")]
    assert steps and all(" data wait " in x and x.endswith("%") for x in steps)


def test_checkpoint_format_and_settings_it_lacks_load_with_defaults(tmp_path):
    """A checkpoint carries its format; a setting it lacks (written before the setting existed) takes its dataclass
    default, when sampling and when resuming; a newer format is refused."""
    train_image_run(*TINY_IMAGE, "--max-steps", "1", "--eval-every", "0", "--out", tmp_path)
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert ckpt["format"] == FORMAT == 3
    old = dict(ckpt["config"], train={k: v for k, v in ckpt["config"]["train"].items() if k != "accum"},
               model={k: v for k, v in ckpt["config"]["model"].items() if k != "codes"})
    del old["prediction"]
    torch.save({**ckpt, "config": old}, tmp_path / "old.pt")
    back = load_checkpoint(tmp_path / "old.pt", kind="image")["config"]
    assert back.model.codes == "piece" and back.prediction == "x0" and back.train.accum == 1   # typed: its default
    train_image_run("--resume", tmp_path / "old.pt", "--max-steps", "2", "--out", tmp_path / "r")   # typed: accum 1
    resumed = torch.load(tmp_path / "r" / "ckpt.pt", weights_only=True)
    assert resumed["step"] == 2 and resumed["config"]["train"]["accum"] == 1
    torch.save({**ckpt, "format": 4}, tmp_path / "new.pt")
    with pytest.raises(UserError, match="has format 4, newer than this version's 3"):
        load_checkpoint(tmp_path / "new.pt")


def test_a_setting_this_version_does_not_know_is_refused_naming_it(tmp_path):
    """A config with a key no dataclass has (a removed setting, or a newer version's) is refused, naming it: when
    sampling, and when resuming (the stored training settings are typed then)."""
    train_image_run(*TINY_IMAGE, "--max-steps", "1", "--eval-every", "0", "--out", tmp_path)
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    ckpt["config"]["puzzle"]["paired_pictures"] = True                       # removed before format 3
    torch.save(ckpt, tmp_path / "paired.pt")
    with pytest.raises(UserError, match=r"paired.pt has settings this version of jpdvt does not know "
                                        r"\(paired_pictures\)"):
        sample_run("--ckpt", tmp_path / "paired.pt", "--out", tmp_path / "s")
    del ckpt["config"]["puzzle"]["paired_pictures"]
    ckpt["config"]["train"]["scaler_growth"] = 2.0
    torch.save(ckpt, tmp_path / "scaler.pt")
    with pytest.raises(UserError, match=r"does not know \(scaler_growth\)"):   # a checkpoint's config is typed whole
        load_checkpoint(tmp_path / "scaler.pt")
    with pytest.raises(UserError, match=r"does not know \(scaler_growth\)"):
        train_image_run("--resume", tmp_path / "scaler.pt", "--out", tmp_path / "r")


def test_the_final_checkpoint_is_written_once(tmp_path, monkeypatch):
    """Checkpoints at --ckpt-every and at the end, each written once, to a temporary file then renamed."""
    writes = []
    real = torch.save
    monkeypatch.setattr(torch, "save", lambda ckpt, path: (writes.append((ckpt["step"], str(path)[-7:])),
                                                           real(ckpt, path)))
    train_image_run(*TINY_IMAGE, "--max-steps", "3", "--ckpt-every", "2", "--eval-every", "0", "--out", tmp_path)
    assert writes == [(2, ".pt.tmp"), (3, ".pt.tmp")] and sorted(os.listdir(tmp_path)) == ["ckpt.pt", "log.txt"]


# ----------------------------------------------------------------------------- solving

def test_the_anchor_keeps_its_cell_in_every_assignment():
    """A told piece (the anchor) stays on its true cell in jpdvt.solve and the Solver, whatever the codes say."""
    from diffusion import GaussianDiffusion
    from jpdvt import SampleOptions, anchor_pieces, solve
    from metrics import assign_batch
    from posenc import grid_table
    from puzzles import ImageConfig, ImagePuzzles, collate

    class Zero(torch.nn.Module):                          # predicts x0 = 0 for every code: no cell is preferred
        def forward(self, code, content, t, missing, given):
            return torch.zeros_like(code), content

    batch = collate([ImagePuzzles(ImageConfig(grid=(3, 3), anchor=True), "test", 0)[i] for i in range(16)])
    given, table = anchor_pieces(batch, True), grid_table(3, 3)
    pos, _ = solve(Zero(), GaussianDiffusion(1000, "x0"), batch, table, SampleOptions(steps=2), given=given)
    assert (pos[:, 0] == batch["true_pos"][:, 0].numpy()).all()
    cost = torch.rand(4, 5, 5)
    cost[:, 0, 3] = 10.0                                  # piece 0's true cell 3 looks the worst
    pinned = torch.tensor([[3, -1, -1, -1, -1]] * 4)
    for method in ("hungarian", "greedy"):
        out = assign_batch(cost, method, pinned=pinned)
        assert (out[:, 0] == 3).all() and all(len(set(row)) == 5 for row in out)


def test_the_solver_keeps_the_anchor_on_its_cell_whatever_the_costs(monkeypatch):
    """Solver.solve_batch (test puzzles) and a video bag (order_clips) with costs that put the anchor's true cell
    last: it stays there."""
    import numpy as np
    solver = solving.load(SHAPES_CKPT, device="cpu")
    batch = collate([puzzle_set(solver.config.puzzle, "test", 0)[i] for i in range(4)])
    cost = torch.rand(4, 9, 9)
    cost[torch.arange(4), 0, batch["true_pos"][:, 0]] = 10.0           # piece 0's true cell looks the worst
    monkeypatch.setattr(jpdvt, "code_costs", lambda *a, **k: (cost[None], batch["content"]))   # (S, B, N, P)
    pos, _ = solver.solve_batch(batch, pinned=jpdvt.anchor_pieces(batch, True))
    assert (pos[:, 0] == batch["true_pos"][:, 0].numpy()).all()
    video = solving.load(os.path.join(ROOT, "checkpoints", "video-digits-5x4.pt"), device="cpu")
    clip_cost = torch.rand(1, 1, 5, 5)
    clip_cost[0, 0, 0, 0] = 10.0                                         # the first piece's slot 0 looks the worst
    monkeypatch.setattr(video, "costs", lambda *a, **k: (clip_cost, None))
    clips = {f"c{k}": np.random.default_rng(k).random((4, 32, 32, 1)) for k in range(5)}
    assert video.solve(clips, pins={2: 0}).positions[2] == 0             # the pinned clip comes first


def test_gaussian_diffusion_needs_its_prediction():
    """No default target: a diffusion built without one cannot silently pair an x0 checkpoint with eps."""
    from diffusion import GaussianDiffusion
    with pytest.raises(TypeError, match="prediction"):
        GaussianDiffusion(1000)


def test_sample_sets_cpu_threads_and_load_does_not(monkeypatch, tmp_path):
    """sample.py on CPU: one thread per core but one (unless OMP_NUM_THREADS says otherwise), as training does;
    solving.load leaves the process's thread count alone (a library call)."""
    import os

    from conftest import SHAPES_CKPT, sample_run

    import solving
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    try:
        torch.set_num_threads(3)
        solving.load(SHAPES_CKPT, device="cpu")
        assert torch.get_num_threads() == 3
        sample_run("--ckpt", SHAPES_CKPT, "--num-puzzles", "2", "--steps", "2", "--out", tmp_path)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_the_held_out_check_solves_in_the_training_precision(tmp_path, monkeypatch):
    """Training's check solves under the same autocast as training (and as sample.py): bf16 here when asked."""
    import train
    seen = []
    real = train.autocast
    monkeypatch.setattr(train, "autocast", lambda device, precision: (seen.append(precision), real(device,
                                                                                                      precision))[1])
    train_image_run(*TINY_IMAGE, "--max-steps", "1", "--eval-every", "0", "--precision", "bf16", "--out", tmp_path)
    assert seen == ["bf16", "bf16"]                                  # the step, then the final check


def test_ema_decay_is_a_setting_below_one(capsys):
    """--ema-decay sets the EMA's largest decay (the paper's settings: the authors' 0.9999); 1 or more is refused."""
    import train_image
    assert train_image.get_parser().parse_args(["--ema-decay", "0.9999"]).ema_decay == 0.9999
    with pytest.raises(SystemExit):
        train_image.get_parser().parse_args(["--ema-decay", "1"])
    assert "--ema-decay: must be below 1 (0.9999 is the authors'), got 1" in capsys.readouterr().err


@pytest.mark.parametrize("script,flag", [(train_image, "--warmup"), (train_image, "--seed"), (train_video, "--workers"),
                                         (train_video, "--eval-every"), (sample, "--seed"), (own, "--superres")])
def test_counts_below_zero_are_refused_by_the_parser(script, flag, capsys):
    flags = ["--ckpt", "x.pt"] if script in (sample, own) else []
    with pytest.raises(SystemExit) as stop:
        script.get_parser().parse_args([*flags, flag, "-1"])
    assert stop.value.code == 2 and f"argument {flag}: must be at least 0, got -1" in capsys.readouterr().err


def test_two_processes_train_as_one(tmp_path):
    """torchrun with 2 processes by half the batch trains as 1 process by the whole batch, with an anchor and a varying
    number of missing pieces: the same draws, and each part's loss the mean over the global batch's generated entries
    (its content too, though the processes hold different numbers of missing pieces), here with 2 micro-batches each
    and a code per token (--codes token: 4 copies of each code, each noised on its own)."""
    token = ["--patch-size", "4", "--codes", "token", "--code-dim", "8"]
    one, _ = weights_after(tmp_path, "w1", "--device", "cpu", *token)
    out = tmp_path / "w2"
    proc = run(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "train_image.py",
               *TINY_IMAGE, "--batch-size", "8", "--anchor", "--missing", "2", "--max-steps", "2", "--eval-every",
               "0", "--precision", "fp32", "--device", "cpu", "--out", out, "--accum", "2", *token)
    # --batch-size 8 is the global batch; one thread each (OMP_NUM_THREADS=1, as torchrun sets for 2 processes)
    assert "2 process(es) on cpu, 1 thread(s) each; global batch 8 = 2 process(es) x 2 micro-batch(es) x 2;" \
        in proc.stdout
    two = torch.load(out / "ckpt.pt", weights_only=True)
    assert two["step"] == 2
    for name, w in one["model"].items():
        torch.testing.assert_close(two["model"][name], w, rtol=1e-4, atol=2e-5)
