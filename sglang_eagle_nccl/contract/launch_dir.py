"""The launch directory: where it is, how it is created and opened, what its files are called, and who wrote them.

Layout: ``<audit root>/<launch id>/proc-<identity>.jsonl`` (audit records) and
``nccl-reads-<identity>.jsonl`` (what NCCL itself read, written by the native env plugin). The root
defaults to ``<tmp>/sglang-eagle-nccl-<uid>`` (created 0700 and refused if another user owns it or it
is writable by others: the directory is shared by every launch of this user, so it must not be a place
where someone else can plant files or symlinks). Each launch gets its own 0700 sub-directory.

Every file in it is created by :func:`open_record_file`, the one set of rules both writers obey (the
Python audit writer, and the C reads log, which gets the opened descriptor and never opens a path
itself): the launch directory is opened without following a symlink and must be ours and private;
the file is created new (``O_EXCL``: a name someone planted -- a FIFO, a symlink, a hard link to
another file, a regular file with lines in it -- is refused, never appended to), without blocking.

A process is its :func:`identity`: host name, boot id, PID namespace, pid and start time. Host names
repeat (containers, cloned VMs), pids repeat across containers and over time; together they do not.
Records carry it and ``audit`` matches records, reads logs and hosts by all of it.

Only launches open one (:func:`open_launch`: a launcher, SGLang's launcher, ``preflight``, ``env
--audit-dir``), and it is the only thing that writes ``launch.json``. A process writes records only
under an audit root of its user and only into a launch directory a launch opened: a hand-off that no
validating process of this user signed may name only such a directory (:func:`check_handed_launch_dir`:
ours, private, under a root of ours, with its ``launch.json``); anything else is refused through the
door table before anything is written. Nothing here creates a chain of parents: an audit root is
created only where its parent exists, and a process of a signed launch on a node without the
launcher's filesystem (:func:`join_launch_dir`) creates at most that root and the launch directory in it.
Every writer and reader takes names and rules from here. Imported at interpreter start in enabled processes: ``os``, ``stat`` and ``time`` only.
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
READS_PREFIX = "nccl-reads-"
FILE_SUFFIX = ".jsonl"
LAUNCH_META = "launch.json"
# Beside a record file or reads log whose write failed for want of space (ENOSPC, EDQUOT): an empty file,
# which a full disk still holds (a name, no data block), so the audit can say "disk full on <host>".
# ``-required``: the process ran under audit_required (it stopped there: fail closed).
DISK_FULL_SUFFIX = ".disk-full"
DISK_FULL_REQUIRED_SUFFIX = ".disk-full-required"
UNKNOWN = "unknown"


class AuditError(PluginStop, RuntimeError):
    """The audit could not be written and the policy requires it."""


def default_root() -> "Path":
    import tempfile
    from pathlib import Path

    return Path(tempfile.gettempdir()) / f"sglang-eagle-nccl-{os.getuid()}"


def hostname() -> str:
    # os.uname() avoids importing socket at interpreter start (same value as gethostname()).
    return os.uname().nodename


def check_dir_stat(path: "Any", st: "os.stat_result") -> None:
    """A launch directory or audit root must be a real directory of ours that nobody else can write."""
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise AuditError(f"audit directory {path} is not a plain directory (symlink or file); refusing to use it")
    if st.st_uid != os.getuid():
        raise AuditError(f"audit directory {path} belongs to uid {st.st_uid}, not to you; refusing to use it")
    if st.st_mode & 0o022:
        raise AuditError(
            f"audit directory {path} is writable by group/others (mode {oct(st.st_mode & 0o777)}); "
            f"fix with chmod 700 {path}"
        )


def secure_dir(path: "Any", *, create_parents: bool = False) -> "Any":
    """Create ``path`` with mode 0700 (or accept it if it is ours and private). Its parent must exist:
    for the audit, a chain of missing parents is never created (a typo in a path must not grow a tree of
    folders). ``create_parents``: only ``audit --collect``'s own output folder (offline/ray_collect.py)."""
    try:
        if create_parents:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        raise AuditError(
            f"audit directory {path}: its parent {os.path.dirname(os.path.abspath(path))} does not exist "
            "(folders are created one level at most); create it first"
        ) from None
    check_dir_stat(path, os.lstat(path))
    return path


def join_launch_dir(run_dir: str) -> str:
    """A process of a signed launch started on another node (Ray, Kubernetes): make its launch directory here.

    The hand-off names the launch directory the launcher opened; on a node that does not share that
    filesystem it does not exist yet. It is created under the same root with the same rules (the
    root, then the launch directory, each ours and private), never through a symlink, and never a
    chain: the root's parent must exist.
    """
    if not os.path.isabs(run_dir) or os.path.normpath(run_dir) != run_dir:
        raise AuditError(f"launch directory {run_dir!r} is not a normalised absolute path")
    secure_dir(os.path.dirname(run_dir))
    secure_dir(run_dir)
    return run_dir


