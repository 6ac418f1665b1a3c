"""A Sc2St release laid out as upstream gives it (hopeisme/Sc2St README, `main.py`,
`lsmdc_utils.py`), for the end-to-end tests: `write_release(root, meta_csv)`.

    <root>/story10_all/story10_all_{train,val,test}_no.json   (+ the overlapping variants)
    <root>/i2chars.json  parsed_clip.json  parsed_text.json     (Google-Drive `Sc2St/`)
    <root>/data/lsmdc.json  data/meta.csv                       (upstream repository `data/`)
    <root>/frames/<movie>/<clip>/<k>.jpg                        (upstream `main.py`)
    <root>/LSMDC16_annos_{training,val,test}.csv                 (LSMDC 2016, the same clips)

Exact where upstream is explicit: frames every 200 ms from k = 0, resized to 640x360 (not
square); `lsmdc.json` as `lsmdc_utils.indexing_lsmdc` writes it (`data` / `i2n` / `n2i`,
string indices, movies in natural order); ids `l_<movie>_<clip>[_<frame>]`; LSMDC clip
folders `<movie>_<hh.mm.ss.mmm>-<hh.mm.ss.mmm>` and LSMDC markup in the texts
(`<PERSON>Name</PERSON>`, `SOMEONE<Name>`, bare `SOMEONE`); a clip with two descriptions.
Upstream does not document the inside of the story files: they are written as one of the
shapes `tfds_builders/sc2st/released.py` accepts (story id -> 10 frame ids, texts from
`parsed_text.json`). `meta.csv` is the real file when given (`../shared/data/sc2st`), else
lines for the same movies in its format, the space-separated line of the real file included.

The release's awkward cases are in it, one each: a story of 9 frames, a story id given twice,
a frame id whose clip `lsmdc.json` lacks, a frame missing on disk, a clip without text, a
movie without a `meta.csv` line; in the LSMDC CSVs (ISO-8859-1, tab-separated, no header) a
clip's row given twice, a cp1252 row, a row of a movie upstream excludes (`1010_*`).
`MovieEmbedder` (`numpy_embedder` / `other_embedder`) is a cheap deterministic stand-in for
a keyframe embedder, for tests of the build's plumbing.
"""

from __future__ import annotations

import dataclasses
import io
import json
import pathlib
import re
import shutil
import zlib
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw

FRAME_SIZE = (640, 360)  # upstream main.py: cv2.resize(image, (640, 360))
# LSMDC folder names of movies in the real meta.csv (their title, as normalised, is its line's),
# one without a line; genres as the real meta.csv gives them.
MOVIES = {
    "0001_American_Beauty": ["Drama"],
    "0003_CASABLANCA": ["Drama", "Romance", "War"],
    "1008_Spider-Man2": ["Action", "Adventure", "Sci-Fi"],
    "1056_Harry_Potter_and_the_prisoner_of_azkaban": ["Adventure", "Family", "Fantasy"],
    "9001_Not_In_Meta": [],
}
META_LINES = [  # the real file's lines for these movies (tabs, and its one space-separated line)
    "American Beauty\thttps://www.imdb.com/title/tt0169547/\tDrama\tcolor",
    "CASABLANCA\thttps://www.imdb.com/title/tt0034583/\tDrama,Romance,War\twb",
    "Spider-Man2\thttps://www.imdb.com/title/tt0316654/\tAction,Adventure,Sci-Fi\tcolor",
    "Harry Potter and the prisoner of azkaban https://www.imdb.com/title/tt0304141/  "
    "Adventure, Family, Fantasy  color",
]
STORIES = {"train": 12, "val": 11, "test": 12}  # usable storyboards (100 candidates: >= 11)
SKIPPED = {"wrong_length_story": 1, "duplicate_key": 1, "unknown_id": 1, "no_frames": 1,
           "no_text": 1}
NAMES = ("Rick", "Ilsa", "Lester", "Harry", "Peter")
VERBS = ("opens the door", "looks at the window", "walks to the car", "sits down",
         "reads a letter", "picks up the phone", "smiles", "runs down the stairs")


def _ts(sec: float) -> str:
    ms = int(round(sec * 1000))
    return f"{ms // 3_600_000:02d}.{ms // 60_000 % 60:02d}.{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def _jpeg(movie: int, clip: int, frame: int) -> bytes:
    """A 640x360 frame: the movie's colour, a box placed by clip and frame."""
    img = Image.new("RGB", FRAME_SIZE, ((60 * movie) % 256, 90, (37 * clip) % 256))
    x, y = (clip * 53 + frame * 17) % 560, (clip * 29) % 280
    ImageDraw.Draw(img).rectangle([x, y, x + 80, y + 80], fill=(250, (clip * 7) % 256, 40))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=70)
    return buf.getvalue()


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


