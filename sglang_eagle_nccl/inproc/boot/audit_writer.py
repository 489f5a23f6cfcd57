"""Audit records written from inside each process: one JSON-lines file per process.

Each process writes only its own 0600 file in its launch directory, created new by
:func:`~sglang_eagle_nccl.contract.launch_dir.open_record_file` (the launch directory's one rule
set), one ``os.write`` per record, so records of different processes or launches never interleave, and a
kill (SIGTERM, SIGKILL) lands between two lines, never inside one (:func:`page_aligned`: a record of up
to a page never crosses a page boundary): a line is written whole or not at all (a short write is
truncated away). A write refused for want of space (``ENOSPC``, ``EDQUOT``) leaves
an empty marker file beside the record file (:func:`~sglang_eagle_nccl.contract.launch_dir.mark_disk_full`:
a full disk still takes a name), which the audit reports as "disk full on <host>".
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
    mark_disk_full,
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
# ENOSPC, EDQUOT (Linux's numbers; errno is not imported at interpreter start): a full disk or quota
# leaves a marker beside the file (contract/launch_dir.py: mark_disk_full) for the audit to report.
_NO_SPACE = (28, 122)


# Linux copies a write(2) into a regular file a page (or folio, a multiple of it) at a time and gives up
# between two of them when the process is being killed (SIGKILL, or a signal whose default action kills):
# a line across a page boundary can be cut there. So a line that would cross one, and fits in a page,
# starts on the next page instead, after a blank line of spaces (the reader skips blank lines): the one
# write either gets the line out whole or stops before it. A line longer than a page can still be cut
# by a kill (the audit lists it as a cut line, with file and process).
PAGE = 4096


def page_aligned(line: bytes, size: int) -> bytes:
    """``line`` as written at byte ``size`` of its file: padded to the next page when it would cross a page
    boundary and fits in one page."""
    room = PAGE - size % PAGE
    if room < len(line) <= PAGE:
        return b" " * (room - 1) + b"\n" + line
    return line


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
        self._size = 0  # bytes in this process's file: it alone appends to it (a new file, O_EXCL)

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
                self._size = 0
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
                self._size = 0
            line = page_aligned(line, self._size)
            written = os.write(self._fd, line)
            self._size += written
            if written != len(line):
                import errno  # only here: every SGLang child imports this module at start

                self._unwrite(written)
                raise OSError(errno.ENOSPC, f"short write ({written} of {len(line)} bytes: disk full?)")
            return True
        except (OSError, AuditError) as exc:
            if isinstance(exc, OSError) and exc.errno in _NO_SPACE and self.run_dir is not None:
                mark_disk_full(self.run_dir, process_file_name(), self.required)
            return self._fail(exc)

    def _unwrite(self, written: int) -> None:
        """Take back the first ``written`` bytes of a line the disk had no room for: a line is whole or absent
        (this process alone appends to its file, under the lock)."""
        try:
            end = os.lseek(self._fd, 0, os.SEEK_END)  # type: ignore[arg-type]
            os.ftruncate(self._fd, max(end - written, 0))  # type: ignore[arg-type]
            self._size -= written
        except OSError:
            pass  # the audit lists what is left as a cut line

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
