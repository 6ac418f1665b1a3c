"""Every runnable SYMON row (Tables 2-4, 6, 8, 9) at smoke scale: Table 4's gaps equal the
paper's, Table 6 averages its runs per column, Table 9 reads its source runs. The rows' runs
are also where the UniVL and VideoCLIP presets' end-to-end checks look (one training each):
the pretrained towers load, every test item is evaluated, YMS videos are aligned."""

import json
import pathlib
from collections.abc import Callable

import numpy as np
import pytest

from tests import helpers
from tests.reproduce import smoke
from vnr import workdir as workdir_lib
from vnr.reproduce import registry

pytestmark = pytest.mark.e2e


runs = smoke.module_runs("symon")


def test_every_symon_row_runs_at_smoke_scale(runs):
    tables, root = runs.tables, runs.root
    for ln in tables["4"]:  # the semantic gap from the printed human counts (Eq. 3)
        assert round(ln.cells[-1].ours, 1) == registry.number(ln.cells[-1].paper)
    acc = [smoke.results(root, f"t6-univl-symon-{i}-a_to_b")["setB"]["accuracy"]
           for i in ("text_video", "video_only")]
    row = next(ln for ln in tables["6"] if ln.row.id == "t6-univl-symon")
    assert [c.ours for c in row.cells] == pytest.approx(acc)
    src = json.loads((root / "t9-new-sent-univl-symon-0" / "config.json").read_text())
    assert src["transfer"]["source_run"] == str(root / "symon-yms-source-0")


def _uncapped(config) -> None:
    """The row's smoke overrides lift the smoke cap on test items (rows.toml: the counts
    below are every item of the split, not the first few)."""
    assert config.evals.test.max_examples == 0


def _towers_loaded(config, tower: str, match: Callable[[dict], dict]) -> None:
    """`train.setup` on a run's config: the pretrained hook puts every model parameter in
    from the checkpoint file (`match(shapes)`: the port's arrays), nothing left random."""
    from vnr import train

    state = train.setup(config).state
    got, every = helpers.params_under(state, tower), helpers.params_under(state, "")
    assert got and len(got) == len(every), sorted(set(every) - {f"{tower}.{k}" for k in got})[:5]
    want = match({k: a.shape for k, a in got.items()})
    assert set(want) == set(got)
    for k, w in want.items():
        np.testing.assert_array_equal(got[k], w, err_msg=k)


def _every_test_clip_ranked(root: pathlib.Path, run: str):
    """A Table 8 retrieval run: every test clip ranked, finite metrics; its config."""
    from vnr.benchmarks.symon import data

    c = workdir_lib.load_config(root / run)
    _uncapped(c)
    m = smoke.results(root, run)["test"]
    assert m["items"] == len(data.ItemSource(c.data, "test", "retrieval")) > 0
    assert np.isfinite(m["v2t_r@10"]) and np.isfinite(m["t2v_medr"])
    return c


def test_univl_ordering_trains_and_evaluates(runs):
    """Table 6's UniVL-SYMON (Fig. 10): the three towers load, train and order every pair."""
    from vnr.benchmarks.symon import data

    root = runs.root
    for arg in ("text_video", "video_only"):
        run = f"t6-univl-symon-{arg}-a_to_b"
        c = workdir_lib.load_config(root / run)
        assert (c.model.encoder, c.model.use_text, c.data.test_splits) == (
            "univl", arg == "text_video", ("setB",))
        _uncapped(c)
        m = smoke.results(root, run)["setB"]
        assert m["pairs"] == len(data.ItemSource(c.data, "setB", "order")) > 0
        assert 0 <= m["accuracy"] <= 100


def test_univl_preset_trains_and_evaluates_every_test_clip(runs):
    """Table 8's UniVL-SYMON: the hook loads the towers into the fresh state, the run ranks
    every test clip."""
    from vnr.models.encoders import torch_checkpoint, univl

    root = runs.root
    c = _every_test_clip_ranked(root, "t8-t2v-univl-symon")
    assert c.model.encoder == "univl" and c.total_steps > 0  # fine-tuned, not zero-shot
    tensors = torch_checkpoint.read_torch_checkpoint(c.model.univl_checkpoint)
    _towers_loaded(c, "univl", lambda shapes: univl.match(tensors, shapes, "x"))


def _aligned(root: pathlib.Path, run: str, split: str = "test") -> dict:
    """A Table 9 run's YMS alignment: in range, a finite tuned threshold."""
    m = smoke.results(root, run)[split]
    assert m["videos"] > 0 and 0 <= m["clip_accuracy"] <= 100, (run, m)
    assert np.isfinite(m["threshold"])
    return m


def test_yms_alignment_with_univl_itself_and_a_univl_symon_run(runs):
    """Table 9's UniVL row (the checkpoint's towers, nothing trained) and its UniVL-SYMON
    row (a univl retrieval run, copied whole) on the generated YMS release: both of its test
    videos, below the smoke cap."""
    root = runs.root
    for run, source in (("t9-orig-sent-univl", ""),
                        ("t9-orig-sent-univl-symon-0", str(root / "symon-yms-source-0"))):
        c = workdir_lib.load_config(root / run)
        assert (c.model.encoder, c.transfer.source_run) == ("univl", source)
        cap = c.evals.test.max_examples
        assert _aligned(root, run)["videos"] == 2 and (cap == 0 or cap > 2)


def test_videoclip_rows_zero_shot_on_generated_releases(runs):
    """Table 8's row: the hook loads every parameter, nothing trains, every test clip is
    ranked; Table 9's rows (original and new split): VideoCLIP aligns the YMS test videos."""
    from vnr.models.encoders import videoclip

    root = runs.root
    c = _every_test_clip_ranked(root, "t8-t2v-videoclip")
    assert c.model.encoder == "videoclip" and c.total_steps == 0
    tensors = videoclip.read_checkpoint(c.model.videoclip_checkpoint)
    _towers_loaded(c, "videoclip", lambda shapes: videoclip.match(tensors, shapes, "x"))
    for run, split in (("t9-orig-sub-videoclip", "test"), ("t9-new-sub-videoclip", "new_test")):
        y = workdir_lib.load_config(root / run)
        assert (y.model.encoder, y.data.dim, y.data.memory) == ("videoclip", 512, False)
        _aligned(root, run, split)