def check_handed_launch_dir(run_dir: str) -> None:
    """An unsigned hand-off's launch directory: one a launch of this user opened, or AuditError saying why not.

    Nothing is created: the directory and its ``launch.json`` exist already (a launcher, ``preflight`` or
    ``env --audit-dir`` made them), the directory and its audit root are this user's and private, and no
    part of it is a symlink.
    """
    why = None
    if not os.path.isabs(run_dir) or os.path.normpath(run_dir) != run_dir:
        why = "it is not a normalised absolute path"
    else:
        try:
            check_dir_stat(os.path.dirname(run_dir), os.lstat(os.path.dirname(run_dir)))
            check_dir_stat(run_dir, os.lstat(run_dir))
            meta = os.lstat(os.path.join(run_dir, LAUNCH_META))
            if not stat.S_ISREG(meta.st_mode) or meta.st_uid != os.getuid():
                why = f"its {LAUNCH_META} is not a file of yours"
        except FileNotFoundError as exc:
            why = f"{exc.filename} does not exist"
        except AuditError as exc:
            why = str(exc)
        except OSError as exc:
            why = f"it cannot be read ({exc.strerror})"
    if why is not None:
        raise AuditError(
            f"the hand-off in SGLANG_EAGLE_NCCL_PROFILE is not signed by this user's sglang-eagle-nccl and names "
            f"launch directory {run_dir!r}, which is not one a launch opened: {why}. Fix: print a fresh environment "
            "with `sglang-eagle-nccl env --audit-dir DIR`, or unset SGLANG_EAGLE_NCCL_PROFILE"
        )


# PID_MAX_LIMIT (include/linux/threads.h) on 64-bit Linux is 2**22 = 4194304: seven digits.
_PID_DIGITS = 7


def launch_name() -> str:
    """A name for a launch a launcher has decided on (:mod:`sglang_eagle_nccl.decision`), not yet made:
    ``<date>-<time>-<pid, 7 digits>-<4 hex>``, always as long as the longest :func:`new_launch_dir`
    makes, so the hand-off decided with it has the size the real one will have."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid():0{_PID_DIGITS}d}-{os.urandom(2).hex()}"


def new_launch_dir(root: "str | Path | None" = None, *, name: str | None = None) -> "Path":
    """Create a fresh per-launch directory under ``root`` (default: :func:`default_root`).

    ``name``: exactly this one (a launcher decided it, :func:`launch_name`); it must not exist yet.
    """
    from pathlib import Path

    base = secure_dir(Path(root) if root else default_root())
    if name is not None:
        if not name or "/" in name or name in (".", ".."):
            raise AuditError(f"not a launch directory name: {name!r}")
        try:
            os.mkdir(base / name, 0o700)
        except FileExistsError:
            raise AuditError(f"the launch directory {base / name} exists already (another launch chose it)") from None
        return base / name
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for _ in range(100):
        candidate = base / f"{stamp}-{os.getpid()}-{os.urandom(2).hex()}"
        try:
            os.mkdir(candidate, 0o700)
            return candidate
        except FileExistsError:
            continue
    raise AuditError(f"could not create a launch directory under {base}")


def _read_small(path: str) -> str | None:
    # /proc files: O_NONBLOCK costs nothing and keeps a bind-mounted FIFO from blocking start-up.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return os.read(fd, 4096).decode("ascii", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


_machine: "dict[str, str] | None" = None
_started: "tuple[int, str] | None" = None


def _host_part() -> "dict[str, str]":
    # Host name, boot id and PID namespace never change in a process's life (a new namespace is for
    # children), so they are read once: one uname, one read and one readlink.
    global _machine
    if _machine is None:
        boot = _read_small("/proc/sys/kernel/random/boot_id")
        boot_id = boot.strip().replace("-", "") if boot else ""
        try:
            link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
            pidns = link[link.index("[") + 1:link.index("]")]
        except (OSError, ValueError):
            pidns = ""
        _machine = {
            "host": hostname(),
            "boot_id": boot_id if boot_id.isalnum() else UNKNOWN,
            "pidns": pidns if pidns.isdigit() else UNKNOWN,
        }
    return _machine


def _start_time(pid: int) -> str:
    # Field 22 of /proc/<pid>/stat (clock ticks after boot): with the pid, it tells a process from a
    # later one that got the same pid. The command name (field 2) may hold spaces and parentheses,
    # so fields are counted after its closing parenthesis.
    global _started
    if _started is not None and _started[0] == pid:
        return _started[1]
    text = _read_small(f"/proc/{pid}/stat")
    fields = text[text.rfind(")") + 2:].split() if text and ")" in text else []
    value = fields[19] if len(fields) > 19 and fields[19].isdigit() else UNKNOWN
    _started = (pid, value)
    return value


def identity(pid: int | None = None) -> "dict[str, Any]":
    """This process's identity: ``host``, ``boot_id``, ``pidns``, ``pid``, ``start`` (see the module doc)."""
    pid = os.getpid() if pid is None else pid
    return {**_host_part(), "pid": pid, "start": _start_time(pid)}


