"""TFDS builder for MoviePuzzle clips (public per-clip layout) and the synthetic corpus.

Both configs read the same layout (see README.md) with the same code: `clip_id.json`
mapping split -> clip ids, and `<split>/<clip>/{info.json, subtitle.json, <clip>_<k>.jpg}`.
Examples are stored in true order; frames are the original JPEG bytes.

Added configs (same features): `movienet` curates raw MovieNet (`movienet_build.py`, rules in
`movienet.py`); `movienet_synopsis` and `synthetic_synopsis*` add a `synopsis` text feature
for the Movie Synopsis Association task (`synopsis_corpus.py`; reader `synopsis_source` in
`__init__.py`).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tfds_builders import common
from tfds_builders import schema as S
from tfds_builders.moviepuzzle import schema

VERSION = tfds.core.Version("1.1.0")
INFO_FIELDS = ("img_id", "shot_id", "scene_id")

MANUAL_DOWNLOAD_INSTRUCTIONS = """\
Point --manual_dir at a directory in the public MoviePuzzle per-clip layout: `clip_id.json`
({split: [clip ids]}) and `<split>/<clip>/{info.json, subtitle.json, <clip>_<k>.jpg}`,
e.g. the `game/` folder of MoviePuzzle/MoviePuzzle.github.io."""


@dataclasses.dataclass(eq=False)
class MoviePuzzleConfig(tfds.core.BuilderConfig):
    """`source` is "clips" (read manual_dir) or "synthetic" (write the corpus, then read it)."""

    source: str = "clips"
    sizes: str = "default"
    seed: int = 0


@dataclasses.dataclass(eq=False)
class MovieNetConfig(MoviePuzzleConfig):
    """Raw MovieNet curation knobs (`movienet_build.Rules`; paper values by default)."""

    default_fps: float = 24.0
    min_frames: int = 10
    max_frames: int = 20
    min_paired: float = 0.8
    max_overlap_share: float = 0.2
    segment_frames: int = 20
    min_dialogues: int = 500
    require_synopsis: bool = True
    require_cast: bool = True
    crop_borders: bool = True

    def rules(self) -> Any:
        from tfds_builders.moviepuzzle import movienet_build

        return movienet_build.Rules(
            default_fps=self.default_fps, min_frames=self.min_frames,
            max_frames=self.max_frames, min_paired=self.min_paired,
            max_overlap_share=self.max_overlap_share, segment_frames=self.segment_frames,
            seed=self.seed, min_dialogues=self.min_dialogues,
            require_synopsis=self.require_synopsis, require_cast=self.require_cast,
            crop_borders=self.crop_borders)


MOVIENET_SOURCES = ("movienet", "movienet_synopsis")


def check_manual_dir(manual_dir: os.PathLike | str | None) -> pathlib.Path:
    """The manual_dir as a Path, or a one-line `ManualDirError` saying what it must hold."""
    what = "clip_id.json and <split>/<clip>/{info.json, subtitle.json, <clip>_<k>.jpg}"
    if not manual_dir:
        raise common.ManualDirError(
            f"moviepuzzle/clips needs --manual_dir: a directory holding {what}"
        )
    path = pathlib.Path(manual_dir)
    if not path.is_dir():
        raise common.ManualDirError(
            f"manual_dir {path} does not exist; it must be a directory holding {what}"
        )
    if not (path / "clip_id.json").is_file():
        raise common.ManualDirError(f"manual_dir {path} has no clip_id.json; it must hold {what}")
    return path


def read_clip_ids(root: pathlib.Path) -> dict[str, list[str]]:
    """`clip_id.json` as {split: [clip id strings]} (`schema.ClipIds`); a malformed file
    raises one clear line naming it and the key path."""
    path = root / "clip_id.json"
    try:
        return S.check(schema.ClipIds, S.load_json(path), "bad_clip_ids")
    except S.Invalid as e:
        raise common.ManualDirError(f"{path} must map split names to lists of clip ids "
                                    f"({e})") from None


def _renumber(ids: list[int]) -> list[int]:
    """Renumbers ids 0.. by first appearance."""
    seen: dict[int, int] = {}
    return [seen.setdefault(i, len(seen)) for i in ids]


def _load_json(path: pathlib.Path) -> tuple[Any, str | None, str]:
    """(value, reason, detail): reason is None on success."""
    if not path.is_file():
        return None, "missing_file", "no such file"
    try:
        return S.load_json(path), None, ""
    except S.Unreadable as e:
        return None, "bad_json", S.detail(e)


def load_clip(
    clip_dir: pathlib.Path, clip_id: str, check_frames: bool = True
) -> tuple[dict | None, tuple]:
    """Parses and validates one clip; returns (metadata, ()) or (None, (reason, path, detail)).

    Metadata holds everything but the frame bytes: frame paths are in `frame_paths`.
    """
    if not clip_dir.is_dir():
        return None, ("missing_clip_dir", clip_dir, "no such directory")
    info_path, sub_path = clip_dir / "info.json", clip_dir / "subtitle.json"
    info, reason, detail = _load_json(info_path)
    if reason:
        return None, (reason, info_path, detail)
    subs, reason, detail = _load_json(sub_path)
    if reason:
        return None, (reason, sub_path, detail)
    try:
        parsed = S.check(schema.Info, info, "bad_field")
    except S.Invalid as e:
        return None, (e.reason, info_path, str(e))
    try:
        lines = S.check(schema.Subtitles, subs, "bad_field")
    except S.Invalid as e:
        return None, (e.reason, sub_path, str(e))
    fields = {k: getattr(parsed, k) for k in INFO_FIELDS}
    n = len(fields["img_id"])
    lengths = {k: len(v) for k, v in fields.items()} | {"subtitles": len(lines)}
    if parsed.img_num is not None:
        lengths["img_num"] = parsed.img_num
    if len(set(lengths.values())) != 1:
        return None, (
            "length_mismatch",
            info_path,
            ", ".join(f"{k}={v}" for k, v in lengths.items()),
        )
    if n < 2:
        return None, ("too_few_frames", info_path, f"{n} frame(s)")
    if len(set(fields["img_id"])) != n:
        return None, ("bad_field", info_path, "duplicate img_id")
    frame_paths = [clip_dir / f"{clip_id}_{k}.jpg" for k in fields["img_id"]]
    for p in frame_paths:
        if not p.is_file():
            return None, ("missing_frame", p, "no such file")
        if check_frames:
            problem = common.jpeg_problem(p.read_bytes())
            if problem:
                return None, ("bad_frame", p, problem)
    meta = {
        "clip_id": clip_id,
        "movie_id": parsed.tt_id,
        "subtitles": [" ".join(s.strip() for s in ls if s.strip()) for ls in lines],
        "img_id": fields["img_id"],
        "shot_id": _renumber(fields["shot_id"]),
        "scene_id": _renumber(fields["scene_id"]),
        "frame_paths": frame_paths,
    }
    return meta, ()


def scan_split(
    root: pathlib.Path, split: str, clip_ids: list[str], skips: collections.Counter
) -> list[dict]:
    """Validated metadata of a split's readable clips; every unreadable one is warned + counted,
    and so are the clip folders the split's list does not name (`noted_clip_dir_not_in_clip_id`,
    left out)."""
    split_dir = root / split
    if not split_dir.is_dir():
        if clip_ids:
            common.log.warning(
                "split %s: directory %s is missing; its %d clips are skipped",
                split,
                split_dir,
                len(clip_ids),
            )
            common.count(skips, "missing_split_dir", split_dir, len(clip_ids))
        return []
    listed = set(clip_ids)
    unlisted = sorted(p.name for p in split_dir.iterdir() if p.is_dir() and p.name not in listed)
    if unlisted:  # the release's index decides the split: a folder outside it is left out
        common.note(skips, "clip_dir_not_in_clip_id", len(unlisted), split_dir / unlisted[0])
        common.log.warning("split %s: %d clip folder(s) not listed in clip_id.json are left "
                           "out: %s", split, len(unlisted), ", ".join(unlisted[:5]))
    metas, seen = [], set()
    for clip_id in clip_ids:
        if clip_id in seen:
            common.record_skip(skips, "duplicate_clip_id", split_dir / clip_id)
            continue
        seen.add(clip_id)
        meta, problem = load_clip(split_dir / clip_id, clip_id)
        if meta is None:
            common.record_skip(skips, problem[0], problem[1], problem[2])
        else:
            metas.append(meta)
    return metas


def make_example(meta: dict) -> dict:
    """The stored example: frames as the original JPEG bytes, everything in true order."""
    n = len(meta["img_id"])
    return {
        "clip_id": meta["clip_id"],
        "movie_id": meta["movie_id"],
        "frames": [p.read_bytes() for p in meta["frame_paths"]],
        "subtitles": meta["subtitles"],
        "img_id": np.asarray(meta["img_id"], np.int32),
        "shot_id": np.asarray(meta["shot_id"], np.int32),
        "scene_id": np.asarray(meta["scene_id"], np.int32),
        "position": np.arange(n, dtype=np.int32),
    }


class MoviePuzzle(common.SummaryBuilder, tfds.core.GeneratorBasedBuilder):
    """MoviePuzzle clips in true order: frames (JPEG), utterances, shot/scene ids."""

    name = "moviepuzzle"
    VERSION = VERSION
    RELEASE_NOTES = {"1.0.0": "Initial release: clips (public layout) and synthetic configs.",
                     "1.1.0": "movienet configs: black borders cropped (§2.1, borders.py)."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS
    BUILDER_CONFIGS = [
        MoviePuzzleConfig(
            name="synthetic",
            source="synthetic",
            sizes="default",
            description="Embedded procedural corpus (no manual_dir).",
        ),
        MoviePuzzleConfig(
            name="synthetic_small",
            source="synthetic",
            sizes="small",
            description="Smaller procedural corpus for smoke runs.",
        ),
        MoviePuzzleConfig(
            name="synthetic_tiny",
            source="synthetic",
            sizes="tiny",
            description="Tiny procedural corpus for tests.",
        ),
        MoviePuzzleConfig(
            name="clips", source="clips", description="Public per-clip layout read from manual_dir."
        ),
        MovieNetConfig(
            name="movienet",
            source="movienet",
            description="Clips curated from raw MovieNet (annotation, shot, subtitle, keyframes).",
        ),
        MovieNetConfig(
            name="movienet_synopsis",
            source="movienet_synopsis",
            description="MovieNet story segments with their synopsis paragraphs (+synopsis).",
        ),
        MoviePuzzleConfig(
            name="synthetic_synopsis",
            source="synthetic_synopsis",
            sizes="default",
            description="Synthetic clips with generated synopsis paragraphs (+synopsis).",
        ),
        MoviePuzzleConfig(
            name="synthetic_synopsis_small",
            source="synthetic_synopsis",
            sizes="small",
            description="Smaller synthetic synopsis pairs.",
        ),
        MoviePuzzleConfig(
            name="synthetic_synopsis_tiny",
            source="synthetic_synopsis",
            sizes="tiny",
            description="Tiny synthetic synopsis pairs for tests.",
        ),
    ]
    DEFAULT_CONFIG_NAME = "synthetic"

    @classmethod
    def check_inputs(cls, config: str, manual_dir: os.PathLike | str | None) -> None:
        """Raises a one-line `ManualDirError` before any work if `config` lacks its inputs."""
        if any(c.name == config and c.source == "clips" for c in cls.BUILDER_CONFIGS):
            check_manual_dir(manual_dir)
        if any(c.name == config and c.source in MOVIENET_SOURCES for c in cls.BUILDER_CONFIGS):
            from tfds_builders.moviepuzzle import movienet_build

            movienet_build.check_manual_dir(manual_dir, config)

    def _info(self) -> tfds.core.DatasetInfo:
        ints = tfds.features.Sequence(tfds.features.Scalar(np.int32))
        features = {
            "clip_id": tfds.features.Text(),
            "movie_id": tfds.features.Text(),
            "frames": tfds.features.Sequence(tfds.features.Image(encoding_format="jpeg")),
            "subtitles": tfds.features.Sequence(tfds.features.Text()),
            "img_id": ints,
            "shot_id": ints,
            "scene_id": ints,
            "position": ints,
        }
        if "synopsis" in self.builder_config.source:  # only the added synopsis configs
            features["synopsis"] = tfds.features.Text()
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(features),
            homepage="https://moviepuzzle.github.io/",
        )

    def _root(self, dl_manager: tfds.download.DownloadManager) -> pathlib.Path:
        config: MoviePuzzleConfig = self.builder_config
        if config.source == "synthetic":
            from tfds_builders.moviepuzzle import synthetic

            return common.synthetic_corpus(dl_manager, "moviepuzzle", synthetic, config.sizes,
                                           seed=config.seed, sizes=config.sizes)
        return check_manual_dir(common.manual_dir(dl_manager))

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict:
        config = self.builder_config
        if config.source in MOVIENET_SOURCES or config.source == "synthetic_synopsis":
            return self._added_split_generators(dl_manager)
        root = self._root(dl_manager)
        self.skips = common.Counts()  # names the first inputs behind each count
        generators = {}
        for split, clip_ids in read_clip_ids(root).items():
            metas = scan_split(root, split, clip_ids, self.skips)
            if metas:
                generators[split] = self._generate_examples(metas)
            elif clip_ids:
                common.log.warning("split %s has no readable clips; it is left out", split)
        if not generators:
            raise common.ManualDirError(f"{root}: no readable clips in any split of clip_id.json")
        return generators

    def _generate_examples(self, metas: list[dict]) -> Iterator[tuple[str, dict]]:
        for meta in metas:
            yield meta["clip_id"], make_example(meta)

    def _added_split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict:
        """Splits of the movienet / synopsis configs (empty splits are left out, warned)."""
        from tfds_builders.moviepuzzle import movienet_build, synopsis_corpus

        config = self.builder_config
        self.skips = common.Counts()  # names the first inputs behind each count
        if config.source == "synthetic_synopsis":
            pairs = synopsis_corpus.synthetic_pairs(config.seed, config.sizes)
            return {s: self._generate_ready(v) for s, v in pairs.items() if v}
        root = movienet_build.check_manual_dir(common.manual_dir(dl_manager),
                                                    config.name)
        splits = movienet_build.scan(root, config.rules(), self.skips,
                                     synopsis=config.source == "movienet_synopsis")
        for split, metas in splits.items():
            if not metas:
                common.log.warning("split %s has no clips; it is left out", split)
        if not any(splits.values()):
            what = ("a story[] synopsis alignment in annotation/<imdb>.json"
                    if config.source == "movienet_synopsis" else "any clip")
            counts = ", ".join(f"{k}={v}" for k, v in sorted(self.skips.items()) if v)
            raise common.ManualDirError(f"{root}: no movie gave {what} (skipped: {counts})")
        return {s: self._generate_checked(v) for s, v in splits.items() if v}

    def _generate_ready(self, examples: list[dict]) -> Iterator[tuple[str, dict]]:
        for ex in examples:
            yield ex["clip_id"], ex

    def _generate_checked(self, metas: list[dict]) -> Iterator[tuple[str, dict]]:
        """Examples whose frames all decode; a clip with a bad JPEG is skipped and counted.
        Frames of a movie with black borders are cropped (`borders.py`, §2.1)."""
        for meta in metas:
            frames = []
            for p in meta["frame_paths"]:
                data = p.read_bytes() if p.is_file() else b""
                problem = common.jpeg_problem(data) if data else "no such file"
                if problem:
                    common.record_skip(self.skips, "clip_bad_frame", p, problem)
                    break
                frames.append(self._cropped(data, meta.get("crop")))
            else:
                ex = make_example(dict(meta, frame_paths=[]))
                ex["frames"] = frames
                if "synopsis" in meta:
                    ex["synopsis"] = meta["synopsis"]
                yield meta["clip_id"], ex

    def _cropped(self, data: bytes, crop: dict | None) -> bytes:
        """A frame's JPEG with its movie's black borders cropped (unchanged without any; a
        frame of another size than the one measured is kept whole, counted)."""
        if crop is None:
            return data
        from tfds_builders.moviepuzzle import borders

        out = borders.crop_jpeg(data, crop["box"], crop["size"])
        reason = "frame_border_size_differs" if out is None else "frame_border_cropped"
        self.skips[f"{common.KEPT_PREFIX}{reason}"] += 1
        return data if out is None else out


Builder = MoviePuzzle
