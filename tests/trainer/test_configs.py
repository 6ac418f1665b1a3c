"""Config files: every one (and every `path.py:ARGS` the docs show) loads, bad args are one
error line, and configs import their siblings however they are loaded."""

import re
import shutil
import subprocess
import sys

import ml_collections
import pytest

from tests import ROOT
from tests.reproduce.test_configs import SELECTION
from vnr import cli, evaluators
from vnr import config as config_lib
from vnr import task as task_lib

CONFIG_FILES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "configs").rglob("*.py")
                      if "def get_config" in p.read_text())
# `configs/<...>.py[:ARGS]` as written in the READMEs, launch scripts and config docstrings.
_SPEC = re.compile(r"configs/[\w/]+\.py(?::[^\s'\"`)\]]+)?")
_DOCS = [ROOT / "README.md", *ROOT.glob("*/**/README.md"), *ROOT.glob("docs/*.md"),
         *ROOT.glob("launch/*.sh"),
         *(ROOT / "configs").rglob("*.py")]


def _documented_specs() -> list[str]:
    specs = set()
    for doc in _DOCS:
        if ".venv" in doc.parts:
            continue
        for spec in _SPEC.findall(doc.read_text()):
            spec = spec.rstrip(".,;")
            if re.search(r"[\[<>|]|ARGS|ROW", spec):
                continue  # a placeholder such as path.py:ROW[,smoke|clips]
            path = ROOT / spec.partition(":")[0]
            if path.is_file() and "def get_config" not in path.read_text():
                continue  # a shared module named in prose (configs/common.py)
            specs.add(re.sub(r"\$\w+", "/ckpt", spec))  # $CKPT/x: any directory will do
    return sorted(specs)


DOCUMENTED = _documented_specs()
NEEDS_ARG = {"configs/moviepuzzle/baselines.py": "fusion"}  # no default row: name one


def test_every_config_file_is_found():
    assert len(CONFIG_FILES) >= 11, CONFIG_FILES
    assert "configs/moviepuzzle/hcmc.py:frame_shot,paper,movienet,clip=/ckpt" in {
        s.replace("/ckpt/clip-vit-base-patch32", "/ckpt") for s in DOCUMENTED}


@pytest.mark.parametrize("spec", sorted(set(CONFIG_FILES) | set(DOCUMENTED)))
def test_config_loads(spec):
    config = config_lib.load(spec if ":" in spec else f"{spec}:{NEEDS_ARG.get(spec, '')}")
    assert isinstance(config, ml_collections.ConfigDict)
    for key in ("task", "data", "model", "batch_size", "total_steps", "lr", "mesh", "eval"):
        assert key in config, (spec, key)


@pytest.mark.parametrize("spec", sorted(set(CONFIG_FILES) | set(DOCUMENTED) | set(SELECTION)))
def test_config_declares_its_evaluators(spec):
    """Every config (every documented `path.py:ARGS`, every paper row's) declares evaluators:
    each names a
    module with an evaluation (`evaluators.parse`, which also checks `select.metric` against
    the module's `metric_columns`), one of them gives the results (`final`), and each split it
    reads is one of the config's own data splits (so it follows `data.val_split` /
    `data.test_splits`, which the task's `check_splits` checks against the built dataset
    before anything compiles)."""
    config = config_lib.load(spec if ":" in spec else f"{spec}:{NEEDS_ARG.get(spec, '')}")
    assert config.get("evals"), f"{spec}: no config.evals"
    parsed = evaluators.parse(config, task_lib.load(config.task))
    assert any(e.final for e in parsed), f"{spec}: no final evaluator"
    d = config.data
    own = {d.val_split, *d.test_splits}
    for e in parsed:
        assert task_lib.evaluates(e.module) and callable(e.module.metric_columns), (spec, e.name)
        assert set(e.splits) <= own, (spec, e.name, e.splits, own)


@pytest.mark.parametrize("spec, names", [
    ("configs/moviepuzzle/main.py:bogus", "'bogus'"),
    ("configs/moviepuzzle/hcmc.py:smoke,lambda=x", "lambda='x'"),
    ("configs/moviepuzzle/hcmc.py:smoke,freeze=legs", "freeze='legs' is not one of image"),
    ("configs/sc2st/main.py:smoke,steps=1.5", "steps='1.5' is not an integer"),
    ("configs/moviepuzzle/baselines.py:smoke", "exactly one row"),
    ("configs/msymon/main.py:individual:de", "'de'"),
    ("configs/msymon/main.py:individual", "individual needs a value"),
    ("configs/movie101/mcn.py:v1,v2", "v1, v2"),
    ("configs/symon/order.py:text_video,video_only", "text_video, video_only"),
])
def test_bad_arg_is_one_line_naming_file_and_arg(spec, names):
    with pytest.raises(ValueError) as e:
        config_lib.load(spec)
    message = str(e.value)
    assert "\n" not in message and names in message
    assert spec.partition(":")[0] in message, message


