"""A benchmark's tools given another benchmark's release (or the wrong kind of build): one
`error:` line on stderr and exit status 2 (a SystemExit, or `main`'s return value), before
anything is built. The foreign releases are folders in the other benchmarks' published
layouts (only the files their checks read)."""

from __future__ import annotations

import importlib
import pathlib

import pytest

pytestmark = pytest.mark.faults  # the fault-injection suite (-m faults)


def _msymon(root: pathlib.Path) -> pathlib.Path:
    (root / "annotations" / "en").mkdir(parents=True)
    (root / "annotations" / "en" / "train.json").write_text("[]")
    return root


def _symon(root: pathlib.Path) -> pathlib.Path:
    (root / "timestamped_text").mkdir(parents=True)
    (root / "url.txt").write_text("abc https://www.youtube.com/watch?v=abc\n")
    return root


def _sc2st(root: pathlib.Path) -> pathlib.Path:
    root.mkdir(parents=True)
    (root / "meta.csv").write_text("CASABLANCA\thttps://www.imdb.com/title/tt0034583/\tDrama\n")
    return root


def _yms(root: pathlib.Path) -> pathlib.Path:
    root.mkdir(parents=True)
    (root / "movie_list.txt").write_text("Casablanca\n")
    (root / "url_list.txt").write_text("https://www.youtube.com/watch?v=abc\n")
    return root


CASES = [  # (id, module, argv with {msymon} / {symon} / {sc2st} / {tmp}, what the line says)
    ("msymon baseline <- SYMON", "vnr.benchmarks.msymon.tools",
     "baseline --data_dir {tmp}/d --manual_dir {symon}", "has no annotations/ folder"),
    ("msymon baseline <- Sc2St", "vnr.benchmarks.msymon.tools",
     "baseline --data_dir {tmp}/d --manual_dir {sc2st}", "has no annotations/ folder"),
    ("symon steps <- M-SYMON", "vnr.benchmarks.symon.tools",
     "steps --data_dir {tmp}/d --manual_dir {msymon}", "has no timestamped_text/"),
    ("symon steps of a text-only build", "vnr.benchmarks.symon.tools",
     "steps --data_dir {tmp}/d --manual_dir {symon} --config text_only",
     "text_only has none"),
    ("symon contamination <- M-SYMON as YMS", "vnr.benchmarks.symon.tools",
     "contamination --data_dir {tmp}/d --manual_dir {symon} --yms_dir {msymon}",
     "is not the YMS release: it has no url_list.txt or movie_list.txt"),
    ("symon contamination <- Sc2St as SYMON", "vnr.benchmarks.symon.tools",
     "contamination --data_dir {tmp}/d --manual_dir {sc2st} --yms_dir {yms}",
     "has no timestamped_text/"),
    ("build symon <- M-SYMON", "tfds_builders.__main__",
     "build symon --config text_only --data_dir {tmp}/d --manual_dir {msymon}",
     "has no timestamped_text/"),
    ("build msymon <- Sc2St", "tfds_builders.__main__",
     "build msymon --config text_only --data_dir {tmp}/d --manual_dir {sc2st}",
     "has no annotations/ folder"),
]


@pytest.mark.parametrize(("module", "argv", "says"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_tool_given_another_benchmarks_release_is_one_line(
        module: str, argv: str, says: str, tmp_path: pathlib.Path,
        capsys: pytest.CaptureFixture) -> None:
    dirs = {"msymon": _msymon(tmp_path / "msymon"), "symon": _symon(tmp_path / "symon"),
            "sc2st": _sc2st(tmp_path / "sc2st"), "yms": _yms(tmp_path / "yms"), "tmp": tmp_path}
    try:
        code = importlib.import_module(module).main(argv.format(**dirs).split())
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("error: ") and "\n" not in err and says in err, err
    assert "Traceback" not in err
    assert not list((tmp_path / "d").rglob("dataset_info.json"))  # nothing built
