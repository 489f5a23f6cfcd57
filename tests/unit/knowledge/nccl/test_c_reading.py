"""The one emulation of NCCL's C reading (strtoll numbers, path levels), checked against C itself.

``strtoll0`` is compared with the C library's own ``strtoll`` (through ctypes) on the bounds of
a long long in every base, one past each bound, and on generated strings; the level rule follows
``ncclGetLevel`` in NCCL's ``src/graph/paths.cc`` (cited in the module). The profile checks
(``parsing``) and the debug-log comparison (``debug_log_check``) must read every value the same way.
"""

from __future__ import annotations

import ctypes

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sglang_eagle_nccl.knowledge.nccl import c_reading as c
from sglang_eagle_nccl.knowledge.nccl import parsing
from sglang_eagle_nccl.knowledge.nccl.debug_log_check import _agree, _level_name, _strtoll

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.strtoll.restype = ctypes.c_longlong
_LIBC.strtoll.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
ERANGE = 34


def libc_strtoll(text: str) -> tuple[int, int, bool]:
    """(value, bytes read, ERANGE) from the C library's strtoll(text, &end, 0)."""
    buf = ctypes.create_string_buffer(text.encode("utf-8"))
    end = ctypes.c_void_p()
    ctypes.set_errno(0)
    value = _LIBC.strtoll(ctypes.addressof(buf), ctypes.byref(end), 0)
    overflow = ctypes.get_errno() == ERANGE
    return value, end.value - ctypes.addressof(buf), overflow


def ours(text: str) -> tuple[int, int, bool]:
    parsed = c.strtoll0(text)
    read = len(text.encode("utf-8")) - len(parsed.rest.encode("utf-8"))
    return parsed.value, read, parsed.overflow


EDGES = [
    # decimal: the bounds and one past each
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "+9223372036854775807",
    "+9223372036854775808",
    # hex: the bounds and one past
    "0x7fffffffffffffff",
    "0x8000000000000000",
    "-0x8000000000000000",
    "-0x8000000000000001",
    "0X7FFFFFFFFFFFFFFF",
    # octal: the bounds and one past
    "0777777777777777777777",
    "01000000000000000000000",
    "-01000000000000000000000",
    "-01000000000000000000001",
    # leading zeros are not significant digits
    "000000000000000000000009223372036854775807",
    "0x00000000000000007fffffffffffffff",
    # prefixes without digits, signs, white space, trailing text
    "",
    "0",
    "-0",
    "+",
    "-",
    "+-1",
    " ",
    "0x",
    "0xg",
    "0X",
    " 0x1",
    "-0x",
    "08",
    "09",
    "0x1g",
    "4M",
    "8MB",
    "1e3",
    " \t\n\v\f\r12",
    "\u00a012",
    "12 ",
    "1٣",
    "٣",
    "0b101",
    "1_000",
    "--1",
    "+ 1",
    "9" * 40,
    "-" + "9" * 40,
    "0x" + "f" * 40,
    "0" + "7" * 40,
]


@pytest.mark.parametrize("text", EDGES)
def test_strtoll_is_the_c_library_on_the_edges(text):
    assert ours(text) == libc_strtoll(text)


@given(st.text(alphabet=" \t+-0123456789xXabcdefABCDEFgM٣\u00a0", max_size=30))
@example("-9223372036854775809")
def test_strtoll_is_the_c_library_on_generated_text(text):
    assert ours(text) == libc_strtoll(text)


@given(st.integers(min_value=-(2**66), max_value=2**66), st.sampled_from(["{:d}", "{:#x}", "0{:o}"]))
def test_strtoll_is_the_c_library_around_the_range(number, form):
    text = ("-" + form.format(-number)) if number < 0 else form.format(number)
    assert ours(text) == libc_strtoll(text)


@pytest.mark.parametrize(
    "value",
    [0, 1, -1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 2, -(2**31), -(2**31) - 1, 2**63 - 1, -(2**63)],
)
def test_c_int_keeps_the_low_32_bits_like_a_c_conversion(value):
    assert c.c_int(value) == ctypes.c_int(value).value


# --- ncclGetLevel (src/graph/paths.cc) --------------------------------------------------------


