"""TFDS builder for M-SyMoN (Sun et al., 2024): timed narration sentences per video, their
human alignment to the video, and optionally per-second video features.

Splits are `<lang>_<split>` for split in train/val/test (the annotated portion) and
`<lang>_weak` (unannotated videos with subtitle timestamps as weak labels, §4.4). Only splits
with at least one usable video exist. See README.md for the manual_dir layout and the exact
rules.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tfds_builders import common, schema
from tfds_builders.msymon import parse
from tfds_builders.schema import Invalid, Unreadable, check, detail, each, load_json

VERSION = tfds.core.Version("1.2.0")
MOVIES_FILE = "movies.json"
VAL_FRACTION = 0.1  # of a language's train videos, when its val.json is empty

MANUAL_DOWNLOAD_INSTRUCTIONS = """\
Point --manual_dir at a directory holding `annotations/<lang>/{train,val,test}.json` (the
M-SyMoN release), optionally `subtitles/<lang>/<video_id>.json` (timed narration sentences),
`movies.json` ({video_id: movie name}) and, for feature configs, `features/<video_id>.npy`
([T, dim] float, `fps` rows per second); for the `videos` config, `videos/<video_id>.<ext>`
(yt-dlp's downloads); `cuts/<video_id>.txt` (hard cuts in seconds, one a line: `python -m
vnr.extract --model transnetv2` writes them) gives the video's shots (Appendix A)."""


@dataclasses.dataclass(eq=False)
class MSymonConfig(tfds.core.BuilderConfig):
    """`features`: store [T, dim] video features at `fps` rows/s (False: text side only).
    `videos`: store the name of each video's file under `videos/` and take its duration from
    the file (the frames themselves are read by the trainer's frame store).
    `source`: "manual" (read manual_dir) or "synthetic" (write the generated corpus first)."""

    features: bool = True
    dim: int = 512
    fps: float = 1.0
    source: str = "manual"
    seed: int = 0
    videos: bool = False


def builder_config(features: bool, dim: int = 512, fps: float = 1.0) -> MSymonConfig:
    """A config for any feature size and rate (named e.g. `features_d512_fps1`)."""
    if not features:
        return MSymonConfig(name="text_only", features=False, dim=0,
                            description="Text side only: sentences, times, matched flags.")
    if dim < 1 or fps <= 0:
        raise ValueError(f"msymon features need dim >= 1 and fps > 0, got dim={dim}, fps={fps}")
    return MSymonConfig(name=f"features_d{dim}_fps{fps:g}".replace(".", "p"), dim=dim, fps=fps,
                        description=f"Video features [T, {dim}] at {fps:g} rows per second.")


def check_manual_dir(manual_dir: os.PathLike | str | None) -> pathlib.Path:
    what = "annotations/<lang>/{train,val,test}.json"
    if not manual_dir:
        raise common.ManualDirError(f"msymon needs --manual_dir: a directory holding {what}")
    path = pathlib.Path(manual_dir)
    if not (path / "annotations").is_dir():
        raise common.ManualDirError(f"manual_dir {path} has no annotations/ folder ({what})")
    return path


def read_movies(root: pathlib.Path, counts: collections.Counter) -> dict[str, str]:
    """`movies.json` ({video_id: movie name}, optional): the movie of each video, used to keep
    a movie on one side of a split (an entry whose name is not a string is skipped,
    `bad_movie_entry`). The release ships no such file (the paper matched
    movies with ChatGPT, Appendix A.1); without it every video is its own movie."""
    path = root / MOVIES_FILE
    if not path.is_file():
        common.log.warning("%s: no %s, every video counts as its own movie (validation "
                           "carving and weak-data overlap removal work by video)", root,
                           MOVIES_FILE)
        return {}
    try:
        data = check(dict[str, Any], load_json(path), "bad_json", depth=0)
    except (Unreadable, Invalid) as e:
        common.record_skip(counts, "bad_json", path, detail(e) if isinstance(
            e, Unreadable) else f"not an object {{video_id: movie}}: {e}")
        return {}
    return {k: " ".join(v.lower().split()) for k, v in
            each(schema.Text, data.items(), "bad_movie_entry", path, counts)}


def movie_of(vid: str, movies: dict[str, str]) -> str:
    return movies.get(vid) or f"video:{vid}"


def carve_validation(train: list[dict], movies: dict[str, str], fraction: float = VAL_FRACTION
                     ) -> tuple[list[dict], list[dict]]:
    """(train, val): whole movies moved from `train` to a validation set, deterministically.

    Movies are ordered by the CRC32 of their name and taken in that order until at least
    `max(1, round(fraction * len(train)))` videos are in val; a movie never straddles the
    two sets, and at least one train video is left (no carving from a single movie)."""
    want = max(1, round(fraction * len(train)))
    by_movie: dict[str, list[int]] = collections.defaultdict(list)
    for i, v in enumerate(train):
        by_movie[movie_of(v["video_id"], movies)].append(i)
    if len(by_movie) < 2:
        return train, []
    picked: set[int] = set()
    for name in sorted(by_movie, key=lambda m: (zlib.crc32(m.encode()), m)):
        if len(picked) >= want or len(picked) + len(by_movie[name]) >= len(train):
            break
        picked.update(by_movie[name])
    return ([v for i, v in enumerate(train) if i not in picked],
            [v for i, v in enumerate(train) if i in picked])


def scan(root: pathlib.Path, config: MSymonConfig, counts: collections.Counter
         ) -> dict[str, list[dict]]:
    """Every usable video of `root`, grouped by split name `<lang>_<split>`.

    A language whose val.json is empty or absent gets a validation set carved from its train
    videos by movie (`carve_validation`, counted as `kept_val_carved_from_train`); weak
    videos of a movie that appears in the annotated portion are left out (Appendix A.1,
    `weak_movie_in_annotated`)."""
    out: dict[str, list[dict]] = collections.defaultdict(list)
    movies = read_movies(root, counts)
    annotated: dict[str, set[str]] = {}
    for lang_dir in sorted(p for p in (root / "annotations").iterdir() if p.is_dir()):
        lang = lang_dir.name
        files = sorted(lang_dir.glob("*.json"))
        if lang not in parse.LANGUAGES:
            for f in files:
                common.record_skip(counts, "unknown_language", f,
                                   f"language {lang!r} is not one of {', '.join(parse.LANGUAGES)}")
            continue
        seen: set[str] = set()
        for f in files:
            if f.stem not in parse.SPLITS:
                common.record_skip(counts, "unknown_split_file", f,
                                   f"expected {', '.join(parse.SPLITS)}")
                continue
            for vid, video in parse.read_annotations(f, counts).items():
                if vid in seen:
                    common.record_skip(counts, "duplicate_video", f, vid)
                    continue
                seen.add(vid)
                video = _complete(root, config, lang, vid, video, counts, f)
                if video is not None:
                    out[f"{lang}_{f.stem}"].append(video)
        annotated[lang] = seen
        if out.get(f"{lang}_train") and not out.get(f"{lang}_val"):
            train, val = carve_validation(out[f"{lang}_train"], movies)
            if val:
                out[f"{lang}_train"], out[f"{lang}_val"] = train, val
                counts["kept_val_carved_from_train"] += len(val)
                common.log.warning(
                    "%s: no validation video, %d of %d train videos (%d movies) carved as "
                    "%s_val by movie: %s", lang_dir, len(val), len(val) + len(train),
                    len({movie_of(v['video_id'], movies) for v in val}), lang,
                    ", ".join(v["video_id"] for v in val))
    held = {movie_of(v, movies) for vids in annotated.values() for v in vids}
    for lang in sorted(annotated):
        for video in _weak_videos(root, config, lang, annotated[lang], counts, movies, held):
            out[f"{lang}_weak"].append(video)
    sub_root = root / "subtitles"
    if sub_root.is_dir():
        for d in sorted(p for p in sub_root.iterdir() if p.is_dir()):
            if d.name not in parse.LANGUAGES:
                for f in sorted(d.glob("*.json")):
                    common.record_skip(counts, "unknown_language", f, f"language {d.name!r}")
    return dict(out)


def _complete(root: pathlib.Path, config: MSymonConfig, lang: str, vid: str, video: dict,
              counts: collections.Counter, where: Any) -> dict | None:
    """Adds narration times, features and duration; None (counted) if unusable."""
    sub_path = root / "subtitles" / lang / f"{vid}.json"
    subs = parse.read_subtitles(sub_path, counts) if sub_path.is_file() else None
    video["narr_begin"], video["narr_end"] = parse.narration_times(video["sentences"], subs,
                                                                  counts)
    video.update(video_id=vid, language=lang)
    need = parse.spans_end(video)
    if config.features:
        feats = parse.video_features(root, vid, config.dim, config.fps, need, counts,
                                     f"video {vid} ({where})")
        if feats is None:
            return None
        duration = len(feats) / config.fps
        video["features"] = feats
    elif config.videos:
        got = parse.video_duration(root, vid, need, counts, f"video {vid} ({where})")
        if got is None:
            return None
        video["video_file"], duration = got
    else:
        duration = need
        if duration <= 0:
            common.record_skip(counts, "no_timed_sentences", where,
                               f"{vid}: no span or narration time gives a duration")
            return None
    video["duration"] = np.float32(duration)
    return _shots(root, video, counts)


def _shots(root: pathlib.Path, video: dict, counts: collections.Counter) -> dict:
    """Adds `shot_begin` / `shot_end`: the shots between the hard cuts of
    `cuts/<id>.txt` over [0, duration) (Appendix A: TransNetV2's cuts); none without the
    file (counted `kept_without_cuts`); a cut at or past the video's end, or at or before
    0, is dropped and counted (`cuts:outside_video`)."""
    from tfds_builders.symon.symon import read_cuts

    path = root / "cuts" / f"{video['video_id']}.txt"
    duration = float(video["duration"])
    if not path.is_file():
        counts["kept_without_cuts"] += 1
        video["shot_begin"] = video["shot_end"] = np.zeros((0,), np.float32)
        return video
    cuts = read_cuts(path, counts)
    inside = (cuts > 0) & (cuts < duration)
    if (~inside).any():
        for c in cuts[~inside]:  # each dropped cut counted, the file named
            common.record_skip(counts, "cuts:outside_video", path,
                               f"cut {float(c):g} s outside (0, {duration:g}) s")
    edges = np.concatenate([[0.0], cuts[inside], [duration]]).astype(np.float32)
    video["shot_begin"], video["shot_end"] = edges[:-1], edges[1:]
    return video


def _weak_videos(root: pathlib.Path, config: MSymonConfig, lang: str, annotated: set[str],
                 counts: collections.Counter, movies: dict[str, str], held: set[str]
                 ) -> Iterator[dict]:
    """Unannotated videos with subtitles: each narrated sentence is taken as matched to the
    footage played while it is spoken (M-SyMoN §4.4's weak supervision)."""
    sub_dir = root / "subtitles" / lang
    if not sub_dir.is_dir():
        return
    for path in sorted(sub_dir.glob("*.json")):
        if path.stem in annotated:
            continue
        if movie_of(path.stem, movies) in held:
            common.record_skip(counts, "weak_movie_in_annotated", path,
                               f"movie {movie_of(path.stem, movies)!r} is annotated")
            continue
        subs = parse.read_subtitles(path, counts)
        if subs is None:
            continue
        video = {"sentences": subs["sentences"], "begin": subs["begin"], "end": subs["end"],
                 "matched": np.ones(len(subs["sentences"]), bool),
                 "narr_begin": subs["begin"], "narr_end": subs["end"]}
        video.update(video_id=path.stem, language=lang)
        video = _complete_weak(root, config, video, counts)
        if video is not None:
            yield video


def _complete_weak(root: pathlib.Path, config: MSymonConfig, video: dict,
                   counts: collections.Counter) -> dict | None:
    need = parse.spans_end(video)
    if config.videos:
        got = parse.video_duration(root, video["video_id"], need, counts,
                                   f"weak video {video['video_id']}")
        if got is None:
            return None
        video["video_file"], duration = got
        video["duration"] = np.float32(duration)
        return _shots(root, video, counts)
    if not config.features:
        video["duration"] = np.float32(need)
        return _shots(root, video, counts)
    feats = parse.video_features(root, video["video_id"], config.dim, config.fps, need, counts,
                                 f"weak video {video['video_id']}")
    if feats is None:
        return None
    video.update(features=feats, duration=np.float32(len(feats) / config.fps))
    return _shots(root, video, counts)


def make_example(video: dict, with_features: bool, shots: bool = True) -> dict:
    ex = {
        "video_id": video["video_id"],
        "language": video["language"],
        "sentences": list(video["sentences"]),
        "begin": np.asarray(video["begin"], np.float32),
        "end": np.asarray(video["end"], np.float32),
        "matched": np.asarray(video["matched"], np.int32),
        "narr_begin": np.asarray(video["narr_begin"], np.float32),
        "narr_end": np.asarray(video["narr_end"], np.float32),
        "duration": np.float32(video["duration"]),
    }
    if shots:
        ex["shot_begin"] = np.asarray(video.get("shot_begin", ()), np.float32)
        ex["shot_end"] = np.asarray(video.get("shot_end", ()), np.float32)
    if with_features:
        ex["features"] = np.asarray(video["features"], np.float32)
    if "video_file" in video:
        ex["video_file"] = video["video_file"]
    return ex


def feature_specs(config: Any, shots: bool = True) -> dict:
    """The stored features of a video (YMS stores these too, plus clip boundaries);
    `config.features` / `config.dim` add the [T, dim] video features."""
    f32 = tfds.features.Tensor(shape=(None,), dtype=np.float32)
    feats = {
        "video_id": tfds.features.Text(),
        "language": tfds.features.Text(),
        "sentences": tfds.features.Sequence(tfds.features.Text()),
        "begin": f32, "end": f32, "narr_begin": f32, "narr_end": f32,
        "matched": tfds.features.Tensor(shape=(None,), dtype=np.int32),
        "duration": tfds.features.Scalar(np.float32),
    }
    if shots:  # M-SyMoN's shots from cuts/ (YMS stores its own clips instead)
        feats.update(shot_begin=f32, shot_end=f32)
    if config.features:
        feats["features"] = tfds.features.Tensor(shape=(None, config.dim), dtype=np.float32)
    if getattr(config, "videos", False):
        feats["video_file"] = tfds.features.Text()
    return feats


class MSymon(common.SummaryBuilder, tfds.core.GeneratorBasedBuilder):
    """M-SyMoN videos: narration sentences with spans, matched flags, narration times,
    optional per-second features."""

    name = "msymon"
    VERSION = VERSION
    RELEASE_NOTES = {"1.0.0": "Initial release.",
                     "1.1.0": "Validation carved by movie when val is empty; weak overlap "
                              "removal by movie.",
                     "1.2.0": "Shots from cuts/<id>.txt (shot_begin, shot_end)."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS
    BUILDER_CONFIGS = [
        builder_config(False),
        MSymonConfig(name="features", dim=512, fps=1.0,
                     description="Per-second 512-d features (e.g. S3D or CLIP ViT-B/32)."),
        MSymonConfig(name="features_1024", dim=1024, fps=1.0,
                     description="Per-second 1024-d features (e.g. S3D mixed_5c)."),
        MSymonConfig(name="synthetic", dim=32, fps=1.0, source="synthetic",
                     description="Generated corpus with known alignment (no manual_dir)."),
        MSymonConfig(name="videos", features=False, dim=0, videos=True,
                     description="Text side and each video's file under videos/ (frames "
                                 "are read by the trainer's frame store)."),
    ]
    DEFAULT_CONFIG_NAME = "text_only"

    @classmethod
    def check_inputs(cls, config: str | MSymonConfig, manual_dir: Any) -> None:
        cfg = config if isinstance(config, MSymonConfig) else next(
            (c for c in cls.BUILDER_CONFIGS if c.name == config), None)
        if cfg is None or cfg.source == "manual":
            check_manual_dir(manual_dir)

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(feature_specs(self.builder_config)),
            homepage="https://github.com/insundaycathy/M-SyMoN")

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict:
        cfg: MSymonConfig = self.builder_config
        if cfg.source == "synthetic":
            from tfds_builders.msymon import synthetic

            root = common.synthetic_corpus(dl_manager, "msymon", synthetic, f"d{cfg.dim}",
                                           seed=cfg.seed, dim=cfg.dim)
        else:
            root = check_manual_dir(common.manual_dir(dl_manager))
        self.skips = common.Counts()  # names the first inputs behind each count
        videos = scan(root, cfg, self.skips)
        if not videos:
            raise common.ManualDirError(
                f"{root}: no usable video in any annotations/<lang>/ file (skipped: "
                f"{dict(self.skips)}; without features/ use --config text_only)")
        return {split: self._generate_examples(v) for split, v in sorted(videos.items())}

    def _generate_examples(self, videos: list[dict]) -> Iterator[tuple[str, dict]]:
        for v in videos:
            yield v["video_id"], make_example(v, self.builder_config.features)


Builder = MSymon
