"""Image side: puzzles, DiT, training, checkpoints, sample.py (test set, refusals), torchrun."""
import argparse
import importlib
import json
import os
import shutil
from dataclasses import asdict

import numpy as np
import pytest
import torch
from conftest import ROOT, SHAPES_CKPT, TINY_IMAGE, assert_one_line_error, own_run, py, sample_run, train_image_run
from PIL import Image

import jpdvt
import train_image
from config import FORMAT, Config, TrainConfig, load_checkpoint, typed
from diffusion import GaussianDiffusion
from dit import DiT, DiTConfig
from jpdvt import anchor_pieces, puzzle_loss
from pictures import assemble
from plumbing.cli import UserError, parse_grid
from puzzles import SPLITS, ImageConfig, ImagePuzzles, collate, cut_image, puzzle_set, shuffle_pieces
from sources.synthetic import shapes_image

# ----------------------------------------------------------------------------- puzzles


@pytest.mark.parametrize("grid,piece,gap", [((3, 3), 8, 0), ((2, 4), 6, 3), ((4, 2), 5, 0)])
def test_cut_assemble_round_trip(grid, piece, gap):
    rng = np.random.default_rng(0)
    img = rng.random((grid[0] * (piece + gap), grid[1] * (piece + gap), 3)).astype(np.float32)
    pieces = cut_image(img, grid, piece, gap)                          # centre crops
    assert pieces.shape == (grid[0] * grid[1], piece, piece, 3)
    order, _ = shuffle_pieces(len(pieces), rng)
    back = assemble(pieces[order], order, grid)                         # put shuffled pieces back
    if gap == 0:
        assert np.array_equal(back, img)
    else:
        o = gap // 2
        assert np.array_equal(back[:piece, piece:2 * piece], img[o:o + piece, piece + gap + o:piece + gap + o + piece])
    random_crops = cut_image(img, grid, piece, gap, np.random.default_rng(1))
    assert random_crops.shape == pieces.shape


def test_only_training_pieces_are_random_crops_of_their_cells():
    """With a gap, training pieces come from random places in their cells; val and test pieces from the centres."""
    cfg = ImageConfig(grid=(3, 3), piece_size=8, gap=4)

    def centre_pieces(ds, i):
        img = ds.source(i, np.random.default_rng([ds.seed, SPLITS[ds.split], i]))   # the source image of item i
        want = torch.from_numpy(cut_image(img, cfg.grid, cfg.piece_size, cfg.gap)[ds[i]["true_pos"].numpy()])
        return want.permute(0, 3, 1, 2).float() * 2 - 1
    for split in ("val", "test"):
        ds = ImagePuzzles(cfg, split, seed=0)
        assert torch.allclose(ds[5]["content"], centre_pieces(ds, 5))
    train = ImagePuzzles(cfg, "train", seed=0)
    assert not torch.allclose(train[5]["content"], centre_pieces(train, 5))


def test_parse_grid():
    assert parse_grid("3") == (3, 3) and parse_grid("2x4") == (2, 4) and parse_grid("10x15") == (10, 15)
    for bad in ["1", "0", "x", "3x", "a", "1x1", "-2"]:
        with pytest.raises(UserError):
            parse_grid(bad)


def test_shapes_dataset_deterministic_and_disjoint():
    cfg = ImageConfig(grid=(3, 3), piece_size=8, missing=2, anchor=True)
    a, b, t = puzzle_set(cfg, "train", 0), ImagePuzzles(cfg, "train", 0), puzzle_set(cfg, "test", 0)
    assert torch.equal(a[5]["content"], b[5]["content"]) and torch.equal(a[5]["true_pos"], b[5]["true_pos"])
    assert not torch.equal(a[5]["content"], t[5]["content"])
    assert not torch.equal(puzzle_set(cfg, "val", 0)[5]["content"], t[5]["content"])
    assert not torch.equal(puzzle_set(cfg, "test", 1)[5]["content"], t[5]["content"])   # another seed
    item = t[3]
    assert item["content"].shape == (9, 3, 8, 8) and item["content"].min() >= -1 and item["content"].max() <= 1
    assert item["missing"].sum() == 2 and not item["missing"][0]       # exactly K at test time; anchor kept
    assert sorted(item["true_pos"].tolist()) == list(range(9))
    assert {int(a[i]["missing"].sum()) for i in range(30)} == {0, 1, 2}  # 0..K in training
    img = shapes_image(np.random.default_rng(0), 24, 40)
    assert img.shape == (24, 40, 3) and img.std() > 0.05


