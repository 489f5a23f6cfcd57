"""What preflight shows of its ranks' own output: SGLang's known CPU-only notices folded into one
explained line, every other line relayed as it comes (with its rank), and known errors with their cause.

The rules:

- A line matching one of :data:`CPU_NOTICES` is not relayed. These are SGLang's own messages on a
  machine without a GPU, printed once per rank, several of them worded like errors ("Setup Custom
  allreduce failed with ."); none says anything about the profile. After the ranks finish, one line
  says how many were held back, of which kinds, and why they are expected.
- Every other line is relayed at once, prefixed with its rank (``[rank 1] ...``), so a real problem
  is never hidden and two ranks' lines can be told apart.
- A rank's error line matching one of :data:`KNOWN_CAUSES` is shown with its cause and the fix.

Pure (:func:`is_cpu_notice`, :func:`notice_summary`, :func:`known_cause`) apart from
:class:`RankRelay`, which owns the pipes.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import resource_tracker

from sglang_eagle_nccl.contract import names


@dataclass(frozen=True)
class Notice:
    name: str  # what it is, in a few words
    pattern: re.Pattern[str]
    why: str  # why it is expected on a machine without a GPU


CPU_NOTICES: tuple[Notice, ...] = (
    Notice("custom all-reduce off", re.compile(r"Setup Custom allreduce failed with"),
           "SGLang's custom all-reduce needs CUDA"),
    Notice("cores bound per rank", re.compile(r"SGLANG_CPU_OMP_THREADS_BIND is set for explicit control"),
           "preflight gives each rank its share of the cores"),
    Notice("more ranks than NUMA nodes", re.compile(r"is larger than numa node number"),
           "ranks share one NUMA node"),
    Notice("no shared-memory all-reduce", re.compile(r"shared memory based AllReduce is disabled"),
           "SGLang's CPU all-reduce kernel needs Intel AMX or arm64"),
    Notice("CUDA graphs off", re.compile(r"Cuda graph is disabled because of using torch native attention backend"),
           "no CUDA"),
    # A Python warning of SGLang's quantization modules at import: the message, then its source line.
    Notice("GPU-only quantization", re.compile(r"Only CUDA, .{0,40} support (AWQ|GGUF)"),
           "SGLang's AWQ and GGUF kernels need a GPU"),
)


def is_cpu_notice(line: str) -> Notice | None:
    """The known notice ``line`` is, if any."""
    return next((n for n in CPU_NOTICES if n.pattern.search(line)), None)


def notice_summary(counts: Counter[str], ranks: int) -> str | None:
    """One line for the notices held back (``counts``: notice name -> lines), or None when there were none."""
    if not sum(counts.values()):
        return None
    shown = [n for n in CPU_NOTICES if counts[n.name]]
    kinds = "; ".join(f"{n.name} ({n.why})" for n in shown)
    return (f"[preflight] {sum(counts.values())} line(s) of SGLang's usual CPU-only notices from {ranks} rank(s) "
            f"not shown, expected without a GPU: {kinds}")


@dataclass(frozen=True)
class Cause:
    pattern: re.Pattern[str]
    text: str


KNOWN_CAUSES: tuple[Cause, ...] = (
    Cause(re.compile(r"operator torchvision::\w+ does not exist"),
          "torchvision's compiled operators do not match the installed torch (a torchvision wheel built "
          f"for another torch, e.g. for CUDA beside a CPU torch). Fix: in the CPU venv ./ci/quickstart built, "
          f"put {names.ENV_TEST_CPU_STANDINS}=1 before the command (its stand-ins for GPU-only kernels); "
          "elsewhere install the torchvision release paired with this torch. See README.md, Troubleshooting"),
)


def known_cause(error: str) -> str | None:
    """The cause and fix of a rank's error, when it is one this plugin knows."""
    return next((c.text for c in KNOWN_CAUSES if c.pattern.search(error)), None)


class RankRelay:
    """Each rank's stdout and stderr through a pipe of its own, read by a thread that relays the lines.

    The ranks are spawned processes: they inherit the file descriptors 1 and 2 the parent has while
    it starts them. :meth:`starting` points both at the rank's pipe for exactly that moment (nothing
    else in preflight writes then: the relaying threads start after every rank has started).

    multiprocessing's resource tracker is started by the first spawn of a process and lives as long as
    it does: started during a rank's start, it would inherit that rank's pipe and hold it open, so
    the rank's last line without a newline would never be read and :meth:`finish` would wait its
    whole timeout. :meth:`starting` therefore starts the tracker first, on the parent's own fds.
    """

    def __init__(self, write: Callable[[str], None] | None = None) -> None:
        self._write = write or (lambda text: (sys.stderr.write(text + "\n"), sys.stderr.flush()))
        self._pipes: dict[int, int] = {}  # rank -> read end
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.notices: Counter[str] = Counter()

    def starting(self, rank: int, start: Callable[[], None]) -> None:
        """Run ``start`` (which spawns the rank) with fds 1 and 2 on a new pipe for that rank."""
        resource_tracker.ensure_running()
        read_end, write_end = os.pipe()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(write_end, 1)
            os.dup2(write_end, 2)
            start()
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (*saved, write_end):
                os.close(fd)
        self._pipes[rank] = read_end

    def relay(self) -> None:
        """Start relaying every started rank's lines (call once, after the last rank started)."""
        for rank, fd in self._pipes.items():
            thread = threading.Thread(target=self._pump, args=(rank, fd), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _pump(self, rank: int, fd: int) -> None:
        with os.fdopen(fd, "rb") as pipe:
            for raw in pipe:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                notice = is_cpu_notice(line)
                with self._lock:
                    if notice is not None:
                        self.notices[notice.name] += 1
                    elif line.strip():
                        self._write(f"[rank {rank}] {line}")

    def finish(self, timeout: float = 5.0) -> str | None:
        """Wait for the ranks' pipes to close (a grandchild holding one is not waited for beyond
        ``timeout``); the line summing up the notices held back, if any."""
        for thread in self._threads:
            thread.join(timeout)
        with self._lock:
            return notice_summary(self.notices, len(self._pipes))
