"""Tuner rules at their edges: every bound at the bound and one past it, every refusal naming the
rule key and value, and the match model's inclusive/exclusive ends (issue 19). The C tuner's own
matching is held to the same ends in tests/native/test_native_tuner.py."""

from __future__ import annotations

import pytest

from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import (
    MAX_CHANNELS,
    SIZE_T_MAX,
    TunerRule,
    check_rules,
    first_match,
    matches,
    parse_rules,
    rule_from_dict,
    rule_label,
    rule_to_dict,
    rules_digest,
)

MIN_BYTES = f"min must be an integer number of bytes from 0 to {SIZE_T_MAX - 1}"
MAX_BYTES = f'max must be an integer number of bytes up to {SIZE_T_MAX} (NCCL\'s size_t: no message is larger) or "inf"'


def rule(**fields) -> dict:
    base = {"collective": "allreduce", "bytes": [0, 1024], "algorithm": "ring", "protocol": "LL"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def parsed(**fields) -> TunerRule:
    rules, findings = parse_rules([rule(**fields)], "t.toml")
    assert findings == [], findings
    (r,) = rules
    return r


def refused(**fields):
    rules, findings = parse_rules([rule(**fields)], "t.toml")
    assert rules == []
    (f,) = findings
    assert f.severity == "error" and f.source == "t.toml"
    return f


# --- names ---------------------------------------------------------------------------------------------


def test_names_match_case_insensitively_after_stripping():
    r = parsed(collective=" ALLGATHER ", algorithm="nvls", protocol="simple")
    assert (r.collective, r.algorithm, r.protocol) == ("AllGather", "NVLS", "Simple")
    assert (r.collective_id, r.algorithm_id, r.protocol_id) == (2, 4, 2)


@pytest.mark.parametrize(
    "key,example",
    [
        ("collective", 'add collective = "Reduce"'),
        ("algorithm", 'add algorithm = "Ring"'),
        ("protocol", 'add protocol = "LL128"'),
    ],
)
def test_a_missing_name_is_named_with_an_example(key, example):
    f = refused(**{key: None})
    assert f.variable == f"tuner.rules#1.{key}" and f.value is None
    assert f.rule == f"every rule needs a {key}" and f.fix == example


@pytest.mark.parametrize(
    "key,value",
    [("collective", "allreduces"), ("algorithm", 1), ("protocol", "LL,Simple"), ("algorithm", "ring tree")],
)
def test_an_unknown_name_is_refused(key, value):
    f = refused(**{key: value})
    assert f.variable == f"tuner.rules#1.{key}" and f.value == repr(value) and f.rule == f"unknown {key}"


# --- bytes: [min, max) ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,expected",
    [
        ([0, 1], (0, 1)),
        ([7, 8], (7, 8)),
        ([0, "inf"], (0, None)),
        ([5, " Infinity "], (5, None)),
        ([0, "INF"], (0, None)),
    ],
)
def test_byte_ranges_accepted(value, expected):
    r = parsed(bytes=value)
    assert (r.min_bytes, r.max_bytes) == expected


@pytest.mark.parametrize(
    "value,rule_text",
    [
        (None, "every rule needs a byte range [min, max) of NCCL's nBytes"),
        ([0], "must be a list of two sizes [min, max)"),
        ([0, 1, 2], "must be a list of two sizes [min, max)"),
        ((0, 1), "must be a list of two sizes [min, max)"),
        ([-1, 10], MIN_BYTES),
        ([True, 10], MIN_BYTES),
        (["0", 10], MIN_BYTES),
        ([0, "10"], MAX_BYTES),
        ([0, False], MAX_BYTES),
        ([0, 1.5], MAX_BYTES),
        ([SIZE_T_MAX, "inf"], MIN_BYTES),  # at the bound: [SIZE_T_MAX, ...) holds no size_t at all
        ([0, SIZE_T_MAX + 1], MAX_BYTES),  # one past: no message is larger than SIZE_T_MAX
        ([8, 8], "the range [min, max) is empty: max is excluded, so nothing matches"),
        ([9, 8], "the range is inverted (min > max)"),
    ],
)
def test_byte_ranges_refused(value, rule_text):
    f = refused(bytes=value)
    assert f.variable == "tuner.rules#1.bytes" and f.rule == rule_text
    assert f.value == (None if value is None else repr(value))


