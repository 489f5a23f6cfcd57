"""What the tuner plugin actually answered, per process and communicator, from NCCL's reads logs.

The C tuner (``native/src/tuner_plugin.c``) counts its answers per communicator and (collective,
size, answer) and writes them as ``tuner_answers`` lines of the process's reads log: cumulative for
the live communicators with every ``counts`` line (at exit, on demand), final at the
communicator's destroy. Rules:

- **The largest count wins.** A (process, communicator, collective, size, answer)'s count is the
  largest any line gives it, as in the ledger (:mod:`.ledger_read`): several flushes, the final line
  and a copy of a file count nothing twice.
- **A communicator is (process identity, context).** ``context`` numbers the communicators in the
  order they initialised the tuner in that process (v2-v4 give no commId; v5+ give it and it is kept
  for display). The process is the identity on the log's first line; a line from another pid in
  that file is not that process's and is skipped (the same rule as the audit's reader).
- **Files are read by the audit's rules**: regular files only, nothing followed, bounded, each line
  checked against ``contract/events.py`` (:func:`~.records.read_record_file` with the reads schema).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.contract.launch_dir import identity_key
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import ALGORITHMS, COLLECTIVES, PROTOCOLS, rule_label
from sglang_eagle_nccl.offline.audit.records import READS, is_reads_file_name, read_record_file

# (collective id, bytes, rule index or -1, applied, algorithm id or -1, protocol id or -1, channels)
AnswerKey = tuple[int, int, int, bool, int, int, int]


def answer_text(rule: int | None, applied: bool, algorithm: str | None, protocol: str | None,
                channels: int | None) -> str:
    """The tuner's answer in the words ``sglang-eagle-nccl tuner`` uses (library.QueryResult.describe)."""
    if rule is None or rule < 0:
        return "no rule: NCCL decides"
    if not applied:
        return f"{rule_label(rule)} matches, but its algorithm/protocol was not available: NCCL decides"
    return f"{rule_label(rule)}: {algorithm}/{protocol}" + (f", {channels} channels" if channels else "")


def answer_of(key: AnswerKey) -> dict[str, Any]:
    """One recorded answer as the decision fields the ledger compares (the rule's view: rule, applied, cell)."""
    _, _, rule, applied, algo, proto, channels = key
    named = applied and 0 <= algo < len(ALGORITHMS) and 0 <= proto < len(PROTOCOLS)
    algorithm = ALGORITHMS[algo] if named else None
    protocol = PROTOCOLS[proto] if named else None
    return {
        "rule_index": rule if rule >= 0 else None, "applied": bool(named),
        "algorithm": algorithm, "protocol": protocol, "channels": (channels or None) if named else None,
        "answer": answer_text(rule, bool(named), algorithm, protocol, channels),
    }


@dataclass
class CommAnswers:
    """One communicator's answers in one process."""

    context: int
    comm_id: str
    group: str | None
    abi: int
    nranks: int
    nnodes: int
    final: bool = False
    unrecorded: int = 0
    counts: dict[AnswerKey, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "context": self.context, "comm_id": self.comm_id, "group": self.group, "abi": self.abi,
            "nranks": self.nranks, "nnodes": self.nnodes, "final": self.final, "unrecorded": self.unrecorded,
            "answers": [
                {"collective": COLLECTIVES[k[0]] if 0 <= k[0] < len(COLLECTIVES) else str(k[0]), "bytes": k[1],
                 "count": n, **answer_of(k)}
                for k, n in sorted(self.counts.items())
            ],
        }


@dataclass
class TunerAnswers:
    """Per process (identity key), its communicators by context."""

    processes: dict[tuple, dict[int, CommAnswers]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)

    def add(self, ident_key: tuple, line: dict[str, Any]) -> None:
        comms = self.processes.setdefault(ident_key, {})
        ctx = int(line["context"])
        comm = comms.get(ctx)
        if comm is None:
            comm = comms[ctx] = CommAnswers(ctx, str(line["comm_id"]), line.get("group"), int(line["abi"]),
                                            int(line["nranks"]), int(line["nnodes"]))
        comm.final = comm.final or bool(line["final"])
        comm.unrecorded = max(comm.unrecorded, int(line["unrecorded"]))
        for a in line["answers"]:
            key = (a["collective"], a["bytes"], a["rule"], bool(a["applied"]), a["algorithm"], a["protocol"],
                   a["channels"])
            comm.counts[key] = max(comm.counts.get(key, 0), int(a["count"]))

    def matching(self, ident_key: tuple, collective: str, nbytes: int, nranks: int) -> list[dict[str, Any]]:
        """What the tuner answered the process's communicators of ``nranks`` ranks for this call, per communicator."""
        out = []
        for comm in self.processes.get(ident_key, {}).values():
            if comm.nranks != nranks:
                continue
            for key, n in comm.counts.items():
                if 0 <= key[0] < len(COLLECTIVES) and COLLECTIVES[key[0]] == collective and key[1] == nbytes:
                    out.append({"context": comm.context, "comm_id": comm.comm_id, "group": comm.group, "count": n,
                                **answer_of(key)})
        return out

    def to_dict(self) -> list[dict[str, Any]]:
        return [
            {"process": list(k), "communicators": [c.to_dict() for _, c in sorted(comms.items())]}
            for k, comms in sorted(self.processes.items(), key=lambda kv: str(kv[0]))
        ]


def read_tuner_answers(run_dirs: list[str]) -> TunerAnswers:
    """The tuner's answers recorded in every reads log of ``run_dirs``."""
    out = TunerAnswers()
    for run_dir in sorted(set(run_dirs)):
        try:
            names = sorted(os.listdir(run_dir))
        except OSError as exc:
            out.unreadable.append(f"{run_dir}: {exc.strerror or exc}")
            continue
        for name in names:
            if not is_reads_file_name(name):
                continue
            # Lines that do not check out are the audit's to list (its reads-log section): skipped here.
            records, _ = read_record_file(Path(run_dir) / name, READS)
            if not records or records[0].get("event") != "reads_log":
                continue
            ident = {k: records[0].get(k) for k in ("host", "boot_id", "pidns", "pid", "start")}
            key = identity_key(ident)
            for rec in records[1:]:
                if rec.get("event") == "tuner_answers" and rec.get("pid") == ident["pid"]:
                    out.add(key, rec)
    return out