def _text(k: int, movie: str) -> str:
    """An LSMDC sentence with its markup (names as the release attaches them)."""
    name, verb = NAMES[k % len(NAMES)], VERBS[k % len(VERBS)]
    return (f"<PERSON>{name}</PERSON> {verb}.", f"SOMEONE<{name}> {verb}.",
            f"SOMEONE {verb} in {movie.split('_')[1]}.")[k % 3]


@dataclasses.dataclass
class Release:
    """What `write_release` wrote: the manual_dir and what a build must find in it."""

    root: pathlib.Path
    stories: dict[str, int]  # usable storyboards per split
    skipped: dict[str, int]  # skip reason -> count
    genres: dict[str, list[str]]  # movie folder -> its genres from meta.csv
    sentences: dict[str, str]  # a storyboard's first frame id -> its first sentence, cleaned


def write_release(root: pathlib.Path, meta_csv: pathlib.Path | None = None) -> Release:
    """Writes the release under `root` (module docstring); `meta_csv`: the real file."""
    movies = sorted(MOVIES, key=_natural)
    clips: dict[str, list[str]] = {m: [] for m in movies}
    frames: dict[tuple[int, int], int] = {}
    texts: dict[str, list[str]] = {}
    boards: dict[str, dict[str, list[str]]] = {s: {} for s in STORIES}
    first: dict[str, str] = {}

    def clip(m: int, n_frames: int = 2, text: str | None = "") -> tuple[int, int]:
        movie = movies[m]
        c = len(clips[movie])
        t = 60.0 + 7.0 * c
        name = f"{movie}_{_ts(t)}-{_ts(t + 0.2 * n_frames)}"
        clips[movie].append(name)
        d = root / "frames" / movie / name
        d.mkdir(parents=True)
        for k in range(n_frames):
            (d / f"{k}.jpg").write_bytes(_jpeg(m, c, k))
        frames[(m, c)] = n_frames
        if text is not None:
            texts[f"l_{m}_{c}"] = [text or _text(c, movie)]
        return m, c

    def board(split: str, m: int, key: str | None = None, **defect: int) -> list[str]:
        ids = []
        for k in range(defect.get("length", 10)):
            cm, cc = clip(m, text=None if defect.get("no_text") == k else "")
            if k == 0 and m % 2:  # a clip with two descriptions (parsed_text: "may have")
                texts[f"l_{cm}_{cc}"].append(f"Then SOMEONE {VERBS[cc % len(VERBS)]}.")
            ids.append(f"l_{cm}_{cc}_{1 if k % 2 else 0}")
        if "missing_frame" in defect:
            ids[defect["missing_frame"]] = ids[defect["missing_frame"]].rsplit("_", 1)[0] + "_7"
        if "unknown_clip" in defect:
            ids[defect["unknown_clip"]] = f"l_{m}_9999_0"
        usable = not defect and key is None  # a named key is given twice (below)
        key = key or f"{split}_{len(boards[split]):03d}"
        boards[split][key] = ids
        if usable:
            cm, cc = (int(x) for x in ids[0].split("_")[1:3])
            first[ids[0]] = " ".join(_clean(t) for t in texts[f"l_{cm}_{cc}"])
        return ids

    n = 0
    for split, count in STORIES.items():
        for _ in range(count):
            board(split, n % len(movies))
            n += 1
    board("val", 1, unknown_clip=4)  # a clip lsmdc.json does not index: unknown_id
    board("train", 2, no_text=6)  # a clip without text in parsed_text.json: no_text
    board("test", 3, missing_frame=2)  # frame 7 of a 2-frame clip: no_frames
    board("test", 0, length=9)  # 9 frames: wrong_length_story
    twice = board("test", 4, key="test_dup")  # its id given twice below: duplicate_key

    # lsmdc.json as lsmdc_utils.indexing_lsmdc writes it
    i2n = {str(i): [m, {str(c): name for c, name in enumerate(clips[m])}]
           for i, m in enumerate(movies)}
    n2i = {m: [str(i), {name: str(c) for c, name in enumerate(clips[m])}]
           for i, m in enumerate(movies)}
    data = {str(i): {str(c): frames[(i, c)] for c in range(len(clips[m]))}
            for i, m in enumerate(movies)}
    _dump(root / "data" / "lsmdc.json", {"data": data, "i2n": i2n, "n2i": n2i})
    if meta_csv is not None:
        shutil.copyfile(meta_csv, root / "data" / "meta.csv")
    else:
        (root / "data" / "meta.csv").write_text("\n".join(META_LINES) + "\n")
    _dump(root / "parsed_text.json", texts)
    _dump(root / "parsed_clip.json", {k: [0, 1] for k in texts})
    _dump(root / "i2chars.json", {k: [n for n in NAMES if n in " ".join(v)]
                                  for k, v in texts.items()})
    stories = root / "story10_all"
    for split, b in boards.items():
        body = json.dumps(b)
        if split == "test":  # the story id given a second time, with other frames
            body = body[:-1] + f', "test_dup": {json.dumps(twice[::-1])}}}'
        for name in (f"story10_all_{split}_no.json", f"story10_all_{split}.json"):
            (stories / name).parent.mkdir(parents=True, exist_ok=True)
            (stories / name).write_text(body)
    _dump(stories / "story10_all.json", {k: v for b in boards.values() for k, v in b.items()})
    _write_lsmdc(root, clips, texts)
    return Release(root, dict(STORIES), dict(SKIPPED), dict(MOVIES), first)


