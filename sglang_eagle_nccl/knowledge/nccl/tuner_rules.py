"""Size-aware tuner rules: what a profile's ``[[tuner.rules]]`` mean to NCCL, validated here.

The C tuner (native/) only obeys: it gets these rules as numbers and applies the first one
that matches a collective call. Everything a person can get wrong is caught here instead, with
the variable, value, rule and fix of every problem:

.. code-block:: toml

    [[tuner.rules]]
    collective = "allreduce"   # broadcast, reduce, allgather, reducescatter, allreduce
    bytes = [0, 65536]         # [min, max) of NCCL's nBytes; max may be "inf"
    algorithm = "ring"         # tree, ring, collnetdirect, collnetchain, nvls, nvlstree, pat
    protocol = "LL"            # LL, LL128, Simple
    nranks = [2, 8]            # optional [min, max] communicator size (max may be "inf")
    nnodes = [1, 1]            # optional [min, max] node count
    group = "tp"               # optional SGLang group label (eager PyNccl communicators only)
    channels = 8               # optional nChannels for the matching calls

Names are matched case-insensitively, like NCCL's own parsing of NCCL_ALGO/NCCL_PROTO. Every
function is pure.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from sglang_eagle_nccl.contract.findings import Finding, ProfileError, error, warning
from sglang_eagle_nccl.knowledge.nccl.parsing import ALGORITHMS, FUNCTIONS, PROTOCOLS, enable_row

# Index in each tuple == NCCL's enum value (ncclFunc_t, NCCL_ALGO_*, NCCL_PROTO_*), the same in every
# release 2.21 - 2.30 (src/include/nccl_common.h; 2.28+: src/include/plugin/nccl_tuner.h).
COLLECTIVES = FUNCTIONS
COLLECTIVE_IDS = {name: i for i, name in enumerate(COLLECTIVES)}
ALGORITHM_IDS = {name: i for i, name in enumerate(ALGORITHMS)}
PROTOCOL_IDS = {name: i for i, name in enumerate(PROTOCOLS)}
# NCCL's nChannels limit (MAXCHANNELS: 32 before 2.18, 64 since).
MAX_CHANNELS = 64
# NCCL passes nBytes, nRanks and nNodes as size_t (64 bits on every platform the plugin is built for): no
# bound above it can ever be asked, and the C tuner stores bounds as uint64_t (native/abi.py uses this).
SIZE_T_MAX = (1 << 64) - 1
RULE_KEYS = ("collective", "bytes", "algorithm", "protocol", "nranks", "nnodes", "group", "channels")
_GROUP_LABEL = re.compile(r"[A-Za-z0-9_.:\-]{1,64}")
GROUP_LABEL_CHARS = "1 to 64 letters, digits, _ . : -"


def is_group_label(text: object) -> bool:
    """The one rule for a group label, in a rule's ``group`` and a ``[groups.<label>]`` section alike: it is
    handed to the native library as a C string and matched against SGLang's group names."""
    return isinstance(text, str) and _GROUP_LABEL.fullmatch(text) is not None

