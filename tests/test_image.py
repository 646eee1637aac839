"""Image side: puzzles, DiT, training, checkpoints, sample.py, torchrun."""
import json
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import TINY_IMAGE, py, run
from diffusion import GaussianDiffusion
from dit import CONFIGS, DiT, DiTConfig
from jpdvt import puzzle_loss
from posenc import grid_table
from errors import UserError
from puzzles import ImagePuzzles, assemble, cut_image, parse_grid, shuffle_pieces
from synthetic import shapes_image
from train_image import model_config


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


def test_no_jitter_cuts_training_pieces_at_the_centre():
    """--no-jitter: training pieces come from the centres of their cells, as test pieces do; the default jitters."""
    def centre_pieces(ds, i):
        img = ds.source(i, np.random.default_rng([ds.seed, 0, i]))   # the same source image as item i
        want = torch.from_numpy(cut_image(img, ds.grid, ds.piece, ds.gap)[ds[i]["order"].numpy()])
        return want.permute(0, 3, 1, 2).float() * 2 - 1
    still = ImagePuzzles("shapes", "train", (3, 3), 8, gap=4, jitter=False)
    moved = ImagePuzzles("shapes", "train", (3, 3), 8, gap=4)
    assert torch.allclose(still[5]["content"], centre_pieces(still, 5))
    assert not torch.allclose(moved[5]["content"], centre_pieces(moved, 5))


def test_parse_grid():
    assert parse_grid("3") == (3, 3) and parse_grid("2x4") == (2, 4) and parse_grid("10x15") == (10, 15)
    for bad in ["1", "0", "x", "3x", "a", "1x1", "-2"]:
        with pytest.raises(UserError):
            parse_grid(bad)


def test_shapes_dataset_deterministic_and_disjoint():
    a = ImagePuzzles("shapes", "train", (3, 3), 8, missing=2, anchor=True)
    b = ImagePuzzles("shapes", "train", (3, 3), 8, missing=2, anchor=True)
    t = ImagePuzzles("shapes", "test", (3, 3), 8, missing=2, anchor=True)
    assert torch.equal(a[5]["content"], b[5]["content"]) and torch.equal(a[5]["order"], b[5]["order"])
    assert not torch.equal(a[5]["content"], t[5]["content"])
    item = t[3]
    assert item["content"].shape == (9, 3, 8, 8) and item["content"].min() >= -1 and item["content"].max() <= 1
    assert item["missing"].sum() == 2 and not item["missing"][0]       # exactly K at test time; anchor kept
    assert sorted(item["order"].tolist()) == list(range(9))
    img = shapes_image(np.random.default_rng(0), 24, 40)
    assert img.shape == (24, 40, 3) and img.std() > 0.05


def test_folder_dataset_skips_corrupt(tmp_path):
    (tmp_path / "train" / "cats").mkdir(parents=True)
    for i in range(4):
        Image.fromarray((np.random.default_rng(i).random((40, 50, 3)) * 255).astype(np.uint8)).save(
            tmp_path / "train" / "cats" / f"im{i}.png")
    (tmp_path / "train" / "broken.jpg").write_bytes(b"not a jpeg")
    ds = ImagePuzzles("folder", "train", (2, 2), 8, data_dir=str(tmp_path))
    assert len(ds.files) == 5 and len(ds) > 10 ** 9         # training is an endless stream of fresh crops
    items = [ds[i] for i in range(10)]                     # two epochs: every file visited twice
    assert all(it["content"].shape == (4, 3, 8, 8) for it in items)
    assert ds.skipped == {str(tmp_path / "train" / "broken.jpg")}
    with pytest.raises(UserError, match="too few images for its automatic 5% test split"):
        ImagePuzzles("folder", "test", (2, 2), 8, data_dir=str(tmp_path / "train" / "cats"))


# ----------------------------------------------------------------------------- model

def tiny_cfg(**kw):
    return DiTConfig(piece_size=8, patch_size=4, hidden=32, depth=2, heads=2, mlp_dim=64, **kw)


def test_dit_shapes_zero_init_and_equivariance():
    model = DiT(tiny_cfg()).eval()
    b, n = 2, 6
    pos, content = torch.randn(b, n, 32), torch.randn(b, n, 3, 8, 8)
    t, missing = torch.tensor([3, 900]), torch.zeros(b, n, dtype=torch.bool)
    p, c = model(pos, content, t, missing)
    assert p.shape == (b, n, 32) and c.shape == (b, n, 3, 8, 8)
    assert p.abs().max() == 0 and c.abs().max() == 0                  # adaLN-Zero start
    for prm in model.parameters():                                    # perturb so outputs are non-trivial
        prm.data.add_(torch.randn_like(prm) * 0.05)
    p, c = model(pos, content, t, missing)
    perm = torch.randperm(n)
    p2, c2 = model(pos[:, perm], content[:, perm], t, missing[:, perm])
    assert torch.allclose(p2, p[:, perm], atol=1e-5) and torch.allclose(c2, c[:, perm], atol=1e-5)
    assert set(CONFIGS) >= {"tiny", "small", "base"} and CONFIGS["base"].hidden == 768
    assert CONFIGS["base"].depth == 12 and CONFIGS["base"].heads == 12 and CONFIGS["base"].mlp_dim == 3072


