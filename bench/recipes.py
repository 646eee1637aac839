"""
The benchmark's recipes: what `python -m bench NAME` trains and scores, and which baselines and checkpoints the
other groups (baselines, sampler, assign, ensemble, transfer) compare. bench/__main__.py runs them and writes the
rows.

Each recipe is (training script, training flags, evaluations: a list of extra sample.py flags, one row each).
Data folders are read in place (`../shared/data`); checkpoints of earlier recipes are found under runs/bench.
"""
TEST_PUZZLES = "200"

# ----------------------------------------------------------------------------
# Training recipes: name -> (training script, training flags, evaluations: list of extra sample.py flags)
# ----------------------------------------------------------------------------

IMAGE_3X3 = ["--grid", "3", "--patch-size", "16", "--batch-size", "64", "--lr", "2e-3"]
SHORT = ["--max-steps", "1500"]      # comparison rows: ~7 minutes each on 2 cores
PHOTOS = "../shared/data/photos"     # real photographs (train/ and test/), read in place
MNIST = "../shared/data/mnist"       # the MNIST IDX files, Moving MNIST is generated from them


def with_flag(flags, name, value):
    """A copy of the flag list `flags` with the value after `name` replaced by `value`."""
    i = flags.index(name)
    return flags[:i + 1] + [value] + flags[i + 2:]


PHOTO_3X3 = ["--dataset", "folder", "--data-dir", PHOTOS, "--grid", "3", "--piece-size", "24", "--patch-size", "24",
             "--batch-size", "64", "--lr", "2e-3", "--schedule", "cosine", "--eval-puzzles", "39"]


def gap_ft(flags, init):
    """The gap-8 fine-tune of a gapless photo run with these flags: lr halved, up to 3 missing, 4000 steps."""
    return with_flag(flags, "--lr", "1e-3") + [
        "--init", init, "--gap", "8", "--missing", "3", "--eval-every", "1000", "--max-steps", "4000"]


GAP_FT = gap_ft(PHOTO_3X3, "checkpoints/image-photos-3x3.pt")
GAP_FT_NOMIX = gap_ft(PHOTO_3X3, "runs/bench/image-photos-3x3-nomix/ckpt.pt")
GAP_FT_VAL = gap_ft(PHOTO_3X3, "runs/bench/image-photos-3x3-mix-val/ckpt.pt")   # from the val-held-out baseline
PHOTO_GPU = ["--dataset", "folder", "--data-dir", PHOTOS, "--grid", "3", "--piece-size", "64", "--patch-size", "16",
             "--model", "small", "--batch-size", "64", "--lr", "1e-3", "--schedule", "cosine", "--eval-puzzles", "39",
             "--max-steps", "6000", "--workers", "12"]
P12 = with_flag(PHOTO_3X3, "--patch-size", "12")                                  # 4 tokens per 24 px piece
P32 = with_flag(with_flag(PHOTO_3X3, "--piece-size", "32"), "--patch-size", "32")  # one token per 32 px piece
MIXED = PHOTO_3X3 + ["--mix-shapes", "0.25"]                   # a quarter of the training puzzles: built-in shapes
# procedural pictures as pretraining: built-in shapes at the photo model's settings, the start of a photo run (--init)
PRE_SHAPES = ["--grid", "3", "--piece-size", "24", "--patch-size", "24", "--batch-size", "64", "--lr", "2e-3",
              "--schedule", "cosine", "--eval-every", "1000", "--max-steps", "2000"]
PRE = "runs/bench/image-photos-3x3-pre-shapes/ckpt.pt"            # where `python -m bench` writes that run
MISSING_0_3 = [["--missing", str(k)] for k in range(4)]   # score a model trained with missing pieces at 0..3
# the photo test split holds 39 puzzles: one pass is a noisy estimate (its sampling noise alone moved the shipped gap
# model's puzzle accuracy between 2.6% and 17.9%), so photo rows are the mean of 8 passes (seeds 1-8)
PHOTO_PASSES = 8
REPEATS = ["--repeats", str(PHOTO_PASSES)]
PHOTO_TEST = [REPEATS]
VAL = [["--split", "val", *REPEATS]]                    # the val photos only
VAL_TEST = VAL + [REPEATS]                              # choose on the val photos, then score the test photos once
VAL_GAP_X32 = [["--split", "val", "--missing", "0", "--samples", "32", "--sampler", "ddpm", *REPEATS]]  # the README's


def photo_run_from(init, every, steps):
    """The shapes-mix photo recipe started from `init`'s weights (--init): `steps` steps, held-out checks every
    `every`."""
    return MIXED + ["--init", init, "--eval-every", every, "--max-steps", steps]
PHOTO_MISSING_0_3 = [m + REPEATS for m in MISSING_0_3]
VAL_MISSING_0_3 = [["--split", "val", *m, *REPEATS] for m in MISSING_0_3]
MISSING_FT = with_flag(PHOTO_3X3, "--lr", "1e-3") + [
    "--init", "checkpoints/image-photos-3x3.pt", "--missing", "3", "--eval-every", "1000", "--max-steps", "4000"]