# Combinations NCCL never gives a cost (their cell is always -1, so a rule choosing them changes
# nothing): NCCL 2.30.7 src/graph/tuning.cc ncclTopoTuneModel.
_ALGORITHMS_FOR = {
    "Broadcast": {"Ring"},
    "Reduce": {"Ring"},
    "AllGather": {"Ring", "PAT", "NVLS", "CollNetDirect"},
    "ReduceScatter": {"Ring", "PAT", "NVLS", "CollNetDirect"},
    "AllReduce": {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree"},
}
_SIMPLE_ONLY = {"NVLS", "NVLSTree", "PAT"}
# NCCL's protoEnable default: LL128 is 2, "on where the hardware allows" (src/graph/tuning.cc).
_PROTOCOL_DEFAULTS = {"LL128": 2}

Range = tuple[int, "int | None"]  # inclusive [min, max]; None: no upper bound


@dataclass(frozen=True)
class TunerRule:
    """One validated rule, names in NCCL's spelling ("AllReduce", "Ring", "LL")."""

    collective: str
    min_bytes: int
    max_bytes: int | None  # exclusive; None: no upper bound
    algorithm: str
    protocol: str
    nranks: Range | None = None
    nnodes: Range | None = None
    group: str | None = None
    channels: int | None = None

    @property
    def collective_id(self) -> int:
        return COLLECTIVE_IDS[self.collective]

    @property
    def algorithm_id(self) -> int:
        return ALGORITHM_IDS[self.algorithm]

    @property
    def protocol_id(self) -> int:
        return PROTOCOL_IDS[self.protocol]

    def describe(self) -> str:
        """``AllReduce [0, 65536) bytes, 2-8 ranks, group tp -> Ring/LL, 8 channels``."""
        top = "inf" if self.max_bytes is None else str(self.max_bytes)
        parts = [f"{self.collective} [{self.min_bytes}, {top}) bytes"]
        if self.nranks:
            parts.append(f"{_range_text(self.nranks)} ranks")
        if self.nnodes:
            parts.append(f"{_range_text(self.nnodes)} nodes")
        if self.group:
            parts.append(f"group {self.group}")
        choice = f"{self.algorithm}/{self.protocol}"
        if self.channels:
            choice += f", {self.channels} channels"
        return ", ".join(parts) + " -> " + choice


def _range_text(r: Range) -> str:
    lo, hi = r
    return f"{lo}+" if hi is None else (str(lo) if lo == hi else f"{lo}-{hi}")


def rule_label(index: int) -> str:
    """How findings name a rule: ``tuner.rules#1`` is the first ``[[tuner.rules]]`` block."""
    return f"tuner.rules#{index + 1}"


# --- parsing ------------------------------------------------------------------------------------


def _name(kind: str, choices: Sequence[str], raw: Any, where: str, findings: list[Finding]) -> str | None:
    if raw is None:
        findings.append(error(where, None, f"every rule needs a {kind}", f"add {kind.split()[-1]} = \"{choices[1 if len(choices) > 1 else 0]}\""))
        return None
    match = next((c for c in choices if isinstance(raw, str) and c.lower() == raw.strip().lower()), None)
    if match is None:
        findings.append(error(where, repr(raw), f"unknown {kind}", f"use one of {', '.join(choices)} (case-insensitive)"))
    return match


def _shown(raw: Any) -> str:
    # repr() of an integer over Python's 4300-digit limit raises; the finding shows its size instead.
    try:
        return repr(raw)
    except ValueError:
        return "a list holding an integer of more than 4300 digits"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_inf(v: Any) -> bool:
    return isinstance(v, str) and v.strip().lower() in ("inf", "infinity")


def _bytes(raw: Any, where: str, findings: list[Finding]) -> tuple[int, int | None] | None:
    example = "bytes = [0, 65536]"
    if raw is None:
        findings.append(error(where, None, "every rule needs a byte range [min, max) of NCCL's nBytes", f"add {example}"))
        return None
    if not isinstance(raw, list) or len(raw) != 2:
        findings.append(error(where, repr(raw), "must be a list of two sizes [min, max)", f"write e.g. {example}"))
        return None
    lo, hi = raw
    if not _is_int(lo) or lo < 0 or lo >= SIZE_T_MAX:
        findings.append(error(where, _shown(raw), f"min must be an integer number of bytes from 0 to {SIZE_T_MAX - 1}",
                              f"write e.g. {example}"))
        return None
    if _is_inf(hi):
        return lo, None
    if not _is_int(hi) or hi > SIZE_T_MAX:
        findings.append(error(where, _shown(raw), f"max must be an integer number of bytes up to {SIZE_T_MAX} (NCCL's "
                              "size_t: no message is larger) or \"inf\"", f"write e.g. {example} or [65536, \"inf\"]"))
        return None
    if hi == lo:
        findings.append(error(where, repr(raw), "the range [min, max) is empty: max is excluded, so nothing matches", f"write [{lo}, {hi + 1}] or more"))
        return None
    if hi < lo:
        findings.append(error(where, repr(raw), "the range is inverted (min > max)", f"write [{hi}, {lo}]"))
        return None
    return lo, hi


def _count_range(raw: Any, where: str, what: str, findings: list[Finding]) -> Range | None:
    example = f"{where.rsplit('.', 1)[-1]} = [2, 8]"
    if not isinstance(raw, list) or len(raw) != 2:
        findings.append(error(where, repr(raw), f"must be a list [min, max] of {what} (both included)", f"write e.g. {example}"))
        return None
    lo, hi = raw
    if not _is_int(lo) or lo < 1 or lo > SIZE_T_MAX:
        findings.append(error(where, _shown(raw), f"min must be an integer from 1 to {SIZE_T_MAX} ({what})",
                              f"write e.g. {example}"))
        return None
    if _is_inf(hi):
        return lo, None
    if not _is_int(hi) or hi > SIZE_T_MAX:
        findings.append(error(where, _shown(raw), f"max must be an integer up to {SIZE_T_MAX} (NCCL's size_t) or \"inf\"",
                              f"write e.g. {example}"))
        return None
    if hi < lo:
        findings.append(error(where, repr(raw), "the range is inverted (min > max)", f"write [{hi}, {lo}]"))
        return None
    return lo, hi


def _parse_one(raw: Any, index: int, findings: list[Finding]) -> TunerRule | None:
    label = rule_label(index)
    if not isinstance(raw, Mapping):
        findings.append(error(label, repr(raw), "each rule must be a table", "write each rule as a [[tuner.rules]] block"))
        return None
    before = len(findings)
    for key in raw:
        if key not in RULE_KEYS:
            findings.append(error(f"{label}.{key}", repr(raw[key]), "unknown rule key", f"use only {', '.join(RULE_KEYS)}"))
    collective = _name("collective", COLLECTIVES, raw.get("collective"), f"{label}.collective", findings)
    size = _bytes(raw.get("bytes"), f"{label}.bytes", findings)
    algorithm = _name("algorithm", ALGORITHMS, raw.get("algorithm"), f"{label}.algorithm", findings)
    protocol = _name("protocol", PROTOCOLS, raw.get("protocol"), f"{label}.protocol", findings)
    nranks = _count_range(raw["nranks"], f"{label}.nranks", "ranks", findings) if "nranks" in raw else None
    nnodes = _count_range(raw["nnodes"], f"{label}.nnodes", "nodes", findings) if "nnodes" in raw else None
    group = raw.get("group")
    if group is not None and not (isinstance(group, str) and _GROUP_LABEL.fullmatch(group)):
        findings.append(
            error(f"{label}.group", repr(group), "must be an SGLang group label (letters, digits, _ . : -)", "write e.g. group = \"tp\"")
        )
    channels = raw.get("channels")
    if channels is not None and not (_is_int(channels) and 1 <= channels <= MAX_CHANNELS):
        findings.append(
            error(f"{label}.channels", repr(channels), f"must be an integer from 1 to {MAX_CHANNELS}", "remove it to let NCCL choose, or write e.g. channels = 8")
        )
    if len(findings) > before or collective is None or size is None or algorithm is None or protocol is None:
        return None
    return TunerRule(
        collective=collective, min_bytes=size[0], max_bytes=size[1], algorithm=algorithm, protocol=protocol,
        nranks=nranks, nnodes=nnodes, group=group, channels=channels,
    )


def parse_rules(raw: Any, source: str) -> tuple[list[TunerRule], list[Finding]]:
    """Parse a profile's ``tuner.rules`` (the list TOML gives for ``[[tuner.rules]]``).

    Returns the valid rules and every finding (tagged with ``source``); callers refuse the
    profile when any finding is an error. Cross-rule checks are in :func:`check_rules`.
    """
    findings: list[Finding] = []
    if not isinstance(raw, list):
        findings.append(error("tuner.rules", repr(raw), "must be a list of rules", "write each rule as a [[tuner.rules]] block"))
        return [], [f.with_source(source) for f in findings]
    rules = [r for i, item in enumerate(raw) if (r := _parse_one(item, i, findings)) is not None]
    return rules, [f.with_source(source) for f in findings]


# --- what the C tuner does, as a model ------------------------------------------------------------


def matches(rule: TunerRule, collective: str, nbytes: int, nranks: int, nnodes: int, group: str | None) -> bool:
    """Whether ``rule`` applies to one call of a communicator (``group``: label selected at its init)."""
    if rule.collective != collective or nbytes < rule.min_bytes:
        return False
    if rule.max_bytes is not None and nbytes >= rule.max_bytes:
        return False
    for count, r in ((nranks, rule.nranks), (nnodes, rule.nnodes)):
        if r is not None and (count < r[0] or (r[1] is not None and count > r[1])):
            return False
    return rule.group is None or rule.group == group


def first_match(
    rules: Sequence[TunerRule], collective: str, nbytes: int, nranks: int, nnodes: int = 1, group: str | None = None
) -> int | None:
    """Index of the rule the tuner applies (first match wins), or None: NCCL decides."""
    return next((i for i, r in enumerate(rules) if matches(r, collective, nbytes, nranks, nnodes, group)), None)


# --- cross-rule checks ------------------------------------------------------------------------------

_INF = 1 << 64  # above every size_t NCCL can pass


def _box(rule: TunerRule) -> tuple[tuple[int, int], ...]:
    """The rule's match region as half-open intervals: bytes, ranks, nodes (counts start at 1)."""

    def count(r: Range | None) -> tuple[int, int]:
        if r is None:
            return 1, _INF
        return r[0], _INF if r[1] is None else r[1] + 1

    top = _INF if rule.max_bytes is None else rule.max_bytes
    return (rule.min_bytes, top), count(rule.nranks), count(rule.nnodes)


def _covers_group(earlier: TunerRule, later: TunerRule) -> bool:
    # A rule without a group also matches communicators without a label, which no group rule can.
    return earlier.group is None or earlier.group == later.group


# Rules in one profile. The C tuner tries them in order for every collective call NCCL makes (first
# match wins), so the list sits on NCCL's hot path; real profiles hold a handful. The bound also
# keeps the shadow check below quadratic in the worst case.
MAX_RULES = 256
# Boxes the shadow check may examine in its multi-dimensional sweep, over all rules of a profile
# (about a second of work on a slow core). Rules that differ from the earlier ones in one
# dimension only (the usual case: byte ranges) are decided by an interval merge that costs nothing
# from it; only many rules overlapping in bytes, ranks and nodes at once can exhaust it.
SHADOW_BUDGET = 500_000


class ShadowBudget:
    """Work left to the shadow check of one profile; ``spent`` is what it examined."""

    def __init__(self, units: int = SHADOW_BUDGET) -> None:
        self.left = units
        self.spent = 0

    def spend(self, units: int) -> bool:
        if self.left < 0:
            return False  # spent: every later sweep stops at once
        self.spent += units
        self.left -= units
        return self.left >= 0


Box = tuple[tuple[int, int], ...]


def _merged_cover(lo: int, hi: int, intervals: Iterable[tuple[int, int]]) -> bool:
    """Whether half-open ``intervals`` together cover [lo, hi)."""
    reach = lo
    for a, z in sorted(intervals):
        if a > reach:
            return False
        reach = max(reach, z)
        if reach >= hi:
            return True
    return reach >= hi


def _covered(target: Box, boxes: list[Box], budget: ShadowBudget) -> bool | None:
    """Whether the union of ``boxes`` (each inside ``target``) covers ``target``; None: over budget.

    Dimensions every box spans entirely play no part; with one dimension left, an interval merge
    decides. Otherwise the target is cut into slabs at the box edges of its first open dimension,
    and each slab's set of boxes spanning it is decided one dimension lower (equal sets once).
    """
    if not boxes:
        return False
    open_dims = [d for d in range(len(target)) if any(b[d] != target[d] for b in boxes)]
    if not open_dims or any(all(b[d] == target[d] for d in open_dims) for b in boxes):
        return True  # one box is the whole target
    if len(open_dims) == 1:
        d = open_dims[0]
        return _merged_cover(target[d][0], target[d][1], (b[d] for b in boxes))
    d, rest = open_dims[0], open_dims[1:]
    lo, hi = target[d]
    edges = sorted({lo, hi, *(e for b in boxes for e in b[d] if lo < e < hi)})
    seen: dict[tuple[int, ...], bool] = {}
    for a, z in pairwise(edges):
        if not budget.spend(len(boxes)):
            return None
        active = tuple(i for i, b in enumerate(boxes) if b[d][0] <= a and b[d][1] >= z)
        if active in seen:
            continue
        answer = _covered(tuple(target[r] for r in rest), [tuple(boxes[i][r] for r in rest) for i in active], budget)
        if answer is not True:
            return answer
        seen[active] = True
    return True


def _shadowing(rules: Sequence[TunerRule], index: int, budget: ShadowBudget) -> tuple[list[int], bool | None]:
    """The earlier rules overlapping rule ``index``, and whether together they match every call it
    matches (None: undecided within ``budget``)."""
    rule = rules[index]
    target = _box(rule)
    candidates = [
        i for i in range(index)
        if rules[i].collective == rule.collective and _covers_group(rules[i], rule)
        and all(lo < t_hi and t_lo < hi for (lo, hi), (t_lo, t_hi) in zip(_box(rules[i]), target, strict=True))
    ]
    clipped = [
        tuple((max(lo, t_lo), min(hi, t_hi)) for (lo, hi), (t_lo, t_hi) in zip(_box(rules[i]), target, strict=True))
        for i in candidates
    ]
    return candidates, _covered(target, clipped, budget)


def check_rules(rules: Sequence[TunerRule], proto_env: str | None, algo_env: str | None,
                budget: ShadowBudget | None = None) -> list[Finding]:
    """Problems between the rules, and between the rules and the profile's own NCCL_PROTO/NCCL_ALGO.

    Errors: a rule that can never fire because earlier rules match everything it matches (first
    match wins); a protocol or algorithm that NCCL_PROTO/NCCL_ALGO disables for that collective
    (its cost-table cell is -1 and a tuner must not re-enable it, so the rule could never act).
    Warnings: combinations NCCL never runs, and LL128 when nothing enables it explicitly.
    Bounded: at most :data:`MAX_RULES` rules (more is an error, and the shadow check is skipped),
    and the shadow check's sweep stops after ``budget`` (a warning names each rule left undecided).
    """
    findings: list[Finding] = []
    budget = ShadowBudget() if budget is None else budget
    too_many = len(rules) > MAX_RULES
    if too_many:
        findings.append(
            error(
                "tuner.rules", f"{len(rules)} rules",
                f"a profile holds at most {MAX_RULES} tuner rules: the tuner tries them in order for every "
                "collective call NCCL makes",
                "merge rules with the same choice into wider byte ranges, or keep the rules of the groups you tune",
            )
        )
    for i, rule in enumerate(rules):
        label = rule_label(i)
        shadow, covered = ([], False) if too_many else _shadowing(rules, i, budget)
        if covered:
            by = ", ".join(rule_label(j) for j in shadow)
            findings.append(
                error(
                    label, rule.describe(),
                    f"can never match: first match wins and {by} already match{'es' if len(shadow) == 1 else ''} "
                    "every call it matches",
                    "move it before the rule(s) that shadow it, narrow those, or delete it",
                )
            )
        elif covered is None:
            findings.append(
                warning(
                    label, rule.describe(),
                    f"not checked for shadowing: {len(shadow)} earlier rules overlap it in bytes, ranks and nodes at "
                    f"once, more than the check examines ({SHADOW_BUDGET} steps per profile); if they match every "
                    "call it matches, it never fires",
                    "order the rules from narrow to wide, or split them by collective or group",
                )
            )
        for env_name, env_value, tokens, chosen, defaults in (
            ("NCCL_PROTO", proto_env, PROTOCOLS, rule.protocol, _PROTOCOL_DEFAULTS),
            ("NCCL_ALGO", algo_env, ALGORITHMS, rule.algorithm, None),
        ):
            row = enable_row(env_value, tokens, rule.collective, defaults)
            if env_value is not None and row is not None and row[chosen] == 0:
                usable = ", ".join(t for t in tokens if row[t])
                findings.append(
                    error(
                        env_name, env_value,
                        f"{label} ({rule.describe()}) chooses {chosen}, which this {env_name} disables for "
                        f"{rule.collective}; NCCL marks it unusable (-1) and a tuner cannot re-enable it",
                        f"enable {chosen} in {env_name} (e.g. remove {env_name} and let the rules decide), "
                        f"or choose one of {usable} in {label}",
                    )
                )
            elif row is not None and row[chosen] == 2:
                findings.append(
                    warning(
                        f"{label}.protocol", rule.protocol,
                        f"NCCL enables {chosen} by default only on some hardware and topologies; where it does not, "
                        "the cell is -1 and this rule leaves the choice to NCCL",
                        "check NCCL's 'Enabled NCCL Func/Proto/Algo Matrix' (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=ENV) "
                        "on the target machine",
                    )
                )
        if rule.algorithm not in _ALGORITHMS_FOR[rule.collective]:
            findings.append(
                warning(
                    f"{label}.algorithm", rule.algorithm,
                    f"NCCL runs {rule.collective} only with {', '.join(sorted(_ALGORITHMS_FOR[rule.collective]))}; "
                    "this rule never changes anything",
                    f"choose one of those for {rule.collective}",
                )
            )
        elif rule.algorithm in _SIMPLE_ONLY and rule.protocol != "Simple":
            findings.append(
                warning(
                    f"{label}.protocol", rule.protocol,
                    f"NCCL runs {rule.algorithm} only with the Simple protocol; this rule never changes anything",
                    f"write protocol = \"Simple\" for {rule.algorithm}",
                )
            )
    return findings


# --- wire format ------------------------------------------------------------------------------------


def rule_to_dict(rule: TunerRule) -> dict[str, Any]:
    """Plain JSON-able dict in the TOML shape (so :func:`rule_from_dict` re-validates it)."""
    out: dict[str, Any] = {
        "collective": rule.collective,
        "bytes": [rule.min_bytes, "inf" if rule.max_bytes is None else rule.max_bytes],
        "algorithm": rule.algorithm,
        "protocol": rule.protocol,
    }
    for key, r in (("nranks", rule.nranks), ("nnodes", rule.nnodes)):
        if r is not None:
            out[key] = [r[0], "inf" if r[1] is None else r[1]]
    if rule.group is not None:
        out["group"] = rule.group
    if rule.channels is not None:
        out["channels"] = rule.channels
    return out


def rule_from_dict(data: Mapping[str, Any], source: str = "wire format") -> TunerRule:
    """Decode one rule of the wire format, re-checking every value; raises ProfileError."""
    findings: list[Finding] = []
    rule = _parse_one(data, 0, findings)
    if rule is None or any(f.severity == "error" for f in findings):
        raise ProfileError([f.with_source(source) for f in findings])
    return rule


def rules_digest(rules: Iterable[TunerRule]) -> str:
    """Stable hex digest of the normalised rules, in order (first match wins, so order matters).
    Ranks compare it to know they run the same rules; names are canonical, so spelling does not count."""
    text = json.dumps([rule_to_dict(r) for r in rules], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
