"""How NCCL's C code turns a string into a number or a path level: the one copy of both rules.

Every check of a profile value (:mod:`.parsing`) and every comparison with what NCCL logged
(:mod:`.debug_log_check`) asks this module, so the two can never read one string two ways.

Numbers. ``ncclLoadParam`` (NCCL ``src/misc/param.cc``) reads every ``NCCL_PARAM`` with
``strtoll(str, nullptr, 0)`` and keeps its default when ``errno`` is set (ERANGE): leading C
white space, an optional sign, ``0x`` hex, a leading ``0`` for octal, ASCII digits only, and
whatever follows the digits silently ignored. :func:`strtoll0` is that function; the unit tests
compare it with the C library's own ``strtoll`` through ``ctypes``.

Levels. ``ncclGetLevel`` (``src/graph/paths.cc``; ``NCCL_P2P_LEVEL``, ``NCCL_NET_GDR_LEVEL`` ...)
first compares the value with ``strcmp`` against ``topoPathTypeStr[0..PATH_SYS]``
(``src/graph/topo.cc``; ``NET`` and ``DIS`` come after ``SYS`` and are never accepted). If no name
matched and the first character is an ASCII digit, it reads ``int oldLevel = strtol(str, NULL,
0)``, clamps values above 5 to 5 and indexes ``levelsOldToNew`` = LOC, PIX, PXB, PHB, SYS, SYS.
Two C details matter: ``strtol`` returns a ``long`` (64 bits on Linux, so it overflows exactly
like ``strtoll``) which is then stored in an ``int`` (GCC keeps the low 32 bits: 4294967296
becomes 0, i.e. LOC), and a negative ``int`` passes the clamp and indexes before the table
(undefined behaviour). Anything else is ignored without a log line.
"""

from __future__ import annotations

from dataclasses import dataclass

# C's long long (and Linux's long): the range of strtoll / strtol.
LLONG_MIN = -(2**63)
LLONG_MAX = 2**63 - 1
# isspace() in the C locale.
C_SPACE = frozenset(" \t\n\v\f\r")
_BASE_DIGITS = {
    8: frozenset("01234567"),
    10: frozenset("0123456789"),
    16: frozenset("0123456789abcdefABCDEF"),
}
# Significant digits beyond which a number cannot fit a long long in that base: the magnitude of
# LLONG_MIN, 2**63, has 19 decimal, 16 hex and 22 octal digits (1 followed by 21 zeros; LLONG_MAX
# has 21). Longer digit strings are known to overflow without converting them, which keeps
# int() away from Python's digit limit and from quadratic work; shorter ones are range-checked.
_MAX_SIGNIFICANT = {8: 22, 10: 19, 16: 16}


@dataclass(frozen=True)
class Strtoll:
    """What C's ``strtoll(s, &end, 0)`` makes of a string."""

    value: int  # what strtoll returns (LLONG_MIN / LLONG_MAX when it overflows)
    consumed: str  # what strtoll read after the leading white space (sign included)
    rest: str  # what it silently ignored
    octal: bool  # base-0 parsing read a leading 0 as octal
    # errno == ERANGE: NCCL logs "Invalid value ... using default" and keeps its default.
    overflow: bool = False


def strtoll0(text: str) -> Strtoll:
    """Emulate ``strtoll(text, &end, 0)``: leading spaces, sign, 0x hex, leading-0 octal.

    Only ASCII digits count, as in C: "٣" is not a digit to strtoll, whatever Python's
    ``str.isdigit()`` says. Never calls ``int()`` on more digits than a long long can hold.
    """
    i = 0
    n = len(text)
    while i < n and text[i] in C_SPACE:
        i += 1
    start = i
    negative = False
    if i < n and text[i] in "+-":
        negative = text[i] == "-"
        i += 1
    base = 10
    # "0x" counts as a prefix only when a hex digit follows; else strtoll reads the "0" alone.
    if text[i : i + 2] in ("0x", "0X") and i + 2 < n and text[i + 2] in _BASE_DIGITS[16]:
        base = 16
        i += 2
    elif i < n and text[i] == "0":
        base = 8
    digits = _BASE_DIGITS[base]
    j = i
    while j < n and text[j] in digits:
        j += 1
    if j == i:  # no digits at all: strtoll returns 0 and consumes nothing (not even the spaces)
        return Strtoll(0, "", text, False)
    raw = text[i:j]
    significant = raw.lstrip("0")
    octal = base == 8 and len(raw) > 1 and significant != ""
    if len(significant) > _MAX_SIGNIFICANT[base]:
        overflow = True
        value = LLONG_MIN if negative else LLONG_MAX
    else:
        magnitude = int(significant, base) if significant else 0
        value = -magnitude if negative else magnitude
        overflow = not LLONG_MIN <= value <= LLONG_MAX
        if overflow:
            value = LLONG_MIN if negative else LLONG_MAX
    return Strtoll(value, text[start:j], text[j:], octal, overflow)


def c_int(value: int) -> int:
    """A ``long`` stored in a C ``int``: GCC keeps the low 32 bits, two's complement."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def strtol_int(text: str) -> int:
    """``int x = strtol(text, NULL, 0)``, as ``ncclGetLevel`` reads legacy levels and ``*_DISABLE``."""
    return c_int(strtoll0(text).value)


# topoPathTypeStr[0..PATH_SYS] (src/graph/topo.cc), the names ncclGetLevel accepts, in the order of
# the newest NCCL (2.28 put P2C before PXN; the order does not matter for reading a name).
LEVELS = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
# Names a release before this one does not have in its table (so it ignores them).
LEVEL_SINCE = {"C2C": "2.26", "P2C": "2.27"}
# levelsOldToNew (src/graph/paths.cc): index = the legacy integer level, clamped to 5.
LEGACY_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")


@dataclass(frozen=True)
class LevelReading:
    """What ``ncclGetLevel`` makes of a ``*_LEVEL`` value (for the newest NCCL's table)."""

    how: str  # "name", "legacy" (a number), "ignored" (no log line, NCCL's default) or "undefined"
    level: str | None  # the level NCCL uses; None when ignored or undefined
    number: int | None = None  # for "legacy" / "undefined": the int NCCL indexed its table with


def read_level(text: str) -> LevelReading:
    """The level NCCL uses for ``text`` (see the module docstring for the rule, with citations)."""
    if text in LEVELS:
        return LevelReading("name", text)
    if text[:1] in _BASE_DIGITS[10]:
        number = strtol_int(text)
        if number < 0:
            return LevelReading("undefined", None, number)
        return LevelReading("legacy", LEGACY_LEVELS[min(number, len(LEGACY_LEVELS) - 1)], number)
    return LevelReading("ignored", None)