def test_byte_and_count_bounds_at_the_edge_are_taken():
    edge = parsed(bytes=[SIZE_T_MAX - 1, SIZE_T_MAX])
    assert (edge.min_bytes, edge.max_bytes) == (SIZE_T_MAX - 1, SIZE_T_MAX)
    assert parsed(bytes=[0, SIZE_T_MAX]).max_bytes == SIZE_T_MAX
    assert parsed(nranks=[SIZE_T_MAX, SIZE_T_MAX]).nranks == (SIZE_T_MAX, SIZE_T_MAX)
    assert parsed(nnodes=[1, SIZE_T_MAX]).nnodes == (1, SIZE_T_MAX)


def test_byte_range_fixes_give_the_nearest_valid_range():
    assert refused(bytes=[8, 8]).fix == "write [8, 9] or more"
    assert refused(bytes=[9, 8]).fix == "write [8, 9]"


# --- nranks / nnodes: [min, max], from 1 -----------------------------------------------------------------


@pytest.mark.parametrize("key", ["nranks", "nnodes"])
def test_count_ranges(key):
    assert getattr(parsed(**{key: [1, 1]}), key) == (1, 1)
    assert getattr(parsed(**{key: [2, "inf"]}), key) == (2, None)
    assert getattr(parsed(**{key: [2, 3]}), key) == (2, 3)
    assert getattr(parsed(), key) is None
    for value, text in (
        ([0, 4], "min must be an integer from 1 to"),
        ([True, 4], "min must be an integer from 1 to"),
        ([SIZE_T_MAX + 1, "inf"], "min must be an integer from 1 to"),
        ([4, 3], "the range is inverted (min > max)"),
        ([1, "9"], "max must be an integer up to"),
        ([1, SIZE_T_MAX + 1], "max must be an integer up to"),
        ([1], "must be a list [min, max]"),
        (4, "must be a list [min, max]"),
    ):
        f = refused(**{key: value})
        assert f.variable == f"tuner.rules#1.{key}" and f.rule.startswith(text), (value, f.rule)
        assert f.fix == f"write e.g. {key} = [2, 8]" or f.fix == "write [3, 4]"


# --- group, channels, unknown keys -------------------------------------------------------------------------


def test_group_label_length_and_characters():
    assert parsed(group="g" * 64).group == "g" * 64
    assert parsed(group="moe_ep:0.x-1").group == "moe_ep:0.x-1"
    for value in ("g" * 65, "", "tp group", "tp/0", 5, "\u0663"):
        f = refused(group=value)
        assert f.variable == "tuner.rules#1.group" and f.value == repr(value)


def test_channels_from_one_to_max_channels():
    assert MAX_CHANNELS == 64
    assert parsed(channels=1).channels == 1 and parsed(channels=64).channels == 64
    for value in (0, 65, -1, True, 8.0, "8"):
        f = refused(channels=value)
        assert f.variable == "tuner.rules#1.channels" and f.value == repr(value)
        assert f.rule == "must be an integer from 1 to 64"


def test_unknown_keys_and_non_tables_are_refused_and_labelled_by_position():
    rules, findings = parse_rules([rule(), rule(speed=1), "not a table"], "t.toml")
    assert rules == [parsed()]
    assert [(f.variable, f.value) for f in findings] == [
        ("tuner.rules#2.speed", "1"),
        ("tuner.rules#3", "'not a table'"),
    ]
    assert rule_label(0) == "tuner.rules#1"
    rules, findings = parse_rules({"collective": "allreduce"}, "t.toml")
    assert rules == [] and findings[0].variable == "tuner.rules" and findings[0].source == "t.toml"


def test_one_bad_key_drops_the_whole_rule_and_every_problem_is_reported():
    rules, findings = parse_rules([rule(bytes=[5, 1], channels=0, group="a b")], "t.toml")
    assert rules == [] and {f.variable for f in findings} == {
        "tuner.rules#1.bytes",
        "tuner.rules#1.channels",
        "tuner.rules#1.group",
    }


