"""The pure tuner-rule model: parsing a profile's [[tuner.rules]], cross-rule checks, wire format."""

from __future__ import annotations

import pytest

from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.knowledge import _toml
from sglang_eagle_nccl.knowledge.nccl.parsing import PROTOCOLS, enable_row
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import (
    TunerRule,
    check_rules,
    first_match,
    parse_rules,
    rule_from_dict,
    rule_to_dict,
    rules_digest,
)

EXAMPLE = """
[[tuner.rules]]
collective = "allreduce"
bytes = [0, 65536]
algorithm = "ring"
protocol = "LL"
nranks = [2, 8]
nnodes = [1, 1]
group = "tp"
channels = 8

[[tuner.rules]]
collective = "AllReduce"
bytes = [65536, "inf"]
algorithm = "RING"
protocol = "simple"
"""


def parse(text: str) -> tuple[list[TunerRule], list]:
    return parse_rules(_toml.loads(text)["tuner"]["rules"], "test.toml")


def one(**fields) -> dict:
    base = {"collective": "allreduce", "bytes": [0, 1024], "algorithm": "ring", "protocol": "LL"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def errors(findings) -> list:
    return [f for f in findings if f.severity == "error"]


def test_the_documented_example_parses_to_canonical_names():
    rules, findings = parse(EXAMPLE)
    assert findings == []
    assert rules == [
        TunerRule("AllReduce", 0, 65536, "Ring", "LL", nranks=(2, 8), nnodes=(1, 1), group="tp", channels=8),
        TunerRule("AllReduce", 65536, None, "Ring", "Simple"),
    ]
    assert rules[0].collective_id == 4 and rules[0].algorithm_id == 1 and rules[0].protocol_id == 0
    assert rules[1].describe() == "AllReduce [65536, inf) bytes -> Ring/Simple"
    assert (
        rules[0].describe()
        == "AllReduce [0, 65536) bytes, 2-8 ranks, 1 nodes, group tp -> Ring/LL, 8 channels"
    )


EXAMPLE_BYTES = "write e.g. bytes = [0, 65536]"


@pytest.mark.parametrize(
    ("fields", "variable", "rule_text", "fix"),
    [
        (
            {"collective": "allreduce_"},
            "tuner.rules#1.collective",
            "unknown collective",
            "use one of Broadcast, Reduce, AllGather, ReduceScatter, AllReduce (case-insensitive)",
        ),
        (
            {"algorithm": "rings"},
            "tuner.rules#1.algorithm",
            "unknown algorithm",
            "use one of Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT (case-insensitive)",
        ),
        (
            {"protocol": "LL64"},
            "tuner.rules#1.protocol",
            "unknown protocol",
            "use one of LL, LL128, Simple (case-insensitive)",
        ),
        ({"protocol": None}, "tuner.rules#1.protocol", "needs a protocol", 'add protocol = "LL128"'),
        ({"bytes": [100, 100]}, "tuner.rules#1.bytes", "empty", "write [100, 101] or more"),
        ({"bytes": [200, 100]}, "tuner.rules#1.bytes", "inverted", "write [100, 200]"),
        ({"bytes": [-1, 100]}, "tuner.rules#1.bytes", "min must be", EXAMPLE_BYTES),
        (
            {"bytes": [0, "64KiB"]},
            "tuner.rules#1.bytes",
            "max must be",
            'write e.g. bytes = [0, 65536] or [65536, "inf"]',
        ),
        ({"bytes": [True, 100]}, "tuner.rules#1.bytes", "min must be", EXAMPLE_BYTES),
        ({"bytes": 1024}, "tuner.rules#1.bytes", "two sizes", EXAMPLE_BYTES),
        ({"bytes": None}, "tuner.rules#1.bytes", "needs a byte range", "add bytes = [0, 65536]"),
        ({"nranks": [0, 8]}, "tuner.rules#1.nranks", "min must be", "write e.g. nranks = [2, 8]"),
        ({"nranks": [8, 2]}, "tuner.rules#1.nranks", "inverted", "write [2, 8]"),
        ({"nnodes": [1]}, "tuner.rules#1.nnodes", "list [min, max]", "write e.g. nnodes = [2, 8]"),
        ({"group": ""}, "tuner.rules#1.group", "group label", 'write e.g. group = "tp"'),
        ({"group": "tp group"}, "tuner.rules#1.group", "group label", 'write e.g. group = "tp"'),
        (
            {"channels": 0},
            "tuner.rules#1.channels",
            "from 1 to 64",
            "remove it to let NCCL choose, or write e.g. channels = 8",
        ),
        (
            {"channels": 65},
            "tuner.rules#1.channels",
            "from 1 to 64",
            "remove it to let NCCL choose, or write e.g. channels = 8",
        ),
        (
            {"chanels": 8},
            "tuner.rules#1.chanels",
            "unknown rule key",
            "use only collective, bytes, algorithm, protocol, nranks, nnodes, group, channels",
        ),
    ],
)
def test_bad_rules_name_variable_value_rule_and_fix(fields, variable, rule_text, fix):
    assert fix not in repr(fields)  # the plugin's own words, not an echo of the rule it refuses
    rules, findings = parse_rules([one(**fields)], "p.toml")
    assert rules == []
    (f,) = errors(findings)
    assert f.variable == variable and rule_text in f.rule and f.fix == fix and f.source == "p.toml", f
    assert variable in f.message() and f.message().endswith(f"Fix: {fix}")


def test_all_problems_of_all_rules_are_reported_at_once():
    rules, findings = parse_rules([one(collective="x"), one(), one(protocol="y", bytes=[5, 1])], "p")
    assert rules == [TunerRule("AllReduce", 0, 1024, "Ring", "LL")]
    assert [f.variable for f in errors(findings)] == [
        "tuner.rules#1.collective",
        "tuner.rules#3.bytes",
        "tuner.rules#3.protocol",
    ]


def test_rules_must_be_a_list_of_tables():
    assert errors(parse_rules({"collective": "allreduce"}, "p")[1])[0].variable == "tuner.rules"
    assert errors(parse_rules(["ring"], "p")[1])[0].variable == "tuner.rules#1"


# --- shadowing -----------------------------------------------------------------------------------------


def rules_of(*dicts) -> list[TunerRule]:
    rules, findings = parse_rules(list(dicts), "p")
    assert errors(findings) == []
    return rules


def shadow_errors(rules) -> list[str]:
    return [f.variable for f in check_rules(rules, None, None) if "can never match" in f.rule]


def test_a_rule_inside_an_earlier_one_is_shadowed():
    rules = rules_of(one(bytes=[0, "inf"]), one(bytes=[100, 200], protocol="Simple"))
    (f,) = [f for f in check_rules(rules, None, None) if "can never match" in f.rule]
    assert f.severity == "error" and f.variable == "tuner.rules#2" and "tuner.rules#1" in f.rule
    assert "move it before" in f.fix


def test_a_rule_covered_only_by_several_earlier_ones_together_is_shadowed():
    rules = rules_of(one(bytes=[0, 100]), one(bytes=[100, 200]), one(bytes=[50, 150], protocol="Simple"))
    assert shadow_errors(rules) == ["tuner.rules#3"]
    assert "tuner.rules#1, tuner.rules#2" in check_rules(rules, None, None)[0].rule


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        (one(bytes=[0, 100]), one(bytes=[50, 150])),  # overlaps, not covered
        (one(nranks=[2, 8]), one()),  # later matches more sizes
        (one(group="tp"), one()),  # later also matches communicators without that label
        (one(group="tp"), one(group="pp")),
        (one(collective="allgather"), one()),
        (one(nnodes=[2, "inf"]), one(nnodes=[1, 4])),
    ],
)
def test_partial_overlap_is_not_shadowing(earlier, later):
    assert shadow_errors(rules_of(earlier, later)) == []


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        (one(), one(group="tp")),  # no group matches every label
        (one(nranks=[1, "inf"]), one(nranks=[2, 8])),
        (one(nranks=[1, "inf"]), one()),  # every communicator has >= 1 rank
        (one(nnodes=[1, 2]), one(nnodes=[2, 2])),
    ],
)
def test_covering_earlier_rule_shadows(earlier, later):
    assert shadow_errors(rules_of(earlier, later)) == ["tuner.rules#2"]