MMNIST = ["--dataset", "movingmnist", "--data-dir", MNIST, "--size", "32", "--lr", "1e-3", "--schedule", "cosine",
          "--eval-every", "500", "--eval-puzzles", "32"]
MMNIST_5X4 = MMNIST + ["--pieces", "5", "--frames-per-piece", "4"]
RECIPES = {
    # the shipped checkpoints' recipes: a quarter of the photo model's training puzzles are built-in shapes (the
    # procedural stream as a prior), then the gap fine-tune starts from it (its 29 minutes + these 4000 steps)
    "image-photos-3x3": ("train_image.py", MIXED + ["--eval-every", "4000", "--max-steps", "24000"],
                         [REPEATS, ["--dataset", "shapes"]]),
    "image-photos-3x3-gap-ft": ("train_image.py", GAP_FT, PHOTO_MISSING_0_3),
    # the shipped recipes again on the 183 training photos only (the split rule holds val out), scored on val with
    # the README commands' settings (a val split the shipped models never saw)
    "image-photos-3x3-val": ("train_image.py", MIXED + ["--eval-every", "4000", "--max-steps", "24000"], VAL_TEST),
    "image-photos-3x3-val-gap-ft": ("train_image.py", gap_ft(PHOTO_3X3, "runs/bench/image-photos-3x3-val/ckpt.pt"),
                                    VAL_GAP_X32),
    # misses (bench/notes.md): the shapes mix kept in the gap fine-tune; the fine-tune twice as long (39 min in all)
    "image-photos-3x3-gap-ft-keepmix": ("train_image.py", GAP_FT + ["--mix-shapes", "0.25"], PHOTO_MISSING_0_3),
    "image-photos-3x3-gap-ft-8k": ("train_image.py", with_flag(GAP_FT, "--max-steps", "8000"), PHOTO_MISSING_0_3),
    # the photo model shipped until 2026-11-27 (photos only) and its gap fine-tune; the one-change fine-tunes below
    # start from it (to rebuild it: python -m bench image-photos-3x3-nomix, or git show
    # 5772292:checkpoints/image-photos-3x3.pt > runs/bench/image-photos-3x3-nomix/ckpt.pt)
    "image-photos-3x3-nomix": ("train_image.py", PHOTO_3X3 + ["--max-steps", "24000"],
                               [REPEATS, ["--dataset", "shapes"]]),
    "image-photos-3x3-nomix-gap-ft": ("train_image.py", GAP_FT_NOMIX, PHOTO_MISSING_0_3),
    "image-photos-3x3-gap": ("train_image.py", PHOTO_3X3 + ["--gap", "8", "--max-steps", "16000"], PHOTO_TEST),
    # misses (bench/notes.md): the learning rate halved, below (the rows image-photos-3x3-gap-ft-scale0.6 and
    # image-photos-3x3-mix-scale0.15 trained with --crop-scale, since removed)
    # gap puzzles only (no missing pieces while fine-tuning): does training for 1-3 missing cost the 0-missing figure?
    "image-photos-3x3-gap-ft-missing0": ("train_image.py", with_flag(GAP_FT_NOMIX, "--missing", "0"), PHOTO_TEST),
    "image-photos-3x3-gap-ft-mix": ("train_image.py", GAP_FT_NOMIX + ["--mix-shapes", "0.25"], PHOTO_MISSING_0_3),
    "image-photos-3x3-gap-ft-lr5e-4": ("train_image.py", with_flag(GAP_FT_NOMIX, "--lr", "5e-4"), PHOTO_MISSING_0_3),
    # 4 tokens per piece (12 px patches): a gapless start, then the gap fine-tune from it (40 minutes in all)
    "image-photos-3x3-p12": ("train_image.py", P12 + ["--eval-every", "2000", "--max-steps", "10000"], PHOTO_TEST),
    "image-photos-3x3-p12-gap-ft": ("train_image.py", gap_ft(P12, "runs/bench/image-photos-3x3-p12/ckpt.pt"),
                                    PHOTO_MISSING_0_3),
    # 32 px pieces (one token each), the calibration length of the 16 and 24 px rows in bench/notes.md
    "image-photos-3x3-32px": ("train_image.py", P32 + ["--eval-every", "2000", "--max-steps", "6000"], PHOTO_TEST),
    # the shapes mix at the calibration length of the 16 and 24 px rows
    "image-photos-3x3-mix": ("train_image.py", MIXED + ["--eval-every", "2000", "--max-steps", "6000"],
                             [REPEATS, ["--dataset", "shapes"]]),
    # generalization levers: one change each from the shapes-mix calibration recipe, trained with the val
    # split held out (183 of the 205 photos), scored on val (8 passes), then on the test photos (8 passes)
    "image-photos-3x3-mix-val": ("train_image.py", MIXED + ["--eval-every", "2000", "--max-steps", "6000"], VAL_TEST),
    "image-photos-3x3-mix-val-seed1": ("train_image.py", MIXED + ["--seed", "1", "--eval-every", "2000", "--max-steps",
                                                                  "6000"], VAL_TEST),
    "image-photos-3x3-mix-batch128": ("train_image.py", with_flag(MIXED, "--batch-size", "128") + [
        "--eval-every", "2000", "--max-steps", "6000"], VAL_TEST),
    # the same compute as the baseline: batch 128 for half the steps (the same photos seen)
    "image-photos-3x3-mix-batch128-3k": ("train_image.py", with_flag(MIXED, "--batch-size", "128") + [
        "--eval-every", "1000", "--max-steps", "3000"], VAL_TEST),
    # procedural pictures as pretraining: 2000 steps of built-in shapes at the photo model's settings, then 4000 steps
    # of the baseline recipe from them (6000 steps in all, as the baseline `image-photos-3x3-mix-val`)
    "image-photos-3x3-pre-shapes": ("train_image.py", PRE_SHAPES, [[]]),
    "image-photos-3x3-pre-shapes-mix-val": ("train_image.py", photo_run_from(PRE, "2000", "4000"), VAL),
    # the same with --seed 1 in both stages (the run-to-run spread)
    "image-photos-3x3-pre-shapes-seed1": ("train_image.py", PRE_SHAPES + ["--seed", "1"], [[]]),
    "image-photos-3x3-pre-shapes-mix-val-seed1": ("train_image.py", photo_run_from(
        "runs/bench/image-photos-3x3-pre-shapes-seed1/ckpt.pt", "2000", "4000") + ["--seed", "1"], VAL),
    # the pretrained start at half the shipped recipe's steps (2000 of shapes + 10000), at its steps (2000 + 22000), and
    # the gap fine-tune of the first, scored on val as `image-photos-3x3-val` and `image-photos-3x3-val-gap-ft` (the
    # 24000-step runs, with and without shapes first, also on test once)
    "image-photos-3x3-pre-shapes-val": ("train_image.py", photo_run_from(PRE, "2000", "10000"), VAL),
    "image-photos-3x3-pre-shapes-val-24k": ("train_image.py", photo_run_from(PRE, "4000", "22000"), VAL_TEST),
    "image-photos-3x3-pre-shapes-val-24k-gap-ft": ("train_image.py", gap_ft(
        PHOTO_3X3, "runs/bench/image-photos-3x3-pre-shapes-val-24k/ckpt.pt"), VAL_GAP_X32),
    "image-photos-3x3-pre-shapes-val-gap-ft": ("train_image.py", gap_ft(
        PHOTO_3X3, "runs/bench/image-photos-3x3-pre-shapes-val/ckpt.pt"), VAL_GAP_X32),
    # the shapes prior in the gap fine-tune: the gap-8 fine-tune of the val-held-out baseline, without and with it
    "image-photos-3x3-mix-val-gap-ft": ("train_image.py", GAP_FT_VAL, VAL_TEST),
    "image-photos-3x3-mix-val-gap-ft-mix": ("train_image.py", GAP_FT_VAL + ["--mix-shapes", "0.25"], VAL_TEST),
    # masked photo puzzles (issue 71): the shipped photo model (183 training photos, val held out) fine-tuned with
    # 0 to 3 missing pieces and no gaps; chosen on val at 0..3 missing, then scored on test once
    "image-photos-3x3-missing-ft": ("train_image.py", MISSING_FT, VAL_MISSING_0_3),
    "image-photos-3x3-missing-ft-w1": ("train_image.py", MISSING_FT + ["--weight-content", "1.0"], VAL_MISSING_0_3),
    "image-photos-3x3-missing-ft-8k": ("train_image.py", with_flag(MISSING_FT, "--max-steps", "8000"),
                                       VAL_MISSING_0_3 + [m + ["--samples", "8"] for m in VAL_MISSING_0_3]),
    # the gap-8 fine-tune of the masked-photo model (the gap model's recipe from another start), scored on val at 1
    # and 2 missing with the gap model's README estimator (32 samples)
    "image-photos-3x3-missing-gap-ft": ("train_image.py", gap_ft(PHOTO_3X3, "runs/bench/image-photos-3x3-missing-ft-8k/"
                                                                            "ckpt.pt"),
                                        [["--split", "val", "--missing", k, "--samples", "32", *REPEATS]
                                         for k in ("1", "2")]),
    "image-photos-3x3-gap-missing": ("train_image.py", PHOTO_3X3 + ["--gap", "8", "--missing", "3", "--max-steps",
                                                                    "16000"], PHOTO_MISSING_0_3),
    "image-3x3": ("train_image.py", IMAGE_3X3 + ["--schedule", "cosine", "--max-steps", "5000"], [[]]),
    "video-mmnist-10x2": ("train_video.py", MMNIST + ["--pieces", "10", "--frames-per-piece", "2", "--curriculum", "3",
                                                      "2000", "--max-steps", "5000"], [[]]),
    # the same at the paper's 64 px frames (the effect of 32 px), to score on val beside the 5000-step 32 px
    # model's `one-call val video-mmnist-10x2 ddim-50 [retired]` row (the same clips, made at 64 px and halved for
    # 32); data in the main process (--workers 0, the same batches): at 64 px a batch takes 24 ms to make, so both
    # cores compute
    "video-mmnist-10x2-64px": ("train_video.py", with_flag(MMNIST, "--size", "64") + [
        "--pieces", "10", "--frames-per-piece", "2", "--curriculum", "3", "2000", "--max-steps", "5000",
        "--workers", "0"],
                               [["--split", "val"]]),
    # the paper's other Moving MNIST settings (curriculum: 3 pieces at first, growing to all by the given step)
    "video-mmnist-20x1": ("train_video.py", MMNIST + ["--pieces", "20", "--frames-per-piece", "1", "--curriculum", "3",
                                                      "6000", "--max-steps", "12000"], [[]]),
    "video-mmnist-20x1-lr5e-4": ("train_video.py", with_flag(MMNIST, "--lr", "5e-4") + [
        "--pieces", "20", "--frames-per-piece", "1", "--curriculum", "3", "6000", "--max-steps", "12000"], [[]]),
    # the 5 x 4 fix (batch 32, lr 5e-4) on 20 x 1: begun as 16000 steps, cut to 12000 on resume at step
    # 4200 (its cosine then jumps from 4.2e-4 to 3.6e-4, logged); data in the main process (--workers 0:
    # the same batches; on 10 x 2, 1.2x the steps per second of one worker beside one thread: `pace-mmnist` rows)
    "video-mmnist-20x1-batch32-lr5e-4": ("train_video.py", with_flag(with_flag(MMNIST, "--lr", "5e-4"), "--eval-every",
                                                                     "2000") + [
        "--pieces", "20", "--frames-per-piece", "1", "--curriculum", "3", "6000", "--batch-size", "32",
        "--max-steps", "12000", "--workers", "0"], [[]]),
    # the same recipe, no cut of --max-steps (resumed once, at step 10100), with the curriculum reaching 20 pieces by
    # step 4000 instead of 6000 (about 235 steps per added piece, between the 118 that failed and the 350 that works):
    # 8000 steps on whole clips instead of 6000; 139.9 logged minutes (shipped before the 20000-step run)
    "video-mmnist-20x1-batch32-lr5e-4-cur4k": ("train_video.py", with_flag(with_flag(MMNIST, "--lr", "5e-4"),
                                                                           "--eval-every", "2000") + [
        "--pieces", "20", "--frames-per-piece", "1", "--curriculum", "3", "4000", "--batch-size", "32",
        "--max-steps", "12000", "--workers", "0"], [[]]),
    # that recipe for 20000 steps, begun after its 1000 test clips missed a target of 0.005 (the 10 x 2
    # gained from a longer cosine: 16000 -> 18000); 121.5 logged minutes (one run, no resume, on a machine that ran
    # 20 x 1 at about 2.5 steps/s); chosen on 1000 val clips (candidate-val), shipped, then replaced by ...-24k-head6
    "video-mmnist-20x1-batch32-lr5e-4-cur4k-20k": ("train_video.py", with_flag(with_flag(MMNIST, "--lr", "5e-4"),
                                                                               "--eval-every", "2000") + [
        "--pieces", "20", "--frames-per-piece", "1", "--curriculum", "3", "4000", "--batch-size", "32",
        "--max-steps", "20000", "--workers", "0"], [["--split", "val"]]),
    "video-mmnist-5x4": ("train_video.py", MMNIST_5X4 + ["--curriculum", "3", "2000", "--max-steps", "10000"], [[]]),
    # the same with more puzzles per step (batch 32: as many positional codes per step as 10 x 2 at batch 16)
    "video-mmnist-5x4-batch32": ("train_video.py", MMNIST_5X4 + ["--curriculum", "3", "2000", "--batch-size", "32",
                                                                 "--max-steps", "8000"], [[]]),
    # batch 32 at half the learning rate, longer: the 5 x 4 recipe that orders every test clip (bench/notes.md)
    "video-mmnist-5x4-batch32-lr5e-4": ("train_video.py", with_flag(MMNIST_5X4, "--lr", "5e-4") + [
        "--curriculum", "3", "2000", "--batch-size", "32", "--max-steps", "12000"], [[]]),
    # the 5 x 4 fix (batch 32, lr 5e-4) carried over to 10 x 2, longer; data in the main process (the same batches)
    "video-mmnist-10x2-batch32-lr5e-4": ("train_video.py", with_flag(MMNIST, "--lr", "5e-4") + [
        "--pieces", "10", "--frames-per-piece", "2", "--curriculum", "3", "2000", "--batch-size", "32",
        "--max-steps", "16000", "--workers", "0"], [[]]),
    # the same for 18000 steps: planned about 130 minutes at the 2.3 steps/s of the first 16000-step run;
    # logged 232.7 (its row; two resumes, 0.5-3.0 steps/s in log.txt, an AMD EPYC; over the ~150-minute budget);
    # held-out checks every 2000 steps, scored on val (a candidate: candidate-val, then test once); resumed across
    # sessions with `python -m bench --resume`; shipped as video-mmnist-10x2 (its test clips: paper-table, confidence)
    "video-mmnist-10x2-batch32-lr5e-4-18k": ("train_video.py", with_flag(with_flag(MMNIST, "--lr", "5e-4"),
                                                                         "--eval-every", "2000") + [
        "--pieces", "10", "--frames-per-piece", "2", "--curriculum", "3", "2000", "--batch-size", "32",
        "--max-steps", "18000", "--workers", "0"], [["--split", "val"]]),
    # the same for 40000 steps (about 290 minutes at 2.3 steps/s; held-out checks every 2000 steps), resumed
    # across sessions with `python -m bench --resume` where a session's runs/ survives
    "video-mmnist-10x2-batch32-lr5e-4-40k": ("train_video.py", with_flag(with_flag(MMNIST, "--lr", "5e-4"),
                                                                         "--eval-every", "2000") + [
        "--pieces", "10", "--frames-per-piece", "2", "--curriculum", "3", "2000", "--batch-size", "32",
        "--max-steps", "40000"], [[]]),
    "video-mmnist-5x4-batch64": ("train_video.py", MMNIST_5X4 + ["--curriculum", "3", "1000", "--batch-size", "64",
                                                                 "--max-steps", "4000"], [[]]),
    "video-mmnist-10x2-missing": ("train_video.py", MMNIST + ["--pieces", "10", "--frames-per-piece", "2", "--missing",
                                                              "2", "--curriculum", "3", "2000", "--max-steps", "4000"],
                                  [["--missing", str(k)] for k in range(3)]),
    # the paper's Figure 4(b): one 8 x 4 model trained with 0..4 missing pieces, scored at 0, 1, 2, 3 and 4
    "video-mmnist-8x4-missing": ("train_video.py", with_flag(with_flag(MMNIST, "--lr", "5e-4"), "--eval-every",
                                                             "2000") + [
        "--pieces", "8", "--frames-per-piece", "4", "--missing", "4", "--curriculum", "3", "2000", "--batch-size", "16",
        "--max-steps", "12000"], [["--missing", str(k)] for k in range(5)]),
    "video-5x4": ("train_video.py", ["--pieces", "5", "--frames-per-piece", "4", "--lr", "1e-3",
                                     "--schedule", "cosine", "--max-steps", "3200"], [[]]),
    # shorter runs that show the effect of one option each
    "image-2x2": ("train_image.py", ["--grid", "2", "--patch-size", "16", "--batch-size", "64", "--lr", "2e-3",
                                     "--max-steps", "800"], [[]]),
    "image-3x3-short": ("train_image.py", IMAGE_3X3 + SHORT, [[]]),
    "image-3x3-short-eps": ("train_image.py", IMAGE_3X3 + SHORT + ["--prediction", "eps"], [[]]),
    "image-3x3-short-anchor": ("train_image.py", IMAGE_3X3 + SHORT + ["--anchor"], [[]]),
    "image-3x3-short-gap": ("train_image.py", IMAGE_3X3 + SHORT + ["--gap", "4"], [[]]),
    "image-3x3-gap": ("train_image.py", IMAGE_3X3 + ["--schedule", "cosine", "--max-steps", "5000", "--gap", "4"],
                      [[]]),
    # the shipped shapes model fine-tuned on gap-4 puzzles (20% of the cell) with up to 3 missing, as for photos
    "image-shapes-3x3-gap-ft": ("train_image.py", with_flag(IMAGE_3X3, "--lr", "1e-3") + [
        "--schedule", "cosine", "--init", "checkpoints/image-shapes-3x3.pt", "--gap", "4", "--missing", "3",
        "--max-steps", "4000"], MISSING_0_3),
    "image-3x3-short-missing": ("train_image.py", IMAGE_3X3 + SHORT + ["--missing", "3"], MISSING_0_3),
    "image-3x3-short-missing-wc1": ("train_image.py", IMAGE_3X3 + SHORT + ["--missing", "3", "--weight-content", "1"],
                                    MISSING_0_3),
    "video-10x2": ("train_video.py", ["--pieces", "10", "--frames-per-piece", "2", "--lr", "1e-3",
                                      "--schedule", "cosine", "--max-steps", "3200"], [[]]),
    "video-10x2-short": ("train_video.py", ["--pieces", "10", "--frames-per-piece", "2", "--max-steps", "1500"], [[]]),
    "video-5x4-missing": ("train_video.py", ["--pieces", "5", "--frames-per-piece", "4", "--missing", "2",
                                             "--max-steps", "1500"], [["--missing", str(k)] for k in range(3)]),
    # one GPU (run on a lent machine): the same recipes, larger and longer, data loading on 12 processes
    "image-3x3-gpu": ("train_image.py", ["--grid", "3", "--patch-size", "16", "--model", "small", "--batch-size",
                                         "64", "--lr", "1e-3", "--schedule", "cosine", "--max-steps", "6000",
                                         "--workers", "12"], [[]]),
    "video-5x4-gpu": ("train_video.py", ["--pieces", "5", "--frames-per-piece", "4", "--batch-size", "64", "--lr",
                                         "1e-3", "--schedule", "cosine", "--max-steps", "4000", "--workers", "12"],
                      [[]]),
    "image-3x3-missing-gpu": ("train_image.py", ["--grid", "3", "--patch-size", "16", "--model", "small",
                                                 "--batch-size", "64", "--lr", "1e-3", "--schedule", "cosine",
                                                 "--max-steps", "3500", "--missing", "3", "--workers", "12"],
                              MISSING_0_3),
    # for a session with a device (not yet run): the paper's photo protocol, 64 px pieces of
    # 16 tokens, in 85 px cells for gaps (21 px, 25% of the cell), small DiT
    "image-photos-3x3-gpu": ("train_image.py", PHOTO_GPU, PHOTO_TEST),
    "image-photos-3x3-gap-gpu": ("train_image.py", PHOTO_GPU + ["--gap", "21", "--missing", "3"], PHOTO_MISSING_0_3),
    "video-5x4-missing-gpu": ("train_video.py", ["--pieces", "5", "--frames-per-piece", "4", "--batch-size", "64",
                                                 "--lr", "1e-3", "--schedule", "cosine", "--max-steps", "2500",
                                                 "--missing", "2", "--workers", "12"],
                              [["--missing", str(k)] for k in range(3)]),
}
# the 20000-step 20 x 1 with a 6-block head over pieces (unet3d `tiny-head6`, 2.2M parameters): on 1000 val clips
# short of the margin set before its x4 score (candidate-val, bench/README.md), so not shipped
RECIPES["video-mmnist-20x1-batch32-lr5e-4-cur4k-20k-head6"] = (
    "train_video.py", RECIPES["video-mmnist-20x1-batch32-lr5e-4-cur4k-20k"][1] + ["--model", "tiny-head6"],
    [["--split", "val"]])
