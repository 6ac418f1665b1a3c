"""Runs a registered extractor (`vnr.extractors`) over a directory of videos and writes the
layout a builder reads, e.g. SYMON's `features/<id>.npy` (float32 [seconds, D]).

    python -m vnr.extract --model clip --checkpoint DIR --videos VIDEOS --out RELEASE \
        [--ids url_list.txt] [--batch 64] [--decode_workers 2]

* **Sharding.** Each process takes a disjoint share of the videos (video i of the sorted list
  to process i mod P); in a process, units are batched to `--batch` (rounded up to the local
  device count), padded, and split over its devices along a `data` mesh axis: one compile.
  Decoding runs `--decode_workers` videos ahead in threads (FFmpeg decodes without the GIL).
* **Resumable.** A video's output is written to a temporary file and renamed, then its record
  `.extract/<id>.json`; a rerun skips every video whose record matches this extraction and
  recomputes nothing else. `.extract/manifest.json` holds the extraction's identity (the
  checkpoint files' sha256, the sampling, the preprocessing): a directory holding outputs of
  another identity is refused in one line.
* **Progress** in `<out>/extract.log` (and on stdout): videos done, videos/s, ETA.
* **Outputs.** `features/<id>.npy` float32 [units, D] (a unit a second), or for a whole-video
  extractor (`transnetv2`) `cuts/<id>.txt`: cut times in seconds, one a line.
* **Bad input.** A video that cannot be read (missing, empty, truncated before any frame, no
  video stream) is a counted skip naming the file; a listed id (`--ids`) with no file is
  counted `missing_video`; times past a video's end are clamped and counted. An unwritable
  `--out`, an unknown model or a checkpoint that does not load: one `error:` line, exit 2.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import os
import pathlib
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from absl import flags

from tfds_builders import alive
from vnr import cli, extractors
from vnr.data import video

PROG = "python -m vnr.extract"
VERSION = 1  # of the records and the manifest


class ExtractError(ValueError):
    """Bad input for an extraction (one line)."""


def _flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("model", None, f"Extractor: {', '.join(extractors.REGISTRY)}.",
                        flag_values=fv)
    flags.DEFINE_string("checkpoint", None, "The model's checkpoint (file or directory).",
                        flag_values=fv)
    flags.DEFINE_string("videos", None, "Directory of videos (<id>.<ext>, yt-dlp's layout).",
                        flag_values=fv)
    flags.DEFINE_string("out", None, "Release directory to write into (features/ or cuts/).",
                        flag_values=fv)
    flags.DEFINE_string("ids", "", "Optional list of the release's video ids or YouTube URLs "
                        "(one a line): only these, the absent ones counted.", flag_values=fv)
    flags.DEFINE_integer("batch", 64, "Units per batch (rounded up to the device count).",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("decode_workers", 2, "Videos decoded ahead, in threads.",
                         lower_bound=1, flag_values=fv)
    for name in ("model", "checkpoint", "videos", "out"):
        flags.mark_flag_as_required(name, flag_values=fv)


_ID = re.compile(r"(?:[?&]v=|youtu\.be/|/shorts/)([A-Za-z0-9_-]+)")


def read_ids(path: str | os.PathLike) -> list[str]:
    """Video ids of a list file: bare ids or YouTube URLs, one a line (blank lines and `#`
    comments ignored)."""
    p = pathlib.Path(path)
    if not p.is_file():
        raise ExtractError(f"--ids {p}: no such file")
    out = []
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = _ID.search(line)
            out.append(m.group(1) if m else line.split()[0])
    return list(dict.fromkeys(out))


_HOST = socket.gethostname()


def _write_atomic(path: pathlib.Path, write: Callable[[pathlib.Path], None]) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{_HOST}-{os.getpid()}")
    write(tmp)
    os.replace(tmp, path)


def _remove_stale(folder: pathlib.Path) -> int:
    """Deletes the temporary files of killed writers on this host (pid no longer alive)."""
    n = 0
    for p in folder.glob(f".*.tmp-{_HOST}-*"):
        pid = p.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not alive(int(pid)):
            p.unlink(missing_ok=True)
            n += 1
    return n


def _write_json(path: pathlib.Path, value: Any) -> None:
    _write_atomic(path, lambda t: t.write_text(json.dumps(value, indent=1, sort_keys=True)))


def _check_out(out: pathlib.Path, manifest: dict) -> None:
    """Creates `out`'s folders, or refuses a directory holding another extraction."""
    try:
        (out / ".extract").mkdir(parents=True, exist_ok=True)
        probe = out / ".extract" / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ExtractError(f"--out {out}: cannot write there ({e.strerror or e})") from None
    path = out / ".extract" / "manifest.json"
    if path.is_file():
        try:
            have = json.loads(path.read_text())
        except (OSError, ValueError):
            have = None
        if have != manifest:
            what = (f"checkpoint sha256 {have.get('checkpoint_sha256', '?')[:12]}, "
                    f"model {have.get('extractor', {}).get('extractor', '?')}"
                    if isinstance(have, dict) else "an unreadable manifest")
            raise ExtractError(
                f"--out {out} holds outputs of another extraction ({what}; this one: checkpoint "
                f"sha256 {manifest['checkpoint_sha256'][:12]}, model "
                f"{manifest['extractor']['extractor']}): use another --out, or delete "
                f"{out / '.extract'} and {out / manifest['extractor']['layout']} to redo them")
    else:
        _write_json(path, manifest)