def test_width_and_depth_flags_resize_the_model():
    cfg = model_config("tiny", 24, 24, depth=6, width=192)
    assert (cfg.hidden, cfg.mlp_dim, cfg.depth, cfg.heads, cfg.patch_size) == (192, 768, 6, 4, 24)
    assert model_config("tiny", 24, None) == DiTConfig(piece_size=24, patch_size=12, hidden=128, depth=4, heads=4,
                                                       mlp_dim=512)
    with pytest.raises(UserError, match="--width"):
        model_config("tiny", 24, 24, width=190)


def test_training_steps_lower_loss():
    torch.manual_seed(0)
    model = DiT(tiny_cfg())
    diffusion = GaussianDiffusion(1000, "x0")
    ds = ImagePuzzles("shapes", "train", (2, 2), 8, missing=1)
    batch = {k: torch.stack([ds[i][k] for i in range(16)]) for k in ("content", "order", "missing")}
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    table = grid_table(2, 2)

    def loss():
        torch.manual_seed(1)
        return puzzle_loss(model, diffusion, batch, table, False, None)["loss"]

    start = loss().item()
    for _ in range(30):
        opt.zero_grad()
        loss().backward()
        opt.step()
    assert loss().item() < 0.7 * start


# ----------------------------------------------------------------------------- scripts

def test_checkpoint_contents(image_ckpt):
    ck = torch.load(image_ckpt, weights_only=True)
    assert set(ck) == {"config", "model", "ema", "opt", "step"} and ck["step"] == 20
    assert ck["config"]["kind"] == "image" and ck["config"]["grid"] == [2, 2]
    log = (image_ckpt.parent / "log.txt").read_text()
    assert "steps/s" in log and "eval step 10" in log and "final step 20" in log


def test_sample_end_to_end(image_ckpt, tmp_path):
    py("sample.py", "--ckpt", image_ckpt, "--num-puzzles", "6", "--steps", "5", "--batch-size", "4",
       "--out", tmp_path)
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["num_puzzles"] == 6 and 0 <= m["piece_acc"] <= 1 and 0 <= m["puzzle_acc"] <= 1
    assert m["missing"] == 1 and m["steps"] == 5 and m["sampler"] == "ddpm"
    png = Image.open(tmp_path / "examples.png")
    width, height = 4 * 18 + 3 * 6, 6 * 18 + 5 * 6   # 4 panels of 2x2 8 px pieces; a row per puzzle (6 < 8)
    assert png.size == (width * (480 // width), height * (480 // width))  # enlarged to stay visible
    py("sample.py", "--ckpt", image_ckpt, "--num-puzzles", "2", "--steps", "3", "--sampler", "ddim",
       "--assign", "greedy", "--missing", "0", "--out", tmp_path / "b")
    assert json.loads((tmp_path / "b" / "metrics.json").read_text())["assign"] == "greedy"


def test_sample_repeats_are_passes_of_consecutive_seeds(image_ckpt, tmp_path):
    flags = ["--ckpt", image_ckpt, "--num-puzzles", "4", "--steps", "3", "--missing", "0"]
    py("sample.py", *flags, "--seed", "3", "--repeats", "3", "--out", tmp_path / "r")
    m = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert m["repeats"] == 3 and len(m["passes"]) == 3 and m["num_puzzles"] == 4
    assert m["piece_acc"] == pytest.approx(np.mean([p["piece_acc"] for p in m["passes"]]))
    for r in (0, 2):                    # pass r is exactly the single run of seed 3 + r
        py("sample.py", *flags, "--seed", str(3 + r), "--out", tmp_path / str(r))
        single = json.loads((tmp_path / str(r) / "metrics.json").read_text())
        assert "passes" not in single and single["piece_acc"] == m["passes"][r]["piece_acc"]


def test_bench_score_only_needs_an_earlier_run(tmp_path):
    proc = py("bench.py", "--score-only", "image-3x3", "--out", tmp_path, check=False)
    assert proc.returncode != 0 and "--score-only needs" in proc.stderr and "python bench.py image-3x3" in proc.stderr


def test_sample_own_photo(image_ckpt, tmp_path):
    photo = tmp_path / "photo.jpg"
    Image.fromarray((shapes_image(np.random.default_rng(5), 120, 160) * 255).astype(np.uint8)).save(photo)
    out = py("sample.py", "--ckpt", image_ckpt, "--image", photo, "--steps", "3", "--out", tmp_path).stdout
    assert "solved" in out and (tmp_path / "photo_solved.png").exists()
    # drawn from the photo's own pixels: 2x2 pieces of 60 px (its 120 px side / 2), not the model's 8 px pieces
    original = np.asarray(Image.open(tmp_path / "photo_solved.png"))[:, -120:]
    assert original.shape[0] == 120 + 2 and abs(original[:60, :60].astype(float).mean() -
                                                 np.asarray(Image.open(photo))[:60, 20:80].mean()) < 10


def test_resume_continues(image_ckpt, tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    (out / "ckpt.pt").write_bytes(image_ckpt.read_bytes())
    py("train_image.py", "--resume", out / "ckpt.pt", "--max-steps", "25", "--eval-every", "0", "--out", out)
    ck = torch.load(out / "ckpt.pt", weights_only=True)
    assert ck["step"] == 25 and ck["config"]["missing"] == 1            # settings came from the checkpoint


def test_torchrun_two_cpu_processes(tmp_path):
    proc = run(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "train_image.py", *TINY_IMAGE, "--max-steps", "4", "--eval-every", "0", "--out", tmp_path,
               "--device", "cpu")
    assert "2 process(es)" in proc.stdout
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["step"] == 4
