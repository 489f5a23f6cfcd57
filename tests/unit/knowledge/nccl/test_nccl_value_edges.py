"""NCCL value checks at their edges (issue 19): every integer bound of the variable table at the
bound and one past it, strtoll's reading at the limits of a long long, and each check's verdict
(error / warning / nothing) for the values on either side of its rule."""

from __future__ import annotations

import pytest

from sglang_eagle_nccl.knowledge.nccl import parsing as p
from sglang_eagle_nccl.knowledge.nccl import variables as v


def sev(findings) -> list[str]:
    return [f.severity for f in findings]


# --- the table's integer bounds, each at the bound and one past it -------------------------------------

INT_SPECS = [
    s for s in v.table().values() if s.kind == "int" and (s.minimum is not None or s.maximum is not None)
]
BYTE_SPECS = [s for s in v.table().values() if s.kind == "bytes"]


def test_the_table_has_bounded_integers_and_byte_counts():
    assert len(INT_SPECS) >= 10 and BYTE_SPECS
    nthreads = v.lookup("NCCL_NTHREADS")
    assert (nthreads.minimum, nthreads.maximum, nthreads.multiple_of) == (64, 512, 32)
    assert v.lookup("NCCL_MAX_NCHANNELS").maximum == 64 and v.lookup("NCCL_MIN_NCHANNELS").minimum == 1
    assert v.lookup("NCCL_BUFFSIZE").maximum == 2**31 - 1


@pytest.mark.parametrize("spec", INT_SPECS, ids=[s.name for s in INT_SPECS])
def test_each_integer_bound_holds_at_the_bound_and_fails_one_past_it(spec):
    step = spec.multiple_of or 1
    if spec.minimum is not None:
        lo = spec.minimum
        assert [f for f in v.check_value(spec, str(lo)) if f.severity == "error"] == [], (spec.name, lo)
        past = lo - step
        errors = [f for f in v.check_value(spec, str(past)) if f.severity == "error"]
        assert errors and errors[0].variable == spec.name and errors[0].value == str(past), (spec.name, past)
        assert errors[0].rule.startswith(f"must be between {lo} and ")
    if spec.maximum is not None:
        hi = spec.maximum
        assert [f for f in v.check_value(spec, str(hi)) if f.severity == "error"] == [], (spec.name, hi)
        past = hi + step
        errors = [f for f in v.check_value(spec, str(past)) if f.severity == "error"]
        assert errors and errors[0].value == str(past), (spec.name, past)
        assert errors[0].rule.endswith(f" and {hi}")


@pytest.mark.parametrize("spec", BYTE_SPECS, ids=[s.name for s in BYTE_SPECS])
def test_each_byte_count_is_positive_and_at_most_its_maximum(spec):
    assert v.check_value(spec, "1") == [] or sev(v.check_value(spec, "1")) == ["warning"]
    assert sev(v.check_value(spec, "0")) == ["error"] and sev(v.check_value(spec, "-1")) == ["error"]
    if spec.maximum is not None:
        assert "error" not in sev(v.check_value(spec, str(spec.maximum)))
        (f,) = v.check_value(spec, str(spec.maximum + 1))
        assert f.severity == "error" and f"a size above {spec.maximum}" in f.rule
        assert (
            f.fix == f"give a byte count up to {spec.maximum}, e.g. {spec.name}={min(1 << 30, spec.maximum)}"
        )


def test_integer_range_message_with_one_open_end():
    (f,) = p.check_integer("N", "-5", minimum=0)
    assert f.rule == "must be between 0 and inf" and f.fix == "choose an integer in [0, inf]"
    (f,) = p.check_integer("N", "5", maximum=4)
    assert f.rule == "must be between -inf and 4"
    assert p.check_integer("N", "-5") == [] and p.check_integer("N", "4", minimum=4, maximum=4) == []


def test_multiple_of_names_the_neighbours():
    (f,) = p.check_integer("NCCL_NTHREADS", "100", minimum=64, maximum=512, multiple_of=32)
    assert f.fix == "use 96 or 128"
    (f,) = p.check_integer("NCCL_NTHREADS", "65", minimum=64, maximum=512, multiple_of=32)
    assert f.fix == "use 64 or 96"
    below = p.check_integer("X", "10", minimum=64, multiple_of=32)  # below the minimum: down is the minimum
    assert [x.fix for x in below] == ["choose an integer in [64, inf]", "use 64 or 96"]
    assert (
        p.check_integer("X", "96", multiple_of=32) == [] and p.check_integer("X", "0", multiple_of=32) == []
    )
    (f,) = p.check_integer("X", "5", multiple_of=4)
    assert f.fix == "use 4 or 8"


