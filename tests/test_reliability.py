"""Reliability: exact resume after SIGKILL, fine-tuning, safe checkpoints, NaN stop, clean errors for bad input."""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict

import numpy as np
import pytest
import torch
from conftest import (
    ROOT,
    SHAPES_CKPT,
    TINY_IMAGE,
    assert_one_line_error,
    own_run,
    py,
    sample_run,
    train_image_run,
    train_video_run,
)
from PIL import Image

import sample
import solving.own as own
import train_image
from config import FORMAT, Config, TrainConfig, load_checkpoint
from dit import DiTConfig
from plumbing.cli import UserError, user_errors
from puzzles import VideoConfig
from unet3d import UNetConfig


def weights(path):
    ck = torch.load(path, weights_only=True)
    return ck["step"], ck["model"], ck["ema"]


def test_kill_and_resume_is_exact(tmp_path):
    """A run killed (SIGKILL) after an intermediate checkpoint, resumed, ends with the weights of an unbroken run."""
    flags = [*TINY_IMAGE, "--warmup", "3", "--ckpt-every", "2", "--eval-every", "0"]
    b = tmp_path / "b"
    # far more steps than it can take before the kill: the kill lands between checkpoints, never at the end
    b.mkdir()
    with open(b / "stderr.txt", "w") as err:
        proc = subprocess.Popen([sys.executable, "train_image.py", *flags, "--max-steps", "100000", "--out", str(b)],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,
                                env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        deadline = time.time() + 120
        while not (b / "ckpt.pt").exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, (b / "stderr.txt").read_text()[-3000:]   # killed while training
    killed_at = torch.load(b / "ckpt.pt", weights_only=True)["step"]   # the last good checkpoint is intact
    assert killed_at >= 2 and killed_at % 2 == 0
    end = killed_at + 5
    train_image_run("--resume", b / "ckpt.pt", "--max-steps", end)    # --out: the checkpoint's folder
    train_image_run(*flags, "--max-steps", end, "--out", tmp_path / "a")
    step_a, model_a, ema_a = weights(tmp_path / "a" / "ckpt.pt")
    step_b, model_b, ema_b = weights(b / "ckpt.pt")
    assert step_a == step_b == end                                     # the resumed run trained 5 more steps
    assert f"step {end} loss" in (b / "log.txt").read_text()
    for k in model_a:
        assert torch.allclose(model_a[k], model_b[k], atol=1e-5), k
        assert torch.allclose(ema_a[k], ema_b[k], atol=1e-5), k
    assert not [f for f in os.listdir(b) if ".tmp" in f]                 # no temp file left behind


def test_init_fine_tunes_from_a_checkpoint(image_ckpt, tmp_path):
    src = torch.load(image_ckpt, weights_only=True)["ema"]
    train_image_run(*TINY_IMAGE, "--missing", "1", "--init", image_ckpt, "--lr", "1e-9", "--max-steps", "1",
                    "--eval-every", "0", "--out", tmp_path)
    step, model, ema = weights(tmp_path / "ckpt.pt")
    assert step == 1                                                     # a fresh run: step and optimizer restart
    for k in src:
        assert torch.allclose(model[k], src[k], atol=1e-6), k           # ... from the other run's EMA weights
    with pytest.raises(UserError, match=r"--init .* other settings \(piece_size, patch_size\)"):
        train_image_run(*TINY_IMAGE, "--piece-size", "12", "--patch-size", "4", "--init", image_ckpt,
                        "--max-steps", "1", "--out", tmp_path / "b")
    with pytest.raises(UserError, match="checkpoint .*nothing.pt does not exist"):
        train_image_run(*TINY_IMAGE, "--init", tmp_path / "nothing.pt", "--max-steps", "1", "--out", tmp_path / "c")
    with pytest.raises(UserError, match=r"--init .* predicts x0 and this run eps; pass --prediction x0"):
        train_image_run(*TINY_IMAGE, "--prediction", "eps", "--init", image_ckpt, "--max-steps", "1",
                        "--out", tmp_path / "d")


class Evil:
    """Pickles into a call that creates a file: loading must never run it."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_cpu_threads_leave_a_core_per_data_worker(monkeypatch):
    """Training on CPU uses one thread per core left free by the data workers of this machine's processes, unless
    OMP_NUM_THREADS is set; other devices leave torch's threads alone."""
    from plumbing.cli import cpu_threads
    cores, cpu = len(os.sched_getaffinity(0)), torch.device("cpu")
    try:
        monkeypatch.delenv("OMP_NUM_THREADS")
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
        assert cpu_threads(cpu, world=1, workers=1) == max(1, cores - 1)
        assert cpu_threads(cpu, world=1, workers=0) == cores
        assert cpu_threads(cpu, world=2, workers=0) == max(1, cores // 2)
        assert cpu_threads(cpu, world=2, workers=cores) == 1
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")          # 2 machines, one process each: all of its cores
        assert cpu_threads(cpu, world=2, workers=0) == cores
        torch.set_num_threads(2)
        monkeypatch.setenv("OMP_NUM_THREADS", "1")           # set by the user (or torchrun): left as it is
        assert cpu_threads(cpu, world=1, workers=0) == 2
        assert cpu_threads(torch.device("meta"), world=1, workers=0) is None
    finally:
        torch.set_num_threads(1)


def test_malicious_checkpoint_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    bad = tmp_path / "evil.pt"
    torch.save({"config": {"kind": "image"}, "model": Evil(str(marker)), "ema": {}, "step": 0}, bad)
    with pytest.raises(UserError, match="refusing"):
        sample_run("--ckpt", bad, "--out", tmp_path)
    assert not marker.exists()


def video_checkpoint(path):
    config = Config(VideoConfig(), UNetConfig(), TrainConfig())
    torch.save({"format": FORMAT, "config": {"kind": "video", **asdict(config)}, "model": {}, "ema": {}, "opt": {},
                "step": 0}, path)
    return path


def test_truncated_and_wrong_kind_checkpoints(image_ckpt, tmp_path):
    cut = tmp_path / "cut.pt"
    data = image_ckpt.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="truncated"):
        sample_run("--ckpt", cut, "--out", tmp_path)
    photo = tmp_path / "photo.jpg"                                       # a picture passed as the checkpoint
    Image.new("RGB", (8, 8)).save(photo)
    with pytest.raises(UserError, match="photo.jpg is truncated or not a PyTorch checkpoint; pass the ckpt.pt"):
        sample_run("--ckpt", photo, "--out", tmp_path)
    with pytest.raises(UserError, match="--steps 5000 is more than the model's 1000 diffusion steps"):
        sample_run("--ckpt", image_ckpt, "--steps", "5000", "--out", tmp_path)
    video = video_checkpoint(tmp_path / "video.pt")
    with pytest.raises(UserError, match="holds the video model, not the image model; pass it to train_video.py, or "
                                        "give this command a train_image.py checkpoint$"):
        train_image_run("--resume", video, "--out", tmp_path)
    with pytest.raises(UserError, match="holds the image model, not the video model; pass it to train_image.py"):
        train_video_run("--init", image_ckpt, "--out", tmp_path)
    with pytest.raises(UserError, match=r"--pieces does not apply to .*video.pt, which holds the video model; its "
                                        "input is --frames or --superres$"):
        own_run("--ckpt", video, "--pieces", tmp_path, "--out", tmp_path)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    with pytest.raises(UserError, match="not a jpdvt checkpoint"):
        sample_run("--ckpt", other, "--out", tmp_path)


def test_config_that_does_not_fit_is_refused_in_one_sentence(image_ckpt, tmp_path):
    """A setting this version does not know is refused, named; a config of an earlier layout (no puzzle, model and
    train parts) too; a setting the config lacks takes its default."""
    ck = torch.load(image_ckpt, weights_only=True)
    cases = {"unknown": ("model", {**ck["config"]["model"], "width": 64}, r"does not know \(width\)"),
             "unknown puzzle": ("puzzle", {**ck["config"]["puzzle"], "colour": 1}, r"does not know \(colour\)"),
             "old": (None, None, "no config of this jpdvt version")}
    for name, (part, value, message) in cases.items():
        config = dict(ck["config"], **{part: value}) if part else {"kind": "image", "grid": [3, 3], "args": {}}
        path = tmp_path / f"{name}.pt"
        torch.save(dict(ck, config=config), path)
        with pytest.raises(UserError, match=f"checkpoint {re.escape(str(path))} " + r"[^\n]*" + message) as e:
            load_checkpoint(path)
        assert str(e.value).count(". ") == 0 and "\n" not in str(e.value)        # one sentence
    assert ck["config"]["model"]["piece_size"] == 8 != DiTConfig.piece_size
    lacking = dict(ck["config"], model={k: v for k, v in ck["config"]["model"].items() if k != "piece_size"})
    torch.save(dict(ck, config=lacking), tmp_path / "lacking.pt")
    assert load_checkpoint(tmp_path / "lacking.pt")["config"].model.piece_size == DiTConfig.piece_size


def test_a_checkpoint_setting_this_version_does_not_know_is_one_line(tmp_path):
    """A shipped checkpoint whose model settings hold a key this version does not know: sample.py exits 2 with one
    error line that names it (no traceback)."""
    ck = torch.load(SHAPES_CKPT, weights_only=True)
    ck["config"]["model"]["dept_typo"] = 12
    torch.save(ck, tmp_path / "typo.pt")
    proc = py("sample.py", "--ckpt", tmp_path / "typo.pt", "--num-puzzles", "1", "--steps", "1", "--device", "cpu",
              check=False)
    assert_one_line_error(proc, "settings this version of jpdvt does not know (dept_typo)")
    assert not (tmp_path / "samples").exists()                           # nothing written


def folder_dataset(root):
    """A folder dataset of random 40 x 50 px photos: train/ (4), val/ (1) and test/ (1)."""
    for split, n in (("train", 4), ("val", 1), ("test", 1)):
        (root / split).mkdir(parents=True)
        for i in range(n):
            pixels = np.random.default_rng(10 * len(split) + i).random((40, 50, 3))
            Image.fromarray((pixels * 255).astype(np.uint8)).save(root / split / f"{split}{i}.png")


def test_resume_takes_the_same_data_moved_and_refuses_other_files(tmp_path):
    """--resume --data-dir NEW: the run's folder dataset copied to a new place is accepted and the run goes on from
    there; a folder that holds other files (one more training photo) is refused, naming it."""
    data = tmp_path / "data"
    folder_dataset(data)
    train_image_run(*TINY_IMAGE, "--dataset", "folder", "--data-dir", data, "--max-steps", "2", "--eval-every", "0",
                    "--out", tmp_path / "run")
    ckpt = tmp_path / "run" / "ckpt.pt"
    other = tmp_path / "other"
    shutil.copytree(data, other)
    shutil.copy(other / "train" / "train0.png", other / "train" / "extra.png")
    with pytest.raises(UserError, match=f"^--data-dir {re.escape(str(other))} does not hold the files of "
                                        f"{re.escape(str(data))} in the same splits"):
        train_image_run("--resume", ckpt, "--data-dir", other, "--max-steps", "3")
    assert torch.load(ckpt, weights_only=True)["step"] == 2                 # the refused resume trained nothing
    moved = tmp_path / "moved"
    shutil.copytree(data, moved)
    train_image_run("--resume", ckpt, "--data-dir", moved, "--max-steps", "3", "--workers", "0")
    ck = load_checkpoint(ckpt)
    assert ck["step"] == 3 and ck["config"].puzzle.data_dir == str(moved)
    assert "resuming at step 2" in (tmp_path / "run" / "log.txt").read_text()


def test_shipped_checkpoint_cannot_be_resumed(tmp_path):
    ck = torch.load(os.path.join(ROOT, "checkpoints", "image-shapes-3x3.pt"), weights_only=True)
    assert not ck["model"] and not ck["opt"]                             # shipped: EMA weights only
    with pytest.raises(UserError, match="EMA weights only"):
        train_image_run("--resume", os.path.join(ROOT, "checkpoints", "image-shapes-3x3.pt"), "--out", tmp_path)


def test_nan_loss_stops_and_keeps_checkpoint(tmp_path):
    with pytest.raises(UserError, match=r"loss became nan or inf between steps \d+ and \d+; "
                                        r"the last good checkpoint is .*ckpt.pt"):
        train_image_run(*TINY_IMAGE, "--lr", "1e30", "--max-steps", "50", "--ckpt-every", "1", "--eval-every", "0",
                        "--out", tmp_path)
    ck = torch.load(tmp_path / "ckpt.pt", weights_only=True)              # last good one is readable
    assert 1 <= ck["step"] < 50
    assert all(torch.isfinite(v).all() for v in ck["model"].values())    # and holds no nan weights


POISON = """
import sys
sys.path.insert(0, {root!r})
import torch
import train_image
from plumbing.cli import user_errors

class Poisoned(torch.utils.data.Dataset):
    # rank 1's half of the global batch of 4 is nan from step 1 on: only that process sees a nan loss first
    def __init__(self, base):
        self.base = base
    def __len__(self):
        return len(self.base)
    def __getitem__(self, i):
        item = self.base[i]
        if i >= 4 and i % 4 >= 2:
            item["content"] = item["content"] * float("nan")
        return item

make = train_image.ImagePuzzles
train_image.ImagePuzzles = lambda cfg, split, seed: (Poisoned if split == "train" else lambda d: d)(make(cfg, split,
                                                                                                         seed))
with user_errors():
    train_image.main(train_image.get_parser().parse_args(sys.argv[1:]))
"""


def test_nan_on_one_rank_stops_every_rank(tmp_path):
    """2 gloo processes with the environment torchrun sets (launched here one by one, so that no launcher ends a
    hung process for us), a nan loss on rank 1 only: both stop by themselves with the same one-line error (no hang
    in the gradient all-reduce), and the checkpoint keeps the last good weights."""
    script = tmp_path / "poisoned.py"
    script.write_text(POISON.format(root=ROOT))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    flags = [*TINY_IMAGE, "--max-steps", "20", "--log-every", "5", "--ckpt-every", "1", "--eval-every", "0",
             "--out", tmp_path / "run", "--device", "cpu"]
    procs = [subprocess.Popen([sys.executable, str(script), *map(str, flags)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(os.environ, OMP_NUM_THREADS="1", RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2",
                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
             for r in range(2)]
    errors = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError("a process hung after another one saw a nan loss") from None
        assert p.returncode == 2, err[-2000:]
        errors += [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2 and errors[0] == errors[1], errors
    assert "loss became nan or inf between steps 1 and 2; the last good checkpoint is" in errors[0]
    assert torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)["step"] == 1


def test_bad_flag_is_one_line_and_exit_code_2(tmp_path):
    """As a user sees it: a real process, one `error:` line naming the flag, exit code 2, no traceback."""
    assert_one_line_error(py("train_image.py", "--missing", "9", "--out", tmp_path, check=False), "--missing")


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "empty").mkdir()
    (d / "notes.txt").write_text("not an image")
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(d / "tiny.png")
    return d


def cli_error(module, flags, capsys):
    """The last stderr line and exit code of `python module.py FLAGS` run in-process (argparse or user_errors)."""
    with pytest.raises(SystemExit) as stop, user_errors():
        module.main(module.get_parser().parse_args([str(f) for f in flags]))
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and "Traceback" not in "\n".join(lines)
    return lines[-1]


IMAGE_BAD = [
    (["--grid", "1"], "--grid"),
    (["--grid", "3x"], "--grid"),
    (["--missing", "-1"], "--missing"),
    (["--missing", "9"], "--missing"),
    (["--batch-size", "0"], "--batch-size"), (["--max-steps", "0"], "--max-steps"),
    (["--lr", "-1"], "--lr"),
    (["--weight-content", "-0.5"], "--weight-content"), (["--weight-code", "nan"], "--weight-code"),
    (["--device", "tpu"], "--device"),
    (["--dataset", "imagenet"], "--data-dir"),
    (["--dataset", "folder", "--data-dir", "/nonexistent/photos"], "--data-dir"),
    (["--dataset", "folder", "--data-dir", "{bad}/empty"], "--data-dir"),
    (["--piece-size", "0"], "--piece-size"),
    (["--patch-size", "5"], "--patch-size"),
    (["--mix-shapes", "0.5"], "--mix-shapes"),
    (["--resume", "{bad}/missing.pt"], "does not exist"),
]


@pytest.mark.parametrize("flags,needle", IMAGE_BAD)
def test_train_image_bad_input(flags, needle, bad_files, capsys):
    flags = [f.replace("{bad}", str(bad_files)) for f in flags]
    last = cli_error(train_image, [*flags, "--workers", "0", "--out", bad_files / "out"], capsys)
    assert "error:" in last and needle in last, last


@pytest.mark.parametrize("flags,needle", [
    (["--missing", "4"], "--missing"),
    (["--dataset", "folder", "--data-dir", "{bad}/empty"], "--data-dir"),
    (["--dataset", "digits"], "--dataset digits does not fit this image checkpoint"),
    (["--device", "gpu"], "--device"),
])
def test_sample_bad_input(flags, needle, bad_files, image_ckpt, capsys):
    flags = [f.replace("{bad}", str(bad_files)) for f in flags]
    last = cli_error(sample, ["--ckpt", image_ckpt, "--out", bad_files / "s", *flags], capsys)
    assert last.startswith("error: ") and needle in last, last


@pytest.mark.parametrize("flags,needle", [
    (["--pieces", "{bad}/nothing"], "nothing is not a folder"),
    (["--pieces", "{bad}/empty"], "empty is empty"),
    ([], "give your data: --pieces DIR"),
    (["--device", "gpu"], "--device"),
])
def test_own_data_bad_input(flags, needle, bad_files, image_ckpt, capsys):
    flags = [f.replace("{bad}", str(bad_files)) for f in flags]
    last = cli_error(own, ["--ckpt", image_ckpt, "--out", bad_files / "o", *flags], capsys)
    assert last.startswith("error: ") and needle in last, last