# --- the match model -------------------------------------------------------------------------------------


def test_bytes_min_is_included_and_max_excluded():
    r = parsed(bytes=[100, 200])
    assert [matches(r, "AllReduce", n, 2, 1, None) for n in (99, 100, 199, 200)] == [False, True, True, False]
    unbounded = parsed(bytes=[100, "inf"])
    assert matches(unbounded, "AllReduce", 2**62, 2, 1, None) and not matches(
        unbounded, "AllReduce", 99, 2, 1, None
    )


def test_rank_and_node_ranges_include_both_ends():
    r = parsed(nranks=[2, 4], nnodes=[1, 2])
    assert [matches(r, "AllReduce", 0, n, 1, None) for n in (1, 2, 4, 5)] == [False, True, True, False]
    assert [matches(r, "AllReduce", 0, 2, n, None) for n in (1, 2, 3)] == [True, True, False]
    open_ended = parsed(nranks=[2, "inf"])
    assert matches(open_ended, "AllReduce", 0, 4096, 1, None) and not matches(
        open_ended, "AllReduce", 0, 1, 1, None
    )


def test_collective_and_group_must_match():
    r = parsed(group="tp")
    assert matches(r, "AllReduce", 0, 2, 1, "tp")
    assert not matches(r, "AllReduce", 0, 2, 1, "pp") and not matches(r, "AllReduce", 0, 2, 1, None)
    assert not matches(r, "AllGather", 0, 2, 1, "tp")
    anyone = parsed()
    assert matches(anyone, "AllReduce", 0, 2, 1, None) and matches(anyone, "AllReduce", 0, 2, 1, "tp")


def test_first_match_wins_and_none_leaves_the_choice_to_nccl():
    small, tp_only, everything = (
        parsed(bytes=[0, 100]),
        parsed(bytes=[0, 1000], group="tp"),
        parsed(bytes=[0, "inf"]),
    )
    rules = [small, tp_only, everything]
    assert first_match(rules, "AllReduce", 50, 2, group="tp") == 0
    assert first_match(rules, "AllReduce", 500, 2, group="tp") == 1
    assert first_match(rules, "AllReduce", 500, 2) == 2
    assert first_match(rules, "AllGather", 50, 2) is None and first_match([], "AllReduce", 0, 2) is None
    assert first_match([parsed(nnodes=[2, 2])], "AllReduce", 0, 2) is None  # nnodes defaults to 1


# --- against NCCL_PROTO / NCCL_ALGO --------------------------------------------------------------------


def test_a_rule_choosing_what_nccl_proto_disables_is_an_error_naming_the_usable_ones():
    (f,) = [f for f in check_rules([parsed(protocol="LL")], "Simple,LL128", None) if f.severity == "error"]
    assert f.variable == "NCCL_PROTO" and f.value == "Simple,LL128"
    assert "chooses LL, which this NCCL_PROTO disables for AllReduce" in f.rule
    assert f.fix.endswith("or choose one of LL128, Simple in tuner.rules#1")
    assert [f for f in check_rules([parsed(protocol="LL")], "LL", None) if f.severity == "error"] == []
    assert [f for f in check_rules([parsed(protocol="LL")], "^Simple", None) if f.severity == "error"] == []
    per_function = check_rules([parsed(protocol="LL")], "AllGather:Simple", None)
    assert [f for f in per_function if f.severity == "error"] == []  # disabled for all-gather only


def test_a_rule_choosing_what_nccl_algo_disables_is_an_error():
    errors = [f for f in check_rules([parsed(algorithm="ring")], None, "Tree") if f.severity == "error"]
    assert [(f.variable, f.value) for f in errors] == [("NCCL_ALGO", "Tree")]
    assert "usable" not in errors[0].fix and "choose one of Tree in tuner.rules#1" in errors[0].fix