# the same head, 24000 steps (146.8 logged min): shipped as video-mmnist-20x1 on fresh val clips (bench/README.md)
RECIPES["video-mmnist-20x1-batch32-lr5e-4-cur4k-24k-head6"] = (
    "train_video.py", with_flag(RECIPES["video-mmnist-20x1-batch32-lr5e-4-cur4k-20k-head6"][1], "--max-steps", "24000"),
    [["--split", "val"]])


# ----------------------------------------------------------------------------
# Baselines and sweeps
# ----------------------------------------------------------------------------

# (dataset, data dir, grid, piece px, gap px, missing pieces, passes over the test puzzles: seeds 1, 2, ...)
IMAGE_BASELINES = [("shapes", None, (2, 2), 16, 0, 0, 1), ("shapes", None, (3, 3), 16, 0, 0, 1),
                   *[("shapes", None, (3, 3), 16, 4, k, 1) for k in range(4)]]
IMAGE_BASELINES += [("shapes", None, (3, 3), 24, 0, 0, 1)] + [("shapes", None, (3, 3), 24, 8, k, 1) for k in range(4)]
IMAGE_BASELINES += [("folder", PHOTOS, (3, 3), piece, gap, k, PHOTO_PASSES)
                    for piece, gap, k in [(24, 0, 0), (24, 0, 1), (24, 0, 2), (24, 0, 3),
                                          (24, 8, 0), (24, 8, 1), (24, 8, 2), (24, 8, 3),
                                          (64, 0, 0), (64, 21, 0), (64, 21, 1), (64, 21, 2), (64, 21, 3)]]
