"""What NCCL itself read, per process: the native env plugin's reads logs, read and judged.

Evidence order for a verdict (DESIGN §7): NCCL's own reads > NCCL's debug output > the process's
``os.environ``. A read is judged against the profile in force in that process (the last
expectation its audit records, per-group values when NCCL read with a group label):

- ✗ NCCL got a value the profile contradicts (for a variable the profile sets, outside
  ``sglang_wins``);
- ⚠ NCCL got the profile's value but the environment said otherwise at that moment (something
  wrote the variable after activation; the plugin kept NCCL on the profile);
- ✓ otherwise, where NCCL read at least one variable the profile sets. Variables the profile does
  not set are listed, not judged;
- – NCCL read none of the profile's variables through the env plugin in that process (it never
  loaded NCCL, as on a CPU machine, loaded it without the plugin, or read only other variables):
  nothing was checked, so no ✓.

Files are opened the way every audit file is: never following symlinks, never blocking on a FIFO.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

READS_PREFIX = "nccl-reads-"
MAX_BYTES = 16 << 20


@dataclass
class ProcessReads:
    pid: int
    file: str
    env_init: dict[str, Any] | None = None
    reads: list[dict[str, Any]] = field(default_factory=list)
    tuner_inits: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[tuple[str, str | None, str], int] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "file": self.file,
            "nccl_version": (self.env_init or {}).get("nccl_version"),
            "env_plugin_abi": (self.env_init or {}).get("abi"),
            "reads": self.reads,
            "tuner_inits": self.tuner_inits,
            "unreadable": self.unreadable,
        }


def _read_text(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(fd)


def read_reads(run_dir: str | Path) -> dict[int, ProcessReads]:
    """Every ``nccl-reads-<host>-<pid>.jsonl`` of a launch, by pid (bad lines are listed, not fatal)."""
    out: dict[int, ProcessReads] = {}
    for path in sorted(Path(run_dir).glob(f"{READS_PREFIX}*.jsonl")):
        stem = path.name[: -len(".jsonl")]
        pid_text = stem.rsplit("-", 1)[-1]
        if not (pid_text.isascii() and pid_text.isdigit()):
            continue
        text = _read_text(path)
        proc = ProcessReads(int(pid_text), path.name)
        if text is None:
            proc.unreadable.append(f"{path.name}: not a regular readable file (or larger than {MAX_BYTES} bytes)")
            out[proc.pid] = proc
            continue
        for no, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                rec = None
            if not isinstance(rec, dict) or not isinstance(rec.get("event"), str):
                proc.unreadable.append(f"{path.name}:{no}: not a JSON object with an event")
                continue
            event = rec["event"]
            if event == "env_init":
                proc.env_init = rec
            elif event == "read" and isinstance(rec.get("name"), str) and isinstance(rec.get("source"), str):
                proc.reads.append({k: rec.get(k) for k in ("name", "value", "source", "environment", "disagrees")})
            elif event == "tuner_init":
                proc.tuner_inits.append({k: rec.get(k) for k in ("abi", "nranks", "nnodes", "rules", "group", "comm_id")})
            elif event == "counts" and isinstance(rec.get("reads"), list):
                proc.counts = {
                    (str(r.get("name")), r.get("value"), str(r.get("source"))): int(r.get("count") or 0)
                    for r in rec["reads"] if isinstance(r, dict)
                }
        out[proc.pid] = proc
    return out


@dataclass
class ReadsVerdict:
    verdict: str  # ok / warn / fail / absent
    notes: list[str]


def judge_reads(reads: ProcessReads, expected: Mapping[str, str], groups: Mapping[str, Mapping[str, str]],
                keep: Iterable[str]) -> ReadsVerdict:
    keep = set(keep)
    notes: list[str] = []
    verdicts: list[str] = []
    for r in reads.reads:
        name, value, source = r["name"], r.get("value"), r["source"]
        want = expected.get(name)
        if source.startswith("group:"):
            want = groups.get(source[len("group:"):], {}).get(name, want)
        if want is None or name in keep:
            continue
        if value != want:
            verdicts.append("fail")
            got = "(unset)" if value is None else value
            notes.append(f"NCCL read {name}={got} ({source}); the profile says {want}")
        elif r.get("disagrees"):
            verdicts.append("warn")
            env = "(unset)" if r.get("environment") is None else r.get("environment")
            notes.append(
                f"the environment held {name}={env} when NCCL read it (written after activation); "
                f"NCCL got the profile's {value}"
            )
        else:
            verdicts.append("ok")
    if not verdicts:
        # Nothing judged: a ✓ here would vouch for reads that never happened. The log exists once the
        # library is configured (torch imports ctypes), whether or not NCCL ever loads it.
        if reads.reads:
            why = (f"NCCL read {len(reads.reads)} variable(s), none that the profile sets for NCCL to take "
                   "(or only variables left to SGLang)")
        elif reads.env_init is None:
            why = "NCCL never initialised the env plugin in this process (NCCL not loaded here, or loaded without it)"
        else:
            why = "NCCL initialised the env plugin but read no variable through it"
        return ReadsVerdict("absent", [f"{why}: nothing to check"])
    order = {"ok": 0, "warn": 1, "fail": 2}
    return ReadsVerdict(max(verdicts, key=order.__getitem__), notes)


def read_lines(reads: ProcessReads) -> list[str]:
    """One line per variable NCCL read: what it got and from where."""
    out = []
    for r in sorted(reads.reads, key=lambda x: (x["name"], str(x.get("source")))):
        value = "(unset)" if r.get("value") is None else r["value"]
        count = reads.counts.get((r["name"], r.get("value"), r["source"]))
        out.append(f"{r['name']}={value}  [{r['source']}]" + (f" x{count}" if count and count > 1 else ""))
    return out
