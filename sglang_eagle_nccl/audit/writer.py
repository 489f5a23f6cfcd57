"""Audit records written from inside each process: one JSON-lines file per process.

Layout: ``<audit root>/<launch id>/proc-<host>-<pid>.jsonl``. The root defaults to
``<tmp>/sglang-eagle-nccl-<uid>`` (created 0700 and refused if another user owns it or it is
writable by others: the directory is shared by every launch of this user, so it must not be
a place where someone else can plant files or symlinks). Each launch gets its own 0700
sub-directory; each process writes only its own 0600 file, one ``os.write`` per record, so
records of different processes or launches never interleave.

Records hold the NCCL / TORCH_NCCL part of the environment only, never anything else.
An audit that cannot be written is loud (one warning on stderr) but not fatal, unless the
profile's policy says ``audit_required``.
"""

from __future__ import annotations

import _thread
import errno
import os
import stat
import sys
import time

from sglang_eagle_nccl import names
from sglang_eagle_nccl._json_light import dumps as _dumps
from sglang_eagle_nccl.errors import PluginStop

TYPE_CHECKING = False  # typing/pathlib are not imported at interpreter start
if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path
    from typing import Any

FILE_PREFIX = "proc-"
FILE_SUFFIX = ".jsonl"
LAUNCH_META = "launch.json"


class AuditError(PluginStop, RuntimeError):
    """The audit could not be written and the policy requires it."""


def default_root() -> Path:
    import tempfile
    from pathlib import Path

    return Path(tempfile.gettempdir()) / f"sglang-eagle-nccl-{os.getuid()}"


def hostname() -> str:
    # os.uname() avoids importing socket at interpreter start (same value as gethostname()).
    return os.uname().nodename


def _secure_dir(path: Any, *, create_parents: bool) -> Any:
    """Create ``path`` with mode 0700 (or accept it if it is ours and private)."""
    try:
        if create_parents:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise AuditError(f"audit directory {path} is not a plain directory (symlink or file); refusing to use it")
    if st.st_uid != os.getuid():
        raise AuditError(f"audit directory {path} belongs to uid {st.st_uid}, not to you; refusing to use it")
    if st.st_mode & 0o022:
        raise AuditError(
            f"audit directory {path} is writable by group/others (mode {oct(st.st_mode & 0o777)}); "
            f"fix with chmod 700 {path}"
        )
    return path


def new_launch_dir(root: str | Path | None = None) -> Path:
    """Create a fresh per-launch directory under ``root`` (default: :func:`default_root`)."""
    from pathlib import Path

    base = _secure_dir(Path(root) if root else default_root(), create_parents=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for _ in range(100):
        candidate = base / f"{stamp}-{os.getpid()}-{os.urandom(2).hex()}"
        try:
            os.mkdir(candidate, 0o700)
            return candidate
        except FileExistsError:
            continue
    raise AuditError(f"could not create a launch directory under {base}")


def process_file_name(pid: int | None = None, host: str | None = None) -> str:
    host = (host or hostname()).replace("/", "-")
    return f"{FILE_PREFIX}{host}-{pid or os.getpid()}{FILE_SUFFIX}"


class AuditWriter:
    """Appends JSON records to this process's audit file; never raises unless ``required``.

    Runs at interpreter start in enabled processes, so it sticks to ``os``, ``_thread`` and the
    start-up JSON writer.
    """

    def __init__(self, run_dir: str | Path | None, *, required: bool = False, role: str = "process"):
        self.run_dir = str(run_dir) if run_dir else None
        self.required = required
        self.role = role
        self._fd: int | None = None
        self._pid: int | None = None
        self._lock = _thread.allocate_lock()
        self._failed: str | None = None
        self._host = hostname()

    @property
    def path(self) -> Path | None:
        from pathlib import Path

        return Path(self.file_path) if self.file_path else None

    @property
    def file_path(self) -> str | None:
        return os.path.join(self.run_dir, process_file_name(os.getpid(), self._host)) if self.run_dir else None

    @property
    def failure(self) -> str | None:
        return self._failed

    def _open(self) -> int:
        assert self.run_dir is not None
        _secure_dir(self.run_dir, create_parents=False)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        return os.open(self.file_path, flags, 0o600)  # type: ignore[arg-type]

    def write(self, event: str, **fields: Any) -> bool:
        """Append one record. Returns False (after one stderr warning) when it cannot be written."""
        if self.run_dir is None:
            return False
        record = {"ts": time.time(), "pid": os.getpid(), "role": self.role, "event": event, **fields}
        line = (_dumps(record) + "\n").encode("utf-8")
        with self._lock:
            try:
                if self._fd is None or self._pid != os.getpid():
                    self._fd = self._open()
                    self._pid = os.getpid()
                written = os.write(self._fd, line)
                if written != len(line):
                    raise OSError(errno.ENOSPC, "short write (disk full?)")
                return True
            except (OSError, AuditError) as exc:
                return self._fail(exc)

    def _fail(self, exc: Exception) -> bool:
        message = f"cannot write audit record to {self.file_path}: {exc}"
        if self.required:
            raise AuditError(message + " (audit_required is set)") from exc
        if self._failed is None:
            self._failed = message
            print(f"[sglang-eagle-nccl] WARNING: {message}; continuing without audit", file=sys.stderr, flush=True)
        return False

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.close(self._fd)
                finally:
                    self._fd = None


def write_launch_meta(run_dir: str | Path, meta: dict[str, Any]) -> None:
    """Written once by the process that created the launch directory."""
    path = os.path.join(run_dir, LAUNCH_META)
    import json

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(meta, fh, sort_keys=True, indent=1, default=str)


def run_dir_from_environ() -> str | None:
    return os.environ.get(names.ENV_RUN_DIR) or None
