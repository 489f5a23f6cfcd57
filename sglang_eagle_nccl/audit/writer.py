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

import _thread
import os
import stat
import time

from sglang_eagle_nccl._json_light import dumps as _dumps
from sglang_eagle_nccl.errors import PluginStop
from sglang_eagle_nccl.log import log

TYPE_CHECKING = False  # typing/pathlib are not imported at interpreter start
if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path
    from typing import Any

FILE_PREFIX = "proc-"
FILE_SUFFIX = ".jsonl"
LAUNCH_META = "launch.json"


class AuditError(PluginStop, RuntimeError):
    """The audit could not be written and the policy requires it."""


def default_root() -> "Path":
    import tempfile
    from pathlib import Path

    return Path(tempfile.gettempdir()) / f"sglang-eagle-nccl-{os.getuid()}"


def hostname() -> str:
    # os.uname() avoids importing socket at interpreter start (same value as gethostname()).
    return os.uname().nodename


def _secure_dir(path: "Any", *, create_parents: bool) -> "Any":
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


def new_launch_dir(root: "str | Path | None" = None) -> "Path":
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


# Records written before a process knows its launch directory (an SGLang launcher opens it only
# at _set_envs_and_config) wait in memory; a process that never joins a launch drops them.
MAX_PENDING = 256


class AuditWriter:
    """Appends JSON records to this process's audit file.

    Never raises, with one deliberate exception: under the policy's ``audit_required`` a record
    that cannot be written raises :class:`AuditError` (the user asked for fail-closed auditing).
    Without a launch directory, records are kept in memory until :meth:`attach` names one.
    Runs at interpreter start in enabled processes, so it sticks to ``os``, ``_thread`` and the
    start-up JSON writer.
    """

    def __init__(self, run_dir: "str | Path | None", *, required: bool = False, role: str = "process"):
        self.run_dir = str(run_dir) if run_dir else None
        self.required = required
        self.role = role
        self._fd: int | None = None
        self._pid: int | None = None
        self._lock = _thread.allocate_lock()
        self._failed: str | None = None
        self._host = hostname()
        self._pending: list[bytes] = []

    @property
    def path(self) -> "Path | None":
        from pathlib import Path

        return Path(self.file_path) if self.file_path else None

    @property
    def file_path(self) -> str | None:
        return os.path.join(self.run_dir, process_file_name(os.getpid(), self._host)) if self.run_dir else None

    @property
    def failure(self) -> str | None:
        return self._failed

    def attach(self, run_dir: "str | Path") -> bool:
        """Join a launch directory: later records go there, and so do the ones kept so far."""
        with self._lock:
            self.run_dir = str(run_dir)
            pending, self._pending = self._pending, []
            self._close_locked()
            ok = True
            for line in pending:
                ok = self._write_locked(line) and ok
            return ok

    def _open(self) -> int:
        assert self.run_dir is not None
        _secure_dir(self.run_dir, create_parents=False)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        return os.open(self.file_path, flags, 0o600)  # type: ignore[arg-type]

    def write(self, event: str, **fields: "Any") -> bool:
        """Append one record. Returns False (after one stderr warning) when it cannot be written."""
        try:
            record = {"ts": time.time(), "pid": os.getpid(), "role": self.role, "event": event, **fields}
            line = (_dumps(record) + "\n").encode("utf-8", "backslashreplace")
        except Exception as exc:  # noqa: BLE001 - a record that cannot be encoded must not break SGLang
            line = (_dumps({"ts": time.time(), "pid": os.getpid(), "role": self.role, "event": "audit_error",
                            "lost_event": str(event), "error": repr(exc)}) + "\n").encode("utf-8", "backslashreplace")
        with self._lock:
            if self.run_dir is None:
                if len(self._pending) < MAX_PENDING:
                    self._pending.append(line)
                return False
            return self._write_locked(line)

    def _write_locked(self, line: bytes) -> bool:
        try:
            if self._fd is None or self._pid != os.getpid():
                self._fd = self._open()
                self._pid = os.getpid()
            written = os.write(self._fd, line)
            if written != len(line):
                import errno  # only here: every SGLang child imports this module at start

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
            log(f"WARNING: {message}; continuing without audit")
        return False

    def _close_locked(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def close(self) -> None:
        with self._lock:
            self._close_locked()


def write_launch_meta(run_dir: "str | Path", meta: "dict[str, Any]") -> None:
    """Written once by the process that created the launch directory."""
    path = os.path.join(run_dir, LAUNCH_META)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(_dumps(meta))


def open_launch(root: str | None, meta: "dict[str, Any]", *, required: bool) -> str | None:
    """Open a new launch: ``<root>/<launch id>/`` with its ``launch.json``. The one error policy.

    Only launches call this: ``launch``, SGLang's launcher (at ``_set_envs_and_config``),
    ``preflight`` and ``env --audit-dir``. When the directory cannot be made: under
    ``audit_required`` raise :class:`AuditError` (the caller stops); otherwise say so once, loudly,
    and return None (the launch runs without audit).
    """
    try:
        run_dir = str(new_launch_dir(os.path.abspath(root) if root else None))
        write_launch_meta(run_dir, meta)
        return run_dir
    except (OSError, AuditError) as exc:
        message = f"cannot create the audit directory under {root or default_root()}: {exc}"
        if required:
            raise AuditError(f"{message} (audit_required is set); pass a writable audit directory") from exc
        log(f"WARNING: {message}; continuing without audit (set audit_required to make this fatal)", once="no-audit-dir")
        return None
