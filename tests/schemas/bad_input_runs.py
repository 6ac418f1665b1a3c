"""Issue #33's bad-input classes that need a run rather than one broken release file: a stale
dataset (the same data_dir given another manual_dir), a corrupted checkpoint (bytes replaced;
a file cut short in a step without its checksum manifest, the storage error that used to be a
~430-line warning), config values that cannot mean a run (negative steps or learning rate,
zero batch), a misspelled split name and an unwritable data_dir. One `RunCase` each: the
command, run with `--repo`'s Python in subprocesses, and what it gave; `refused` says whether
that is the issue's outcome (one line naming the file, key or argument, or a one-line warning
and the documented fallback) rather than a traceback or a silent success.

The trainer cases use the MoviePuzzle main job at smoke sizes (2 steps, a checkpoint each
step). `bad_input.py` prints them after the release-file cases; `test_bad_input.py` runs them.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Callable

MICRO = dict(movies=3, heldout=1, train=4, val=2, test_in_domain=2, test_out_domain=2)
TRAIN = ("-m", "vnr.train", "--config", "configs/moviepuzzle/main.py:smoke", "--workdir")
FLAGS = ("--config.total_steps=2", "--config.ckpt_every=1", "--config.eval_every=2",
         "--config.keep_ckpts=3", "--config.progress=False",
         "--config.data.test_splits=('test_in_domain',)")
SHOWN_TRAIN = "python -m vnr.train --config configs/moviepuzzle/main.py:smoke --workdir W " \
              "--config.data.data_dir=D (2 steps, a checkpoint each)"


@dataclasses.dataclass
class Outcome:
    """A table cell and whether it is the issue's outcome."""

    text: str
    refused: bool


class Context:
    """Where the cases run (`tmp`), with whose code (`repo`), and the one finished training
    run the checkpoint cases copy (made on first use)."""

    def __init__(self, tmp: pathlib.Path, repo: pathlib.Path):
        self.tmp, self.repo = tmp, repo
        self.data_dir = tmp / "tfds"

    def python(self, *args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, PYTHONPATH=str(self.repo))
        return subprocess.run([sys.executable, *args], cwd=self.repo, env=env,
                              capture_output=True, text=True)

    def train(self, workdir: pathlib.Path, *extra: str) -> subprocess.CompletedProcess:
        return self.python(*TRAIN, str(workdir), f"--config.data.data_dir={self.data_dir}",
                           *FLAGS, *extra)

    def release(self, name: str, seed: int) -> pathlib.Path:
        """A generated MoviePuzzle release in the public per-clip layout."""
        root = self.tmp / name
        if not root.is_dir():
            code = ("from tfds_builders.moviepuzzle import synthetic; "
                    f"synthetic.write_corpus({str(root)!r}, seed={seed}, sizes={MICRO!r})")
            got = self.python("-c", code)
            if got.returncode:
                raise RuntimeError(got.stderr)
        return root

    @functools.cached_property
    def finished(self) -> pathlib.Path:
        """A finished smoke run with checkpoints at steps 1 and 2."""
        run = self.tmp / "finished"
        got = self.train(run)
        if got.returncode or not (run / "checkpoints" / "2").is_dir():
            raise RuntimeError(f"the smoke run failed: {lines(got.stderr)[-1:]}")
        return run


def lines(err: str) -> list[str]:
    """The lines that say something (not a build's or a run's progress lines)."""
    progress = ("building ", "built ", "  ", "model: ", "step ", "eval ", "resumed from",
                "|", "WARNING:absl")
    return [x for x in err.splitlines() if x.strip() and not x.startswith(progress)]


def one_line(got: subprocess.CompletedProcess, *must: str) -> Outcome:
    """An error that must be one line naming `must` (no traceback, a non-zero status)."""
    said = lines(got.stderr)
    if "Traceback" in got.stderr:
        return Outcome(f"traceback: `{said[-1][:140]}`", False)
    if not got.returncode:
        return Outcome(f"rc 0 (accepted): `{(said or ['(nothing)'])[-1][:140]}`", False)
    ok = len(said) == 1 and said[0].startswith("error: ") and all(m in said[0] for m in must)
    return Outcome(f"rc {got.returncode}, {len(said)} line(s): `{said[-1][:500]}`", ok)


def stale_dataset(ctx: Context) -> Outcome:
    a, b = ctx.release("release_a", 3), ctx.release("release_b", 4)
    data = ctx.tmp / "stale"
    base = ("-m", "tfds_builders", "build", "moviepuzzle", "--config", "clips", "--data_dir",
            str(data), "--manual_dir")
    first = ctx.python(*base, str(a))
    if first.returncode:
        return Outcome(f"first build failed: `{lines(first.stderr)[-1:]}`", False)
    got = ctx.python(*base, str(b))
    if not got.returncode:
        return Outcome(f"rc 0: `{got.stdout.strip().splitlines()[0][:120]}` (a's examples)",
                       False)
    return one_line(got, str(a), str(b), "--rebuild")