def identity_key(ident: "dict[str, Any]") -> "tuple[str, str, str, int, str]":
    """What two records must share to come from one process (every match in ``audit`` uses it)."""
    return (str(ident.get("host")), str(ident.get("boot_id")), str(ident.get("pidns")), ident.get("pid"),  # type: ignore[return-value]
            str(ident.get("start")))


def _name_part(text: str) -> str:
    # File names carry the identity for people; the records carry it for audit. A host name is
    # whatever the system says, so anything but [A-Za-z0-9._] becomes '_' in the name.
    return "".join(c if c.isascii() and (c.isalnum() or c in "._") else "_" for c in text)[:64] or "_"


def file_stem(ident: "dict[str, Any] | None" = None) -> str:
    """``<host>-<boot id>-<pid namespace>-<start>-<pid>``: unique per process across hosts and containers."""
    ident = identity() if ident is None else ident
    return "-".join(_name_part(str(ident[k])) for k in ("host", "boot_id", "pidns", "start", "pid"))


def process_file_name(ident: "dict[str, Any] | None" = None) -> str:
    return f"{FILE_PREFIX}{file_stem(ident)}{FILE_SUFFIX}"


def reads_file_name(ident: "dict[str, Any] | None" = None) -> str:
    return f"{READS_PREFIX}{file_stem(ident)}{FILE_SUFFIX}"


def open_record_file(run_dir: str, name: str) -> int:
    """Create ``name`` in the launch directory ``run_dir`` and return a write descriptor (the one rule set).

    The directory is opened with ``O_NOFOLLOW`` (a launch directory replaced by a symlink is
    refused) and checked on the opened descriptor: a directory of ours that group and others cannot
    write. The file is created relative to that descriptor with ``O_EXCL | O_NOFOLLOW | O_NONBLOCK``:
    whatever is already at the name (planted FIFO, symlink, hard link, a file with lines) is refused,
    nothing blocks, and the new file is 0600 with one link. Raises OSError or AuditError saying why.
    """
    dir_fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        check_dir_stat(run_dir, os.fstat(dir_fd))
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            raise AuditError(
                f"{os.path.join(run_dir, name)} already exists: records are only ever written to a file this process "
                "created (something else put it there); refusing to use it"
            ) from None
    finally:
        os.close(dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.getuid():
        os.close(fd)
        raise AuditError(f"{os.path.join(run_dir, name)} is not a new private file; refusing to use it")
    return fd


def mark_disk_full(run_dir: str, name: str, required: bool) -> bool:
    """Leave the empty disk-full marker of ``name`` (see :data:`DISK_FULL_SUFFIX`); True when it is there.

    Created like a record file (relative to the directory opened without following a link, ``O_EXCL``,
    never blocking), once: an existing marker is kept. Never raises: the disk is full already."""
    marker = name + (DISK_FULL_REQUIRED_SUFFIX if required else DISK_FULL_SUFFIX)
    try:
        dir_fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        os.close(os.open(marker, flags, 0o600, dir_fd=dir_fd))
        return True
    except FileExistsError:
        return True
    except OSError:
        return False
    finally:
        os.close(dir_fd)


def write_launch_meta(run_dir: "str | Path", meta: "dict[str, Any]") -> None:
    """Written once by the process that created the launch directory."""
    path = os.path.join(run_dir, LAUNCH_META)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(_dumps(meta))


def open_launch(root: str | None, meta: "dict[str, Any]", *, required: bool, name: str | None = None) -> str | None:
    """Open a new launch: ``<root>/<launch id>/`` with its ``launch.json``. The one error policy.

    Only launches call this: ``launch``, SGLang's launcher (at ``_set_envs_and_config``),
    ``preflight`` and ``env --audit-dir`` (``name``: the one their decision chose). When the
    directory cannot be made: under ``audit_required`` raise :class:`AuditError` (the caller
    stops); otherwise say so once, loudly, and return None (the launch runs without audit).
    """
    try:
        run_dir = str(new_launch_dir(os.path.abspath(root) if root else None, name=name))
        write_launch_meta(run_dir, meta)
        return run_dir
    except (OSError, AuditError) as exc:
        message = f"cannot create the audit directory under {root or default_root()}: {exc}"
        if required:
            raise AuditError(f"{message} (audit_required is set); pass a writable audit directory") from exc
        log(f"WARNING: {message}; continuing without audit (set audit_required to make this fatal)", once="no-audit-dir")
        return None
