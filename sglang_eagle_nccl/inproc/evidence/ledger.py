"""The phase ledger inside one SGLang process: counts per key, flushed to the launch directory.

Opt-in (policy ``ledger``, ``SGLANG_EAGLE_NCCL_LEDGER=1``, ``--nccl-ledger``): when off, the
hooks that feed it are not even installed (``when = "ledger"`` in the manifests), so a process
without the ledger runs SGLang's collectives untouched.

Aggregation rule: a collective adds 1 to the count of its key, the key being the current step
context (phase, mode, batch, tokens: set by the forward-pass hooks, innermost wins) plus the
collective's own fields (op, group, ranks, bytes, dtype, implementation); a step adds 1 to its
context's count when the forward returns. Nothing else changes a count; a count never goes down.
Two threads never share a context (the context is thread-local; SGLang's overlap scheduler runs
forwards in a thread of its own), and the counts are updated under one lock.

Writing (:mod:`sglang_eagle_nccl.contract.ledger` says what a reader may rely on): at a flush,
one line per key whose count changed since the last flush, with the cumulative count, all
appended in one ``os.write`` of whole lines. Flushes happen at the end of every forward pass that
counted something (SGLang ends its schedulers with SIGKILL -- ``kill_process_tree`` -- so
``atexit`` never runs there: a step's counts are on disk before its results leave the process),
at exit where there is one (``atexit``), and on demand (:func:`flush`). Each key's line is
serialised once; a flush appends numbers to those prefixes (measured by bench/ledger_cost.py).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from sglang_eagle_nccl.contract import ledger as contract
from sglang_eagle_nccl.contract.jsonlight import dumps


def _step_fields(ctx: list[Any]) -> dict[str, Any]:
    phase, mode, batch, tokens = ctx
    return {"phase": phase, "mode": mode, "batch": batch, "tokens": tokens}


class Ledger:
    """Counts per key (the deciding part) and the file they go to (the doing part)."""

    def __init__(self) -> None:
        self.counts: dict[tuple, int] = {}
        self.fields: dict[tuple, dict[str, Any]] = {}
        self._dirty: set[tuple] = set()
        # Each key's line up to its count (``{...,"count":``), serialised once: a flush only appends numbers.
        self._prefix: dict[tuple, bytes] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._fd: int | None = None
        self._path: str | None = None
        self._header: dict[str, Any] | None = None
        # Where the file goes is known only once the process joined its launch (the audit
        # writer attaches after SGLang is imported): asked at each flush until it answers.
        self._locate: Any = None
        self.failure: str | None = None
        # The models' shapes ("target" / "draft": layers, hidden size), learnt at their first forward
        # and written in a process line, so the screen can say "per layer".
        self.models: dict[str, dict[str, Any]] = {}
        self._models_written: dict[str, dict[str, Any]] = {}

    # --- context ---------------------------------------------------------------------------

    def _stack(self) -> list[list[Any]]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def context(self) -> list[Any] | None:
        """The innermost step context of this thread: [phase, mode, batch, tokens], or None."""
        stack = self._stack()
        return stack[-1] if stack else None

    def enter(self, phase: str, mode: str, batch: int | None, tokens: int | None) -> list[Any]:
        ctx = [phase, mode, batch, tokens]
        self._stack().append(ctx)
        return ctx

    def leave(self, ctx: list[Any], *, completed: bool) -> None:
        """End a step context; a completed one counts as one step (of the mode it ended in)."""
        stack = self._stack()
        if stack and stack[-1] is ctx:
            stack.pop()
        if completed:
            self.add("step", _step_fields(ctx))

    def mark_replay(self, runner: str) -> None:
        """The current forward replays a CUDA graph: it counts as a replay step, and once as a replay."""
        ctx = self.context()
        if ctx is None:
            ctx = [contract.OUTSIDE, "replay", None, None]
        else:
            ctx[1] = "replay"
        self.add("replay", {**_step_fields(ctx), "runner": runner})

    # --- counting ----------------------------------------------------------------------------

    def add(self, kind: str, fields: dict[str, Any]) -> None:
        line = {"kind": kind, **fields}
        self._bump(contract.key_of(line), line)

    def _bump(self, key: tuple, line: Any) -> None:
        """Count ``key`` once more; ``line`` (its fields, or a function making them) is kept the first time."""
        with self._lock:
            n = self.counts.get(key)
            if n is None:
                self.fields[key] = line() if callable(line) else line
                self.counts[key] = 1
            else:
                self.counts[key] = n + 1
            self._dirty.add(key)

    def collective(self, op: str, group: str, ranks: int, nbytes: int, dtype: str, impl: str, mode: str | None = None) -> None:
        ctx = self.context()
        phase, ctx_mode, batch, tokens = ctx if ctx is not None else (contract.OUTSIDE, "eager", None, None)
        mode = mode or ctx_mode
        # The key in contract.key_of's order, built directly: this runs once per collective.
        key = ("collective", phase, mode, batch, tokens, op, group, ranks, nbytes, dtype, impl)
        self._bump(key, lambda: {
            "kind": "collective", "phase": phase, "mode": mode, "batch": batch, "tokens": tokens, "op": op,
            "group": group, "ranks": ranks, "bytes": nbytes, "dtype": dtype, "impl": impl,
        })

    # --- the file ------------------------------------------------------------------------------

    def attach(self, locate: Any) -> None:
        """``locate()`` answers ``(run_dir, header)`` once the process has a launch directory, else None."""
        self._locate = locate

    def flush(self) -> bool:
        """Append the changed counts to this process's ledger file; False when nothing could be written."""
        if self._path is None and self._locate is not None:
            found = self._locate()
            if found is not None:
                self._path, header = found
                self._header = {"kind": "process", **header}
        if self._path is None:
            return False
        with self._lock:
            pending = [(k, self.counts[k]) for k in self._dirty]
            self._dirty = set()
        try:
            if self._fd is None:
                from sglang_eagle_nccl.contract.launch_dir import file_stem, open_record_file

                self._fd = open_record_file(self._path, contract.file_name(file_stem()))
                os.write(self._fd, (dumps(self._header) + "\n").encode())
            if self.models != self._models_written:
                models = {k: dict(v) for k, v in self.models.items()}
                os.write(self._fd, (dumps({**(self._header or {}), "models": models}) + "\n").encode())
                self._models_written = models
            if pending:
                out = []
                for key, n in pending:
                    prefix = self._prefix.get(key)
                    if prefix is None:
                        prefix = self._prefix[key] = (dumps(self.fields[key])[:-1] + ',"count":').encode()
                    out.append(prefix + b"%d}\n" % n)
                # One write of whole lines (O_APPEND): a line is never split between writes.
                os.write(self._fd, b"".join(out))
        except Exception as exc:  # noqa: BLE001 - the ledger never takes SGLang down
            self.failure = repr(exc)
            self._path = self._locate = None
            return False
        return True

    def maybe_flush(self) -> None:
        """After a forward pass: what it counted is on disk before SGLang sends its results on."""
        if self._dirty:
            self.flush()


LEDGER = Ledger()
_started = False


def start(locate: Any) -> None:
    """Turn the ledger's file on in this process (idempotent): flushed at exit from now on."""
    global _started
    LEDGER.attach(locate)
    if not _started:
        import atexit

        atexit.register(LEDGER.flush)
        _started = True


def flush() -> bool:
    """Write what this process counted so far (on demand)."""
    return LEDGER.flush()
