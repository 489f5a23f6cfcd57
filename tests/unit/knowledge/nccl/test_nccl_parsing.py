"""NCCL's own reading of values, reproduced: strtoll, levels, PROTO/ALGO lists."""

from __future__ import annotations

import pytest
from packaging.version import Version

from sglang_eagle_nccl.knowledge.nccl import parsing as p


@pytest.mark.parametrize(
    "text,value,rest,octal",
    [
        ("4194304", 4194304, "", False),
        ("0x400000", 4194304, "", False),
        ("4M", 4, "M", False),
        ("8MB", 8, "MB", False),
        ("  12", 12, "", False),
        ("-5", -5, "", False),
        ("010", 8, "", True),
        ("0", 0, "", False),
        ("abc", 0, "abc", False),
        ("0x", 0, "x", False),
    ],
)
def test_strtoll_matches_c(text, value, rest, octal):
    r = p.strtoll0(text)
    assert (r.value, r.rest, r.octal) == (value, rest, octal)


def test_bytes_suffix_reports_what_nccl_reads_and_the_intended_bytes():
    (f,) = p.check_bytes("NCCL_BUFFSIZE", "4M")
    assert f.severity == "error"
    assert "read as 4 byte" in f.rule
    assert "NCCL_BUFFSIZE=4194304" in f.fix


def test_bytes_accepts_hex():
    assert p.check_bytes("NCCL_BUFFSIZE", "0x1000000") == []


def test_level_lowercase_is_error_with_uppercase_fix():
    (f,) = p.check_level("NCCL_P2P_LEVEL", "nvl", None)
    assert "strcmp" in f.rule and f.fix.endswith("NCCL_P2P_LEVEL=NVL")


def test_level_legacy_integer_is_accepted_with_mapping_note():
    (f,) = p.check_level("NCCL_P2P_LEVEL", "2", None)
    assert f.severity == "warning" and "PXB" in f.rule


@pytest.mark.parametrize(
    "level,version,severity", [("C2C", "2.25", "error"), ("C2C", "2.26", None), ("P2C", None, "warning")]
)
def test_level_names_follow_nccl_version(level, version, severity):
    found = p.check_level("NCCL_P2P_LEVEL", level, Version(version) if version else None)
    assert (found[0].severity if found else None) == severity


def test_proto_func_syntax_accepted_on_224():
    assert p.check_proto("NCCL_PROTO", "LL,Simple;AllReduce:Simple", Version("2.24")) == []


def test_proto_func_syntax_refused_before_224():
    (f,) = p.check_proto("NCCL_PROTO", "LL;allreduce:Simple", Version("2.21"))
    assert "2.24" in f.rule


@pytest.mark.parametrize("value", ["^LL", "LL128", "LL,LL128", "Simple;allreduce:^LL"])
def test_ll128_forced_on_warning(value):
    found = p.check_proto("NCCL_PROTO", value, Version("2.27"))
    assert any(f.severity == "warning" and "LL128" in f.rule for f in found)


@pytest.mark.parametrize("value", ["LL", "LL,Simple", "^LL128", "simple"])
def test_proto_without_ll128_forcing_is_quiet(value):
    assert p.check_proto("NCCL_PROTO", value, Version("2.27")) == []


def test_algo_is_case_insensitive_like_strcasecmp():
    assert p.check_algo("NCCL_ALGO", "ring,TREE", Version("2.27")) == []


def test_algo_pat_needs_223():
    found = p.check_algo("NCCL_ALGO", "PAT", Version("2.21"))
    assert any("2.23" in f.rule for f in found)


def test_sglang_deterministic_algo_value_is_valid():
    # SGLang itself writes NCCL_ALGO=allreduce:tree in deterministic mode.
    assert p.check_algo("NCCL_ALGO", "allreduce:tree", Version("2.27")) == []


def test_debug_file_percent_p_and_h_are_fine():
    assert p.check_debug_file("NCCL_DEBUG_FILE", "/tmp/nccl.%h.%p.log") == []


def test_thread_thresholds_six_numbers():
    assert p.check_thread_thresholds("NCCL_THREAD_THRESHOLDS", "64 256 256 64 256 256") == []
    assert p.check_thread_thresholds("NCCL_THREAD_THRESHOLDS", "64 256")[0].severity == "error"


def test_cta_policy_names_need_229():
    assert p.check_cta_policy("NCCL_CTA_POLICY", "EFFICIENCY|ZERO", Version("2.29")) == []
    assert p.check_cta_policy("NCCL_CTA_POLICY", "EFFICIENCY", Version("2.27"))[0].severity == "error"


# --- strtoll bounds (NCCL's ncclLoadParam: strtoll(str, NULL, 0); errno -> "Invalid value ... using default")


@pytest.mark.parametrize(
    "text,value,overflow",
    [
        ("9223372036854775807", 2**63 - 1, False),
        ("9223372036854775808", 2**63 - 1, True),
        ("-9223372036854775808", -(2**63), False),
        ("-9223372036854775809", -(2**63), True),
        ("0x7fffffffffffffff", 2**63 - 1, False),
        ("0x8000000000000000", 2**63 - 1, True),
        ("-0x8000000000000000", -(2**63), False),
        ("0777777777777777777777", 2**63 - 1, False),
        ("01000000000000000000000", 2**63 - 1, True),
        ("000000000000000000000000000042", 0o42, False),  # leading zeros are not significant
        ("9" * 5000, 2**63 - 1, True),
        ("0x" + "f" * 100000, 2**63 - 1, True),
    ],
)
def test_strtoll_overflow_like_glibc(text, value, overflow):
    parsed = p.strtoll0(text)
    assert (parsed.value, parsed.overflow) == (value, overflow)


def test_strtoll_reads_only_ascii_digits():
    assert "٣".isdigit()  # why str.isdigit() is not used anywhere
    assert p.strtoll0("٣").consumed == ""
    assert p.strtoll0("1٣").value == 1 and p.strtoll0("1٣").rest == "٣"


def test_huge_digit_strings_never_reach_int():
    import sys

    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
    text = "1" * (limit * 10)
    assert p.check_integer("NCCL_NTHREADS", text, minimum=64, maximum=512)[0].rule.startswith(
        "the number is outside"
    )
    assert p.check_bytes("NCCL_BUFFSIZE", text + "M")[0].severity == "error"
    assert p.check_thread_thresholds("NCCL_THREAD_THRESHOLDS", " ".join([text] * 6))[0].severity == "error"
    assert p.check_level("NCCL_P2P_LEVEL", text, None)[0].severity == "error"
