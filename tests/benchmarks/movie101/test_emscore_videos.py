"""EMScore as Movie101 scores it (eval.em_source="videos", vnr/benchmarks/movie101/emscore.py):
Chinese-CLIP from a training checkpoint in upstream's layout (the golden tiny model of
tests/golden/cn_clip, as upstream's fine-tuned cnclip-huge-movie101.pt is read), on frames
decoded from the videos at the centres of equal parts of each clip."""

from __future__ import annotations

import json
import pathlib
import shutil

import jax
import numpy as np
import pytest

from configs.movie101 import mcn as mcn_config
from vnr import evaluation, sharding
from vnr.benchmarks.movie101 import caption_metrics as cm
from vnr.benchmarks.movie101 import emscore, records, tng_cnclip
from vnr.benchmarks.movie101 import mcn as task
from vnr.benchmarks.movie101 import mcn_data as data
from vnr.data import synthetic_video, video
from vnr.models.encoders import chinese_clip

GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "golden" / "cn_clip"


@pytest.fixture(scope="module")
def cnclip(tmp_path_factory) -> str:
    return emscore.smoke_checkpoint(tmp_path_factory.mktemp("cnclip"))


def test_towers_from_the_training_checkpoint_match_upstream(cnclip) -> None:
    """The image and text towers EMScore runs, loaded from the training checkpoint, give
    upstream's encode_image / encode_text (`cn_clip.clip.model.CLIP`, golden io.npz)."""
    weights = str(pathlib.Path(cnclip) / "epoch_latest.pt")
    with np.load(GOLDEN / "io.npz") as f:
        io = dict(f)
    embed, size = emscore._vision(cnclip, weights)
    assert size == 16
    pre = chinese_clip.preprocessing(cnclip)
    # the tower normalises uint8-scale pixels itself: hand it upstream's input un-normalised
    raw = io["pixel_values"].transpose(0, 2, 3, 1) * (np.asarray(pre.std) * 255) \
        + np.asarray(pre.mean) * 255
    np.testing.assert_allclose(np.asarray(embed(raw.astype(np.float32))),
                               io["image_features"], atol=1e-5)
    text, _, _, _ = emscore._clip(cnclip, weights)
    ids = io["input_ids"].astype(np.int32)
    tokens, glob = text(ids, (ids != 0).astype(np.int32))
    np.testing.assert_allclose(np.asarray(glob), io["text_features"], atol=2e-5)
    assert np.asarray(tokens).shape[:2] == ids.shape


def _config(data_dir: pathlib.Path, cnclip: str, videos: str):
    c = mcn_config.get_config("smoke,mnscore")
    c.data.update(data_dir=str(data_dir), videos=videos)
    c.eval.update(clip_model=cnclip, clip_weights=str(pathlib.Path(cnclip) / "epoch_latest.pt"),
                  em_frames=3, bert_model="", em_source="videos")
    c.progress = False
    return c


def _rolled_predict(b):
    return {"tokens": jax.numpy.roll(b["targets"], 1, axis=0),
            "valid": b["frame_mask"].any(-1)}


def test_evaluate_scores_frames_decoded_from_the_videos(tmp_path, cnclip) -> None:
    """evaluate(): EMScore of each hypothesis against the em_frames frames shown at the
    centres of equal parts of its clip (the synthetic videos spell each frame's second),
    embedded by the checkpoint's image tower; equal to the same computed here."""
    videos = tng_cnclip.smoke_videos(tmp_path / "videos")
    c = _config(tmp_path / "tfds", cnclip, videos)
    data.prepare(c.data)
    task.validate(c)
    task.check_splits(c)
    m = evaluation.evaluate(task, c, "test", _rolled_predict, sharding.make_mesh((-1, 1)),
                            max_examples=8)
    b = next(iter(data.eval_dataset(c.data, "test", 8, 8)))
    spans = emscore.parse_spans(b["span"])
    src = records.usable_source(c.data, "test")
    assert spans == [(src[i]["movie_id"], float(src[i]["start"]), float(src[i]["end"]))
                     for i in range(8)]
    words, tokens = data.vocab(c.data), np.roll(b["targets"], 1, axis=0)
    casts = [str(x).split("\t") for x in b["cast"]]
    hyps = [task.decode_text(tokens[i], words, casts[i]) for i in range(8)]
    embed, size = emscore._vision(c.eval.clip_model, emscore.weights_file(c.eval))
    resize = video.Resize("squash", width=size, height=size, interpolation="bicubic")
    feats, checked = [], 0
    for mid, start, end in spans:
        times = video.uniform(start, end, 3)
        got = video.decode_at(pathlib.Path(videos) / f"{mid}.mp4", times, resize=resize)
        if not got.clamped:  # one frame a second, each spelling its second
            assert [synthetic_video.read_index(f) for f in got.frames] == \
                [int(t) for t in times], (mid, times)
            checked += 1
        feats.append(np.asarray(embed(got.frames)))
    assert checked >= 4
    frames = np.stack(feats)
    tok, tmask, glob, _ = emscore.clip_text_embeddings(c.eval.clip_model, hyps,
                                                       emscore.weights_file(c.eval))
    want = cm.emscore(frames, np.ones(frames.shape[:2], bool), glob, tok, tmask)
    for k in cm.EMSCORE:
        assert m[k] == pytest.approx(100 * float(np.mean(want[k])), rel=1e-4, abs=1e-4), k
    assert frames.shape == (8, 3, 24) and np.isfinite(m["em_fine_f"])