# --- against the profile's NCCL_PROTO / NCCL_ALGO --------------------------------------------------------


@pytest.mark.parametrize(
    ("proto", "protocol", "disabled"),
    [
        ("LL", "Simple", True),
        ("LL,Simple", "Simple", False),
        ("^LL", "LL", True),
        ("^LL", "Simple", False),
        ("Simple;allreduce:LL", "LL", False),  # the AllReduce row is what counts
        ("LL;allreduce:^LL", "LL", True),
        ("allgather:LL", "Simple", False),  # other functions' sections do not touch AllReduce
        ("ll", "Simple", True),  # NCCL compares case-insensitively
    ],
)
def test_a_protocol_the_profile_disables_is_an_error(proto, protocol, disabled):
    rules = rules_of(one(protocol=protocol))
    found = [f for f in check_rules(rules, proto, None) if f.variable == "NCCL_PROTO"]
    assert bool(found) == disabled
    if disabled:
        (f,) = found
        assert f.severity == "error" and f.value == proto and "cannot re-enable" in f.rule
        assert "tuner.rules#1" in f.rule and "tuner.rules#1" in f.fix


def test_an_algorithm_the_profile_disables_is_an_error():
    rules = rules_of(one(algorithm="tree"))
    (f,) = [f for f in check_rules(rules, None, "Ring") if f.variable == "NCCL_ALGO"]
    assert f.severity == "error" and "Tree" in f.rule and "Ring" in f.fix


def test_ll128_without_explicit_enable_is_a_warning_only():
    rules = rules_of(one(protocol="LL128"))
    (f,) = check_rules(rules, None, None)
    assert f.severity == "warning" and "some hardware" in f.rule
    assert check_rules(rules, "LL128,Simple", None) == []  # forced on by the profile