def test_ll128_warns_unless_nccl_proto_enables_it_explicitly():
    (w,) = check_rules([parsed(protocol="LL128")], None, None)
    assert w.severity == "warning" and w.variable == "tuner.rules#1.protocol" and w.value == "LL128"
    assert check_rules([parsed(protocol="LL128")], "LL128,Simple", None) == []
    assert check_rules([parsed(protocol="LL")], None, None) == []


@pytest.mark.parametrize(
    "collective,algorithm,warns",
    [
        ("allgather", "tree", True),
        ("broadcast", "ring", False),
        ("broadcast", "tree", True),
        ("reducescatter", "pat", False),
        ("allreduce", "pat", True),
        ("allreduce", "nvlstree", False),
    ],
)
def test_combinations_nccl_never_runs_warn(collective, algorithm, warns):
    protocol = "Simple"
    found = check_rules([parsed(collective=collective, algorithm=algorithm, protocol=protocol)], None, None)
    assert [(f.severity, f.variable) for f in found] == (
        [("warning", "tuner.rules#1.algorithm")] if warns else []
    )


@pytest.mark.parametrize("algorithm", ["nvls", "nvlstree"])
def test_nvls_runs_with_simple_only(algorithm):
    (w,) = check_rules([parsed(algorithm=algorithm, protocol="LL")], None, None)
    assert w.variable == "tuner.rules#1.protocol" and w.value == "LL"
    assert check_rules([parsed(algorithm=algorithm, protocol="Simple")], None, None) == []
    (w,) = check_rules([parsed(collective="allgather", algorithm="pat", protocol="LL")], None, None)
    assert w.variable == "tuner.rules#1.protocol"


def test_an_exact_duplicate_is_shadowed_and_a_later_wider_rule_is_not():
    rules = [parsed(bytes=[0, 100]), parsed(bytes=[0, 100])]
    (f,) = check_rules(rules, None, None)
    assert (
        f.severity == "error" and f.variable == "tuner.rules#2" and "tuner.rules#1 already matches" in f.rule
    )
    assert check_rules([parsed(bytes=[0, 100]), parsed(bytes=[0, 200])], None, None) == []
    assert check_rules([parsed(bytes=[0, 100], group="tp"), parsed(bytes=[0, 100])], None, None) == []


# --- wire format, digest, description --------------------------------------------------------------------


def test_rule_round_trips_through_the_wire_format():
    full = parsed(bytes=[0, "inf"], nranks=[2, "inf"], nnodes=[1, 1], group="tp", channels=8)
    d = rule_to_dict(full)
    assert d == {
        "collective": "AllReduce",
        "bytes": [0, "inf"],
        "algorithm": "Ring",
        "protocol": "LL",
        "nranks": [2, "inf"],
        "nnodes": [1, 1],
        "group": "tp",
        "channels": 8,
    }
    assert rule_from_dict(d) == full
    assert rule_to_dict(parsed()) == {
        "collective": "AllReduce",
        "bytes": [0, 1024],
        "algorithm": "Ring",
        "protocol": "LL",
    }
    with pytest.raises(ProfileError) as info:
        rule_from_dict({**d, "channels": 65}, source="wire")
    assert (
        info.value.findings[0].source == "wire"
        and info.value.findings[0].variable == "tuner.rules#1.channels"
    )


def test_digest_depends_on_order_and_values_not_on_spelling():
    a, b = parsed(bytes=[0, 100]), parsed(bytes=[100, 200])
    assert rules_digest([a, b]) != rules_digest([b, a])
    assert rules_digest([a]) == rules_digest(
        [parsed(bytes=[0, 100], collective="ALLREDUCE", algorithm="RING")]
    )
    assert rules_digest([a]) != rules_digest([parsed(bytes=[0, 101])]) and len(rules_digest([])) == 64


def test_describe():
    assert parsed(bytes=[0, 65536], nranks=[2, 8], group="tp", channels=8).describe() == (
        "AllReduce [0, 65536) bytes, 2-8 ranks, group tp -> Ring/LL, 8 channels"
    )
    assert parsed(bytes=[1, "inf"], nranks=[4, 4], nnodes=[2, "inf"]).describe() == (
        "AllReduce [1, inf) bytes, 4 ranks, 2+ nodes -> Ring/LL"
    )
