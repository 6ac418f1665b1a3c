"""`data.num_workers=-1` (auto): the trainer turns it into a count before config.json is
written (`vnr.startup.resolve_workers`), this host's cores minus two on a fresh run and the
run's own count on resume, since grain restores an iterator only with its worker count."""

from __future__ import annotations

import json

import ml_collections

from vnr import startup
from vnr.data import pipeline


def _config(workers: int) -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict({"data": {"num_workers": workers}})


def test_auto_workers_are_the_hosts_cores_minus_two_on_a_fresh_run(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "host_cores", lambda: 16)
    said: list[str] = []
    c = _config(-1)
    startup.resolve_workers(c, tmp_path, said.append)
    assert c.data.num_workers == 14
    assert said == ["data.num_workers=-1: 14 input worker process(es) (16 cores minus 2 for "
                    "the training process)"]
    monkeypatch.setattr(pipeline, "host_cores", lambda: 2)
    c = _config(-1)
    startup.resolve_workers(c, tmp_path, said.append)
    assert c.data.num_workers == 1  # at least one worker


def test_a_resumed_auto_run_keeps_the_count_it_started_with(tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text(json.dumps({"data": {"num_workers": 6}}))
    monkeypatch.setattr(pipeline, "host_cores", lambda: 64)  # another host now
    said: list[str] = []
    c = _config(-1)
    startup.resolve_workers(c, tmp_path, said.append)
    assert c.data.num_workers == 6 and "the count this run started with" in said[0]


def test_an_explicit_count_is_left_as_it_is(tmp_path):
    said: list[str] = []
    for n in (0, 3):
        c = _config(n)
        startup.resolve_workers(c, tmp_path, said.append)
        assert c.data.num_workers == n
    startup.resolve_workers(ml_collections.ConfigDict({"model": {}}), tmp_path, said.append)
    assert said == []
