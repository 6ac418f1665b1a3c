"""A lock file that names its holder and survives `kill -9`: one process at a time.

`Holder(path)` creates `path` atomically (`O_EXCL`, also on NFS) holding the host, pid and a
random token, refreshes its modification time every `HEARTBEAT_S` from a daemon thread, and
removes it on release. A holder is gone when its pid no longer exists on this host, or when
its file has not been refreshed for `STALE_S` (another host): the next process takes the
file over and says so in one line. Used for a training workdir (`vnr.workdir.Owner`) and for
a dataset while it is built (`wait_to_build`). It lives here, the lowest package, so the
builders and the trainer share one implementation.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

HEARTBEAT_S = 30.0
STALE_S = 300.0  # a holder on another host that has not beaten for this long is gone


class LockHeld(RuntimeError):
    """The lock is held by a live process (`held`: its host, pid)."""

    def __init__(self, path: pathlib.Path, held: dict):
        super().__init__(f"{path} is held by pid {held.get('pid')} on {held.get('host')}")
        self.held = held


class Holder:
    """One process's hold on `path` (module docstring); a context manager that releases."""

    HEARTBEAT_S, STALE_S = HEARTBEAT_S, STALE_S

    def __init__(self, path: pathlib.Path, say: Callable[[str], None] = print) -> None:
        self.path, self.say = pathlib.Path(path), say
        self.me = {"host": socket.gethostname(), "pid": os.getpid(),
                   "token": uuid.uuid4().hex}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def holder(self) -> dict | None:
        """The live holder's record, else None (no file, ours, or stale)."""
        try:
            raw, age = self.path.read_text(), time.time() - self.path.stat().st_mtime
            held = json.loads(raw)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):  # half-written by a process killed mid-write
            return None
        if not isinstance(held, dict) or held.get("token") == self.me["token"]:
            return None
        if age > STALE_S or (held.get("host") == self.me["host"]
                             and not alive(held.get("pid"))):
            return None
        return held

    def acquire(self) -> None:
        """Creates the file atomically; a stale one is taken over (one line); `LockHeld` when a
        live process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(self.me)
        tmp = self.path.with_name(f"{self.path.name}.{self.me['token']}")
        try:
            if not self._create(tmp, data):
                if held := self.holder():
                    raise LockHeld(self.path, held) from None
                old = self._read()
                tmp.write_text(data)
                tmp.replace(self.path)
                if self._read().get("token") != self.me["token"]:  # another took it first
                    if held := self.holder():
                        raise LockHeld(self.path, held) from None
                self.say(f"took over {self.path}: its holder (pid {old.get('pid')} on "
                         f"{old.get('host')}) is gone")
        finally:
            tmp.unlink(missing_ok=True)
        self._thread = threading.Thread(target=self._beat, name="vnr-holder", daemon=True)
        self._thread.start()

    def _create(self, tmp: pathlib.Path, data: str) -> bool:
        """Creates the file with its content in one step (a hard link of a written temporary
        file: never seen empty, so a second process cannot mistake a holder mid-write for a
        dead one); False when it exists. Where hard links are refused, `O_EXCL`."""
        tmp.write_text(data)
        try:
            os.link(tmp, self.path)
            return True
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links
            pass
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(data)
        return True

    def release(self) -> None:
        """Stops the heartbeat and removes the file if it is still ours."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._read().get("token") == self.me["token"]:
            self.path.unlink(missing_ok=True)

    def _read(self) -> dict:
        try:
            held = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return held if isinstance(held, dict) else {}

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError:
                pass  # removed by hand: nothing to keep alive

    def __enter__(self) -> Holder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def wait_to_build(path: pathlib.Path, what: str, say: Callable[[str], None],
                  poll_s: float = 2.0) -> Holder:
    """Holds `path` for building `what`, first waiting (one line naming the holder) while
    another live process builds it: two commands started together on a fresh `data_dir`
    build it once, the second then finds it built. A builder killed meanwhile is taken over
    (at once on this host, after `STALE_S` from another)."""
    h = Holder(path, say)
    told = False
    while True:
        try:
            h.acquire()
            return h
        except LockHeld as e:
            if not told:
                say(f"waiting: {what} is being built by pid {e.held.get('pid')} on "
                    f"{e.held.get('host')} ({path})")
                told = True
        time.sleep(poll_s)


def alive(pid: Any) -> bool:
    """Whether process `pid` of this host exists (and is not a zombie)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:  # Linux: a killed process its parent has not reaped yet is a zombie, i.e. gone
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]