LSMDC_SKIPPED = {"kept_duplicate_clip_merged": 1, "unknown_encoding": 1, "excluded_movie": 1}


def _write_lsmdc(root: pathlib.Path, clips: dict[str, list[str]],
                 texts: dict[str, list[str]]) -> None:
    """The clips' LSMDC 2016 rows (their texts joined), split over the three CSVs, plus the
    awkward rows of `LSMDC_SKIPPED`."""
    rows = []
    for m, movie in enumerate(sorted(clips, key=_natural)):
        for c, name in enumerate(clips[movie]):
            if f"l_{m}_{c}" not in texts:
                continue
            a, b = name.rsplit("_", 1)[1].split("-")
            rows.append(f"{name}\t{a}\t{b}\t{a}\t{b}\t{' '.join(texts[f'l_{m}_{c}'])}"
                        .encode("iso-8859-1"))
    rows.insert(5, rows[4])  # a clip's row given twice: merged (kept)
    t = "00.00.01.000-00.00.02.000"
    rows.insert(9, f"1010_TITANIC_{t}\t00.00.01.000\t00.00.02.000\t00.00.01.000\t"
                   "00.00.02.000\tSOMEONE sails.".encode())  # upstream drops 1010_*: excluded
    rows.insert(13, rows[12].rsplit(b"\t", 1)[0] + b"\tHe says \x93hi\x94.")  # cp1252 quotes
    third = len(rows) // 3
    for name, part in (("training", rows[:third]), ("val", rows[third:2 * third]),
                       ("test", rows[2 * third:])):
        (root / f"LSMDC16_annos_{name}.csv").write_bytes(b"\n".join(part) + b"\n")


def _clean(text: str) -> str:
    """The builder's names rule (README: `<PERSON>Name</PERSON>`, `SOMEONE<Name>` -> Name)."""
    text = re.sub(r"<PERSON>(.*?)</PERSON>", r"\1", text)
    return re.sub(r"SOMEONE<(.*?)>", r"\1", text)


def _dump(path: pathlib.Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


class MovieEmbedder:
    """Deterministic 512-d stand-in for a keyframe embedder (`keyframes.Embedder`): texts by
    hashed words, images by their 8x8 thumbnail, each through a fixed random projection."""

    dim = 512

    def __init__(self, seed: int):
        rng = np.random.default_rng(seed)
        self._words = rng.normal(size=(1024, self.dim)).astype(np.float32)
        self._pixels = rng.normal(size=(8 * 8 * 3, self.dim)).astype(np.float32)

    @staticmethod
    def _norm(x: np.ndarray) -> np.ndarray:
        return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-6)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        rows = [self._words[[zlib.crc32(w.encode()) % 1024 for w in t.lower().split()] or
                            [0]].sum(0) for t in texts]
        return self._norm(np.stack(rows)).astype(np.float32)

    def encode_images(self, jpegs: Sequence[bytes]) -> np.ndarray:
        thumbs = [np.asarray(Image.open(io.BytesIO(j)).convert("RGB").resize((8, 8)),
                             np.float32).ravel() / 255.0 for j in jpegs]
        return self._norm(np.stack(thumbs) @ self._pixels).astype(np.float32)


def numpy_embedder(encoder: str, seed: int = 0) -> MovieEmbedder:
    """A `MakeEmbedder` (the builder calls it with its config's encoder name and seed)."""
    del encoder
    return MovieEmbedder(seed)


def other_embedder(encoder: str, seed: int = 0) -> MovieEmbedder:
    """Another `MakeEmbedder` (other weights): a build with it is another dataset."""
    del encoder
    return MovieEmbedder(seed + 1)