def test_bad_emscore_inputs_are_one_line(tmp_path, cnclip) -> None:
    videos = tng_cnclip.smoke_videos(tmp_path / "videos")
    c = _config(tmp_path / "tfds", cnclip, videos)
    c.eval.clip_weights = str(tmp_path / "missing.pt")
    with pytest.raises(ValueError, match=r"eval.clip_weights=.*missing.pt.*no such file"):
        task.validate(c)
    c = _config(tmp_path / "tfds", cnclip, str(tmp_path / "no-videos"))
    with pytest.raises(ValueError, match=r"data.videos=.*no-videos.*no such directory"):
        task.validate(c)
    c = _config(tmp_path / "tfds", cnclip, videos)
    c.eval.em_source = "frames"
    with pytest.raises(ValueError, match=r"eval.em_source='frames': choose one of"):
        task.validate(c)
    c = _config(tmp_path / "tfds", cnclip, videos)
    c.eval.em_frames = 0
    with pytest.raises(ValueError, match=r"eval.em_frames=0 .*em_source='videos'"):
        task.validate(c)
    # a movie without its video: named at check_splits, before anything compiles
    c = _config(tmp_path / "tfds", cnclip, str(tmp_path / "partial"))
    data.prepare(c.data)
    gone = f"{records.usable_source(c.data, 'test')[0]['movie_id']}.mp4"
    (tmp_path / "partial").mkdir()
    for f in pathlib.Path(videos).glob("*.mp4"):
        if f.name != gone:
            (tmp_path / "partial" / f.name).symlink_to(f)
    with pytest.raises(ValueError, match=rf"{gone}: no such video"):
        task.check_splits(c)
    # checked before anything compiles: a Hugging Face file where a training checkpoint
    # belongs, a training checkpoint of other sizes, no vocab.txt, a processor of another size
    c = _config(tmp_path / "tfds", cnclip, videos)
    c.eval.clip_weights = str(GOLDEN.parent / "chinese_clip" / "tiny" / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"eval.clip_weights=.*not a Chinese-CLIP training"):
        task.validate(c)
    other = tmp_path / "other"
    shutil.copytree(cnclip, other)
    conf = json.loads((other / "config.json").read_text())
    conf["vision_config"]["hidden_size"] = 48
    (other / "config.json").write_text(json.dumps(conf))
    with pytest.raises(ValueError, match=r"eval.clip_weights=.*epoch_latest.pt.*vision_model"):
        task.validate(_config(tmp_path / "tfds", str(other), videos))
    shutil.copytree(cnclip, tmp_path / "novocab")
    (tmp_path / "novocab" / "vocab.txt").unlink()
    with pytest.raises(ValueError, match=r"novocab.*no vocab.txt"):
        task.validate(_config(tmp_path / "tfds", str(tmp_path / "novocab"), videos))
    shutil.copytree(cnclip, tmp_path / "size")
    pre = json.loads((tmp_path / "size" / "preprocessor_config.json").read_text())
    (tmp_path / "size" / "preprocessor_config.json").write_text(json.dumps(
        dict(pre, size={"height": 24, "width": 24})))
    with pytest.raises(ValueError, match=r"preprocessor size 24 but the vision tower takes 16"):
        task.validate(_config(tmp_path / "tfds", str(tmp_path / "size"), videos))
    c = _config(tmp_path / "tfds", cnclip, "")
    with pytest.raises(ValueError, match=r"data.videos is empty and data.manual_dir unset"):
        task.validate(c)


def test_mnscore_scores_chinese_narrations_on_videos_and_english_on_features() -> None:
    """`mnscore`: the paper's EMScore (Chinese-CLIP on the videos) for Chinese narrations;
    OpenAI CLIP on the release's features for English ones and with `em_features`."""
    zh = mcn_config.get_config("v1,mnscore")
    assert (zh.eval.clip_model, zh.eval.em_source, zh.eval.em_frames, zh.eval.mnscore_em) == \
        ("chinese-clip-vit-huge-patch14", "videos", 10, "fine")
    assert zh.epochs == 100 and zh.batch_size == 56
    for args in ("v1,mnscore,em_features", "v2,en,mnscore", "mnscore"):
        c = mcn_config.get_config(args)
        assert (c.eval.clip_model, c.eval.em_source) == ("clip-vit-base-patch32", "features")
    with pytest.raises(ValueError, match="em_features .* add mnscore"):
        mcn_config.get_config("v1,em_features")