def test_folder_dataset_skips_corrupt(tmp_path):
    (tmp_path / "train" / "cats").mkdir(parents=True)
    for split in ("val", "test"):                           # both held-out folders: train/ is all training
        (tmp_path / split).mkdir()
        Image.new("RGB", (40, 40), (9, 9, 9)).save(tmp_path / split / "x.png")
    for i in range(4):
        Image.fromarray((np.random.default_rng(i).random((40, 50, 3)) * 255).astype(np.uint8)).save(
            tmp_path / "train" / "cats" / f"im{i}.png")
    (tmp_path / "train" / "broken.jpg").write_bytes(b"not a jpeg")
    ds = ImagePuzzles(ImageConfig(dataset="folder", data_dir=str(tmp_path), grid=(2, 2), piece_size=8), "train")
    assert len(ds.files) == 5 and len(ds) > 10 ** 9         # training is an endless stream of fresh crops
    items = [ds[i] for i in range(10)]                     # two epochs: every file visited twice
    assert all(it["content"].shape == (4, 3, 8, 8) for it in items)
    assert ds.pictures.skipped == {str(tmp_path / "train" / "broken.jpg")}


# ----------------------------------------------------------------------------- model

def tiny_cfg(**kw):
    return DiTConfig(piece_size=8, patch_size=4, hidden=32, depth=2, heads=2, mlp_dim=64, **kw)


def test_dit_shapes_zero_init_and_equivariance():
    torch.manual_seed(0)
    model = DiT(tiny_cfg()).eval()
    b, n = 2, 6
    code, content = torch.randn(b, n, 32), torch.randn(b, n, 3, 8, 8)
    t, missing = torch.tensor([3, 900]), torch.zeros(b, n, dtype=torch.bool)
    p, c = model(code, content, t, missing, torch.zeros_like(missing))
    assert p.shape == (b, n, 32) and c.shape == (b, n, 3, 8, 8)
    assert p.abs().max() == 0 and c.abs().max() == 0                  # adaLN-Zero start
    for prm in model.parameters():                                    # perturb so outputs are non-trivial
        prm.data.add_(torch.randn_like(prm) * 0.05)
    anchor = torch.zeros_like(missing)
    anchor[:, 0] = True
    p, c = model(code, content, t, missing, anchor)
    perm = torch.randperm(n)
    p2, c2 = model(code[:, perm], content[:, perm], t, missing[:, perm], anchor[:, perm])
    assert torch.allclose(p2, p[:, perm], atol=1e-5) and torch.allclose(c2, c[:, perm], atol=1e-5)
    free = torch.zeros_like(missing)                                     # no code told
    assert not torch.allclose(model(code, content, t, missing, free)[0], p, atol=1e-5)   # the anchor flag is seen


def test_patch_size_default_and_check():
    """--patch-size defaults to the largest divisor of the piece size up to the model's patch; others must divide."""
    def model(*flags):
        return train_image.make_config(train_image.get_parser().parse_args(["--piece-size", "24", *flags])).model
    cfg = model()
    assert (cfg.piece_size, cfg.patch_size) == (24, 12) and DiT(cfg).tokens_per_side == 2
    assert model("--patch-size", "8").patch_size == 8
    with pytest.raises(UserError, match="--patch-size 5 must divide --piece-size 24"):
        model("--patch-size", "5")


def test_training_steps_lower_loss():
    torch.manual_seed(0)
    model = DiT(tiny_cfg())
    diffusion = GaussianDiffusion(1000, "x0")
    cfg = ImageConfig(grid=(2, 2), piece_size=8, missing=1)
    ds = puzzle_set(cfg, "train", 0)
    batch = collate([ds[i] for i in range(16)])
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    table = jpdvt.position_table(argparse.Namespace(puzzle=cfg, model=tiny_cfg()))

    def loss():
        torch.manual_seed(1)
        weights = {"code": 1.0, "content": 0.1}
        return puzzle_loss(model, diffusion, batch, table, anchor_pieces(batch, False), weights)["loss"]

    start = loss().item()
    for _ in range(20):
        opt.zero_grad()
        loss().backward()
        opt.step()
    assert loss().item() < 0.7 * start


