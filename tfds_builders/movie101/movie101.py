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
from tfds_builders import schema as S
from tfds_builders.movie101 import parsing, roles, rtemp, v1
from tfds_builders.movie101.features import read_movie_features, read_portraits
from tfds_builders.movie101.metadata import v1_genres

VERSION = tfds.core.Version("1.2.0")
V1_SPLITS = v1.V1_SPLITS

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


def pointer_targets(config: str, manual_dir: pathlib.Path | str | None = None) -> str | None:
    """Where the `@k` role-pointer targets of the narration config `config` come from, in
    words for messages; None when the config has none (`v1_narration_raw`: Movie101-raw's
    paragraphs carry no `@k` sentence, and no other v1 config is a narration config)."""
    cfg = next((c for c in Movie101.BUILDER_CONFIGS if c.name == config), None)
    if cfg is None or cfg.kind != "narration":
        return None
    if cfg.release == "v1":
        where = pathlib.Path(manual_dir or "<manual_dir>") / roles.ROLE_DIR
        return (f"{where / roles.AUGMENTED} (the release's train role file; "
                f"{where / 'train.json'} when there is none), whose @k sentences must match "
                "Movie101-N/train.json rows by (movie, start, end)")
    return ("the [Name] marks of the narration files that name a cast member with a portrait "
            "feature")


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


def v1_shot_examples(root: pathlib.Path, skips: collections.Counter) -> dict[str, list[dict]]:
    """split -> the Movie101-R-temp shots of a v1 release (`rtemp.shot_examples`)."""
    split_movies, casts = v1.v1_read(root, skips)
    names = sorted(set(casts) | {m for ms in split_movies.values() for m in ms})
    return rtemp.shot_examples(root, split_movies, casts, v1_genres(root, names, skips), skips)


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
            raw_lines = S.read_text(path).splitlines()
        except S.Unreadable as e:
            common.record_skip(skips, "unreadable_file", path, S.detail(e))
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
            plain, pointer_text, found, unknown = parsing.resolve_roles(text, names, aliases)
            if unknown:
                skips["kept_role_not_in_cast"] += len(unknown)
            if found:
                common.note(skips, f"pointer_targets_{split}")
            v1.check_language(plain, config.lang, skips)
            out[split].append(v1.example(mid, f"{mid}_{n}", s, e, plain, pointer_text, found,
                                         [dict(c, name=nm) for c, nm in zip(cast, names)],
                                         meta["genre"]))
    return out


def _portrait(path: pathlib.Path, skips: collections.Counter) -> bytes:
    """A cast member's portrait JPEG, or b"" (the rule for a missing portrait: the member is
    kept without one) when there is no file (`kept_missing_portrait`) or the file is empty,
    unreadable or not a JPEG (a skipped file: `bad_portrait`, naming it and what is wrong)."""
    if not path.is_file():
        common.count(skips, "kept_missing_portrait", path)
        return b""
    try:
        data = path.read_bytes()
    except OSError as e:
        common.record_skip(skips, "bad_portrait", path, e.strerror or type(e).__name__)
        return b""
    problem = common.jpeg_problem(data)
    if problem:
        common.record_skip(skips, "bad_portrait", path, f"{problem}; the cast member is kept "
                           "without a portrait")
        return b""
    return data


def movie_examples(root: pathlib.Path, config: Movie101Config, skips: collections.Counter
                   ) -> dict[str, list[dict]]:
    """split -> one example per movie: cast, portraits (JPEG bytes), features. A v1 split
    movie without a meta_anno.json entry is kept with an empty cast (so no role features),
    as upstream's reader does, counted `kept_movie_without_cast_<split>`."""
    if config.release == "v1":
        split_movies, casts = v1.v1_read(root, skips)
        assign = {m: s for s, ms in split_movies.items() for m in ms}
        genres = v1_genres(root, sorted(set(casts) | set(assign)), skips)
        for mid in sorted(set(assign) - set(casts)):
            common.count(skips, f"kept_movie_without_cast_{assign[mid]}", mid)
            common.log.warning("movie101/%s: movie %s (%s split) has no entry in %s: kept with "
                               "an empty cast, no role features", config.name, mid,
                               assign[mid], root / "metadata" / "meta_anno.json")
        metas = {m: dict(genre=genres.get(m, []), title="", cast=casts.get(m, []))
                 for m in set(casts) | set(assign)}
    else:
        metas = v2_movies_meta(root, skips)
        assign = {m: parsing.movie_split(m) for m in metas}
    out: dict[str, list[dict]] = {s: [] for s in V1_SPLITS}
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
        portraits = [_portrait(root / "metadata" / "portrait" / mid / f"{c['id']}.jpeg", skips)
                     for c in cast]
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
                              "(Movie101-R-temp).",
                     "1.2.0": "v1 split movies without a meta_anno entry kept (empty cast); "
                              "narration_role/train_merge.json read, its augmentation entries "
                              "as the train_clips split; role entries matched by (movie, "
                              "start, end); information counters noted apart from skips."}
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
            root = check_manual_dir(config, common.manual_dir(dl_manager))
        self.skips = common.Counts()
        try:
            if config.kind == "movies":
                splits = movie_examples(root, config, self.skips)
            elif config.kind == "shots":
                splits = v1_shot_examples(root, self.skips)
            elif config.release == "v1":
                splits = v1.v1_examples(root, config.kind, self.skips)
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
                common.note(self.skips, f"empty_split_{split}")
        if not gens:
            why = "; ".join(f"{k}: {', '.join(v[:2])}" for k, v in self.skips.named.items()
                            if not k.startswith((common.KEPT_PREFIX, common.NOTE_PREFIX)))
            raise common.ManualDirError(f"{root}: no usable examples for movie101/{config.name}"
                                        + (f" ({why})" if why else ""))
        return gens

    def _generate_examples(self, rows: list[dict]) -> Iterator[tuple[str, dict]]:
        for r in rows:
            yield r.get("id", r["movie_id"]), r


Builder = Movie101
