"""Validated configs (vnr/config_lib.py): every shared numeric key is range-checked before
anything is written or compiled, as one error line naming the key; a refused config writes
no config.json, so the corrected command runs in the same workdir."""

from __future__ import annotations

import pathlib

import ml_collections
import pytest

from configs.moviepuzzle.main import get_config
from tests import ROOT
from tests.helpers import override
from vnr import config as config_lib
from vnr import train

# key -> (a value the rule refuses, what the error says)
BAD = {
    "seed": (-1, "must be >= 0"),
    "batch_size": (0, "must be >= 1"),
    "eval_batch_size": (-8, "must be >= 1"),
    "total_steps": (-1, "must be >= 0 (0 trains nothing: the final evaluators score the "
                        "model as built, pretrained weights included)"),
    "warmup_steps": (-5, "must be >= 0"),
    "lr": (-1e-3, "must be > 0 (use total_steps=0 or config.frozen to train nothing)"),
    "weight_decay": (-0.1, "must be >= 0"),
    "b1": (1.0, "must be < 1"),
    "b2": (1.5, "must be < 1"),
    "eps": (0.0, "must be > 0"),
    "momentum": (-0.5, "must be >= 0"),
    "end_lr_factor": (-1.0, "must be >= 0"),
    "grad_clip": (-1.0, "must be >= 0 (0 clips nothing)"),
    "log_every": (0, "must be >= 1"),
    "eval_every": (0, "must be >= 1"),
    "ckpt_every": (0, "must be >= 1"),
    "keep_ckpts": (0, "must be >= 1"),
    "eval.beam_size": (0, "must be >= 1"),
    "data.num_workers": (-2, "must be >= -1 (0 reads in this process, -1 = the host's cores "
                             "minus 2)"),
    "data.image_size": (0, "must be >= 1"),
    "data.max_frames": (0, "must be >= 1"),
    "data.max_tokens": (0, "must be >= 1"),
    "data.vocab_size": (-1, "must be >= 0 (0 takes it from data.tokenizer)"),
    "model.dropout": (1.0, "must be < 1"),
    "model.width": (0, "must be >= 1"),
    "model.heads": (0, "must be >= 1"),
    "model.mlp": (-3, "must be >= 1"),
}


def test_every_rule_has_a_case():
    assert set(BAD) == set(config_lib.RULES)


@pytest.mark.parametrize("key", sorted(BAD))
def test_each_rule_refuses_its_bad_value(key):
    value, why = BAD[key]
    c = ml_collections.ConfigDict({"data": {}, "eval": {}, "model": {}})
    override(c, {key: value})
    with pytest.raises(ValueError) as e:
        config_lib.check(c)
    assert str(e.value) == f"config key {key}={value!r} {why}"


@pytest.mark.parametrize("value, why", [
    (8.0, "must be an integer"), (True, "must be an integer"), ("8", "must be an integer")])
def test_an_integer_key_takes_only_integers(value, why):
    with pytest.raises(ValueError, match=rf"^config key batch_size={value!r} {why}$"):
        config_lib.check({"batch_size": value})


@pytest.mark.parametrize("value, why", [
    (float("nan"), "must be finite"), (float("inf"), "must be finite"),
    ("1e-3", "must be a number"), (None, "must be a number")])
def test_a_number_key_takes_only_finite_numbers(value, why):
    with pytest.raises(ValueError, match=rf"^config key lr={value!r} {why}"):
        config_lib.check({"lr": value})


def test_keys_a_config_lacks_are_not_checked_and_ints_are_numbers():
    config_lib.check({})
    config_lib.check({"lr": 1, "total_steps": 0, "model": {"dropout": 0.0}})


def test_relations_are_checked_after_the_ranges():
    c = {"total_steps": 6, "profile": {"start_step": 5, "num_steps": 3}}
    with pytest.raises(ValueError, match=r"profile window steps 5..7 ends past total_steps=6"):
        config_lib.check(ml_collections.ConfigDict(c))
    config_lib.check(ml_collections.ConfigDict(dict(c, total_steps=7)))


def test_a_release_directory_must_be_a_directory(tmp_path):
    """`data.manual_dir`, when set, is checked once for every task: missing, or a file
    (a FIFO would block a build forever), is one line naming the key."""
    (tmp_path / "file").write_text("")
    config_lib.check({"data": {"manual_dir": ""}})
    config_lib.check({"data": {"manual_dir": str(tmp_path)}})
    with pytest.raises(config_lib.ConfigError, match=r"^data.manual_dir='/nope' does not exist$"):
        config_lib.check({"data": {"manual_dir": "/nope"}})
    with pytest.raises(config_lib.ConfigError, match=r"does not exist as a directory$"):
        config_lib.check({"data": {"manual_dir": str(tmp_path / "file")}})


def _shipped() -> list[str]:
    """Every shipped config that loads without arguments, plain and as `smoke`."""
    specs = []
    for path in sorted((ROOT / "configs").glob("*/*.py")):
        for arg in ("", ":smoke"):
            spec = f"{path.relative_to(ROOT)}{arg}"
            try:
                config_lib.load(str(ROOT / spec))
            except ValueError:  # needs an argument (a row, a language): not a default
                continue
            specs.append(spec)
    return specs