# ----------------------------------------------------------------------------- scripts

def test_checkpoint_contents(image_ckpt):
    ck = torch.load(image_ckpt, weights_only=True)                   # plain types and tensors only
    assert set(ck) == {"format", "config", "model", "ema", "opt", "step"} and ck["step"] == 8
    assert ck["format"] == FORMAT == 3
    assert set(ck["config"]) == {"kind", "prediction", "puzzle", "model", "train"}
    config = load_checkpoint(image_ckpt, "image")["config"]
    assert config.puzzle == ImageConfig(grid=(2, 2), piece_size=8, missing=1)
    assert (config.model.piece_size, config.model.patch_size) == (8, 8) and config.prediction == "x0"
    train = config.train                                                # a TrainConfig
    assert isinstance(train, TrainConfig) and (train.max_steps, train.batch_size, train.warmup) == (8, 4, 0)
    log = (image_ckpt.parent / "log.txt").read_text()
    assert "eval step 4 piece_acc" in log and "final step 8 piece_acc" in log
    first = log.splitlines()[0]                                         # the resolved settings, every one
    assert first.startswith("settings: dataset shapes; ") and first.endswith("; prediction x0")
    assert "; grid (2, 2); " in first and "; batch_size 4; " in first and "; lr 0.002; " in first
    assert "(flag)" not in first and "paper table" not in first


def test_sample_end_to_end(image_ckpt, tmp_path, capsys):
    m = sample_run("--ckpt", image_ckpt, "--num-puzzles", "6", "--steps", "3", "--batch-size", "4", "--out", tmp_path)
    m = json.loads(json.dumps(m))                        # what main returns is what metrics.json holds
    assert m == json.loads((tmp_path / "metrics.json").read_text())
    assert (m["num_puzzles"], m["missing"], m["steps"], m["sampler"], m["train_step"]) == (6, 1, 3, "ddpm", 8)
    assert (m["grid"], m["piece_size"], m["gap"], m["anchor"]) == ([2, 2], 8, 0, False)
    assert m["precision"] == "fp32" and not {"split_seen", "calibration", "confidence"} & set(m)
    # the 3 given pieces of each of the 6 puzzles are scored (the missing one is generated, not scored)
    assert m["piece_acc"] * 18 == pytest.approx(round(m["piece_acc"] * 18))
    assert m["puzzle_acc"] * 6 == pytest.approx(round(m["puzzle_acc"] * 6)) and m["puzzle_acc"] <= m["piece_acc"]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("sampling: ddpm, 3 steps, 1 sample(s), hungarian assignment, judge none (steps: flag; sampler, "
                        "samples, assign: default)")
    assert f"6 test puzzles x 1 pass(es): piece accuracy {m['piece_acc']:.4f}, puzzle accuracy " in lines[-2]
    png = Image.open(tmp_path / "examples.png")
    width, height = 4 * 18 + 3 * 6, 6 * 18 + 5 * 6   # 4 panels of 2x2 8 px pieces; a row per puzzle (6 < 8)
    k = 480 // width                                                    # enlarged to stay visible, titles above
    assert png.size[0] == width * k and 16 <= png.size[1] - height * k < 60, png.size
    b = sample_run("--ckpt", image_ckpt, "--num-puzzles", "2", "--steps", "2", "--sampler", "ddim",
                   "--assign", "greedy", "--missing", "0", "--out", tmp_path / "b")
    assert (b["assign"], b["sampler"], b["missing"]) == ("greedy", "ddim", 0)
    assert b["piece_acc"] * 8 == pytest.approx(round(b["piece_acc"] * 8))    # all 4 pieces of 2 puzzles