def test_combinations_nccl_never_runs_are_warnings():
    pat_allreduce = rules_of(one(algorithm="pat", protocol="Simple"))
    (f,) = check_rules(pat_allreduce, None, None)
    assert f.severity == "warning" and f.variable == "tuner.rules#1.algorithm"
    nvls_ll = rules_of(one(algorithm="nvls", protocol="LL"))
    (f,) = check_rules(nvls_ll, None, None)
    assert f.severity == "warning" and "Simple" in f.fix


def test_enable_row_follows_nccl_parse_list():
    assert enable_row(None, PROTOCOLS, "AllReduce", {"LL128": 2}) == {"LL": 1, "LL128": 2, "Simple": 1}
    assert enable_row("^LL128;allreduce:LL128", PROTOCOLS, "AllReduce") == {"LL": 0, "LL128": 1, "Simple": 0}
    assert enable_row("^LL128;allreduce:LL128", PROTOCOLS, "Broadcast") == {"LL": 1, "LL128": 0, "Simple": 1}
    assert enable_row("LL,bogus", PROTOCOLS, "AllReduce") is None


# --- the model, the wire format, the digest ----------------------------------------------------------------


def test_first_match_is_the_first_rule_that_matches_the_call():
    rules, _ = parse(EXAMPLE)
    assert first_match(rules, "AllReduce", 100, 8, 1, "tp") == 0
    assert first_match(rules, "AllReduce", 100, 8, 1, None) is None  # group rule, no label
    assert first_match(rules, "AllReduce", 100, 9, 1, "tp") is None  # 9 ranks: outside [2, 8]
    assert first_match(rules, "AllReduce", 65536, 9, 1, None) == 1
    assert first_match(rules, "AllGather", 65536, 9, 1, None) is None


def test_wire_format_round_trips_and_rechecks():
    rules, _ = parse(EXAMPLE)
    for rule in rules:
        assert rule_from_dict(rule_to_dict(rule)) == rule
    assert rule_to_dict(rules[1]) == {
        "collective": "AllReduce",
        "bytes": [65536, "inf"],
        "algorithm": "Ring",
        "protocol": "Simple",
    }
    with pytest.raises(ProfileError) as exc:
        rule_from_dict({**rule_to_dict(rules[0]), "protocol": "LL256"}, source="SGLANG_EAGLE_NCCL_PROFILE")
    assert exc.value.errors[0].source == "SGLANG_EAGLE_NCCL_PROFILE"


def test_digest_is_stable_ignores_spelling_and_follows_order():
    rules, _ = parse(EXAMPLE)
    respelled, _ = parse(EXAMPLE.replace('"allreduce"', '"ALLREDUCE"').replace('"simple"', '"Simple"'))
    assert rules_digest(rules) == rules_digest(respelled)
    assert len(rules_digest(rules)) == 64
    assert rules_digest(rules) != rules_digest(list(reversed(rules)))
    assert rules_digest([]) != rules_digest(rules[:1])


@pytest.mark.parametrize(
    "bad,rule",
    [
        ({"bytes": [0, 2**64]}, "max must be an integer number of bytes up to 18446744073709551615"),
        (
            {"bytes": [2**64 - 1, "inf"]},
            "min must be an integer number of bytes from 0 to 18446744073709551614",
        ),
        ({"bytes": [0, 10**5000]}, "more than 4300 digits"),
        ({"nranks": [1, 2**64]}, "max must be an integer up to 18446744073709551615"),
        ({"nnodes": [2**64, "inf"]}, "min must be an integer from 1 to 18446744073709551615"),
    ],
)
def test_bounds_past_what_nccl_can_ask_are_refused_at_the_edge(bad, rule):
    from sglang_eagle_nccl.knowledge.nccl.tuner_rules import parse_rules

    raw = {"collective": "allreduce", "bytes": [0, 65536], "algorithm": "ring", "protocol": "LL", **bad}
    rules, findings = parse_rules([raw], "test")
    assert rules == [] and any(rule in f.rule or rule in str(f.value) for f in findings), findings


def test_the_largest_bounds_nccl_can_ask_are_accepted():
    from sglang_eagle_nccl.knowledge.nccl.tuner_rules import SIZE_T_MAX, parse_rules

    (rule,), findings = parse_rules(
        [
            {
                "collective": "allreduce",
                "bytes": [SIZE_T_MAX - 1, SIZE_T_MAX],
                "algorithm": "ring",
                "protocol": "LL",
                "nranks": [SIZE_T_MAX, SIZE_T_MAX],
            }
        ],
        "test",
    )
    assert [f for f in findings if f.severity == "error"] == []
    assert (rule.min_bytes, rule.max_bytes, rule.nranks) == (
        SIZE_T_MAX - 1,
        SIZE_T_MAX,
        (SIZE_T_MAX, SIZE_T_MAX),
    )