def test_config_args_are_parsed_as_their_declared_types():
    """`parse_arg` gives each `key=value` its declared type (or its default when absent);
    a value of another type is one line naming the file, the arg and the type expected."""
    from configs import common

    declared = {"lr": float, "steps": int, "name": str, "mode": ("a", "b"),
                "depth": common.Value(int, 3)}
    args = common.parse_arg("smoke, lr=0.5,steps=12,name=x=y,mode=b", "configs/x.py",
                            ("smoke",), declared)
    assert "smoke" in args and args.values == {"lr": 0.5, "steps": 12, "name": "x=y",
                                               "mode": "b"}
    assert args.get("depth") == 3 and args.get("lr") == 0.5 and args.get("nope") is None
    for arg, want in [("lr=fast", "config arg lr='fast' is not a number for configs/x.py"),
                      ("lr=nan", "lr='nan' is not a number"),
                      ("steps=1e3", "steps='1e3' is not an integer"),
                      ("mode=c", "mode='c' is not one of a, b"),
                      ("name=", "config arg name needs a value (name=...) for configs/x.py"),
                      ("depth", "config arg depth needs a value (depth=...) for configs/x.py"),
                      ("steps=1,steps=2", "config arg steps= given twice"),
                      ("bogus=1", "unknown config arg 'bogus=1' for configs/x.py; choose from "
                                  "smoke, depth=<int>, lr=<float>, mode=<a|b>, name=<str>, "
                                  "steps=<int>")]:
        with pytest.raises(ValueError) as e:
            common.parse_arg(arg, "configs/x.py", ("smoke",), declared)
        assert want in str(e.value) and "\n" not in str(e.value), (arg, str(e.value))
    assert common.parse_arg("k=v", "configs/x.py", values=("k",)).values == {"k": "v"}


def test_tests_load_configs_through_config_file():
    """Tests load a config the way `--config` names it (`vnr.config.load`), never by
    executing its file themselves."""
    own = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "tests").rglob("*.py"))
           for n, line in enumerate(p.read_text().splitlines(), 1)
           if re.search(r"spec_from_file_location\(.*configs", line)]
    assert not own, own


def test_missing_file_or_get_config_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="configs/nope.py does not exist"):
        config_lib.load("configs/nope.py:smoke")
    (tmp_path / "empty.py").write_text("X = 1\n")
    with pytest.raises(ValueError, match="defines no get_config"):
        config_lib.load(f"{tmp_path}/empty.py")


def test_bad_config_arg_is_one_error_line_from_the_cli(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "vnr.train", "--config", "configs/moviepuzzle/main.py:bogus",
         "--workdir", str(tmp_path / "run")],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    lines = [x for x in (out.stdout + out.stderr).splitlines() if x.strip()]
    assert out.returncode != 0
    assert lines == ["error: unknown config arg 'bogus' for configs/moviepuzzle/main.py; "
                     "choose from clips, smoke, text, vision"], lines
    assert not (tmp_path / "run").exists()


def test_the_config_file_runs_once_and_overrides_apply(tmp_path):
    """`--config path.py:args` executes the file once; `--config.key=value` then overrides
    the loaded config, typed like the value it replaces."""
    counter = tmp_path / "runs.txt"
    spec = tmp_path / "counted.py"
    spec.write_text(
        "import ml_collections, pathlib\n"
        "def get_config(arg):\n"
        f"    p = pathlib.Path({str(counter)!r})\n"
        "    p.write_text(p.read_text() + 'x' if p.exists() else 'x')\n"
        "    return ml_collections.ConfigDict(dict(steps=1, rate=0.5, name='a', shape=(1, 2)))\n")
    args = cli.parse([f"--config={spec}", "--config.steps=7", "--config.rate=2",
                      "--config.shape=(4,8)"], "prog", None,
                     lambda fv: cli.config_flag(fv, lock=True))
    assert counter.read_text() == "x"
    assert (args.config.steps, args.config.rate, tuple(args.config.shape)) == (7, 2.0, (4, 8))
    assert isinstance(args.config.rate, float) and args.config.name == "a"


def test_siblings_import_through_the_config_flag_and_by_path(tmp_path):
    # The trainer's --config flag (vnr.cli) loads the file the way vnr.config.load does.
    fv = cli.parse(["--config=configs/moviepuzzle/baselines.py:random,smoke"], "prog", None,
                   cli.config_flag)
    assert fv.config.task == "moviepuzzle.hcmc" and fv.config.model.kind == "random"
    want = config_lib.load("configs/moviepuzzle/baselines.py:random,smoke")
    assert fv.config.to_dict() == want.to_dict()
    # A copy outside the repository loads by path and still imports the configs package.
    copy = tmp_path / "my_yms.py"
    shutil.copy(ROOT / "configs/msymon/yms.py", copy)
    assert config_lib.load(f"{copy}:smoke").to_dict() == \
        config_lib.load("configs/msymon/yms.py:smoke").to_dict()
    assert config_lib.load(str(ROOT / "configs/symon/order.py")).task == "symon.order"
