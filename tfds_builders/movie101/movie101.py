"""TFDS builder for Movie101 (v1 and v2 releases) and a synthetic corpus in the v2 layout.

Configs (see README.md): `v1_narration`, `v1_narration_raw`, `v1_grounding`, `v1_shots`
(Movie101-R-temp shots, `rtemp.py`), `v1_movies`,
`v2_{short,long}_{zh,en}`, `v2_movies`, `synthetic[_tiny]_narration`, `synthetic[_tiny]_movies`.
Narration / grounding configs hold one example per narration; `*_movies` configs one example
per movie (cast, portraits, genre and the per-second features when present).
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tfds_builders import common
from tfds_builders.movie101 import parsing, rtemp
from tfds_builders.movie101.features import read_movie_features, read_portraits
from tfds_builders.movie101.metadata import query_roles, v1_genres

VERSION = tfds.core.Version("1.1.0")
V1_SPLITS = ("train", "val", "test")

MANUAL_DOWNLOAD_INSTRUCTIONS = """\
Point --manual_dir at `Movie101v1/` (v1_* configs: Movie101-N/, Movie101-G/, narration_role/,
metadata/meta_anno.json, public_split.json) or `Movie101v2/data/` (v2_* configs: narration/,
metadata/meta/, metadata/portrait/) of yuezih/Movie101; features optionally under features/."""


@dataclasses.dataclass(eq=False)
class Movie101Config(tfds.core.BuilderConfig):
    """release: v1 | v2 | synthetic; kind: narration | grounding | movies | raw | shots;
    variant (v2): short-71k | long-46k; lang: zh | en."""

    release: str = "v1"
    kind: str = "narration"
    variant: str = ""
    lang: str = "zh"
    sizes: str = "tiny"
    seed: int = 0
    frame_dim: int = 512 + 1024  # CLIP + S3D per second (the release's features)
    face_dim: int = 512  # one face / portrait feature (frame_face is 3 x face_dim)


def _configs() -> list[Movie101Config]:
    out = [
        Movie101Config(name="v1_narration", release="v1", kind="narration",
                       description="Movie101-N paragraphs with narration_role `@k` pointers."),
        Movie101Config(name="v1_narration_raw", release="v1", kind="raw",
                       description="Movie101-N rebuilt from Movie101-raw clips + actor lines "
                                   "(§3.1 merging)."),
        Movie101Config(name="v1_grounding", release="v1", kind="grounding",
                       description="Movie101-G narration clips for TNG."),
        Movie101Config(name="v1_shots", release="v1", kind="shots",
                       description="Movie101-R(temp) 20-s shots with their captions (the "
                                   "release's global-shot retrieval files, per-movie offsets)."),
        Movie101Config(name="v1_movies", release="v1", kind="movies",
                       description="One example per movie: cast, portraits, features."),
        Movie101Config(name="v2_movies", release="v2", kind="movies", lang="zh",
                       description="One example per movie: cast, portraits, genre, features."),
    ]
    for variant in ("short-71k", "long-46k"):
        for lang in ("zh", "en"):
            out.append(Movie101Config(
                name=f"v2_{variant.split('-')[0]}_{lang}", release="v2", kind="narration",
                variant=variant, lang=lang,
                description=f"Movie101v2 narration/{variant}-{lang}, hashed movie split."))
    from tfds_builders.movie101.synthetic import PRESETS

    for prefix, sizes in (("synthetic", "small"), ("synthetic_tiny", "tiny")):
        dc, ds, df = PRESETS[sizes]["dims"]
        dims = dict(frame_dim=dc + ds, face_dim=df)
        out += [
            Movie101Config(name=f"{prefix}_narration", release="synthetic", kind="narration",
                           variant="short-71k", lang="en", sizes=sizes, **dims,
                           description=f"Generated corpus ({sizes}; v2 layout, planted "
                                       "role/face signal)."),
            Movie101Config(name=f"{prefix}_movies", release="synthetic", kind="movies",
                           lang="en", sizes=sizes, **dims,
                           description=f"Movies of the generated {sizes} corpus, features."),
        ]
    return out


def feature_dims(config: str) -> tuple[int, int]:
    """(frame_dim = CLIP + S3D width, face_dim) of a config's features, from its
    BuilderConfig: the one place model configs read them from."""
    cfg = next((c for c in Movie101.BUILDER_CONFIGS if c.name == config), None)
    if cfg is None:
        raise ValueError(f"movie101 has no config {config!r}")
    return cfg.frame_dim, cfg.face_dim


def check_manual_dir(config: Movie101Config, manual_dir: Any) -> pathlib.Path:
    """The manual_dir as a Path or a one-line ManualDirError saying what it must hold."""
    need = {"v1": "public_split.json and metadata/meta_anno.json (Movie101v1/)",
            "v2": "narration/ and metadata/meta/ (Movie101v2/data/)"}[config.release]
    if not manual_dir:
        raise common.ManualDirError(f"movie101/{config.name} needs --manual_dir holding {need}")
    root = pathlib.Path(manual_dir)
    if not root.is_dir():
        raise common.ManualDirError(f"manual_dir {root} does not exist; it must hold {need}")
    if config.release == "v1":
        for f in ("public_split.json", "metadata/meta_anno.json"):
            if not (root / f).is_file():
                raise common.ManualDirError(f"manual_dir {root} has no {f}; it must hold {need}")
        if config.kind == "shots" and rtemp.rtemp_dir(root) is None:
            raise common.ManualDirError(f"manual_dir {root} has none of "
                                        f"{', '.join(rtemp.RTEMP_DIRS)} for movie101/v1_shots")
    else:
        if not (root / "metadata" / "meta").is_dir():
            raise common.ManualDirError(f"manual_dir {root} has no metadata/meta/; "
                                        f"it must hold {need}")
        if config.kind == "narration":
            d = root / "narration" / f"{config.variant}-{config.lang}"
            if not d.is_dir():
                raise common.ManualDirError(f"manual_dir {root} has no narration/"
                                            f"{d.name}/ for movie101/{config.name}")
    return root


def _v1_read(root: pathlib.Path, skips: collections.Counter) -> tuple[dict, dict]:
    """(split -> movie ids, movie -> cast list) of a v1 release."""
    split = parsing.load_json(root / "public_split.json")
    meta = parsing.load_json(root / "metadata" / "meta_anno.json")
    if not isinstance(split, dict) or not isinstance(meta, dict):
        raise common.ManualDirError(f"{root}: public_split.json / meta_anno.json must be objects")
    return ({s: [str(m) for m in split.get(s, [])] for s in V1_SPLITS},
            {str(m): parsing.v1_cast(meta, str(m)) for m in meta})


def _span(item: dict, path: pathlib.Path, skips: collections.Counter) -> tuple | None:
    try:
        s, e, swapped = parsing.parse_span(item.get("start_time"), item.get("end_time"))
    except parsing.ParseError as err:
        common.record_skip(skips, "bad_time", path, str(err))
        return None
    if swapped:
        skips["kept_times_out_of_order_swapped"] += 1
        common.log.warning("%s: end < start for %s; swapped", path, item.get("movie_id"))
    if isinstance(item.get("start_time"), str) or isinstance(item.get("end_time"), str):
        skips["kept_times_given_as_strings"] += 1
    return s, e


def _example(movie_id: str, key: str, start: float, end: float, text: str, pointer_text: str,
             roles: list[int], cast: list[dict], genre: list[str]) -> dict:
    return {"id": key, "movie_id": movie_id, "start": np.float32(start), "end": np.float32(end),
            "text": text, "pointer_text": pointer_text, "roles": np.asarray(roles, np.int32),
            "cast_names": [c["name"] for c in cast], "genre": genre}


def _check_language(text: str, lang: str, path: Any, skips: collections.Counter) -> None:
    if parsing.language_mix(text, lang):
        skips["kept_mixed_language"] += 1


def v1_examples(root: pathlib.Path, config: Movie101Config, skips: collections.Counter
                ) -> dict[str, list[dict]]:
    """split -> examples of a v1 narration / grounding / raw config."""
    split_movies, casts = _v1_read(root, skips)
    movie_split = {m: s for s, ms in split_movies.items() for m in ms}
    genres = v1_genres(root, sorted(set(casts) | set(movie_split)), skips)
    out: dict[str, list[dict]] = {s: [] for s in V1_SPLITS}
    for split in V1_SPLITS:
        items = _v1_items(root, config, split, skips)
        if items is None:
            continue
        path, rows, pointers = items
        for idx, item in enumerate(rows):
            if not isinstance(item, dict) or "movie_id" not in item:
                common.record_skip(skips, "bad_entry", path, f"entry {idx}")
                continue
            mid = str(item["movie_id"])
            if movie_split.get(mid, split) != split:
                skips["kept_movie_in_other_split"] += 1
            span = _span(item, path, skips)
            text = str(item.get("content") or "").strip()
            if span is None:
                continue
            if not text:
                common.record_skip(skips, "empty_text", path, f"entry {idx}")
                continue
            if mid not in casts:
                skips["kept_movie_without_cast"] += 1
            cast = casts.get(mid, [])
            names = [c["name"] for c in cast]
            pointer_text, roles = text, []
            if pointers is not None:
                p = pointers[idx] if idx < len(pointers) else None
                pt = _pointer_sentence(p, mid, span)
                if pt is None:
                    skips["kept_no_role_pointer_entry"] += 1
                else:
                    expanded, roles, bad = parsing.expand_pointers(pt, names)
                    if bad:
                        skips["kept_role_pointer_not_in_cast"] += len(bad)
                        common.log.warning("%s entry %d: @%s not in the cast of %s (%d roles)",
                                           path, idx, bad, mid, len(names))
                        pointer_text = text  # names stay plain text
                        roles = []
                    else:
                        pointer_text = pt
            if config.kind == "grounding":  # Movie101-G has no role file: names in the text
                roles = query_roles(text, names)
                skips["grounding_queries_with_roles" if roles else
                      "grounding_queries_without_roles"] += 1
                skips["grounding_role_mentions"] += len(roles)
            _check_language(text, "zh", path, skips)
            out[split].append(_example(mid, f"{mid}_{split}_{idx}", *span, text, pointer_text,
                                       roles, cast, genres.get(mid, [])))
    return out


def v1_shot_examples(root: pathlib.Path, skips: collections.Counter) -> dict[str, list[dict]]:
    """split -> the Movie101-R-temp shots of a v1 release (`rtemp.shot_examples`)."""
    split_movies, casts = _v1_read(root, skips)
    names = sorted(set(casts) | {m for ms in split_movies.values() for m in ms})
    return rtemp.shot_examples(root, split_movies, casts, v1_genres(root, names, skips), skips)


def _pointer_sentence(p: Any, movie_id: str, span: tuple) -> str | None:
    """narration_role entry -> its `@k` sentence if it is the same narration."""
    if not isinstance(p, dict) or str(p.get("movie_id")) != movie_id:
        return None
    sents = p.get("sentences") or []
    try:
        ts = p.get("timestamps") or []
        if ts and min(abs(parsing.parse_time(ts[0][0]) - t) for t in span) > 1.0:  # swapped too
            return None
    except (parsing.ParseError, TypeError, IndexError):
        return None
    return "".join(str(s) for s in sents) or None


def _v1_items(root: pathlib.Path, config: Movie101Config, split: str,
              skips: collections.Counter) -> tuple | None:
    """(path, rows, pointer rows or None) for one split; a missing file is counted."""
    if config.kind == "raw":
        return _v1_raw_items(root, split, skips)
    folder = "Movie101-N" if config.kind == "narration" else "Movie101-G"
    path = root / folder / f"{split}.json"
    if not path.is_file():
        common.record_skip(skips, "missing_split_file", path, "not in this copy of the release")
        return None
    rows = parsing.load_json(path)
    if not isinstance(rows, list):
        raise common.ManualDirError(f"{path} must be a list of narrations")
    pointers = None
    if config.kind == "narration":
        ppath = root / "narration_role" / f"{split}.json"
        if ppath.is_file():
            praw = parsing.load_json(ppath)
            pointers = list(praw.values()) if isinstance(praw, dict) else list(praw)
            if len(pointers) != len(rows):
                skips["kept_role_file_length_mismatch"] += 1
        else:
            common.record_skip(skips, "missing_role_file", ppath, "names kept as plain text")
    return path, rows, pointers


def _v1_raw_items(root: pathlib.Path, split: str, skips: collections.Counter) -> tuple | None:
    """Movie101-raw clips merged into paragraphs by `parsing.merge_paragraphs`."""
    ann = root / "Movie101-raw" / "annotation"
    clips_p, lines_p = ann / "narration_clips.json", ann / "lines.json"
    for p in (clips_p, lines_p):
        if not p.is_file():
            if split == "train":
                common.record_skip(skips, "missing_raw_file", p, "v1_narration_raw needs it")
            return None
    split_movies = parsing.load_json(root / "public_split.json").get(split, [])
    clips, lines = parsing.load_json(clips_p), parsing.load_json(lines_p)
    rows = []
    for mid in split_movies:
        mid = str(mid)
        nar = [(s, e, t) for s, e, t in _rows_of(clips, mid, clips_p, skips)]
        lin = [(s, e) for s, e, _ in _rows_of(lines, mid, lines_p, skips)]
        for s, e, t in parsing.merge_paragraphs(nar, lin):
            rows.append({"movie_id": mid, "start_time": s, "end_time": e, "content": t})
    return clips_p, rows, None


def _rows_of(data: Any, mid: str, path: pathlib.Path, skips: collections.Counter) -> list:
    """(start, end, text) of one movie from a list of rows or a {movie: [rows]} object."""
    rows = data.get(mid, []) if isinstance(data, dict) else \
        [r for r in data if isinstance(r, dict) and str(r.get("movie_id")) == mid]
    out = []
    for r in rows:
        span = _span(r, path, skips)
        if span is not None:
            out.append((*span, str(r.get("content") or r.get("text") or "").strip()))
    return out


def v2_movies_meta(root: pathlib.Path, skips: collections.Counter) -> dict[str, dict]:
    """movie id -> parsed metadata/meta/<movie>.json (unreadable files counted)."""
    out = {}
    for p in sorted((root / "metadata" / "meta").glob("*.json")):
        try:
            out[p.stem] = parsing.read_v2_cast(parsing.load_json(p), p)
        except parsing.ParseError as e:
            common.record_skip(skips, "bad_meta", p, str(e))
    return out


def v2_examples(root: pathlib.Path, config: Movie101Config, skips: collections.Counter
                ) -> dict[str, list[dict]]:
    """split -> examples of a v2 narration config (movie split by `parsing.movie_split`)."""
    metas = v2_movies_meta(root, skips)
    out: dict[str, list[dict]] = {s: [] for s, _ in parsing.SPLIT_BUCKETS}
    folder = root / "narration" / f"{config.variant}-{config.lang}"
    for path in sorted(folder.glob("*.txt")):
        mid = path.stem
        if mid not in metas:
            common.record_skip(skips, "missing_meta", path, f"no metadata/meta/{mid}.json")
            continue
        meta = metas[mid]
        cast = meta["cast"]
        names = [c["name_en" if config.lang == "en" else "name"] for c in cast]
        aliases = [c["name" if config.lang == "en" else "name_en"] for c in cast]
        try:
            raw_lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            common.record_skip(skips, "unreadable_file", path, str(e))
            continue
        rows, prev = [], -1.0
        for n, line in enumerate(raw_lines):
            if not line.strip():
                continue
            try:
                s, e, text, swapped = parsing.parse_v2_line(line)
            except parsing.ParseError as err:
                common.record_skip(skips, "bad_line", f"{path}:{n + 1}", str(err))
                continue
            if swapped:
                skips["kept_times_out_of_order_swapped"] += 1
            if s < prev:
                skips["kept_lines_out_of_order_sorted"] += 1
            prev = s
            rows.append((s, e, n, text))
        split = parsing.movie_split(mid)
        for s, e, n, text in sorted(rows):
            plain, pointer_text, roles, unknown = parsing.resolve_roles(text, names, aliases)
            if unknown:
                skips["kept_role_not_in_cast"] += len(unknown)
            _check_language(plain, config.lang, path, skips)
            out[split].append(_example(mid, f"{mid}_{n}", s, e, plain, pointer_text, roles,
                                       [dict(c, name=nm) for c, nm in zip(cast, names)],
                                       meta["genre"]))
    return out


def movie_examples(root: pathlib.Path, config: Movie101Config, skips: collections.Counter
                   ) -> dict[str, list[dict]]:
    """split -> one example per movie: cast, portraits (JPEG bytes), features."""
    if config.release == "v1":
        split_movies, casts = _v1_read(root, skips)
        genres = v1_genres(root, sorted(casts), skips)
        metas = {m: dict(genre=genres.get(m, []), title="", cast=c) for m, c in casts.items()}
        assign = {m: s for s, ms in split_movies.items() for m in ms}
    else:
        metas = v2_movies_meta(root, skips)
        assign = {m: parsing.movie_split(m) for m in metas}
    out: dict[str, list[dict]] = {s: [] for s in V1_SPLITS}
    for mid in sorted(set(assign) - set(metas)):
        common.record_skip(skips, "movie_without_cast", mid, "no entry in the metadata")
    portrait_path, portrait_vecs = read_portraits(root)
    if portrait_path is None:
        common.log.warning("movie101/%s: no portrait HDF5 under %s (metadata/portrait_face.hdf5"
                           " or <features>/protrait_face.hdf5): no role can be pointed to",
                           config.name, root)
    for mid in sorted(metas):
        if mid not in assign:
            common.record_skip(skips, "movie_not_in_split", mid, "not in public_split.json")
            continue
        meta = metas[mid]
        cast = meta["cast"]
        portraits = []
        for c in cast:
            p = root / "metadata" / "portrait" / mid / f"{c['id']}.jpeg"
            if p.is_file():
                portraits.append(p.read_bytes())
            else:
                portraits.append(b"")
                skips["kept_missing_portrait"] += 1
        feats = read_movie_features(root, mid, [c["id"] for c in cast], portrait_vecs, skips,
                                    portrait_path)
        out[assign[mid]].append({
            "movie_id": mid, "title": meta["title"], "genre": meta["genre"],
            "cast_ids": [c["id"] for c in cast], "cast_names": [c["name"] for c in cast],
            "cast_names_en": [c["name_en"] for c in cast],
            "cast_actors": [c["actor"] for c in cast], "portraits": portraits, **feats})
    return out


def _narration_features() -> tfds.features.FeaturesDict:
    return tfds.features.FeaturesDict({
        "id": tfds.features.Text(), "movie_id": tfds.features.Text(),
        "start": tfds.features.Scalar(np.float32), "end": tfds.features.Scalar(np.float32),
        "text": tfds.features.Text(), "pointer_text": tfds.features.Text(),
        "roles": tfds.features.Sequence(tfds.features.Scalar(np.int32)),
        "cast_names": tfds.features.Sequence(tfds.features.Text()),
        "genre": tfds.features.Sequence(tfds.features.Text()),
    })


def _movie_features() -> tfds.features.FeaturesDict:
    def t(rank: int, dtype=np.float16):
        return tfds.features.Tensor(shape=(None,) * rank, dtype=dtype, encoding="zlib")

    texts = tfds.features.Sequence(tfds.features.Text())
    return tfds.features.FeaturesDict({
        "movie_id": tfds.features.Text(), "title": tfds.features.Text(), "genre": texts,
        "cast_ids": texts, "cast_names": texts, "cast_names_en": texts, "cast_actors": texts,
        "portraits": tfds.features.Sequence(tfds.features.Tensor(shape=(), dtype=np.object_)),
        "clip": t(2), "s3d": t(2), "face": t(3), "face_score": t(2, np.float32),
        "portrait_face": t(2), "portrait_face_mask": t(1, np.bool_),
    })


class Movie101(common.SummaryBuilder, tfds.core.GeneratorBasedBuilder):
    """Movie101 narrations (MCN), grounding clips (TNG) and per-movie casts and features."""

    name = "movie101"
    VERSION = VERSION
    RELEASE_NOTES = {"1.0.0": "v1 / v2 releases, movies configs, synthetic corpus.",
                     "1.1.0": "The release's frame_face / portrait HDF5 layout; v1 genres from "
                              "v2 metadata; Movie101-G roles from the query text; v1_shots "
                              "(Movie101-R-temp)."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS
    BUILDER_CONFIGS = _configs()
    DEFAULT_CONFIG_NAME = "synthetic_narration"

    @classmethod
    def check_inputs(cls, config: str, manual_dir: Any) -> None:
        cfg = next((c for c in cls.BUILDER_CONFIGS if c.name == config), None)
        if cfg is not None and cfg.release != "synthetic":
            check_manual_dir(cfg, manual_dir)

    def _info(self) -> tfds.core.DatasetInfo:
        kind = self.builder_config.kind
        return self.dataset_info_from_configs(
            features=_movie_features() if kind == "movies" else _narration_features(),
            homepage="https://github.com/yuezih/Movie101")

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict:
        config: Movie101Config = self.builder_config
        if config.release == "synthetic":
            from tfds_builders.movie101 import synthetic

            root = common.synthetic_corpus(dl_manager, "movie101", synthetic, config.sizes,
                                           seed=config.seed, sizes=config.sizes)
            config = dataclasses.replace(config, release="v2")
        else:
            root = check_manual_dir(config, dl_manager._manual_dir)  # noqa: SLF001
        self.skips = collections.Counter()
        try:
            if config.kind == "movies":
                splits = movie_examples(root, config, self.skips)
            elif config.kind == "shots":
                splits = v1_shot_examples(root, self.skips)
            elif config.release == "v1":
                splits = v1_examples(root, config, self.skips)
            else:
                splits = v2_examples(root, config, self.skips)
        except parsing.ParseError as e:
            raise common.ManualDirError(str(e)) from None
        gens = {}
        for split, rows in splits.items():
            if rows:
                gens[split] = self._generate_examples(rows)
            else:
                common.log.warning("movie101/%s: split %s has no examples; left out",
                                   config.name, split)
                self.skips[f"empty_split_{split}"] += 1
        if not gens:
            raise common.ManualDirError(f"{root}: no usable examples for movie101/{config.name}")
        return gens

    def _generate_examples(self, rows: list[dict]) -> Iterator[tuple[str, dict]]:
        for r in rows:
            yield r.get("id", r["movie_id"]), r


Builder = Movie101
