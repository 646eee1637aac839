"""Image and video files (sources/files.py): disjoint train/val/test splits in every folder layout, fresh photo
views."""
import os
from dataclasses import asdict, replace

import numpy as np
import pytest
import torch
from PIL import Image

from config import typed
from plumbing.cli import UserError
from puzzles import ImageConfig, ImagePuzzles, cut_image
from sources.files import IMAGE_EXTS, fit_image, list_images, random_crop, split_files


def photos(folder, n, size=(64, 48), seed=0):
    """n random-colour photos named img000.png ... in folder."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        arr = (rng.uniform(0, 255, (size[1] // 8, size[0] // 8, 3))).astype(np.uint8)
        Image.fromarray(arr).resize(size, Image.BILINEAR).save(folder / f"img{i:03d}.png")


def splits(root):
    return [split_files(str(root), s, "folder", list_images, "images", IMAGE_EXTS) for s in ("train", "val", "test")]


def folder(tmp_path, split, **kw):
    """Puzzles of 2x2 8 px pieces from the photos under tmp_path."""
    return ImagePuzzles(ImageConfig(dataset="folder", data_dir=str(tmp_path), grid=(2, 2), piece_size=8, **kw), split)


@pytest.mark.parametrize("layout", ["train only", "flat", "both"])
def test_splits_never_share_a_file(tmp_path, layout):
    if layout == "train only":
        photos(tmp_path / "train", 200)
    elif layout == "flat":
        photos(tmp_path, 200)
    else:
        photos(tmp_path / "train", 30)
        photos(tmp_path / "val", 10, seed=1)
    train, val, test = splits(tmp_path)
    assert train and val and test and not set(train) & set(test) and not set(train) & set(val)
    assert not set(val) & set(test)
    if layout == "both":
        assert len(train) + len(val) == 30 and len(test) == 10             # val/ is the test split, val from train/
    else:
        assert len(train) + len(val) + len(test) == 200 and 3 <= len(test) <= 20      # about 5% held out
        assert 8 <= len(val) <= 35                                                    # about 10%


@pytest.mark.parametrize("name", ["val", "test"])
def test_eval_folder_only_is_test_split_and_refuses_training(tmp_path, name):
    photos(tmp_path / name, 12)
    assert len(split_files(str(tmp_path), "test", "folder", list_images, "images", IMAGE_EXTS)) == 12
    with pytest.raises(UserError, match="no train/ \\(or video_train/\\) folder"):
        split_files(str(tmp_path), "train", "folder", list_images, "images", IMAGE_EXTS)


def test_random_crop_is_a_zoomed_flipped_view(tmp_path):
    ramp = np.tile(np.linspace(0, 255, 200, dtype=np.float32), (100, 1))           # brighter to the right
    photo = Image.fromarray(np.stack([ramp] * 3, -1).astype(np.uint8))
    views = [random_crop(photo, 24, 24, np.random.default_rng(s), (0.3, 1.0)) for s in range(40)]
    assert all(v.shape == (24, 24, 3) and v.dtype == np.float32 for v in views)
    slopes = [v[:, -1, 0].mean() - v[:, 0, 0].mean() for v in views]
    assert min(slopes) < 0 < max(slopes)                                              # some views are flipped
    assert max(abs(s) for s in slopes) > 2 * min(abs(s) for s in slopes)              # different zooms


def test_photo_training_views_are_fresh_and_test_is_whole_photo(tmp_path):
    photos(tmp_path / "train", 1, size=(96, 64))
    photos(tmp_path / "val", 1, size=(96, 64), seed=2)         # val/ and test/: every file of train/ is training
    photos(tmp_path / "test", 1, size=(96, 64), seed=1)
    train = folder(tmp_path, "train")
    a, b = train[0], train[1]                                 # the same single photo, two visits: two views
    assert not torch.equal(torch.sort(a["content"].flatten())[0], torch.sort(b["content"].flatten())[0])
    test = folder(tmp_path, "test")
    assert len(test) == 1 and len(train) > 10 ** 9
    item = test[0]                                            # the whole photo, resized and centre-cropped, cut up
    whole = fit_image(Image.open(tmp_path / "test" / "img000.png"), 16, 16)
    pieces = torch.from_numpy(cut_image(whole, (2, 2), 8)[item["true_pos"].numpy()]).permute(0, 3, 1, 2) * 2 - 1
    assert torch.allclose(item["content"], pieces)


def test_photo_folder_bad_files(tmp_path, capsys):
    photos(tmp_path / "train", 2, size=(12, 12))              # smaller than a 2x2 grid of 8 px pieces
    photos(tmp_path / "val", 1)
    photos(tmp_path / "test", 1)
    train = folder(tmp_path, "train")
    with pytest.raises(UserError, match="--piece-size"):
        train[0]
    Image.new("RGB", (64, 64), (200, 10, 10)).save(tmp_path / "train" / "big.png")
    (tmp_path / "train" / "broken.jpg").write_bytes(b"not a jpeg")
    train = folder(tmp_path, "train")
    for i in range(6):
        assert train[i]["content"].shape == (4, 3, 8, 8)
    assert train.pictures.skipped == {str(tmp_path / "train" / n) for n in ("broken.jpg", "img000.png", "img001.png")}
    assert "skipped" in capsys.readouterr().err


def test_mix_shapes_puts_procedural_puzzles_in_the_training_stream(tmp_path):
    for split in ("train", "val", "test"):
        (tmp_path / split).mkdir()
        Image.new("RGB", (64, 64), (90, 90, 90)).save(tmp_path / split / "grey.png")   # flat photos: std 0

    def shapes_count(ds):
        return sum(bool(ds[i]["content"].std() > 0) for i in range(40))
    assert shapes_count(folder(tmp_path, "train")) == 0
    assert 5 < shapes_count(folder(tmp_path, "train", mix_shapes=0.5)) < 35                 # about half
    assert folder(tmp_path, "test", mix_shapes=0.5)[0]["content"].std() == 0               # test: photos


def test_unknown_config_fields_are_refused_and_missing_ones_take_their_default(tmp_path):
    """A checkpoint config with a field this version does not know is refused in one sentence naming it (no
    compatibility code for removed settings); one it lacks (added since) takes the dataclass default; a stored list
    is a tuple again."""
    plain = ImageConfig(dataset="folder", data_dir=str(tmp_path), grid=(2, 2), piece_size=8)
    assert typed(ImageConfig, asdict(plain), "new.pt") == plain
    assert typed(ImageConfig, {**asdict(plain), "grid": [2, 2]}, "new.pt").grid == (2, 2)
    with pytest.raises(UserError, match=r"^checkpoint old.pt has settings this version of jpdvt does not know "
                                        r"\(colour\); use a checkpoint written by this version$"):
        typed(ImageConfig, {**asdict(plain), "colour": 1}, "old.pt")
    stored = asdict(replace(plain, anchor=True, missing=2))
    del stored["anchor"]
    assert typed(ImageConfig, stored, "older.pt") == replace(plain, missing=2)     # anchor: its default, False


def test_an_imagenet_layout_with_too_few_training_images_names_the_real_fix(tmp_path):
    """train/ and val/ (ImageNet): val/ is the test split, so an empty val band is not fixed by adding val/."""
    for split in ("train", "val"):
        (tmp_path / split / "n0").mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(tmp_path / split / "n0" / "a.png")
    with pytest.raises(UserError, match=r"add more training images \(the val split is a hashed share of train/, since "
                                        r"val/ is the test split\), or a test/ folder beside val/"):
        split_files(str(tmp_path), "val", "imagenet", list_images, "images", IMAGE_EXTS)


def test_ucf101_splits_keep_each_group_whole_and_test_on_groups_1_to_7(tmp_path):
    """UCF101's clips of one group are cuts of one video: a group never straddles two splits (official split 1)."""
    from sources.files import list_videos
    for name in ("Archery", "Bowling"):
        (tmp_path / name).mkdir()
        for g in range(1, 26):
            for c in range(1, 4):
                (tmp_path / name / f"v_{name}_g{g:02d}_c{c:02d}.avi").write_bytes(b"")
    parts = {s: split_files(str(tmp_path), s, "ucf101", list_videos, "videos", (".avi",))
             for s in ("train", "val", "test")}
    group = {s: {f.rsplit("_c", 1)[0] for f in files} for s, files in parts.items()}
    train, val, test = group["train"], group["val"], group["test"]
    assert not train & val and not train & test and not val & test
    assert {int(g[-2:]) for g in test} == set(range(1, 8)) and len(parts["test"]) == 2 * 7 * 3
    assert val and sum(map(len, parts.values())) == 2 * 25 * 3


def test_clevrer_folders_are_its_three_splits(tmp_path):
    """CLEVRER unpacked as video_train/, video_validation/ and video_test/ (each in folders of 1000 videos): the
    paper's 10,000 / 5,000 / 5,000 split, not a hashed share of all of them."""
    from sources.files import list_videos
    for split, first in (("video_train", 0), ("video_validation", 10000), ("video_test", 15000)):
        folder = tmp_path / split / f"video_{first:05d}-{first + 1000:05d}"
        folder.mkdir(parents=True)
        for i in range(first, first + 4):
            (folder / f"video_{i:05d}.mp4").write_bytes(b"")
    parts = {s: split_files(str(tmp_path), s, "clevrer", list_videos, "videos", (".mp4",))
             for s in ("train", "val", "test")}
    for split, folder in (("train", "video_train"), ("val", "video_validation"), ("test", "video_test")):
        assert len(parts[split]) == 4 and all(f"{os.sep}{folder}{os.sep}" in f for f in parts[split]), split
