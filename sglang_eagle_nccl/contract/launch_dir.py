"""The launch directory: where it is, how it is created, what its files are called.

Layout: ``<audit root>/<launch id>/proc-<host>-<pid>.jsonl``. The root defaults to
``<tmp>/sglang-eagle-nccl-<uid>`` (created 0700 and refused if another user owns it or it is
writable by others: the directory is shared by every launch of this user, so it must not be
a place where someone else can plant files or symlinks). Each launch gets its own 0700
sub-directory; each process writes only its own 0600 file (:mod:`sglang_eagle_nccl.inproc.boot.audit_writer`).

Only launches open one (:func:`open_launch`); every writer and reader takes names and rules from
here. Imported at interpreter start in enabled processes: ``os``, ``stat`` and ``time`` only.
"""

import os
import stat
import time

from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.jsonlight import dumps as _dumps
from sglang_eagle_nccl.contract.log import log

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


def secure_dir(path: "Any", *, create_parents: bool) -> "Any":
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

    base = secure_dir(Path(root) if root else default_root(), create_parents=True)
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
