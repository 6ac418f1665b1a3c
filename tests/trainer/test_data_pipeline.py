"""The MoviePuzzle grain pipeline: conventions, reshuffles, process sharding, padding."""

import numpy as np
import pytest

from configs.moviepuzzle.main import get_config
from vnr.benchmarks.moviepuzzle import data
from vnr.benchmarks.moviepuzzle.pairwise import gt_order
from vnr.data import pipeline, text


def _cfg():
    return get_config("smoke").data


def _records(n=12, seed=0, image=None):
    """Clips of 3-7 JPEG frames; by default frame t is 16x16 of brightness 20 * t (it decodes
    back to its position), else `image(t, rng)` gives frame t's pixels."""
    import io

    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    for c in range(n):
        k = int(rng.integers(3, 8))
        frames = []
        for t in range(k):
            pixels = np.full((16, 16, 3), 20 * t, np.uint8) if image is None else image(t, rng)
            b = io.BytesIO()
            Image.fromarray(pixels).save(b, "JPEG", quality=95)
            frames.append(b.getvalue())
        out.append(dict(clip_id=str(c), movie_id="m", frames=frames,
                        subtitles=[f"word{t}" for t in range(k)],
                        img_id=np.arange(k, dtype=np.int32), shot_id=np.arange(k, dtype=np.int32),
                        scene_id=np.zeros(k, np.int32), position=np.arange(k, dtype=np.int32)))
    return out


def _batches(monkeypatch, n_batches, batch=4, pi=0, pc=1, seed=0):
    recs = _records()
    monkeypatch.setattr(data, "source", lambda cfg, split: recs)
    it = iter(data.train_dataset(_cfg(), batch, seed, pi, pc))
    out = [next(it) for _ in range(n_batches)]
    it.close()
    return out


def test_position_and_gt_order_follow_the_shuffle(monkeypatch):
    for b in _batches(monkeypatch, 3):
        n = b["mask"].sum(-1)
        order = gt_order(b["position"])
        for c in range(len(n)):
            # The input frame at true position k has brightness 20 * k.
            bright = b["frames"][c, order[c, : n[c]], 0, 0, 0].astype(int)
            np.testing.assert_allclose(bright, 20 * np.arange(n[c]), atol=3)
            assert sorted(b["position"][c, : n[c]]) == list(range(n[c]))
            np.testing.assert_array_equal(order[c, n[c]:], np.arange(n[c], len(order[c])))
            assert not b["mask"][c, n[c]:].any()


def test_frames_reshuffled_every_epoch_and_deterministic(monkeypatch):
    a = _batches(monkeypatch, 6)  # 12 clips / 4 per batch: 2 epochs
    again = _batches(monkeypatch, 6)
    for x, y in zip(a, again):
        np.testing.assert_array_equal(x["position"], y["position"])
    first = {tuple(p) for b in a[:3] for p in b["position"]}
    second = {tuple(p) for b in a[3:] for p in b["position"]}
    assert first != second


def test_processes_split_one_global_stream(monkeypatch):
    """Process p of 2 reads the p-th half of every global batch, same rows and shuffles."""
    whole = [b["position"] for b in _batches(monkeypatch, 2, batch=4)]
    for p in range(2):
        got = [b["position"] for b in _batches(monkeypatch, 2, batch=2, pi=p, pc=2)]
        for g, w in zip(got, whole, strict=True):
            np.testing.assert_array_equal(g, w[2 * p:2 * p + 2])


def test_pad_batch_masks_padding():
    b = {"mask": np.ones((3, 5), bool), "frames": np.ones((3, 5, 2, 2, 3), np.uint8),
         "text": np.full((3, 5), "x", dtype=object)}
    p = pipeline.pad_batch(b, 8)
    assert p["mask"].shape == (8, 5) and not p["mask"][3:].any() and p["mask"][:3].all()
    assert (p["frames"][3:] == 0).all() and p["text"][5, 0] == ""


def test_tokenizer_is_unicode_aware_and_stable():
    assert text.words("Où est-il? café") == ["où", "est", "il", "?", "café"]
    assert text.words("你好") == ["你", "好"]
    a = text.tokenize("Where is the key?", 4096, 8)
    np.testing.assert_array_equal(a, text.tokenize("where is the KEY ?", 4096, 8))
    assert (a[:5] >= 2).all() and (a[5:] == 0).all()
    np.testing.assert_array_equal(text.tokenize("", 4096, 4), [text.EMPTY, 0, 0, 0])


def _wide_records(n=10, seed=0):
    """Clips of non-square (40x24) JPEG frames, as MovieNet's are."""
    return _records(n, seed, image=lambda t, rng: rng.integers(0, 256, (24, 40, 3), np.uint8))


def test_squash_path_is_the_previous_decode():
    """The main job's path (data.image_resize="squash", the default): each frame is PIL's
    bilinear resize to S x S, as before CLIP's preprocessing was added (its results must not
    change)."""
    import io

    from PIL import Image

    cfg = _cfg()
    assert cfg.image_resize == "squash" and not cfg.jpeg_draft and not cfg.frame_store
    rec = _wide_records(1)[0]
    ex = data._encode(cfg).map(rec)
    for k, jpeg in enumerate(rec["frames"]):
        img = Image.open(io.BytesIO(jpeg)).convert("RGB").resize(
            (cfg.image_size, cfg.image_size), Image.BILINEAR)
        np.testing.assert_array_equal(ex["frames"][k], np.asarray(img))
    assert not ex["frames"][len(rec["frames"]):].any()


