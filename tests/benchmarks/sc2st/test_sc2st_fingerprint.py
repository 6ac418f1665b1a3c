"""A Sc2St build records the model functions it was handed (`--embedder`, `--feature_embedder`,
...: module:qualname) with its source; the same data_dir and config opened with another
embedder (the builder's prepare, the trainer's data path, the build CLI) stops with one line
saying what differs and how to rebuild, as for another manual_dir (tfds_builders/fingerprint.py).
"""

from __future__ import annotations

import functools
import json

import pytest

from configs.sc2st.main import get_config
from tests.benchmarks.sc2st import release_layout
from tfds_builders import __main__ as cli
from tfds_builders import fingerprint
from tfds_builders import sc2st as sc2st_lib

HERE = "tests.benchmarks.sc2st.release_layout"


@pytest.fixture(scope="module")
def manual(tmp_path_factory):
    return release_layout.write_release(tmp_path_factory.mktemp("sc2st") / "Sc2St").root


@pytest.fixture
def new_process(monkeypatch):
    """Forget the checks this process already made (a fresh trainer start)."""
    monkeypatch.setattr(fingerprint, "_checked", set())


def _record(data_dir) -> dict:
    return json.loads(next(data_dir.rglob(fingerprint.SOURCE_FILE)).read_text())


def test_another_embedder_stops_prepare_trainer_and_cli(manual, tmp_path, new_process, capsys):
    data = tmp_path / "data"
    sc2st_lib.prepare("released", data, manual, embedder=release_layout.numpy_embedder)
    assert _record(data)["functions"] == {"embedder": f"{HERE}:numpy_embedder"}
    sc2st_lib.prepare("released", data, manual, embedder=release_layout.numpy_embedder)  # reused
    src = sc2st_lib.data_source("released", "test", data, build=False)  # a reader: no embedder
    assert len(src) == release_layout.STORIES["test"]

    for fresh in (False, True):  # checked in this process already, and in a new one
        if fresh:
            fingerprint._checked.clear()  # noqa: SLF001 - a new process
        with pytest.raises(fingerprint.SourceChanged) as e:
            sc2st_lib.prepare("released", data, manual, embedder=release_layout.other_embedder)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(
            f"sc2st/released:1.1.0 in {data / 'sc2st' / 'released' / '1.1.0'} was built with "
            f"other model functions (embedder: '{HERE}:numpy_embedder' then, "
            f"'{HERE}:other_embedder' now); rebuild it: python -m tfds_builders build sc2st "
            f"--config released --manual_dir {manual} --data_dir {data} --embedder "
            f"{HERE}:other_embedder --rebuild (or use another data_dir)"), msg

    # the trainer's data path hands vnr's CLIP embedder: stopped before anything is embedded
    cfg = get_config("smoke,sa,released")
    cfg.data.update(data_dir=str(data), manual_dir=str(manual))
    from vnr.benchmarks.sc2st import data as trainer_data

    with pytest.raises(fingerprint.SourceChanged, match=r"embedder: '.*:numpy_embedder' then, "
                       r"'vnr\.benchmarks\.sc2st\.embedders:clip_embedder' now"):
        trainer_data._source(cfg.data, "train")  # noqa: SLF001 - the trainer's own path

    # the build CLI: one error line; --rebuild builds with the embedder given now
    argv = ["build", "sc2st", "--config", "released", "--manual_dir", str(manual),
            "--data_dir", str(data), "--embedder", f"{HERE}:other_embedder"]
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("error: sc2st/released:1.1.0 in ") and \
        "was built with other model functions" in err[0], err
    assert cli.main([*argv, "--rebuild"]) == 0
    assert _record(data)["functions"] == {"embedder": f"{HERE}:other_embedder"}
    sc2st_lib.prepare("released", data, manual, embedder=release_layout.other_embedder)


def test_functions_are_named_by_role(tmp_path):
    """Every function a config uses is recorded by role, by name (never an address)."""
    paper = sc2st_lib.Sc2St(config="lsmdc_paper", data_dir=str(tmp_path),
                            embedder=release_layout.numpy_embedder,
                            candidate_embedder=release_layout.other_embedder,
                            feature_embedder=functools.partial(release_layout.other_embedder,
                                                               seed=3))
    assert fingerprint.functions(paper) == {
        "embedder": f"{HERE}:numpy_embedder", "candidate_embedder": f"{HERE}:other_embedder",
        "feature_embedder": f"functools.partial({HERE}:other_embedder, seed=3)"}
    experts = sc2st_lib.Sc2St(config="synthetic_experts", data_dir=str(tmp_path),
                              embedder=release_layout.numpy_embedder,
                              experts={"scene": release_layout.numpy_embedder,
                                       "object": release_layout.MovieEmbedder,
                                       "unused": release_layout.other_embedder})
    assert fingerprint.functions(experts) == {
        "embedder": f"{HERE}:numpy_embedder", "expert:scene": f"{HERE}:numpy_embedder",
        "expert:object": f"{HERE}:MovieEmbedder"}  # only the experts the config stores
    reader = sc2st_lib.Sc2St(config="released", data_dir=str(tmp_path))
    assert fingerprint.functions(reader) == {}
    hint = fingerprint.rebuild_hint(experts, None)
    assert f"--embedder {HERE}:numpy_embedder --expert scene={HERE}:numpy_embedder " \
           f"--expert object={HERE}:MovieEmbedder --rebuild" in hint
