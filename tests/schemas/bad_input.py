"""The bad-input classes of issue #33 ("Values are coerced instead of checked", "library
tracebacks" of release files), one case each: an input, the build command, what it gives.

Each case copies a real release sample from ../shared/data (or writes a generated corpus) and
breaks one thing in it. `test_bad_input.py` checks the outcome on this checkout; to put a
checkout's outcomes in a table (the issue's before / after), run

    python -m tests.schemas.bad_input --repo CHECKOUT [--shared ../shared/data]

which builds every case with `python -m tfds_builders build` inside CHECKOUT and prints one
Markdown row per case: the class, the input, the command and the outcome (a traceback's
last line, a one-line error, or the build summary's counts and what the value became), then
the cases that need a run (`bad_input_runs.py`: stale dataset, corrupted checkpoint, config
values, split name, unwritable data_dir; `--runs` only those, `--no-runs` without them).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable

import numpy as np

SHARED = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "data"


@dataclasses.dataclass(frozen=True)
class Case:
    """One broken input: `setup(tmp, shared)` writes the manual_dir and returns it (`shared`
    is None for a generated corpus); `probe(data_dir)`, run after a build that succeeded,
    says what the value became."""

    cls: str
    what: str
    builder: str
    config: str
    setup: Callable[[pathlib.Path, pathlib.Path | None], pathlib.Path]
    refused: str  # the reason (or one-line error) the schemas give it
    probe: Callable[[pathlib.Path], str] | None = None

    @property
    def generated(self) -> bool:
        """True when the case writes a generated corpus (no ../shared/data needed)."""
        return self.setup in (complex_features, npz_as_npy, string_features,
                              nonfinite_features)


def _edit_json(path: pathlib.Path, fn: Callable[[dict], object]) -> None:
    data = json.loads(path.read_text("utf-8"))
    out = fn(data)
    path.write_text(out if isinstance(out, str) else json.dumps(data, ensure_ascii=False),
                    encoding="utf-8")


def _moviepuzzle(tmp: pathlib.Path, shared: pathlib.Path, clip: str,
                 edit: Callable[[dict], object]) -> pathlib.Path:
    root = tmp / "mp"
    for c in ("5", clip):
        shutil.copytree(shared / "moviepuzzle_public" / "in_domain" / c, root / "in_domain" / c)
    (root / "clip_id.json").write_text(json.dumps({"in_domain": [5, int(clip)]}))
    _edit_json(root / "in_domain" / clip / "info.json", edit)
    return root


def _record(split: str, clip: str, key: str) -> Callable[[pathlib.Path], str]:
    """What the built MoviePuzzle clip holds under `key`."""
    def probe(data_dir: pathlib.Path) -> str:
        from tfds_builders import moviepuzzle

        src = moviepuzzle.data_source("clips", split, data_dir, build=False)
        got = [src[i] for i in range(len(src)) if src[i]["clip_id"] == clip]
        value = got[0][key] if got else None
        value = value.tolist() if isinstance(value, np.ndarray) else repr(value)
        return f"stored {key} = {value}" if got else "clip not stored"
    return probe


def truncated(tmp: pathlib.Path, shared: pathlib.Path) -> pathlib.Path:
    def edit(info: dict) -> None:
        info["shot_id"][2] = info["shot_id"][2] + 0.7
    return _moviepuzzle(tmp, shared, "1505", edit)


def string_as_list(tmp: pathlib.Path, shared: pathlib.Path) -> pathlib.Path:
    def edit(info: dict) -> None:
        info["img_id"] = "".join(map(str, info["img_id"]))  # 10 frames: "0123456789"
    return _moviepuzzle(tmp, shared, "1505", edit)


def null_id(tmp: pathlib.Path, shared: pathlib.Path) -> pathlib.Path:
    def edit(info: dict) -> None:
        info["tt_id"] = None
    return _moviepuzzle(tmp, shared, "1505", edit)


def _msymon(tmp: pathlib.Path, shared: pathlib.Path) -> pathlib.Path:
    root = tmp / "msymon"
    shutil.copytree(shared / "msymon" / "annotations" / "en", root / "annotations" / "en")
    return root


def duplicate_key(tmp: pathlib.Path, shared: pathlib.Path) -> pathlib.Path:
    """The first video of en/train.json given twice: the second copy has 3 sentences."""
    root = _msymon(tmp, shared)

    def edit(data: dict) -> str:
        vid = sorted(data)[0]
        body = json.dumps(data, ensure_ascii=False)[:-1]
        return body + f", {json.dumps(vid)}: {json.dumps(data[vid][:3], ensure_ascii=False)}}}"
    _edit_json(root / "annotations" / "en" / "train.json", edit)
    return root


def _msymon_probe(data_dir: pathlib.Path) -> str:
    """What became of the first video of the real en/train.json (the one the cases break)."""
    from tfds_builders import msymon

    vid = sorted(json.loads((SHARED / "msymon/annotations/en/train.json").read_text("utf-8")))[0]
    src = msymon.data_source("text_only", "en_train", data_dir, build=False)
    rec = next((src[i] for i in range(len(src)) if src[i]["video_id"] == vid), None)
    if rec is None:
        return f"{vid} not stored"
    return f"{vid} stored with {len(rec['sentences'])} sentences, duration " \
           f"{rec['duration']:.6g} s"


def huge_duration(tmp: pathlib.Path, shared: pathlib.Path) -> pathlib.Path:
    root = _msymon(tmp, shared)

    def edit(data: dict) -> None:
        s = next(s for s in data[sorted(data)[0]] if s["matched"] == "yes")
        s["end_time"] = 1e9
    _edit_json(root / "annotations" / "en" / "train.json", edit)
    return root


def minutes_past_59(tmp: pathlib.Path, shared: pathlib.Path) -> pathlib.Path:
    root = tmp / "yms"
    shutil.copytree(shared / "yms", root)
    path = root / "annotations_sentences.txt"
    text = path.read_text("utf-8")
    path.write_text(text.replace("0000_00.00.07.640-00.00.17.820",
                                 "0000_00.75.07.640-00.75.17.820", 1), encoding="utf-8")
    return root


def _yms_probe(data_dir: pathlib.Path) -> str:
    from tfds_builders.msymon import yms

    src = yms.data_source("sentences_text_only", "train", data_dir, build=False)
    rec = next(src[i] for i in range(len(src)) if src[i]["video_id"] == "0000")
    return f"0000 sentence 0 stored at {rec['begin'][0]:.2f}-{rec['end'][0]:.2f} s"


def undecodable(tmp: pathlib.Path, shared: pathlib.Path) -> pathlib.Path:
    root = tmp / "yms"
    shutil.copytree(shared / "yms", root)
    with open(root / "training_split.txt", "ab") as f:
        f.write(b"00\xff9\n")
    return root


def undecodable_per_video(tmp: pathlib.Path, shared: pathlib.Path) -> pathlib.Path:
    root = tmp / "symon"
    shutil.copytree(shared / "symon", root)
    path = sorted((root / "preprocessed_text").glob("*.txt"))[0]
    path.write_bytes(path.read_bytes()[:200] + b" caf\xe9 " + path.read_bytes()[200:])
    return root


def _msymon_features(tmp: pathlib.Path, x: np.ndarray | None = None, npz: bool = False
                     ) -> pathlib.Path:
    from tfds_builders.msymon import synthetic

    root = synthetic.write_corpus(tmp / "msymon_gen", seed=1, dim=512, languages=("en",),
                                  sizes={"train": 6, "val": 2, "test": 2, "weak": 0})
    path = sorted((root / "features").glob("*.npy"))[0]
    good = np.load(path)
    bad = good.astype(np.complex64) + 1j if x is None else x
    if npz:
        with open(path, "wb") as f:
            np.savez(f, features=good)
    else:
        np.save(path, bad)
    return root


def complex_features(tmp: pathlib.Path, shared: pathlib.Path | None) -> pathlib.Path:
    return _msymon_features(tmp)


def npz_as_npy(tmp: pathlib.Path, shared: pathlib.Path | None) -> pathlib.Path:
    return _msymon_features(tmp, npz=True)


def _features_probe(data_dir: pathlib.Path) -> str:
    """Whether the broken video (`ente000`) was stored, and its first feature value."""
    from tfds_builders import msymon

    for split in ("en_train", "en_val", "en_test"):
        src = msymon.data_source("features", split, data_dir, build=False)
        for i in range(len(src)):
            if src[i]["video_id"] == "ente000":
                return f"ente000 stored, features[0, :2] = {src[i]['features'][0, :2].tolist()}"
    return "ente000 not stored"


def string_features(tmp: pathlib.Path, shared: pathlib.Path | None) -> pathlib.Path:
    from tfds_builders.symon import synthetic

    root = tmp / "symon_gen"
    synthetic.write_corpus(root, sizes="tiny", seed=0)
    path = sorted((root / "features").glob("*.npy"))[0]
    np.save(path, np.load(path).astype(str))
    return root


def nonfinite_features(tmp: pathlib.Path, shared: pathlib.Path | None) -> pathlib.Path:
    from tfds_builders.movie101 import synthetic

    root = tmp / "movie101_gen"
    synthetic.write_corpus(root, seed=0, sizes="tiny")
    path = sorted((root / "features" / "clip").glob("*.npz"))[0]
    x = np.load(path)["features"]
    x[0, 0] = np.nan
    np.savez(path, features=x)
    return root


def _nan_probe(data_dir: pathlib.Path) -> str:
    from tfds_builders import movie101

    bad = 0
    for split in ("train", "val", "test"):
        try:
            src = movie101.data_source("v2_movies", split, data_dir, build=False)
        except KeyError:
            continue
        bad += sum(int((~np.isfinite(src[i]["clip"].astype(np.float32))).sum())
                   for i in range(len(src)))
    return f"{bad} NaN stored in clip features"


def null_movie_id(tmp: pathlib.Path, shared: pathlib.Path) -> pathlib.Path:
    root = tmp / "v1"
    shutil.copytree(shared / "movie101" / "v1", root)

    def edit(rows: list) -> None:
        rows[0]["movie_id"] = None
    _edit_json(root / "Movie101-G" / "val.json", edit)
    return root


def _movie_none_probe(data_dir: pathlib.Path) -> str:
    from tfds_builders import movie101

    src = movie101.data_source("v1_grounding", "val", data_dir, build=False)
    n = sum(src[i]["movie_id"] == "None" for i in range(len(src)))
    return f"{n} example(s) of movie 'None'"


CASES = [
    Case("number where an integer is meant", "MoviePuzzle clip 1505 info.json shot_id[2] "
         "309 -> 309.7", "moviepuzzle", "clips", truncated, "bad_field",
         _record("in_domain", "1505", "shot_id")),
    Case("string where a list is meant", 'clip 1505 info.json img_id [0, .., 9] -> '
         '"0123456789"', "moviepuzzle", "clips", string_as_list, "bad_field",
         _record("in_domain", "1505", "img_id")),
    Case("same JSON key twice", "M-SyMoN en/train.json: first video id given again with 3 "
         "sentences", "msymon", "text_only", duplicate_key, "duplicate_key", _msymon_probe),
    Case("null id", "clip 1505 info.json tt_id -> null", "moviepuzzle", "clips", null_id,
         "bad_field", _record("in_domain", "1505", "movie_id")),
    Case("null id", "Movie101 v1 Movie101-G/val.json row 0 movie_id -> null", "movie101",
         "v1_grounding", null_movie_id, "bad_entry", _movie_none_probe),
    Case("out-of-range time: minutes past 59", "YMS annotations_sentences.txt 0000 "
         "00.00.07.640 -> 00.75.07.640", "msymon.yms", "sentences_text_only", minutes_past_59,
         "malformed_annotation_line", _yms_probe),
    Case("out-of-range time: 1e9 s duration", "M-SyMoN en/train.json first matched "
         "end_time -> 1e9", "msymon", "text_only", huge_duration, "malformed_sentence",
         _msymon_probe),
    Case("non-finite feature values", "Movie101 (generated v2 layout) clip features[0, 0] -> "
         "NaN", "movie101", "v2_movies", nonfinite_features, "unusable_clip_file", _nan_probe),
    Case("complex array becomes floats", "M-SyMoN (generated) features/<vid>.npy as complex64",
         "msymon", "features", complex_features, "bad_features", _features_probe),
    Case("traceback: undecodable bytes", "YMS training_split.txt + line b'00\\xff9'",
         "msymon.yms", "sentences_text_only", undecodable, "error: "),
    Case("traceback: undecodable bytes", "SYMON preprocessed_text/<first>.txt + b'caf\\xe9'",
         "symon", "text_only", undecodable_per_video, "video:bad_preprocessed_text"),
    Case("traceback: .npz saved as .npy", "M-SyMoN (generated) features/<vid>.npy holding "
         "an .npz", "msymon", "features", npz_as_npy, "bad_features", _features_probe),
    Case("traceback: string-typed features", "SYMON (generated) features/<vid>.npy as "
         "dtype <U32", "symon", "features", string_features, "video:bad_features"),
]


def outcome(case: Case, repo: pathlib.Path, shared: pathlib.Path) -> tuple[str, str]:
    """(command, outcome) of `case` built by `repo`'s `python -m tfds_builders build`."""
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        manual = case.setup(tmp, shared)
        cmd = [sys.executable, "-m", "tfds_builders", "build", case.builder, "--config",
               case.config, "--manual_dir", str(manual), "--data_dir", str(tmp / "out")]
        env = dict(os.environ, PYTHONPATH=str(repo), PYTHONWARNINGS="default")
        run = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
        shown = (f"python -m tfds_builders build {case.builder} --config {case.config} "
                 f"--manual_dir M --data_dir D")
        err = [ln for ln in run.stderr.splitlines() if ln.strip()]
        if "Traceback" in run.stderr:
            return shown, f"traceback: `{err[-1][:110]}`"
        if run.returncode:
            return shown, f"rc {run.returncode}, {len(err)} line(s): `{err[-1][:140]}`"
        summary = json.loads(next((tmp / "out").rglob("build_summary.json")).read_text())
        n = summary["skipped"].get(case.refused, 0)
        named = (summary.get("named") or {}).get(case.refused, [""])[0]
        named = named.replace(str(manual), "M")[:110]
        got = f"{case.refused} {n}" + (f" (`{named}`)" if named else "") if n else \
            f"no skip ({sum(summary['examples'].values())} examples)"
        probe = ""
        if case.probe is not None:  # read back with `repo`'s readers
            code = ("import importlib.util as u, pathlib, sys; "
                    f"s = u.spec_from_file_location('bad_input', {__file__!r}); "
                    "m = u.module_from_spec(s); sys.modules['bad_input'] = m; "
                    "s.loader.exec_module(m); "
                    f"m.SHARED = pathlib.Path({str(shared)!r}); "  # the samples of --shared
                    f"print(m.CASES[{CASES.index(case)}].probe("
                    f"pathlib.Path({str(tmp / 'out')!r})))")
            run = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True,
                                 env=dict(os.environ, PYTHONPATH=str(repo)), text=True)
            probe = "; " + (run.stdout.strip() or run.stderr.strip().splitlines()[-1])[:120]
        warned = [ln for ln in err if "Warning" in ln]
        return shown, f"built; {got}{probe}" + (
            f"; warning `{warned[0][-80:]}`" if warned else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", default=str(pathlib.Path(__file__).parents[2]),
                   help="the checkout whose tfds_builders builds the cases")
    p.add_argument("--shared", default=str(SHARED), help="the real release samples")
    p.add_argument("--runs", action=argparse.BooleanOptionalAction, default=None,
                   help="only the cases that need a run (--no-runs: only the release files)")
    args = p.parse_args(argv)
    repo = pathlib.Path(args.repo).resolve()
    print("| class | input | command | outcome |\n|---|---|---|---|")
    if args.runs is not True:
        for case in CASES:
            cmd, got = outcome(case, repo, pathlib.Path(args.shared))
            print(f"| {case.cls} | {case.what} | `{cmd}` | {got} |", flush=True)
    if args.runs is not False:
        from tests.schemas import bad_input_runs as runs

        with tempfile.TemporaryDirectory() as d:
            ctx = runs.Context(pathlib.Path(d), repo)
            for rc in runs.RUN_CASES:
                try:
                    got = rc.run(ctx).text.replace(str(ctx.tmp), "T")  # T: its temporary dir
                except RuntimeError as e:  # e.g. the smoke run the checkpoint cases need
                    got = f"not run: {str(e).splitlines()[-1][:140]}"
                print(f"| {rc.cls} | {rc.what} | `{rc.command}` | {got} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