# the photo settings of the shipped models on the val split (python -m bench baselines-val): the photo goal is set
# against MGC on val
IMAGE_VAL_BASELINES = [("folder", PHOTOS, (3, 3), 24, gap, 0, PHOTO_PASSES) for gap in (0, 8)]
# masked photo puzzles (issue 71): the missing-pieces settings on val, without and with gaps
IMAGE_VAL_BASELINES += [("folder", PHOTOS, (3, 3), 24, gap, k, PHOTO_PASSES) for gap in (0, 8) for k in (1, 2, 3)]
# (dataset, data dir, pieces, frames per piece, frame size px)
VIDEO_BASELINES = [("digits", None, 5, 4, 32), ("digits", None, 10, 2, 32)]
VIDEO_BASELINES += [("movingmnist", MNIST, p, f, 32) for p, f in [(5, 4), (10, 2), (20, 1)]]

# the shipped checkpoints: `python -m bench --export` of their recipes' EMA weights (image-shapes-3x3: image-3x3,
# video-digits-5x4: video-5x4, video-mmnist-10x2: video-mmnist-10x2-batch32-lr5e-4-18k, video-mmnist-5x4:
# video-mmnist-5x4-batch32-lr5e-4, video-mmnist-20x1: video-mmnist-20x1-batch32-lr5e-4-cur4k-24k-head6;
# the photo models: image-photos-3x3 and image-photos-3x3-gap-ft; the masked-photo model:
# image-photos-3x3-missing-ft-8k, then calibrated on val with 8 samples and scored on test once:
# bench/ship-missing.sh), so their recipe rows can be scored again without training
SHIPPED = {name: f"checkpoints/{name}.pt" for name in ("image-shapes-3x3", "video-digits-5x4", "video-mmnist-10x2",
                                                       "video-mmnist-5x4", "video-mmnist-20x1", "image-photos-3x3",
                                                       "image-photos-3x3-gap", "image-photos-3x3-missing")}
