"""Reading a launch's audit records from disk: finding the launch, one file per process.

Judging them is :mod:`sglang_eagle_nccl.audit.verdict`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.audit.writer import FILE_PREFIX, FILE_SUFFIX, LAUNCH_META


@dataclass
class ProcessRecords:
    file: str
    pid: int
    records: list[dict[str, Any]]
    bad_lines: int = 0

    @property
    def role(self) -> str:
        role = "process"
        for r in self.records:
            if r.get("event") == "process_role":
                role = r["title"].removeprefix("sglang::")
            elif r.get("event") == "scheduler_start" and role in ("process", "child"):
                role = "scheduler"
            elif r.get("event") == "process_start" and role == "process":
                role = r.get("role", role)
        return role

    def events(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("event") == name]

    def first(self, name: str) -> dict[str, Any] | None:
        found = self.events(name)
        return found[0] if found else None


def find_launch_dir(path: str | Path) -> Path:
    """``path`` itself if it holds process files, else its newest launch sub-directory."""
    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"audit directory {p} does not exist")
    if any(p.glob(f"{FILE_PREFIX}*{FILE_SUFFIX}")) or (p / LAUNCH_META).exists():
        return p
    launches = sorted((d for d in p.iterdir() if d.is_dir() and (any(d.glob(f"{FILE_PREFIX}*")) or (d / LAUNCH_META).exists())), key=lambda d: d.stat().st_mtime)
    if not launches:
        raise FileNotFoundError(f"no audit records under {p} (expected {FILE_PREFIX}*{FILE_SUFFIX} files or launch sub-directories)")
    return launches[-1]


def read_launch(run_dir: str | Path) -> tuple[dict[str, Any], list[ProcessRecords]]:
    run = Path(run_dir)
    meta: dict[str, Any] = {}
    if (run / LAUNCH_META).exists():
        meta = json.loads((run / LAUNCH_META).read_text("utf-8"))
    processes = []
    for path in sorted(run.glob(f"{FILE_PREFIX}*{FILE_SUFFIX}")):
        records = []
        bad = 0
        for line in path.read_text("utf-8", errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError:
                bad += 1
        pid = records[0]["pid"] if records else int(path.stem.rsplit("-", 1)[-1])
        processes.append(ProcessRecords(path.name, pid, records, bad))
    return meta, processes
