"""Splits that survive preparation, the photo manifest (docs/photos.tsv), and where a checkpoint's data is found
(sources.files.find_data)."""
import csv
import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT
from PIL import Image

from plumbing.cli import UserError
from puzzles import ImageConfig, VideoConfig
from sources.files import IMAGE_EXTS, find_data, hashed_split, list_images, split_files

MANIFEST = os.path.join(ROOT, "docs", "photos.tsv")
PHOTOS = os.path.join(ROOT, "..", "shared", "data")          # the photo rows' folder: beside the checkout, not in CI


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def manifest():
    with open(MANIFEST, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


# ----------------------------------------------------------------------------- python -m sources.prepare


def test_a_prepared_copy_splits_as_its_source(tmp_path):
    """.jpg, .png and .JPEG files (in train/ and a subfolder) through the real command: every file keeps its path,
    so its hashed_split and its split_files split are the source's."""
    rng = np.random.default_rng(0)
    raw = tmp_path / "raw"
    for i in range(60):
        name = f"train/{'n01/' if i % 2 else ''}img{i:03d}{('.jpg', '.png', '.JPEG')[i % 3]}"
        (raw / name).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)).save(raw / name)
    proc = subprocess.run([sys.executable, "-m", "sources.prepare", "--data-dir", raw, "--out", tmp_path / "p",
                           "--workers", "1", "--side", "20"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    sources = list_images(str(raw))
    copies = list_images(str(tmp_path / "p"))
    assert [os.path.relpath(f, raw) for f in sources] == [os.path.relpath(f, tmp_path / "p") for f in copies]
    bands = [hashed_split(f, str(raw / "train")) for f in sources]
    assert bands == [hashed_split(f, str(tmp_path / "p" / "train")) for f in copies]
    assert set(bands) == {"train", "val", "test"}                          # every band holds a file: a real check
    for split in ("train", "val", "test"):
        a, b = (split_files(str(d), split, "folder", list_images, "images", IMAGE_EXTS) for d in (raw, tmp_path / "p"))
        assert [os.path.relpath(f, raw) for f in a] == [os.path.relpath(f, tmp_path / "p") for f in b], split
    formats = {os.path.splitext(f)[1]: Image.open(f).format for f in copies}
    assert formats == {".jpg": "JPEG", ".JPEG": "JPEG", ".png": "PNG"}     # a .png stays a PNG
    assert {Image.open(f).size for f in copies} == {(27, 20)}              # shorter side 20


# ----------------------------------------------------------------------------- docs/photos.tsv


def test_manifest_lists_the_demo_photos_with_their_hashes():
    rows = manifest()
    assert list(rows[0]) == ["file", "split", "sha256", "source package", "licence"]
    assert all(r["licence"] and r["source package"] for r in rows)
    demo = {r["file"]: r["sha256"] for r in rows if r["file"].startswith("docs/photos/")}
    on_disk = {f"docs/photos/{n}" for n in os.listdir(os.path.join(ROOT, "docs", "photos")) if n.endswith(".jpg")}
    assert set(demo) == on_disk
    assert all(sha256(os.path.join(ROOT, f)) == h for f, h in demo.items())


@pytest.mark.skipif(not os.path.isdir(os.path.join(PHOTOS, "photos")), reason="no ../shared/data/photos (CI)")
def test_manifest_matches_the_photo_folder_and_its_splits():
    """Every photo of the rows' folder is listed, with its sha256 and the split split_files gives it (the split the
    shipped photo models were trained, chosen and scored on)."""
    rows = {r["file"]: r for r in manifest() if r["file"].startswith("photos/")}
    root = os.path.join(PHOTOS, "photos")
    split = {f"photos/{os.path.relpath(f, root)}": s for s in ("train", "val", "test")
             for f in split_files(root, s, "folder", list_images, "images", IMAGE_EXTS)}
    assert set(rows) == set(split) and len(rows) == 244
    assert {f: r["split"] for f, r in rows.items()} == split
    assert all(sha256(os.path.join(PHOTOS, f)) == r["sha256"] for f, r in rows.items())


# ----------------------------------------------------------------------------- find_data


def test_find_data_names_how_to_get_a_shipped_models_data(tmp_path, monkeypatch):
    ckpt = tmp_path / "repo" / "checkpoints" / "model.pt"
    ckpt.parent.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    mnist = VideoConfig(dataset="movingmnist", data_dir="mnist")
    with pytest.raises(UserError, match=r"reads the MNIST digits from a folder mnist/, which is found neither .*; "
                                        r"fetch them with `python mnist.py --download mnist`") as e:
        find_data(mnist, str(ckpt))
    assert "\n" not in str(e.value) and "shared" not in str(e.value)
    photos = ImageConfig(dataset="folder", data_dir="photos")
    with pytest.raises(UserError, match=r"reads its photos from a folder photos/.*; pass --data-dir with a folder of "
                                        r"train/ and test/ photos \(docs/photos.tsv lists"):
        find_data(photos, str(ckpt))
    (tmp_path / "repo" / "mnist").mkdir()                               # fetched at the repository's root
    assert find_data(mnist, str(ckpt)) == str(tmp_path / "repo" / "mnist")
    (tmp_path / "mnist").mkdir()                                        # or here (the download's default)
    assert find_data(mnist, str(ckpt)) == "mnist"
    assert find_data(photos, str(ckpt), data_dir="mine") == "mine"      # --data-dir wins, checked where it is read
    assert find_data(photos, str(ckpt), dataset="shapes") is None       # another dataset: not the stored folder
    assert find_data(ImageConfig(dataset="shapes"), str(ckpt)) is None  # built-in data


def test_find_data_keeps_a_users_run_working(tmp_path, monkeypatch):
    """A user's run stores the path given to train_image.py: found from where it ran, or from the checkpoint's
    folder; an absolute path that is gone is refused, named."""
    (tmp_path / "run").mkdir()
    (tmp_path / "my_photos").mkdir()
    own = ImageConfig(dataset="folder", data_dir="my_photos")
    monkeypatch.chdir(tmp_path)
    assert find_data(own, "run/ckpt.pt") == "my_photos"
    monkeypatch.chdir(tmp_path / "run")
    assert find_data(own, "ckpt.pt") == str(tmp_path / "my_photos")
    gone = ImageConfig(dataset="folder", data_dir=str(tmp_path / "gone"))
    with pytest.raises(UserError, match=rf"^ckpt.pt was trained on {tmp_path / 'gone'}, which is found neither from "
                                        r"here nor next to the checkpoint; pass --data-dir with that folder$"):
        find_data(gone, "ckpt.pt")