# the paper's Moving MNIST protocol (its Table 5): each shipped Moving MNIST checkpoint on 1000 test clips
# made from MNIST test digits, first piece anchored, no missing pieces, DDIM-50, and 10 x 2 and 20 x 1 with the
# estimator chosen on val (CANDIDATE_VAL: 10 x 2 DDPM-50, 20 x 1 DDPM-50 with 4 samples a clip)
# (python -m bench paper-table);
# {row suffix: (checkpoint, sample.py flags)}
PAPER_TABLE = {"video-mmnist-5x4": ("video-mmnist-5x4", ["--sampler", "ddim"]),
               "video-mmnist-10x2": ("video-mmnist-10x2", ["--sampler", "ddim"]),
               "video-mmnist-10x2 ddpm-50": ("video-mmnist-10x2", ["--sampler", "ddpm"]),
               "video-mmnist-20x1": ("video-mmnist-20x1", ["--sampler", "ddim"]),
               "video-mmnist-20x1 ddpm-50 x4": ("video-mmnist-20x1", ["--sampler", "ddpm", "--samples", "4"])}
PAPER_CLIPS = "1000"
# the README's video figures: each shipped video model scored once, with its own estimator (the sampling its
# confidence table was fitted with), on test clips of a seed that no choice has seen
FRESH = 20261202
FRESH_SEED = {"video-mmnist-20x1": 1000, "video-mmnist-10x2": 1000, "video-mmnist-5x4": 1000, "video-digits-5x4": 200}
# one network call at t = T-1: the x0 prediction from pure noise, the posterior-mean estimate of every
# code. DDPM and DDIM give the same x0 from the same noise, but DDPM's last step draws noise that it weighs 0, which
# shifts the next batch's starting noise; DDIM draws none
ONE_CALL = ["--sampler", "ddim", "--steps", "1"]
# the sampler sweep of the image-3x3 recipe's weights (its rows of 2026-11-26 read runs/bench/image-3x3/ckpt.pt;
# the shipped checkpoint reproduces their DDIM-50 and DDPM-50 figures exactly)
SAMPLERS = {"steps-1": ONE_CALL, **{f"{s}-{n}": ["--sampler", s, "--steps", str(n)]
                                   for s, n in [("ddim", 10), ("ddim", 25), ("ddim", 50), ("ddim", 100), ("ddpm", 50),
                                                ("ddpm", 100), ("ddpm", 1000)]}}