@pytest.mark.parametrize(
    "text,how,level,number",
    [
        ("LOC", "name", "LOC", None),
        ("SYS", "name", "SYS", None),
        ("P2C", "name", "P2C", None),
        ("NET", "ignored", None, None),  # after PATH_SYS in topoPathTypeStr: never accepted
        ("DIS", "ignored", None, None),
        ("nvl", "ignored", None, None),  # strcmp: case matters
        ("", "ignored", None, None),
        (" 2", "ignored", None, None),  # the first character must be a digit: no white space
        ("+2", "ignored", None, None),  # ... and no sign
        ("٢", "ignored", None, None),  # an Arabic-Indic digit is not '0'..'9'
        ("0", "legacy", "LOC", 0),
        ("1", "legacy", "PIX", 1),
        ("2", "legacy", "PXB", 2),
        ("3", "legacy", "PHB", 3),
        ("4", "legacy", "SYS", 4),
        ("5", "legacy", "SYS", 5),
        ("6", "legacy", "SYS", 6),  # clamped to the last entry
        ("0x3", "legacy", "PHB", 3),
        ("3abc", "legacy", "PHB", 3),
        ("09", "legacy", "LOC", 0),  # octal: strtol reads "0" and stops at 9
        ("2147483647", "legacy", "SYS", 2147483647),  # INT_MAX: still a clamp
        ("2147483648", "undefined", None, -2147483648),  # one past INT_MAX wraps negative
        ("4294967295", "undefined", None, -1),
        ("4294967296", "legacy", "LOC", 0),  # 2**32 keeps no low bits: level 0
        ("4294967298", "legacy", "PXB", 2),
        ("99999999999999999999", "undefined", None, -1),  # strtol overflows to LONG_MAX; low bits -1
    ],
)
def test_read_level_is_ncclgetlevel(text, how, level, number):
    assert c.read_level(text) == c.LevelReading(how, level, number)


def test_the_level_table_is_topopathtypestr_up_to_sys():
    # src/graph/topo.cc (2.28+): LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS | NET DIS
    assert c.LEVELS == ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
    assert c.LEGACY_LEVELS == ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")


# --- every reader asks the one copy -----------------------------------------------------------


def test_parsing_reexports_the_one_copy():
    assert parsing.strtoll0 is c.strtoll0 and parsing.LEVELS is c.LEVELS


@pytest.mark.parametrize("text", ["4294967298", "09", "2x", "99999999999999999999", "2147483648"])
def test_profile_check_names_the_level_nccl_reads(text):
    (finding,) = parsing.check_level("NCCL_P2P_LEVEL", text, None)
    assert finding.severity == "error"
    reading = c.read_level(text)
    assert str(reading.number) in finding.rule
    if reading.level:
        assert finding.fix == f"write the level name, e.g. NCCL_P2P_LEVEL={reading.level}"
    else:
        assert "undefined behaviour" in finding.rule


@pytest.mark.parametrize("text,level", [("6", "SYS"), ("0x3", "PHB"), ("0", "LOC")])
def test_profile_check_warns_on_a_plain_legacy_level(text, level):
    (finding,) = parsing.check_level("NCCL_P2P_LEVEL", text, None)
    assert (
        finding.severity == "warning" and finding.fix == f"write NCCL_P2P_LEVEL={level} to say what you mean"
    )


@pytest.mark.parametrize("text", ["NET", "DIS", "4294967295", "", " 2"])
def test_debug_log_finds_no_level_where_nccl_uses_none(text):
    assert _level_name(text) is None


@pytest.mark.parametrize("text,level", [("4294967298", "PXB"), ("09", "LOC"), ("PXB", "PXB"), ("7", "SYS")])
def test_debug_log_reads_a_level_as_nccl_does(text, level):
    assert _level_name(text) == level


@pytest.mark.parametrize(
    "text,expected",
    [
        ("9223372036854775807", (2**63 - 1, True)),
        ("9223372036854775808", (None, False)),  # ERANGE: NCCL keeps its default
        ("99999999999999999999999", (None, False)),
        ("4M", (4, False)),
        ("abc", (None, False)),
    ],
)
def test_debug_log_numbers_are_strtoll(text, expected):
    assert _strtoll(text) == expected


def test_debug_log_disable_switch_is_an_int_compared_with_one():
    class Report:
        value = raw = "LOC"

    assert _agree("NCCL_P2P_DISABLE", "1", Report())[0]
    assert _agree("NCCL_P2P_DISABLE", "4294967297", Report())[0]  # strtol into an int: 1
    assert not _agree("NCCL_P2P_DISABLE", "2", Report())[0]
    assert not _agree("NCCL_P2P_DISABLE", "x1", Report())[0]
