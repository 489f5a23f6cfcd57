"""Synthetic audit records for judging tests: the shape the real writer gives (contract/events.py), built by hand.

Real writers are exercised elsewhere (tests that run AuditWriter, spawned ranks, SGLang processes); these
helpers let a test state exactly which records a process left, including ones only a GPU run writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# One machine's identity; tests that need two hosts (or two containers) pass their own.
HOST = {"host": "h", "boot_id": "0123456789abcdef0123456789abcdef", "pidns": "4026531836"}


def ident(pid: int = 100, **machine: Any) -> dict[str, Any]:
    return {**HOST, **machine, "pid": pid, "start": f"{1000 + pid}"}


def rec(
    event: str, pid: int = 100, role: str = "child", machine: dict[str, Any] | None = None, **fields: Any
) -> dict:
    """One audit record as AuditWriter writes it (common fields and identity included)."""
    return {"event": event, "ts": 1.0, "role": role, **ident(pid, **(machine or {})), **fields}


def reads_header(pid: int = 100, machine: dict[str, Any] | None = None) -> dict:
    """The first line of a reads log, written by Python when it created the file."""
    return {"event": "reads_log", "time": 1.0, **ident(pid, **(machine or {}))}


def reads_line(event: str, pid: int = 100, **fields: Any) -> dict:
    """A line as the C library writes it (event, pid, time + its fields)."""
    return {"event": event, "pid": pid, "time": 1.0, **fields}


def proc_file(pid: int = 100, host: str = "h") -> str:
    return f"proc-{host}-{pid}.jsonl"


def reads_file(pid: int = 100, host: str = "h") -> str:
    return f"nccl-reads-{host}-{pid}.jsonl"


def write_lines(path: Path, records: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path