# the same sampled codes (same seed and sampler), assigned to positions two ways
ASSIGNMENTS = {f"{kind} {a}": (ckpt, ["--sampler", "ddim", "--assign", a])
               for kind, ckpt in [("image", "checkpoints/image-shapes-3x3.pt"),
                                  ("video", "checkpoints/video-digits-5x4.pt")]
               for a in ("hungarian", "greedy")}

# several independent samples of the codes per puzzle, assigned on their mean distance (sample.py --samples K)
# (row name, checkpoint, sample counts K, missing pieces, (sampler label, extra flags)); DDIM, scored over the 8
# passes of the photo rows
DDIM_50 = ("ddim-50", [])
ENSEMBLE_CKPTS = [("image-photos-3x3", SHIPPED["image-photos-3x3"], (1, 4, 16), (0,), DDIM_50),
                  ("image-photos-3x3-gap", SHIPPED["image-photos-3x3-gap"], (1, 4, 16, 32, 64), (0,), DDIM_50),
                  ("image-photos-3x3-gap", SHIPPED["image-photos-3x3-gap"], (32,), (1, 2, 3), DDIM_50)]
# the one-call rows beside the one-sample DDIM-50 rows: the same flags and passes with --steps 1; and 32 one-call
# estimates per puzzle beside the DDIM-50 x32 row (does their ensemble gain what an ensemble of samples does?)
STEPS_1 = ("steps-1", ["--steps", "1"])
ONE_CALL_ENSEMBLES = [("image-photos-3x3", SHIPPED["image-photos-3x3"], (1,), (0,), STEPS_1),
                      ("image-photos-3x3-gap", SHIPPED["image-photos-3x3-gap"], (1, 32), (0,), STEPS_1),
                      ("image-photos-3x3-gap", SHIPPED["image-photos-3x3-gap"], (1,), (1, 2, 3), STEPS_1)]