def test_every_shipped_config_passes(monkeypatch):
    monkeypatch.chdir(ROOT)
    specs = _shipped()
    assert len(specs) >= 15, specs
    for spec in specs + ["configs/moviepuzzle/baselines.py:random",
                         "configs/moviepuzzle/baselines.py:fusion,smoke"]:
        config_lib.check(config_lib.load(spec))


@pytest.mark.parametrize("arch, usable", [("bert", 40), ("xlm-roberta", 40)])
def test_text_longer_than_a_checkpoints_positions_is_refused(tmp_path, arch, usable):
    """40 positions each (XLM-R: 42 from pad_token_id + 1 = 2 on, as fairseq counts)."""
    from vnr.models.encoders.testing import write_tiny_checkpoint

    write_tiny_checkpoint(arch, tmp_path / arch)
    c = ml_collections.ConfigDict({"data": {"max_tokens": usable},
                                   "model": {"text_encoder": str(tmp_path / arch)}})
    config_lib.fits_positions(c, "data.max_tokens", "model.text_encoder")
    c.data.max_tokens = usable + 1
    with pytest.raises(ValueError, match=rf"^data.max_tokens={usable + 1} exceeds the {usable} "
                                         r"positions of model.text_encoder='.*'$"):
        config_lib.fits_positions(c, "data.max_tokens", "model.text_encoder")
    c.model.text_encoder = "scratch:bert-small"  # sized from the config: nothing to check
    config_lib.fits_positions(c, "data.max_tokens", "model.text_encoder")


def _smoke(data_dir: pathlib.Path, **overrides):
    c = get_config("smoke")
    c.data.data_dir, c.progress = str(data_dir), False
    return override(c, overrides)


@pytest.mark.parametrize("overrides, message", [
    ({"batch_size": 0}, r"^config key batch_size=0 must be >= 1$"),
    ({"total_steps": -1}, r"^config key total_steps=-1 must be >= 0"),
    ({"lr": -1.0}, r"^config key lr=-1.0 must be > 0"),
    ({"eval_every": 0}, r"^config key eval_every=0 must be >= 1$"),
])
def test_setup_refuses_before_writing_anything(tmp_path, overrides, message):
    with pytest.raises(train.ConfigError, match=message):
        train.setup(_smoke(tmp_path / "tfds", **overrides), workdir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.e2e
def test_the_corrected_command_runs_in_the_same_workdir(tmp_path):
    """The issue's case: a zero batch used to write config.json, then fail in a library and
    block the corrected rerun ("holds a run of another config")."""
    run = tmp_path / "run"
    with pytest.raises(train.ConfigError, match="batch_size=0"):
        train.run(_smoke(tmp_path / "tfds", batch_size=0), str(run))
    with pytest.raises(train.ConfigError, match="data.train_split='trian' is not a split"):
        train.run(_smoke(tmp_path / "tfds", **{"data.train_split": "trian"}), str(run))
    assert not (run / "config.json").exists()
    results = train.run(_smoke(tmp_path / "tfds", total_steps=2, ckpt_every=2, eval_every=2),
                        str(run))
    assert (run / "config.json").is_file() and results["test_in_domain"]["clips"] == 10


def test_step_decay_schedule_is_moees_per_epoch_decay():
    """`schedule="step_decay"`: lr x lr_decay after every decay_steps (staircase), no
    warmup; a bad setting is one line."""
    import ml_collections

    from vnr.optim import make_lr

    c = ml_collections.ConfigDict(dict(lr=1e-4, schedule="step_decay", lr_decay=0.95,
                                       decay_steps=128, warmup_steps=0, total_steps=1000))
    lr = make_lr(c)
    assert float(lr(0)) == pytest.approx(1e-4) and float(lr(127)) == pytest.approx(1e-4)
    assert float(lr(128)) == pytest.approx(0.95e-4)
    assert float(lr(5 * 128 + 3)) == pytest.approx(1e-4 * 0.95**5)
    c.decay_steps = 0
    with pytest.raises(ValueError, match="needs decay_steps >= 1"):
        make_lr(c)


def test_inverse_sqrt_schedule_is_fairseqs():
    """`schedule="inverse_sqrt"` (upstream RNL's fairseq schedule): linear warmup from
    warmup_init_lr, then lr x sqrt(warmup / step); a bad setting is one line."""
    import ml_collections

    from vnr.optim import make_lr

    c = ml_collections.ConfigDict(dict(lr=8e-4, schedule="inverse_sqrt", warmup_init_lr=1e-6,
                                       warmup_steps=300, total_steps=10_000))
    lr = make_lr(c)
    assert float(lr(0)) == pytest.approx(1e-6)
    assert float(lr(150)) == pytest.approx(1e-6 + (8e-4 - 1e-6) / 2)
    assert float(lr(300)) == pytest.approx(8e-4)
    assert float(lr(1200)) == pytest.approx(8e-4 * 0.5)
    c.warmup_init_lr = 1e-3
    with pytest.raises(ValueError, match="0 <= warmup_init_lr <= lr"):
        make_lr(c)