# --- strtoll at the limits of a long long ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text,value,overflow",
    [
        (str(2**63 - 1), 2**63 - 1, False),
        (str(2**63), 2**63 - 1, True),
        (str(-(2**63)), -(2**63), False),
        (str(-(2**63) - 1), -(2**63), True),
        ("0x7fffffffffffffff", 2**63 - 1, False),
        ("0x8000000000000000", 2**63 - 1, True),
        ("-0x8000000000000000", -(2**63), False),
        ("0777777777777777777777", 2**63 - 1, False),
        ("01000000000000000000000", 2**63 - 1, True),
        ("9" * 19, 2**63 - 1, True),
        ("0" * 30 + "1", 1, False),
    ],
)
def test_strtoll_at_the_long_long_limits(text, value, overflow):
    got = p.strtoll0(text)
    assert (got.value, got.overflow) == (value, overflow)
    assert got.consumed == text and got.rest == ""


@pytest.mark.parametrize(
    "text,value,consumed,rest,octal",
    [
        (" \t\n\v\f\r42", 42, "42", "", False),  # C's isspace() set is skipped, not consumed
        ("+7", 7, "+7", "", False),
        ("-0", 0, "-0", "", False),
        ("0", 0, "0", "", False),
        ("00", 0, "00", "", False),
        ("010", 8, "010", "", True),
        ("08", 0, "0", "8", False),
        ("0x", 0, "0", "x", False),
        ("0xg", 0, "0", "xg", False),
        ("0X1f", 31, "0X1f", "", False),
        ("0x0", 0, "0x0", "", False),
        ("12abc", 12, "12", "abc", False),
        ("", 0, "", "", False),
        ("-", 0, "", "-", False),
        ("  ", 0, "", "  ", False),
        ("\u00a042", 0, "", "\u00a042", False),
    ],
)
def test_strtoll_reading(text, value, consumed, rest, octal):
    got = p.strtoll0(text)
    assert (got.value, got.consumed, got.rest, got.octal) == (value, consumed, rest, octal)


def test_integer_overflow_is_an_error_naming_the_range_or_the_default():
    (f,) = p.check_integer("N", str(2**63), minimum=1, maximum=8)
    assert f.value == str(2**63) and f.fix == "give an integer in [1, 8]"
    assert f"[{p.LLONG_MIN}, {p.LLONG_MAX}]" in f.rule
    (f,) = p.check_integer("N", str(2**63))
    assert f.fix == "give an integer that fits in 64 bits, or remove N to keep NCCL's default"
    assert p.check_integer("N", str(2**63 - 1)) == []
    (f,) = p.check_integer("N", str(2**63), minimum=1)
    assert f.fix == "give an integer in [1, inf]"
    (f,) = p.check_integer("N", str(2**63), maximum=9)
    assert f.fix == "give an integer in [-inf, 9]"


@pytest.mark.parametrize(
    "value,rule_start,fix",
    [
        ("", "an empty value makes NCCL use its default", "remove N or give an integer"),
        ("   ", "an empty value makes NCCL use its default", "remove N or give an integer"),
        ("x", "NCCL parses N with strtoll, which reads no number", "give an integer, e.g. N=1"),
        (
            "4M",
            "NCCL parses N with strtoll and silently ignores the trailing 'M', so it would read 4",
            "write the plain integer, e.g. N=4",
        ),
        (
            "010",
            "a leading 0 makes NCCL's strtoll(base 0) read '010' as octal = 8",
            "remove the leading zero: N=10",
        ),
        ("4 ", None, None),
        (" 4", None, None),
        ("0x10", None, None),
    ],
)
def test_integer_readings(value, rule_start, fix):
    findings = p.check_integer("N", value)
    if rule_start is None:
        assert findings == []
    else:
        (f,) = findings
        assert f.severity == "error" and f.value == value and f.rule.startswith(rule_start) and f.fix == fix


def test_no_number_example_uses_a_positive_minimum():
    (f,) = p.check_integer("N", "x", minimum=64)
    assert f.fix == "give an integer, e.g. N=64"
    (f,) = p.check_integer("N", "x", minimum=0)
    assert f.fix == "give an integer, e.g. N=1"
    assert p.check_integer("N", "0000", minimum=0, maximum=0) == []  # all zeros is not octal: 0