# the video recipe rows' test clips (200, --seed 1, --sampler ddim) with one call; the shapes checkpoint's one-call
# row on its recipe row's puzzles is the sampler sweep's steps-1
ONE_CALL_TEST = ["video-digits-5x4", "video-mmnist-10x2"]
# sample.py's default chosen on val (--split val, --seed 1): one call, DDIM-50 and sample.py's defaults (DDPM-50).
# (shipped checkpoint, extra flags, note); image rows are 8 passes (seeds 1-8; the first is the seed-1 pass), video rows
# one (about a minute per 50-step pass). The val streams of the shapes and video models are unseen by them, but
# the photo models trained on all 205 photos of photos/train/, val included: their val rows are marked
VAL_SAMPLERS = {"steps-1": ONE_CALL, "ddim-50": ["--sampler", "ddim", "--steps", "50"], "ddpm-50 (default)": []}
TRAINED_ON_VAL = " (trained on val)"
ONE_CALL_VAL = [("image-shapes-3x3", REPEATS, ""), ("video-digits-5x4", [], ""), ("video-mmnist-10x2", [], ""),
                ("image-photos-3x3", REPEATS, TRAINED_ON_VAL),
                ("image-photos-3x3-gap", ["--missing", "0", *REPEATS], TRAINED_ON_VAL)]