def test_trained_model_solves_what_an_untrained_one_cannot(tmp_path):
    """The shipped shapes model solves most test puzzles; the same network untrained places pieces at chance (so the
    accuracy measures the model, not the truth leaking into the solver)."""
    trained = sample_run("--ckpt", SHAPES_CKPT, "--num-puzzles", "8", "--steps", "10", "--out", tmp_path / "t")
    assert trained["piece_acc"] >= 0.9 and trained["puzzle_acc"] >= 0.75, trained
    ck = load_checkpoint(SHAPES_CKPT, "image")
    torch.manual_seed(0)
    fresh = DiT(ck["config"].model)
    torch.save({"format": FORMAT, "config": {"kind": "image", **asdict(ck["config"])}, "model": {},
                "ema": fresh.state_dict(), "opt": {}, "step": 0}, tmp_path / "untrained.pt")
    untrained = sample_run("--ckpt", tmp_path / "untrained.pt", "--num-puzzles", "8", "--steps", "10",
                           "--out", tmp_path / "u")
    assert untrained["piece_acc"] <= 0.4 and untrained["puzzle_acc"] == 0.0, untrained


def test_the_first_line_names_the_sampling_and_where_each_setting_came_from(tmp_path, capsys):
    """The shipped shapes model stores its sampling (DDIM-50, 16 samples averaged, chosen on val) and no judge:
    sample.py's first line says so, --steps from the flag, the rest from the checkpoint; metrics.json keeps the same
    sources. The judge runs only when asked."""
    m = sample_run("--ckpt", SHAPES_CKPT, "--num-puzzles", "2", "--steps", "2", "--out", tmp_path)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("sampling: ddim, 2 steps, 16 sample(s) averaged (ours, not the paper's), hungarian "
                            "assignment, judge none ("), first
    assert first.endswith("(steps: flag; sampler, samples, assign: the checkpoint's, chosen on val)"), first
    chosen = "the checkpoint's, chosen on val"
    assert m["sampling_from"] == {"steps": "flag", "sampler": chosen, "samples": chosen, "assign": chosen}
    assert m["judge"] == "none"
    m = sample_run("--ckpt", SHAPES_CKPT, "--num-puzzles", "2", "--steps", "2", "--judge", "classic", "--out", tmp_path)
    assert m["judge"] == "classic" and 0 <= m["piece_acc"] <= 1


def test_checkpoints_scored_without_out_keep_their_own_folders(tmp_path):
    """Two checkpoints scored one after the other with no --out: each metrics.json in samples/CKPT-SPLIT[-...]/ next
    to its checkpoint (copies here, so that nothing is written into checkpoints/), neither overwritten."""
    names = ("image-shapes-3x3", "image-shapes-3x3-anchor-missing")
    for name in names:
        shutil.copy(os.path.join(ROOT, "checkpoints", f"{name}.pt"), tmp_path / f"{name}.pt")
        sample_run("--ckpt", tmp_path / f"{name}.pt", "--num-puzzles", "2", "--steps", "2")
    sample_run("--ckpt", tmp_path / f"{names[0]}.pt", "--num-puzzles", "2", "--steps", "2", "--split", "val",
               "--missing", "1")
    folders = sorted(p.name for p in (tmp_path / "samples").iterdir())
    assert folders == [f"{names[1]}-test", f"{names[0]}-test", f"{names[0]}-val-missing-1"], folders
    for folder, name, split in zip(folders, (names[1], names[0], names[0]), ("test", "test", "val")):
        m = json.loads((tmp_path / "samples" / folder / "metrics.json").read_text())
        assert m["ckpt"] == str(tmp_path / f"{name}.pt") and m["split"] == split, folder


def test_sample_repeats_are_passes_of_consecutive_seeds(image_ckpt, tmp_path):
    flags = ["--ckpt", image_ckpt, "--num-puzzles", "4", "--steps", "2", "--missing", "0"]
    m = sample_run(*flags, "--seed", "3", "--repeats", "3", "--out", tmp_path / "r")
    assert m["repeats"] == 3 and len(m["passes"]) == 3 and m["num_puzzles"] == 4
    assert m["piece_acc"] == pytest.approx(np.mean([p["piece_acc"] for p in m["passes"]]))
    for r in (0, 2):                    # pass r is exactly the single run of seed 3 + r
        single = sample_run(*flags, "--seed", str(3 + r), "--out", tmp_path / str(r))
        assert len(single["passes"]) == 1 and single["piece_acc"] == m["passes"][r]["piece_acc"]
        assert single["puzzle_acc"] == m["passes"][r]["puzzle_acc"]


