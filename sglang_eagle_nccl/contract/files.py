"""Reading a file that someone else may have prepared: never block, never read a device, bounded.

Profile files, audit records and NCCL debug files are read from paths a user (or whoever can
write the directory) chose. ``open()`` on a FIFO blocks until a writer appears, a character
device such as ``/dev/zero`` never ends, and a symlink can point anywhere. Every such read goes
through :func:`read_regular_file`: ``O_NONBLOCK`` so opening a FIFO returns at once,
``O_NOFOLLOW`` where a symlink must not be followed, ``fstat`` on the opened descriptor (not on
the name, which can change in between) to accept regular files only, and a size cap.
"""

from __future__ import annotations

import os
import stat


class UnreadableFile(Exception):
    """A file that is not read: ``reason`` says why in words (not a regular file, too large ...)."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def kind_of(mode: int) -> str:
    """What a file is, in words, from its ``st_mode``."""
    for test, word in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return word
    return "not a regular file"


def read_regular_file(path: str, max_bytes: int, *, follow_symlinks: bool) -> bytes:
    """The contents of ``path`` if it is a regular file of at most ``max_bytes``; else UnreadableFile."""
    path = os.fspath(path)
    if not follow_symlinks:
        # Checked on the name first so that a FIFO or device is never even opened; the fstat
        # below covers a name swapped between the two calls.
        try:
            st = os.lstat(path)
        except OSError as exc:
            raise UnreadableFile(path, exc.strerror or str(exc)) from None
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(path, f"{kind_of(st.st_mode)}, not a regular file")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UnreadableFile(path, exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(path, f"{kind_of(st.st_mode)}, not a regular file")
        if st.st_size > max_bytes:
            raise UnreadableFile(path, f"{st.st_size} bytes, larger than the {max_bytes}-byte limit")
        chunks = []
        total = 0
        # Read to the cap even if the file grows meanwhile (st_size was a snapshot).
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise UnreadableFile(path, f"grew beyond the {max_bytes}-byte limit while being read")
        return b"".join(chunks)
    except OSError as exc:
        raise UnreadableFile(path, exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
