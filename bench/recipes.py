"""
The benchmark's recipes: what `python -m bench NAME` trains and scores (each a row per evaluation), and the settings
of the groups that score the shipped checkpoints. bench/__main__.py runs them; docs/choices.md says which decision each
recipe's rows carry. Data folders are read in place (`../shared/data`); a recipe that starts from another run
(--init) finds it under runs/bench.
"""
TEST_PUZZLES = "200"
PHOTOS = "../shared/data/photos"     # real photographs (train/ and test/; val is a hashed share of train/)
MNIST = "../shared/data/mnist"       # the MNIST IDX files, Moving MNIST is generated from them
# 39 test photos: one pass is noisy, so photo rows are the mean of 8 passes (seeds 1-8)
PHOTO_PASSES = 8
REPEATS = ["--repeats", str(PHOTO_PASSES)]


def with_flag(flags, name, value):
    """A copy of the flag list `flags` with the value after `name` replaced by `value`."""
    i = flags.index(name)
    return flags[:i + 1] + [value] + flags[i + 2:]


PHOTO_3X3 = ["--dataset", "folder", "--data-dir", PHOTOS, "--grid", "3", "--piece-size", "24", "--patch-size", "24",
             "--batch-size", "64", "--lr", "2e-3", "--schedule", "cosine", "--eval-puzzles", "39"]
MIXED = PHOTO_3X3 + ["--mix-shapes", "0.25"]                   # a quarter of the training puzzles: built-in shapes
PHOTO = MIXED + ["--eval-every", "4000", "--max-steps", "24000"]          # the shipped photo recipe
# the masked-photo fine-tune of the shipped photo model: up to 3 missing pieces, lr halved
MISSING_FT = with_flag(PHOTO_3X3, "--lr", "1e-3") + [
    "--init", "checkpoints/image-photos-3x3.pt", "--missing", "3", "--eval-every", "1000", "--max-steps", "4000"]
VAL_MISSING_0_3 = [["--split", "val", "--missing", str(k), *REPEATS] for k in range(4)]
MMNIST = ["--dataset", "movingmnist", "--data-dir", MNIST, "--size", "32", "--lr", "1e-3", "--schedule", "cosine",
          "--eval-every", "500", "--eval-puzzles", "32"]
MMNIST_5X4 = MMNIST + ["--pieces", "5", "--frames-per-piece", "4", "--curriculum", "3", "2000"]
# the fix of the Moving MNIST recipes: batch 32, lr 5e-4, data in the main process (the same batches as a worker's)
MMNIST_B32 = with_flag(with_flag(MMNIST, "--lr", "5e-4"), "--eval-every", "2000") + ["--batch-size", "32",
                                                                                     "--workers", "0"]

# name -> (training script, training flags, evaluations: a list of extra sample.py flags, one row each)
RECIPES = {
    # the shipped checkpoints' recipes (`python -m bench --export` makes a run's ckpt.pt shippable)
    "image-3x3": ("train_image.py", ["--grid", "3", "--patch-size", "16", "--batch-size", "64", "--lr", "2e-3",
                                     "--schedule", "cosine", "--max-steps", "5000"], [[]]),     # image-shapes-3x3
    "video-5x4": ("train_video.py", ["--pieces", "5", "--frames-per-piece", "4", "--lr", "1e-3", "--schedule",
                                     "cosine", "--max-steps", "3200"], [[]]),                    # video-digits-5x4
    "video-mmnist-5x4-batch32-lr5e-4": ("train_video.py", with_flag(MMNIST_5X4, "--lr", "5e-4") + [
        "--batch-size", "32", "--max-steps", "12000"], [[]]),                                    # video-mmnist-5x4
    "video-mmnist-10x2-batch32-lr5e-4-18k": ("train_video.py", MMNIST_B32 + [
        "--pieces", "10", "--frames-per-piece", "2", "--curriculum", "3", "2000", "--max-steps", "18000"],
        [["--split", "val"]]),                                                                   # video-mmnist-10x2
    "video-mmnist-20x1-batch32-lr5e-4-cur4k-24k-head6": ("train_video.py", MMNIST_B32 + [
        "--pieces", "20", "--frames-per-piece", "1", "--curriculum", "3", "4000", "--max-steps", "24000",
        "--model", "tiny-head6"], [["--split", "val"]]),                                         # video-mmnist-20x1
    # image-photos-3x3: trained on the 183 training photos (val held out), scored on val, then on test once
    "image-photos-3x3-val": ("train_image.py", PHOTO, [["--split", "val", *REPEATS], REPEATS]),
    # image-photos-3x3-gap: its gap-8 fine-tune, up to 3 missing, scored with the README's 32 samples
    "image-photos-3x3-val-gap-ft": ("train_image.py", with_flag(PHOTO_3X3, "--lr", "1e-3") + [
        "--init", "runs/bench/image-photos-3x3-val/ckpt.pt", "--gap", "8", "--missing", "3", "--eval-every", "1000",
        "--max-steps", "4000"], [["--split", "val", "--missing", "0", "--samples", "32", "--sampler", "ddpm",
                                  *REPEATS]]),
    # image-photos-3x3-missing: 8000 steps of MISSING_FT, one sample and 8 (its estimator) at 0..3 missing
    "image-photos-3x3-missing-ft-8k": ("train_image.py", with_flag(MISSING_FT, "--max-steps", "8000"),
                                       VAL_MISSING_0_3 + [m + ["--samples", "8"] for m in VAL_MISSING_0_3]),
    # the decisions behind them (docs/choices.md)
    "image-photos-3x3-missing-ft": ("train_image.py", MISSING_FT, VAL_MISSING_0_3),
    "image-photos-3x3-missing-ft-w1": ("train_image.py", MISSING_FT + ["--weight-content", "1.0"], VAL_MISSING_0_3),
    # the shapes mix against photos only (the rows: before the val split, on all 205 photos)
    "image-photos-3x3": ("train_image.py", PHOTO, [REPEATS]),
    "image-photos-3x3-nomix": ("train_image.py", PHOTO_3X3 + ["--max-steps", "24000"], [REPEATS]),
    # Moving MNIST: the curriculum, the frame size, the 5 x 4 recipe before its fix
    "video-10x2": ("train_video.py", ["--pieces", "10", "--frames-per-piece", "2", "--lr", "1e-3", "--schedule",
                                      "cosine", "--max-steps", "3200"], [[]]),
    "video-mmnist-10x2": ("train_video.py", MMNIST + ["--pieces", "10", "--frames-per-piece", "2", "--curriculum", "3",
                                                      "2000", "--max-steps", "5000"], [[]]),
    "video-mmnist-10x2-64px": ("train_video.py", with_flag(MMNIST, "--size", "64") + [
        "--pieces", "10", "--frames-per-piece", "2", "--curriculum", "3", "2000", "--max-steps", "5000",
        "--workers", "0"], [["--split", "val"]]),
    "video-mmnist-5x4": ("train_video.py", MMNIST_5X4 + ["--max-steps", "10000"], [[]]),
}