def test_bench_score_only_needs_an_earlier_run(tmp_path):
    bench = importlib.import_module("bench.__main__")
    with pytest.raises(SystemExit, match="--score-only and --resume need .*python -m bench image-3x3"):
        bench.run_recipe("image-3x3", str(tmp_path), score_only=True)


def test_inputs_of_the_other_kind_are_refused(image_ckpt, tmp_path):
    with pytest.raises(UserError,
                       match=r"--superres does not apply to .*, which holds the image model; its input is --pieces$"):
        own_run("--ckpt", image_ckpt, "--superres", "1", "--out", tmp_path)
    proc = py("-m", "solving.own", "--ckpt", image_ckpt, "--frames", tmp_path, "--out", tmp_path, check=False)
    assert_one_line_error(proc, f"--frames does not apply to {image_ckpt}, which holds the image model; its input is "
                                "--pieces")


def test_config_round_trip(tmp_path):
    """A Config stored as a checkpoint writes it (plain values) loads back equal, its train part a TrainConfig."""
    tc = TrainConfig(lr=3e-4, max_steps=7)
    config = Config(puzzle=ImageConfig(grid=(2, 4), anchor=True), model=DiTConfig(piece_size=16), train=tc)
    torch.save({"format": FORMAT, "config": {"kind": "image", **asdict(config)}, "model": {}, "ema": {}, "opt": {},
                "step": 0}, tmp_path / "c.pt")
    back = load_checkpoint(tmp_path / "c.pt", "image")["config"]
    assert (back.puzzle, back.model, back.prediction) == (config.puzzle, config.model, config.prediction)
    assert back.puzzle.grid == (2, 4)                                    # a list again a tuple
    assert back.train == tc and typed(TrainConfig, asdict(tc), "c.pt") == tc   # stored as plain values, typed


def test_codes_per_token_train_and_solve(tmp_path):
    """--codes token (the authors' interface): each piece's code on each of its K tokens, every copy noised on its own,
    read and written per token; the solver averages a piece's K predictions before the assignment."""
    model = DiT(DiTConfig(piece_size=8, patch_size=4, code_dim=8, codes="token"))
    for p in model.parameters():                                  # adaLN-Zero starts at zero outputs
        torch.nn.init.normal_(p, std=0.05)
    b, n, k = 2, 4, 4
    code = torch.randn(b, n, k, 8)
    out, content = model(code, torch.rand(b, n, 3, 8, 8) * 2 - 1, torch.tensor([5, 900]), torch.zeros(b, n, dtype=bool),
                         torch.zeros(b, n, dtype=bool))
    assert out.shape == (b, n, k, 8) and content.shape == (b, n, 3, 8, 8)
    assert not torch.allclose(out[:, :, 0], out[:, :, 1])          # a code per token, not one pooled per piece
    train_image_run(*TINY_IMAGE, "--patch-size", "4", "--codes", "token", "--code-dim", "8", "--max-steps", "2",
                    "--eval-every", "0", "--out", tmp_path / "run")
    sample_run("--ckpt", tmp_path / "run" / "ckpt.pt", "--num-puzzles", "4", "--steps", "2", "--out", tmp_path / "s")
    metrics = json.loads((tmp_path / "s" / "metrics.json").read_text())
    assert 0 <= metrics["piece_acc"] <= 1 and metrics["anchor"] is False


def test_prepare_resizes_a_folder_once_keeping_its_layout(tmp_path):
    """python -m sources.prepare: every image's shorter side at most --side (never enlarged), at the same path and
    in its extension's format, so the prepared folder splits as the original."""
    from sources.prepare import get_parser
    from sources.prepare import main as prepare
    for split, name, size in [("train", "n01/a.JPEG", (500, 375)), ("train", "n01/b.png", (120, 90)),
                              ("val", "n01/c.JPEG", (300, 400))]:
        path = tmp_path / "raw" / split / name
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", size, (200, 30, 30)).save(path)
    prepare(get_parser().parse_args(["--data-dir", str(tmp_path / "raw"), "--out", str(tmp_path / "p"), "--workers",
                                     "1", "--side", "255"]))
    sizes = {str(p.relative_to(tmp_path / "p")): Image.open(p).size for p in (tmp_path / "p").rglob("*.*")}
    assert sizes == {"train/n01/a.JPEG": (340, 255), "train/n01/b.png": (120, 90), "val/n01/c.JPEG": (255, 340)}