def _clip_cfg(tmp_path, **kw):
    cfg = _cfg()
    cfg.update(dict(dict(image_resize="clip", image_size=16, data_dir=str(tmp_path),
                         augment=True), **kw))
    return cfg


def _stream(cfg, n_train=6, batch=4):
    it = iter(data.train_dataset(cfg, batch, 0))
    train = [next(it) for _ in range(n_train)]
    it.close()
    ev = list(iter(data.eval_dataset(cfg, "val", batch, 0)))
    return train, ev


def test_frame_store_gives_the_same_batches(monkeypatch, tmp_path):
    """data.frame_store: the frames preprocessed once (CLIP's preprocessing here) give the
    same training and evaluation batches, every key bit for bit, augmentation included."""
    from vnr.data import frame_store

    recs = _wide_records()
    monkeypatch.setattr(data, "source", lambda cfg, split: recs)
    want = _stream(_clip_cfg(tmp_path))
    assert not (tmp_path / "frame_store").exists()
    got = _stream(_clip_cfg(tmp_path, frame_store=True))
    stores = list((tmp_path / "frame_store").glob("*/*/*/*/meta.json"))
    assert len(stores) == 1
    for a, b in zip(want[0] + want[1], got[0] + got[1], strict=True):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    # the store is the pipeline's own decode, and its key follows the preprocessing
    reader = frame_store.Reader(stores[0].parent, "train")
    np.testing.assert_array_equal(reader.rows(3, "3"), data.frames_of(
        recs[3], 16, len(recs[3]["frames"]), "clip"))
    _stream(_clip_cfg(tmp_path, frame_store=True, image_resize="squash"), n_train=1)
    assert len(list((tmp_path / "frame_store").glob("*/*/*/*/meta.json"))) == 2


def test_frame_store_of_another_dataset_is_one_clear_error(monkeypatch, tmp_path):
    from vnr.data import frame_store

    recs = _wide_records()
    monkeypatch.setattr(data, "source", lambda cfg, split: recs)
    cfg = _clip_cfg(tmp_path, frame_store=True)
    _stream(cfg, n_train=1)
    recs[2] = dict(recs[2], clip_id="rebuilt")  # the dataset changed under the store
    with pytest.raises(frame_store.StoreError, match="record 2 is 'rebuilt' in the dataset"):
        next(iter(data.eval_dataset(cfg, "val", 16, 0)))
    with pytest.raises(ValueError, match="data.frame_store with data.feature_cache='image'"):
        data._records(cfg, "val", {"image": str(tmp_path)})


def test_augmentation_is_unchanged_by_its_faster_copy():
    """AugmentClip (the main job trains with it) draws the same (channel permutation, flip)
    and gives the same frames as the earlier fancy-indexing form, for every draw."""
    frames = np.random.default_rng(0).integers(0, 256, (5, 8, 6, 3), dtype=np.uint8)
    ex = {"frames": frames, "mask": np.ones(5, bool)}
    seen = set()
    for seed in range(40):
        got = data.AugmentClip().random_map(ex, np.random.default_rng(seed))["frames"]
        rng = np.random.default_rng(seed)
        perm, flip = rng.permutation(3), rng.random() < 0.5
        want = frames[..., perm]
        if flip:
            want = want[:, :, ::-1]
        np.testing.assert_array_equal(got, want)
        assert got.flags.c_contiguous
        seen.add((tuple(perm), bool(flip)))
    assert len(seen) == 12  # every permutation, flipped and not


def test_frame_store_key_follows_a_rebuilt_dataset(monkeypatch, tmp_path):
    """A dataset rebuilt with other content (its build summary or info differ) gets its own
    store: stored pixels of the earlier build are never read."""
    from tfds_builders.moviepuzzle.moviepuzzle import VERSION

    recs = _wide_records(3)
    monkeypatch.setattr(data, "source", lambda cfg, split: recs)
    cfg = _clip_cfg(tmp_path, frame_store=True)
    built = tmp_path / "moviepuzzle" / cfg.config / str(VERSION)
    built.mkdir(parents=True)
    (built / "build_summary.json").write_text('{"examples": {"train": 3}}')
    first = data.store_directory(cfg)
    assert data.store_directory(cfg) == first  # reused
    (built / "build_summary.json").write_text('{"examples": {"train": 3}, "skipped": {"x": 1}}')
    assert data.store_directory(cfg) != first


def _frames_of_id(rec: dict) -> np.ndarray:
    """A picklable `prepare` for the spawned store builders: record k -> k + 1 frames."""
    k = int(rec["clip_id"])
    return np.full((k + 1, 2, 2, 3), k, np.uint8)


def test_frame_store_built_by_worker_processes_equals_one_built_here(tmp_path):
    """One pool of spawned processes serves every split, in record order: the files are the
    ones the in-process build writes, byte for byte."""
    from vnr.data import frame_store

    sources = {"train": [{"clip_id": str(k)} for k in range(9)],
               "val": [{"clip_id": str(k)} for k in (4, 0, 2)]}
    here = frame_store.build(tmp_path / "here", sources, _frames_of_id, {"x": 1}, workers=0,
                             say=lambda _: None)
    pool = frame_store.build(tmp_path / "pool", sources, _frames_of_id, {"x": 1}, workers=2,
                             say=lambda _: None)
    files = sorted(p.name for p in here.iterdir())
    assert files == sorted(p.name for p in pool.iterdir()) and "val.u8" in files
    for name in files:
        assert (here / name).read_bytes() == (pool / name).read_bytes(), name
    assert frame_store.Reader(pool, "val").rows(1, "0").tolist() == [[[[0] * 3] * 2] * 2]