def _done(out: pathlib.Path, vid: str, key: str, ext: extractors.Extractor) -> bool:
    rec = out / ".extract" / f"{vid}.json"
    if not rec.is_file() or not (out / ext.layout / f"{vid}{ext.suffix}").is_file():
        return False
    try:
        return json.loads(rec.read_text()).get("key") == key
    except (OSError, ValueError):
        return False


def _batches(frames: np.ndarray, size: int) -> Iterator[tuple[np.ndarray, int]]:
    """Fixed-size batches of units (the last padded with zeros) and their real counts."""
    for lo in range(0, len(frames), size):
        part = frames[lo:lo + size]
        real = len(part)
        if real < size:
            pad = np.zeros((size - real, *part.shape[1:]), part.dtype)
            part = np.concatenate([part, pad])
        yield part, real


def run(model: str, checkpoint: str, videos: str, out: str, *, ids: str = "",
        batch: int = 64, decode_workers: int = 2, devices: list | None = None,
        say: Callable[[str], None] = print) -> dict[str, Any]:
    """Extracts every video of this process's share; returns the summary counts."""
    import jax

    ext = extractors.get(model)
    out_dir = pathlib.Path(out)
    vdir = pathlib.Path(videos)
    if not vdir.is_dir():
        raise ExtractError(f"--videos {vdir}: not a directory")
    files = extractors.video_files(vdir)
    wanted = read_ids(ids) if ids else sorted(files)
    missing = [v for v in wanted if v not in files]
    ckpt_files = ext.checkpoint_files(checkpoint)
    if not ckpt_files:
        raise ExtractError(f"--checkpoint {checkpoint}: no checkpoint files there")
    devices = devices or jax.local_devices()
    mesh = jax.sharding.Mesh(np.asarray(devices).reshape(-1, 1), ("data", "model"))
    embed, resize, model_desc = ext.load(checkpoint, mesh)
    manifest = {"version": VERSION, "checkpoint_sha256": extractors.checkpoint_digest(ckpt_files),
                "extractor": ext.describe(resize, model_desc)}
    key = json.dumps(manifest, sort_keys=True)
    _check_out(out_dir, manifest)
    (out_dir / ext.layout).mkdir(exist_ok=True)
    for folder in (out_dir / ext.layout, out_dir / ".extract"):
        _remove_stale(folder)
    pc, pi = jax.process_count(), jax.process_index()
    mine = [v for i, v in enumerate(v for v in wanted if v in files) if i % pc == pi]
    todo = [v for v in mine if not _done(out_dir, v, key, ext)]
    counts: collections.Counter = collections.Counter(
        videos=len(mine), skipped_complete=len(mine) - len(todo), missing_video=len(missing))
    log = open(out_dir / "extract.log", "a", encoding="utf-8")

    def note(line: str) -> None:
        log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} [{pi}/{pc}] {line}\n")
        log.flush()
        say(line)

    note(f"extract {model}: {len(mine)} videos for this process ({len(todo)} to do, "
         f"{counts['skipped_complete']} complete), {len(missing)} listed but absent; "
         f"{len(devices)} device(s)")
    for v in missing[:5]:
        note(f"  missing_video: {v} (listed, no file in {vdir})")
    size = -(-batch // len(devices)) * len(devices)
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))

    def decode(vid: str) -> tuple[str, Any]:
        try:
            info = video.probe(files[vid])
            if ext.whole_video:
                return vid, (info, None, video.decode_all(files[vid], resize=resize))
            plan = ext.plan(info.duration)
            flat = plan.reshape(-1)
            keep = flat < info.duration if ext.zero_past_end else np.ones(len(flat), bool)
            dec = video.decode_at(files[vid], flat[keep], resize=resize, pick=ext.pick)
            if not keep.all():  # black frames past the end, as the extractor defines
                frames = np.zeros((len(flat), *dec.frames.shape[1:]), np.uint8)
                frames[keep] = dec.frames
                dec.frames = frames
            return vid, (info, plan, dec)
        except video.VideoError as e:
            return vid, e

    start = time.time()
    with concurrent.futures.ThreadPoolExecutor(decode_workers) as pool:
        pending: collections.deque = collections.deque()
        queue = iter(todo)
        for vid in queue:
            pending.append(pool.submit(decode, vid))
            if len(pending) >= decode_workers:
                break
        for n in range(1, len(todo) + 1):
            vid, got = pending.popleft().result()
            nxt = next(queue, None)
            if nxt is not None:
                pending.append(pool.submit(decode, nxt))
            if isinstance(got, video.VideoError):
                counts["unreadable_video"] += 1
                note(f"  skipped {vid}: {got}")
                continue
            info, plan, dec = got
            if ext.whole_video:  # one device: the model reads the video's frame windows
                feats = np.asarray(embed(dec.frames, dec.times), np.float64).reshape(-1, 1)
                text = "".join(f"{c:.3f}\n" for c in feats[:, 0])
                _write_atomic(out_dir / ext.layout / f"{vid}.txt",
                              lambda t, x=text: t.write_text(x))
            else:
                feats = _rows(embed, dec.frames.reshape(*plan.shape, *dec.frames.shape[1:]),
                              size, sharding)
                if not np.isfinite(feats).all():
                    raise ExtractError(f"{files[vid]}: the model gave non-finite outputs")
                _write_atomic(out_dir / ext.layout / f"{vid}.npy",
                              lambda t, f=feats: _save(t, f))
            _write_json(out_dir / ".extract" / f"{vid}.json",
                        {"key": key, "units": len(feats), "duration": info.duration,
                         "clamped": dec.clamped, "truncated": dec.truncated})
            counts["extracted"] += 1
            counts["clamped_times"] += dec.clamped
            counts["truncated_video"] += int(dec.truncated)
            rate = n / max(time.time() - start, 1e-9)
            note(f"  {n}/{len(todo)} {vid}: {len(feats)} x {feats.shape[1]} {ext.layout}"
                 f"{' (truncated)' if dec.truncated else ''}; {rate:.2f} videos/s, "
                 f"ETA {(len(todo) - n) / rate:.0f} s")
    note("done: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v))
    log.close()
    return dict(counts)


def _rows(embed: Callable, frames: np.ndarray, size: int, sharding: Any) -> np.ndarray:
    """The model's rows for every unit, in fixed-size batches split over the devices."""
    import jax

    rows = [np.asarray(embed(jax.device_put(part, sharding)), np.float32)[:real]
            for part, real in _batches(frames, size)]
    return np.concatenate(rows)


def _save(path: pathlib.Path, array: np.ndarray) -> None:
    with open(path, "wb") as f:
        np.save(f, array)


def main(argv: list[str] | None = None) -> int:
    """`python -m vnr.extract`: bad input is one `error:` line, exit status 2."""
    args = cli.parse(argv, PROG, __doc__, _flags)
    try:
        run(args.model, args.checkpoint, args.videos, args.out, ids=args.ids,
            batch=args.batch, decode_workers=args.decode_workers)
    except (ExtractError, ValueError, FileNotFoundError) as e:
        cli.fail(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
