"""Child side of the benchmarks: named windows whose CPU time (and, on request, instructions) is counted.

Imported by the ``child_*.py`` scripts, which run inside the Python under test. Kept to ``os``,
``sys`` and ``time`` so that it does not import, before a window, what the measured code would
otherwise have to import itself (``json`` is imported only by :func:`report`, after every window).

Protocol with :func:`_common.run_windows`: ``BENCH-BEGIN <name> <pid>`` and ``BENCH-END <name>
<pid>`` on stdout, each answered by one line on stdin (the parent switches callgrind's
instrumentation on and off meanwhile); ``BENCH-RESULT <json>`` last.
"""

from __future__ import annotations

import os
import sys
import time

_results: dict[str, object] = {}


def _handshake(what: str, name: str) -> None:
    sys.__stdout__.write(f"{what} {name} {os.getpid()}\n")
    sys.__stdout__.flush()
    sys.__stdin__.readline()


class window:  # noqa: N801 - used as a context manager, reads like a statement
    """``with window("registration"): ...`` records ``registration_ms`` (CPU time of this process)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.start = 0.0

    def __enter__(self) -> window:
        _handshake("BENCH-BEGIN", self.name)
        self.start = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        _results[f"{self.name}_ms"] = round((time.process_time() - self.start) * 1000, 3)
        _handshake("BENCH-END", self.name)


def record(**values: object) -> None:
    _results.update(values)


def report() -> None:
    import json

    sys.__stdout__.write("BENCH-RESULT " + json.dumps(_results, default=str) + "\n")
    sys.__stdout__.flush()