# the estimator lever on the 5000-step 10 x 2 model, on val (its rows now end in [retired]; a rerun scores
# the shipped checkpoint): K samples per clip of sample.py's default DDPM-50 (better than DDIM-50 there at K = 1:
# one-call-val rows), assigned on their mean distance (python -m bench estimator-val)
ESTIMATOR_VAL = {f"video-mmnist-10x2 ddpm-50 x{k}": ["--split", "val", "--samples", str(k)] for k in (4, 8)}
# trained recipes that may replace (or become) a shipped model, scored on the val clips of the shipped model's
# estimator rows (python -m bench candidate-val, after `python -m bench RECIPE`: every candidate with a ckpt.pt)
# (200 val clips could not rank two 20 x 1 models: `candidate-val --clips 1000` scores more, beside the shipped model)
CANDIDATES = ["video-mmnist-10x2-batch32-lr5e-4", "video-mmnist-20x1-batch32-lr5e-4",
              "video-mmnist-20x1-batch32-lr5e-4-cur4k", "video-mmnist-10x2-batch32-lr5e-4-18k",
              "video-mmnist-20x1-batch32-lr5e-4-cur4k-20k", "video-mmnist-20x1-batch32-lr5e-4-cur4k-20k-head6",
              "video-mmnist-20x1-batch32-lr5e-4-cur4k-24k-head6"]
CANDIDATE_VAL = {"ddim-50": ["--split", "val", "--sampler", "ddim"], "ddpm-50": ["--split", "val"],
                 "ddpm-50 x4": ["--split", "val", "--samples", "4"]}
# and the README's figure for the shipped gap model, its command as typed there: sample.py's defaults (DDPM-50,
# --seed 0: seeds 0-7), 32 samples, 8 passes (`python -m bench ensemble-readme` runs only this row)
# (row name, checkpoint, sample.py flags, --out folder under the bench's --out)
ENSEMBLE_README = ("image-photos-3x3-gap ddpm-50 x32 (seed 0, README)", "checkpoints/image-photos-3x3-gap.pt",
                   ["--missing", "0", "--samples", "32", *REPEATS], "ensemble-image-photos-3x3-gap-ddpm-50-x32-seed0")


# the shipped gap model (photos, 24 px pieces, 8 px gaps) on the built-in shapes cut the same way
TRANSFER = {f"image-photos-3x3-gap on shapes, missing {k}": ["--dataset", "shapes", "--sampler", "ddim", "--missing",
                                                              str(k)] for k in range(4)}

# the confidence: each shipped checkpoint's confidence tables fitted on val with its README command's
# settings (sample.py --split val --calibrate, written into the checkpoint), then its reliability and ECE on test
# (name, sample.py flags of the README command)
CONFIDENCE = [("image-shapes-3x3", ["--sampler", "ddim"]),              # (the sweep adds --seed 1)
              ("image-photos-3x3", ["--sampler", "ddim", *REPEATS]),
              ("image-photos-3x3-gap", ["--sampler", "ddim", "--missing", "0", "--samples", "32", *REPEATS]),
              ("video-digits-5x4", ["--sampler", "ddim"]), ("video-mmnist-10x2", ["--sampler", "ddpm"]),
              ("video-mmnist-5x4", ["--sampler", "ddim"]),
              ("video-mmnist-20x1", ["--sampler", "ddpm", "--samples", "4"])]
# each the estimator val chose (bench/notes.md): the Moving MNIST 10 x 2 DDPM-50 and 20 x 1 DDPM-50 with 4 samples
# (their tables were fitted on DDIM-50 until 2026-12-02: the "[retired ddim-50 table]" rows)
# val passes of the fit where they differ from the test rows': the photo model's tables on 32 passes of its 22 val
# photos (half the photos' held-out ECE 0.021 / 0.122 fitted on 8 passes, 0.011 / 0.067 on 32); the gap model keeps
# 8 (32 samples a puzzle)
VAL_PASSES = {"image-photos-3x3": ["--repeats", "32"]}
# the gap model's tables for 1, 2 and 3 missing pieces too (sample.py --pieces with 6 to 8 pieces)
CONFIDENCE_MISSING = {"image-photos-3x3-gap": [1, 2, 3]}

# compute (the compute lever): the shipped photo recipe's flags at 10x the batch (640) on a lent H200
# (bench/gpu.py: about 11 steps/s with 15 loader processes, so 2342 steps = 1.5M puzzles in 3.8 minutes, as many as the
# CPU recipe's 24000 x 64) and its gap-8 fine-tune (754 steps at batch 640), trained on the 183 training photos (val
# held out). Scored with the shipped models' README commands on val (python -m bench compute-val; compute-test scores
# the test photos, for a model worth shipping)
README_FLAGS = dict(CONFIDENCE)
COMPUTE = {"image-photos-3x3-gpu": ("runs/gpu/image-photos-3x3-gpu.pt", README_FLAGS["image-photos-3x3"]),
           "image-photos-3x3-gap-gpu": ("runs/gpu/image-photos-3x3-gap-gpu.pt", README_FLAGS["image-photos-3x3-gap"])}