# the masked Moving MNIST model (the paper's Fig. 7): 8 pieces x 4 frames (32-frame clips), 0 to 2 of the 8 pieces
# missing (up to 25%), the paper's loss weights (codes 0.2, missing frames 0.8), fine-tuned from the 5 x 4 model
MASKED_8X4 = ["--dataset", "movingmnist", "--data-dir", MNIST, "--size", "32", "--pieces", "8", "--frames-per-piece",
              "4", "--missing", "2", "--weight-code", "0.2", "--weight-content", "0.8", "--init",
              "checkpoints/video-mmnist-5x4.pt", "--lr", "5e-4", "--schedule", "cosine", "--batch-size", "32",
              "--workers", "0", "--max-steps", "5000", "--eval-every", "1000", "--eval-puzzles", "32", "--ckpt-every",
              "500", "--log-every", "100"]
RECIPES["video-mmnist-8x4-missing"] = ("train_video.py", MASKED_8X4, [["--split", "val", "--missing", str(k),
                                                                      "--seed", "1"] for k in range(3)])
# temporal super-resolution (the supplement's downstream task): 7 pieces x 4 frames, the pieces at slots 0, 2, 4, 6
# given and told, the 3 between missing (--superres 1), fine-tuned from the masked model (which already draws pieces)
SUPERRES = ["--dataset", "movingmnist", "--data-dir", MNIST, "--size", "32", "--pieces", "7", "--frames-per-piece", "4",
            "--superres", "1", "--weight-code", "0.2", "--weight-content", "0.8", "--init",
            "checkpoints/video-mmnist-8x4-missing.pt", "--lr", "5e-4", "--schedule", "cosine", "--batch-size", "32",
            "--workers", "0", "--max-steps", "1000", "--eval-every", "500", "--eval-puzzles", "32", "--ckpt-every",
            "250", "--log-every", "100"]
RECIPES["video-mmnist-7x4-superres"] = ("train_video.py", SUPERRES, [])
SUPERRES_SEED = 20261214          # its test clips: a seed no choice has seen
MASKED_SEED = 20261213            # the masked model's test clips: a seed no choice has seen
MASKED_CLIPS = ("movingmnist", MNIST, 8, 4, 1000)                  # dataset, folder, pieces, frames, clips

# the classic solvers: (dataset, data dir, grid, piece px, gap px, missing pieces, passes: seeds 1, 2, ...)
# large puzzles: 5 x 5 photos fine-tuned from the 3 x 3 models (their 24 px pieces, one token a piece), and the
# paper's 150 pieces with 7% erosion at a size every photo fits (10 x 15 pieces of 14 px in 15 px cells), from scratch;
# each scored on the 22 val photos x 8 passes: DDIM-50 x8 alone and with the judge, x1, x16 with the judge
LARGE_VAL = [["--split", "val", *REPEATS, "--samples", k, "--judge", j] for k, j in
             (("8", "none"), ("8", "classic"), ("1", "none"), ("16", "classic"))]
