"""What NCCL itself read, per process: the native env plugin's reads logs, read and judged.

Evidence order for a verdict: NCCL's own reads > NCCL's debug output > the process's
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

The logs are read by the one reader of launch directories (:mod:`sglang_eagle_nccl.offline.audit.read`),
with the same file rules and the same event table as the audit records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sglang_eagle_nccl.offline.audit.read import ProcessReads


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