def _damaged(ctx: Context, name: str, damage: Callable[[pathlib.Path], None],
             keep_manifest: bool = True) -> Outcome:
    run = ctx.tmp / name
    shutil.copytree(ctx.finished, run)
    step = run / "checkpoints" / "2"
    if not keep_manifest:  # a step written before checksum manifests existed
        for manifest in step.rglob("vnr_checksums.json"):
            manifest.unlink()
    biggest = max((p for p in (step / "state").rglob("*") if p.is_file()),
                  key=lambda p: p.stat().st_size)
    damage(biggest)
    got = ctx.train(run)
    if "Traceback" in got.stderr:
        return Outcome(f"traceback: `{lines(got.stderr)[-1][:140]}`", False)
    warned = [x for x in got.stderr.splitlines() if "warning" in x.lower()]
    resumed = "resumed from step 1" in got.stderr
    aside = list((run / "checkpoints").glob("corrupt-2-*/restore_error.*"))
    details = f"; details: {len(aside[0].read_text().splitlines())} lines in " \
              f"{aside[0].relative_to(run)}" if aside else ""
    ok = (got.returncode == 0 and resumed and len(warned) == 1 and len(warned[0]) < 600
          and "checkpoint step 2" in warned[0])
    text = (f"rc {got.returncode}, {len(warned)} warning line(s) ({len(warned[0])} chars): "
            f"`{warned[0][:170]}...`; {'resumed from step 1' if resumed else 'not resumed'}"
            f"{details}") if warned else f"rc {got.returncode}, no warning (restored as is)"
    return Outcome(text.replace(str(run), "W"), ok)


def bytes_replaced(ctx: Context) -> Outcome:
    from tests.trainer.test_faults import _replace_bytes  # the checkpoint tests' damage

    return _damaged(ctx, "bytes_replaced", _replace_bytes)


def storage_error(ctx: Context) -> Outcome:
    from tests.trainer.test_faults import _truncate

    return _damaged(ctx, "storage_error", _truncate, keep_manifest=False)


def config_value(flag: str, key: str) -> Callable[[Context], Outcome]:
    def run(ctx: Context) -> Outcome:
        work = ctx.tmp / f"config_{key.replace('.', '_')}"
        got = ctx.train(work, flag)
        out = one_line(got, key)
        if work.exists():  # nothing may be written for a config that cannot run
            out = Outcome(out.text + f"; wrote {sorted(p.name for p in work.iterdir())}", False)
        return out
    return run


def unwritable_build(ctx: Context) -> Outcome:
    blocked = ctx.tmp / "a_file"
    blocked.write_text("")
    got = ctx.python("-m", "tfds_builders", "build", "moviepuzzle", "--config", "clips",
                     "--manual_dir", str(ctx.release("release_a", 3)), "--data_dir",
                     str(blocked / "data"))
    return one_line(got, str(blocked / "data"))


def unwritable_train(ctx: Context) -> Outcome:
    blocked = ctx.tmp / "a_file"
    blocked.write_text("")
    got = ctx.train(ctx.tmp / "unwritable", f"--config.data.data_dir={blocked / 'data'}")
    return one_line(got, str(blocked / "data"))


@dataclasses.dataclass(frozen=True)
class RunCase:
    """One class: `run(ctx)` gives its outcome; `trains`: it starts the trainer (an e2e
    test)."""

    cls: str
    what: str
    command: str
    run: Callable[[Context], Outcome]
    trains: bool = True


RUN_CASES = [
    RunCase("stale dataset reused", "generated MoviePuzzle releases a, b; build a, then b into "
            "the same data_dir", "python -m tfds_builders build moviepuzzle --config clips "
            "--manual_dir b --data_dir D (D built from a)", stale_dataset, trains=False),
    RunCase("corrupted checkpoint (bytes replaced)", "16 bytes XOR-ed in the middle of step "
            "2's biggest state file; the run started again", SHOWN_TRAIN, bytes_replaced),
    RunCase("~430-line corruption warning", "step 2 without its checksum manifests, its "
            "biggest state file cut to half (a storage-layer read error)", SHOWN_TRAIN,
            storage_error),
    RunCase("config value: negative steps", "--config.total_steps=-1", SHOWN_TRAIN,
            config_value("--config.total_steps=-1", "total_steps")),
    RunCase("config value: negative learning rate", "--config.lr=-1.0", SHOWN_TRAIN,
            config_value("--config.lr=-1.0", "lr")),
    RunCase("config value: zero batch", "--config.batch_size=0", SHOWN_TRAIN,
            config_value("--config.batch_size=0", "batch_size")),
    RunCase("misspelled split name", "--config.data.train_split=trian", SHOWN_TRAIN,
            config_value("--config.data.train_split=trian", "data.train_split")),
    RunCase("unwritable data_dir (build)", "--data_dir F/data, F a regular file (as root a "
            "chmod does not stop writes)", "python -m tfds_builders build moviepuzzle --config "
            "clips --manual_dir M --data_dir F/data", unwritable_build, trains=False),
    RunCase("unwritable data_dir (trainer)", "--config.data.data_dir=F/data, F a regular file",
            SHOWN_TRAIN, unwritable_train),
]