PHOTO_5X5 = with_flag(with_flag(with_flag(MIXED, "--grid", "5"), "--lr", "1e-3"), "--eval-puzzles", "22") + [
    "--init", "checkpoints/image-photos-3x3.pt", "--max-steps", "4000", "--eval-every", "1000", "--ckpt-every", "1000"]
RECIPES["image-photos-5x5"] = ("train_image.py", PHOTO_5X5, LARGE_VAL)
GAP_5X5 = with_flag(with_flag(with_flag(PHOTO_3X3, "--grid", "5"), "--lr", "1e-3"), "--eval-puzzles", "22") + [
    "--gap", "8", "--init", "checkpoints/image-photos-3x3-gap.pt", "--max-steps", "3000", "--eval-every", "1000",
    "--ckpt-every", "1000"]
RECIPES["image-photos-5x5-gap"] = ("train_image.py", GAP_5X5, LARGE_VAL)
PIECES_150 = MIXED
for flag, value in (("--grid", "10x15"), ("--piece-size", "14"), ("--patch-size", "14"), ("--batch-size", "32"),
                    ("--eval-puzzles", "22")):
    PIECES_150 = with_flag(PIECES_150, flag, value)
PIECES_150 += ["--gap", "1", "--max-steps", "2000", "--eval-every", "2000", "--ckpt-every", "500"]
# 150 pieces cost 6 times the tokens of 25: 4 passes, K 16 left out
RECIPES["image-photos-10x15-gap1"] = ("train_image.py", PIECES_150, [with_flag(e, "--repeats", "4")
                                                                    for e in LARGE_VAL[:3]])

IMAGE_BASELINES = [("shapes", None, (3, 3), 16, 0, 0, 1)]
IMAGE_BASELINES += [("folder", PHOTOS, (3, 3), 24, gap, k, PHOTO_PASSES) for gap in (0, 8) for k in range(4)]
IMAGE_BASELINES += [("folder", PHOTOS, (5, 5), 24, gap, 0, PHOTO_PASSES) for gap in (0, 8)]
IMAGE_BASELINES += [("folder", PHOTOS, (10, 15), 14, 1, 0, 4)]
IMAGE_VAL_BASELINES = IMAGE_BASELINES[1:]                         # the photo settings on val (baselines-val)
# the shipped checkpoints: `python -m bench --export` of their recipes' EMA weights (above)
SHIPPED = {name: f"checkpoints/{name}.pt" for name in ("image-shapes-3x3", "video-digits-5x4", "video-mmnist-10x2",
                                                       "video-mmnist-5x4", "video-mmnist-20x1", "image-photos-3x3",
                                                       "image-photos-3x3-gap", "image-photos-3x3-missing",
                                                       "video-mmnist-8x4-missing", "image-photos-5x5",
                                                       "image-photos-5x5-gap", "video-mmnist-7x4-superres")}
# the README's video figures: each shipped video model once, with its own estimator, on test clips of a seed no
# choice has seen; (dataset, data dir, pieces, frames per piece) of each for frame chaining on the same clips
FRESH = 20261202
FRESH_SEED = {"video-mmnist-20x1": 1000, "video-mmnist-10x2": 1000, "video-mmnist-5x4": 1000, "video-digits-5x4": 200}
FRESH_CLIPS = {"video-mmnist-20x1": ("movingmnist", MNIST, 20, 1), "video-mmnist-10x2": ("movingmnist", MNIST, 10, 2),
               "video-mmnist-5x4": ("movingmnist", MNIST, 5, 4), "video-digits-5x4": ("digits", None, 5, 4)}
# the same sampled codes assigned to positions two ways: the Hungarian method and the paper's greedy rule
ASSIGN = {f"image {a}": ["--sampler", "ddim", "--assign", a] for a in ("hungarian", "greedy")}
# the README's one-sample row of the gap model (beside its 32 samples)
ENSEMBLE = {"image-photos-3x3-gap ddim-50 x1": ["--sampler", "ddim", "--samples", "1", "--missing", "0", *REPEATS]}
# the sampler on val (its rows are named `one-call val ...`): DDIM-50 against sample.py's DDPM-50
VAL_SAMPLERS = {"ddim-50": ["--sampler", "ddim", "--steps", "50"], "ddpm-50 (default)": []}
ONE_CALL_VAL = [("image-shapes-3x3", REPEATS), ("video-digits-5x4", [])]
# Moving MNIST recipes that may replace a shipped model, and the estimators val chooses among (candidate-val)
CANDIDATES = ["video-mmnist-10x2-batch32-lr5e-4-18k", "video-mmnist-20x1-batch32-lr5e-4-cur4k-24k-head6"]
CANDIDATE_VAL = {"ddim-50": ["--split", "val", "--sampler", "ddim"], "ddpm-50": ["--split", "val"],
                 "ddpm-50 x4": ["--split", "val", "--samples", "4"]}
