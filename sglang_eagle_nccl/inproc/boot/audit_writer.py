"""Audit records written from inside each process: one JSON-lines file per process.

Each process writes only its own 0600 file in its launch directory, created new by
:func:`~sglang_eagle_nccl.contract.launch_dir.open_record_file` (the launch directory's one rule
set), one ``os.write`` per record, so records of different processes or launches never interleave.
Every record carries the process's identity (host, boot id, PID namespace, pid, start time) and the
fields :data:`~sglang_eagle_nccl.contract.events.COMMON` names; its event and fields are those of
:data:`~sglang_eagle_nccl.contract.events.EVENTS` (a test checks every write site).

Records hold the NCCL / TORCH_NCCL part of the environment only, never anything else.
An audit that cannot be written is loud (one warning on stderr) but not fatal, unless the
profile's policy says ``audit_required``.
"""

import _thread
import os
import time

from sglang_eagle_nccl.contract.jsonlight import dumps as _dumps
from sglang_eagle_nccl.contract.launch_dir import (
    AuditError,
    identity,
    join_launch_dir,
    open_record_file,
    process_file_name,
)
from sglang_eagle_nccl.contract.log import log

TYPE_CHECKING = False  # typing/pathlib are not imported at interpreter start
if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path
    from typing import Any


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
        self._pending: list[bytes] = []

    @property
    def path(self) -> "Path | None":
        from pathlib import Path

        return Path(self.file_path) if self.file_path else None

    @property
    def file_path(self) -> str | None:
        return os.path.join(self.run_dir, process_file_name()) if self.run_dir else None

    @property
    def failure(self) -> str | None:
        return self._failed

    def attach(self, run_dir: "str | Path") -> bool:
        """Join a launch directory: later records go there, and so do the ones kept so far."""
        with self._lock:
            if self.run_dir != str(run_dir):
                self._close_locked()  # a file is created once per process and launch (O_EXCL)
            self.run_dir = str(run_dir)
            pending, self._pending = self._pending, []
            ok = True
            for line in pending:
                ok = self._write_locked(line) and ok
            return ok

    def prepare(self) -> None:
        """Create this process's file now, when its launch is known: under ``audit_required`` a file that
        cannot be created refuses activation before anything is written (otherwise: one warning)."""
        with self._lock:
            if self.run_dir is None or (self._fd is not None and self._pid == os.getpid()):
                return
            try:
                self._fd = self._open()
                self._pid = os.getpid()
            except (OSError, AuditError) as exc:
                self._fail(exc)

    def _open(self) -> int:
        assert self.run_dir is not None
        name = process_file_name()
        try:
            return open_record_file(self.run_dir, name)
        except FileNotFoundError:
            # A process of this launch on another node (Ray, Kubernetes) without the launcher's
            # filesystem: the launch directory is made here, under the same rules.
            join_launch_dir(self.run_dir)
            return open_record_file(self.run_dir, name)

    def write(self, event: str, **fields: "Any") -> bool:
        """Append one record. Returns False (after one stderr warning) when it cannot be written."""
        try:
            record = {"event": event, "ts": time.time(), "role": self.role, **identity(), **fields}
            line = (_dumps(record) + "\n").encode("utf-8", "backslashreplace")
        except Exception as exc:  # noqa: BLE001 - a record that cannot be encoded must not break SGLang
            line = (_dumps({"event": "audit_error", "ts": time.time(), "role": self.role, **identity(),
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
