"""TFDS builder for SYMON (SYnopses of MOvie Narratives): one example per summary video.

Reads the upstream layout (README.md): WebVTT captions -> deduplicated timed
sentences (`vtt`, `narration`), `asr_label.txt`, camera cuts, per-video features,
by-movie splits, and the 5% trims at both ends of each video (the SYMON paper
drops the start and end of every summary: channel intros and outros).
Every input it cannot use is skipped with a counted reason (`build_summary.json`).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import pathlib
import re
import zlib
from collections.abc import Iterator

import numpy as np
import tensorflow_datasets as tfds

from tfds_builders import arrays, common
from tfds_builders.schema import Invalid, Unreadable, detail, read_text
from tfds_builders.symon import movies, narration, schema, vtt

VERSION = tfds.core.Version("1.3.0")
SPLITS = (("train", 0.8), ("val", 0.1), ("test", 0.1))
_URL_ID = re.compile(r"(?:[?&]v=|youtu\.be/)([A-Za-z0-9_-]{11,})")
_SHOWN = 5  # unusable videos named in the summary line
FEATURE_REASONS = {"unreadable": "video:bad_features", "dtype": "video:bad_features",
                   "shape": "video:feature_dim_mismatch", "nonfinite": "video:nonfinite_features"}
log = logging.getLogger(__name__)

MANUAL_DOWNLOAD_INSTRUCTIONS = """\
Point --manual_dir at the SYMON release (insundaycathy/SYMON): `url.txt`, `asr_label.txt`,
`timestamped_text/<id>.en.vtt`, `preprocessed_text/<id>.txt`; for the `features` config also
`features/<id>.npy` ([T, D] float, 1 per second; S3D is D = 1024, the width is read from the
files), optionally `cuts/<id>.txt` (hard cuts in seconds, one per line, e.g. TransNetV2
output) and `movies.tsv` (`<id>\\t<movie>`). See tfds_builders/symon/README.md."""


@dataclasses.dataclass(eq=False)
class SymonConfig(tfds.core.BuilderConfig):
    """`source`: "manual" (read manual_dir) or "synthetic" (write the generated corpus first).

    `feature_dim` 0: the width comes from the files (the first readable file in id order
    sets it; a file of another width is skipped, counted and named). Features are stored
    flat with their width (`feature_dim` per example) so one builder serves any width.

    Feature-based cut detection (the fallback when a video has no cuts file): a cut at
    second t when the cosine distance between consecutive feature rows exceeds
    max(cut_min, median + cut_mads * 1.4826 * MAD).
    """

    source: str = "manual"
    with_features: bool = True
    feature_dim: int = 0
    fps: float = 1.0
    trim: float = 0.05
    cut_min: float = 0.2
    cut_mads: float = 2.5  # cuts are frequent (SYMON scenes: 2.2 s), not rare outliers
    franchise_names: int = 3  # videos sharing >= this many top names form one franchise
    sizes: str = "default"
    seed: int = 0


def check_manual_dir(manual_dir: os.PathLike | str | None, config: str = "text_only"
                     ) -> pathlib.Path:
    """The manual_dir as a Path, or a one-line `ManualDirError` saying what it must hold."""
    what = "timestamped_text/<id>.en.vtt (+ url.txt, asr_label.txt, preprocessed_text/)"
    if not manual_dir:
        raise common.ManualDirError(
            f"symon/{config} needs --manual_dir: a directory holding {what}")
    path = pathlib.Path(manual_dir)
    if not path.is_dir():
        raise common.ManualDirError(f"manual_dir {path} does not exist; it must hold {what}")
    if not (path / "timestamped_text").is_dir():
        raise common.ManualDirError(f"manual_dir {path} has no timestamped_text/; it must hold "
                                    f"{what}")
    return path


def read_url_ids(path: pathlib.Path, skips: collections.Counter) -> list[str]:
    """Video ids of url.txt (a file that is not UTF-8 text: one line, `schema.Unreadable`)."""
    ids = []
    for line in read_text(path).splitlines():
        if not line.strip():
            continue
        m = _URL_ID.search(line)
        if m:
            ids.append(m.group(1))
        else:
            common.record_skip(skips, "url:unparseable", path, line.strip()[:80])
    return ids


def read_asr_labels(path: pathlib.Path, skips: collections.Counter) -> dict[str, int]:
    """`Video_id Is_ASR` then `<id> Yes|No` lines -> {id: 1|0}."""
    out = {}
    for n, line in enumerate(read_text(path).splitlines(), 1):
        parts = line.split()
        if not parts or (n == 1 and parts[0].lower() == "video_id"):
            continue
        if len(parts) != 2 or parts[1].lower() not in ("yes", "no"):
            common.record_skip(skips, "asr_label:bad_line", f"{path}:{n}", line.strip()[:80])
            continue
        out[parts[0]] = int(parts[1].lower() == "yes")
    return out


def detect_cuts(feats: np.ndarray, fps: float, cut_min: float, cut_mads: float) -> np.ndarray:
    """Cut times (seconds) where consecutive feature rows change abruptly (see SymonConfig)."""
    if len(feats) < 3:
        return np.zeros((0,), np.float32)
    x = feats.astype(np.float64)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-8)
    d = 1.0 - (x[1:] * x[:-1]).sum(1)
    med = np.median(d)
    thr = max(cut_min, med + cut_mads * 1.4826 * np.median(np.abs(d - med)))
    return ((np.flatnonzero(d > thr) + 1) / fps).astype(np.float32)


def read_cuts(path: pathlib.Path, skips: collections.Counter) -> np.ndarray:
    """Cut times (seconds, sorted, unique) of a cuts file; a line that is not a
    `schema.cut_seconds` is `cuts:bad_line` (`schema.Unreadable` if the file is not text)."""
    vals = []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            vals.append(schema.cut_seconds(line.split()[0]))
        except Invalid as e:
            common.record_skip(skips, "cuts:bad_line", f"{path}:{n}",
                               f"{e.message}: {line.strip()[:80]}")
    return np.asarray(sorted(set(vals)), np.float32)


def _find_vtt(root: pathlib.Path, vid: str) -> pathlib.Path | None:
    exact = root / "timestamped_text" / f"{vid}.en.vtt"
    if exact.is_file():
        return exact
    found = sorted((root / "timestamped_text").glob(f"{glob_escape(vid)}.en*.vtt"))
    return found[0] if found else None


def glob_escape(s: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", s)


def load_video(root: pathlib.Path, vid: str, cfg: SymonConfig, asr: dict[str, int],
               skips: collections.Counter, width: dict | None = None,
               why: dict[str, str] | None = None) -> dict | None:
    """One video's record (before movie keys and splits), or None (skip counted, and the
    reason and file in `why[vid]`).

    `width` carries the feature width found so far ({"dim", "file"}) across videos.
    """
    width = {} if width is None else width
    why = {} if why is None else why

    def unusable(reason: str, where: pathlib.Path, detail: str = "") -> None:
        common.record_skip(skips, reason, where, detail)
        why[vid] = f"{reason} {where}"

    path = _find_vtt(root, vid)
    if path is None:
        return unusable("video:missing_vtt", root / "timestamped_text" / f"{vid}.en.vtt")
    try:
        words = vtt.parse(read_text(path), skips, path)
    except (Unreadable, ValueError) as e:
        return unusable("video:bad_vtt", path, detail(e))
    pre_path = root / "preprocessed_text" / f"{vid}.txt"
    pre = None
    if pre_path.is_file():
        try:
            text = read_text(pre_path)
        except Unreadable as e:
            return unusable("video:bad_preprocessed_text", pre_path, detail(e))
        pre, n_escaped = narration.unescape_bytes(text)
        if n_escaped:  # decoded: kept with a fix, counted once per file
            common.count(skips, f"{common.KEPT_PREFIX}text:escaped_utf8_bytes", pre_path)
    else:  # kept: the sentences come from the captions instead
        common.count(skips, f"{common.KEPT_PREFIX}video:no_preprocessed_text", pre_path)
        common.log.warning("%s is missing: sentences split from the captions instead",
                           pre_path)
    sents = narration.timed_sentences(words, pre, skips)
    if not sents:
        return unusable("video:no_sentences", path)
    spans_to = max(e for _, _, e in sents)
    feats = None
    if cfg.with_features:
        fpath = root / "features" / f"{vid}.npy"
        if not fpath.is_file():
            reason, missing = common.missing_features(root, vid)
            return unusable(f"video:{reason}", missing)
        want = cfg.feature_dim or width.get("dim", 0)
        try:
            feats = arrays.load(fpath, (None, want or None), store=np.float16)
        except arrays.ArrayError as e:
            return unusable(FEATURE_REASONS[e.kind], fpath, e.detail + (
                f" (width set by {width['file']})" if "file" in width else ""))
        if not want:
            width.update(dim=int(feats.shape[1]), file=str(fpath))
        if len(feats) / cfg.fps + 1.0 / cfg.fps < spans_to:
            return unusable("video:features_too_short", fpath,
                            f"{len(feats) / cfg.fps:.1f} s of features, narration to "
                            f"{spans_to:.1f} s")
        duration = len(feats) / cfg.fps
    else:
        duration = max(spans_to, words[-1].end if words else 0.0)
    cut_path = root / "cuts" / f"{vid}.txt"
    if cut_path.is_file():
        try:
            cuts = read_cuts(cut_path, skips)
        except Unreadable as e:
            return unusable("video:bad_cuts", cut_path, detail(e))
        if len(cuts) and cuts[-1] > duration:
            common.record_skip(skips, "cuts:beyond_video", cut_path,
                               f"{int((cuts > duration).sum())} cut(s) after the video's "
                               f"{duration:.1f} s dropped (a cuts file of another video?)")
            cuts = cuts[cuts <= duration]
    elif feats is not None:
        if (root / "cuts").is_dir():  # cuts given for other videos but not this one
            common.count(skips, f"{common.KEPT_PREFIX}cuts:no_file_feature_fallback",
                         cut_path)  # kept: cuts detected from feature distances instead
        cuts = detect_cuts(feats, cfg.fps, cfg.cut_min, cfg.cut_mads)
    else:
        cuts = np.zeros((0,), np.float32)
    lo, hi = cfg.trim * duration, (1.0 - cfg.trim) * duration
    kept = [(s, a, b) for s, a, b in sents if a >= lo and b <= hi]
    if not kept:
        return unusable("video:no_sentences_after_trim", path)
    if vid not in asr:  # kept with is_asr = -1 (unknown)
        common.count(skips, f"{common.KEPT_PREFIX}asr_label:missing", vid)
    names = narration.person_names([s for s, _, _ in sents])
    names = [n for n, (_, a, b) in zip(names, sents) if a >= lo and b <= hi]
    return {
        "video_id": vid,
        "is_asr": asr.get(vid, -1),
        "title": narration.announced_title(pre or " ".join(w.text for w in words)),
        "sentences": [s for s, _, _ in kept],
        "starts": np.asarray([a for _, a, _ in kept], np.float32),
        "ends": np.asarray([b for _, _, b in kept], np.float32),
        "names": ["|".join(n) for n in names],
        "cuts": cuts[(cuts > lo) & (cuts < hi)].astype(np.float32),
        "duration": np.float32(duration),
        "trim": np.asarray([lo, hi], np.float32),
        "features": feats,
    }


def assign_franchises(videos: list[dict], min_shared: int) -> None:
    """Sets `group` (the franchise) of every video: connected components of "same movie
    key" (`movies.assign`) and "share >= min_shared of their top-10 names that occur twice
    or more" (the same characters = the same story world)."""
    parent = list(range(len(videos)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        parent[find(i)] = find(j)

    by_movie: dict[str, int] = {}
    tops = []
    for i, v in enumerate(videos):
        key = v["movie_key"] or f"video:{v['video_id']}"
        if key in by_movie:
            union(i, by_movie[key])
        by_movie.setdefault(key, i)
        counts = collections.Counter(n for ns in v["names"] for n in ns.split("|") if n)
        tops.append({n for n, c in counts.most_common(10) if c >= 2})
    if min_shared > 0:
        for i in range(len(videos)):
            for j in range(i + 1, len(videos)):
                if len(tops[i] & tops[j]) >= min_shared:
                    union(i, j)
    groups: dict[int, list[int]] = collections.defaultdict(list)
    for i in range(len(videos)):
        groups[find(i)].append(i)
    for members in groups.values():
        key = min(videos[i]["movie_id"] for i in members)
        for i in members:
            videos[i]["group"] = key


def assign_splits(videos: list[dict]) -> None:
    """80/10/10 by franchise: groups ordered by CRC32 of their key, each placed by the
    cumulative video fraction at its midpoint (deterministic, no group in two splits)."""
    sizes = collections.Counter(v["group"] for v in videos)
    order = sorted(sizes, key=lambda g: (zlib.crc32(g.encode()), g))
    total, done, split_of = len(videos), 0, {}
    for g in order:
        mid = (done + sizes[g] / 2) / total
        acc = 0.0
        for name, frac in SPLITS:
            acc += frac
            if mid < acc or name == SPLITS[-1][0]:
                split_of[g] = name
                break
        done += sizes[g]
    for v in videos:
        v["split"] = split_of[v["group"]]


def scan(root: pathlib.Path, cfg: SymonConfig, skips: collections.Counter) -> list[dict]:
    """Every usable video of `root`, with movie, franchise and split."""
    url = root / "url.txt"
    ids = read_url_ids(url, skips) if url.is_file() else []
    vtt_ids = {p.name.split(".")[0] for p in (root / "timestamped_text").glob("*.vtt")}
    ids = sorted(set(ids) | vtt_ids)
    label_path = root / "asr_label.txt"
    asr = read_asr_labels(label_path, skips) if label_path.is_file() else {}
    width: dict = {}
    why: dict[str, str] = {}
    videos = [v for vid in ids
              if (v := load_video(root, vid, cfg, asr, skips, width, why)) is not None]
    if why:
        shown = "; ".join(f"{vid}: {w}" for vid, w in list(why.items())[:_SHOWN])
        reasons = collections.Counter(w.split()[0] for w in why.values())
        by_reason = ", ".join(f"{r} {n}" for r, n in reasons.most_common())
        msg = (f"{len(why)} of {len(ids)} videos unusable ({by_reason}); first "
               f"{min(_SHOWN, len(why))}: {shown}")
        if not videos:
            need = ("timestamped_text/<id>.en.vtt with narration" if not cfg.with_features else
                    "features/<id>.npy ([T, D] float, one row per second) and "
                    "timestamped_text/<id>.en.vtt")
            raise common.ManualDirError(f"{root}: no usable SYMON video: {msg}; the "
                                        f"{cfg.name} config needs {need} per video "
                                        "(tfds_builders/symon/README.md)")
        log.warning("symon: %s", msg)
    movies.assign(videos, root, skips, set(ids))
    assign_franchises(videos, cfg.franchise_names)
    assign_splits(videos)
    return videos


class Symon(common.SummaryBuilder, tfds.core.GeneratorBasedBuilder):
    """SYMON summary videos: timed narration sentences, names, cuts, features."""

    name = "symon"
    VERSION = VERSION
    RELEASE_NOTES = {"1.0.0": "text_only, features (S3D 512-d, 1 fps) and synthetic configs.",
                     "1.1.0": "features stored flat with their width (read from the files); "
                              "cuts beyond a video or missing for a video are counted.",
                     "1.2.0": "movie_key and movie_source per video (movies.tsv, yt-dlp "
                              "info/<id>.info.json or .description, the narration).",
                     "1.3.0": "movie keys: 'Part 1' dropped anywhere, letters of any script "
                              "kept; a movies.tsv name that normalises to nothing is counted "
                              "and the video takes the next source."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS
    BUILDER_CONFIGS = [
        SymonConfig(name="text_only", with_features=False,
                    description="Narration, names, cuts from cuts/<id>.txt; no video features."),
        SymonConfig(name="features", feature_dim=0, fps=1.0,
                    description="Plus features/<id>.npy [T, D] at 1 fps (S3D: D = 1024; D is "
                                "read from the files)."),
        SymonConfig(name="synthetic", source="synthetic", sizes="default",
                    description="Generated corpus in the upstream layout (no manual_dir)."),
        SymonConfig(name="synthetic_tiny", source="synthetic", sizes="tiny",
                    description="Tiny generated corpus for tests."),
    ]
    DEFAULT_CONFIG_NAME = "text_only"

    @classmethod
    def check_inputs(cls, config: str, manual_dir: os.PathLike | str | None) -> None:
        if any(c.name == config and c.source == "manual" for c in cls.BUILDER_CONFIGS):
            check_manual_dir(manual_dir, config)

    def _info(self) -> tfds.core.DatasetInfo:
        cfg: SymonConfig = self.builder_config
        floats = tfds.features.Tensor(shape=(None,), dtype=np.float32)
        feats = {
            "video_id": tfds.features.Text(),
            "movie_id": tfds.features.Text(),
            "movie_key": tfds.features.Text(),
            "movie_source": tfds.features.Text(),
            "franchise": tfds.features.Text(),
            "is_asr": tfds.features.Scalar(np.int32),
            "sentences": tfds.features.Sequence(tfds.features.Text()),
            "names": tfds.features.Sequence(tfds.features.Text()),
            "starts": floats,
            "ends": floats,
            "cuts": floats,
            "duration": tfds.features.Scalar(np.float32),
            "trim": tfds.features.Tensor(shape=(2,), dtype=np.float32),
        }
        if cfg.with_features:
            feats["features"] = tfds.features.Tensor(shape=(None,), dtype=np.float16)
            feats["feature_dim"] = tfds.features.Scalar(np.int32)
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(feats),
            homepage="https://github.com/insundaycathy/SYMON",
            metadata=tfds.core.MetadataDict(fps=cfg.fps),
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict:
        cfg: SymonConfig = self.builder_config
        if cfg.source == "synthetic":
            from tfds_builders.symon import synthetic

            root = common.synthetic_corpus(dl_manager, "symon", synthetic, cfg.sizes,
                                           sizes=cfg.sizes, seed=cfg.seed)
        else:
            root = check_manual_dir(common.manual_dir(dl_manager), cfg.name)
        self.skips = common.Counts()  # names the first inputs behind each count
        videos = scan(root, cfg, self.skips)
        return {name: self._generate_examples([v for v in videos if v["split"] == name])
                for name, _ in SPLITS if any(v["split"] == name for v in videos)}

    def _generate_examples(self, videos: list[dict]) -> Iterator[tuple[str, dict]]:
        for v in videos:
            ex = {k: v[k] for k in ("video_id", "movie_id", "movie_key", "movie_source",
                                    "is_asr", "sentences", "names",
                                    "starts", "ends", "cuts", "duration", "trim")}
            ex["franchise"] = v["group"]
            if self.builder_config.with_features:
                ex["features"] = v["features"].astype(np.float16).reshape(-1)
                ex["feature_dim"] = v["features"].shape[1]
            yield v["video_id"], ex


Builder = Symon
