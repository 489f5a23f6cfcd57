"""The shadow check stays exact on small rule sets and bounded on large ones (issue 18, item 3).

Exact: compared with a brute force over every cell of the rules' edges. Bounded: at most
MAX_RULES rules (one past is an error, and no cross-rule sweep runs), and the sweep for
rules overlapping in bytes, ranks and nodes at once stops at its budget; the tests assert the
work done, not the time taken. A 200 KiB profile goes through the real ``validate`` in a child
process; the check it replaced took minutes on such a file (cubic in the number of rules).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sglang_eagle_nccl.knowledge.nccl.tuner_rules import (
    MAX_RULES,
    SHADOW_BUDGET,
    ShadowBudget,
    TunerRule,
    _box,
    check_rules,
    matches,
)

REPO = Path(__file__).resolve().parents[4]


def rule(lo: int, hi: int | None, nranks=None, nnodes=None, group=None, protocol="LL") -> TunerRule:
    return TunerRule("AllReduce", lo, hi, "Ring", protocol, nranks=nranks, nnodes=nnodes, group=group)


def shadowed(rules: list[TunerRule], budget: ShadowBudget | None = None) -> list[str]:
    return [f.variable for f in check_rules(rules, None, None, budget) if "can never match" in f.rule]


def brute_force_shadowed(rules: list[TunerRule]) -> list[str]:
    """Rule i is shadowed when every call it matches (every cell of all edges) an earlier rule matches."""
    out = []
    for i, r in enumerate(rules):
        boxes = [_box(x) for x in rules[: i + 1]]
        axes = [sorted({e for b in boxes for e in b[d]}) for d in range(3)]
        groups = [r.group] if r.group is not None else [None]
        calls = [
            (size, ranks, nodes, g)
            for size, ranks, nodes in itertools.product(*axes)
            for g in groups
            if matches(r, "AllReduce", size, ranks, nodes, g)
        ]
        if calls and all(any(matches(e, "AllReduce", *c) for e in rules[:i]) for c in calls):
            out.append(f"tuner.rules#{i + 1}")
    return out


_edge = st.integers(min_value=0, max_value=6)


@st.composite
def small_rule(draw):
    lo = draw(_edge)
    hi = draw(st.one_of(st.none(), st.integers(min_value=lo + 1, max_value=8)))

    def count():
        if draw(st.booleans()):
            return None
        a = draw(st.integers(min_value=1, max_value=4))
        return a, draw(st.one_of(st.none(), st.integers(min_value=a, max_value=5)))

    return rule(lo, hi, count(), count(), draw(st.sampled_from([None, None, "tp"])))


@given(st.lists(small_rule(), min_size=1, max_size=7))
def test_the_shadow_check_is_exact_on_small_rule_sets(rules):
    assert shadowed(rules) == brute_force_shadowed(rules)


def test_a_covering_set_in_three_dimensions_is_found():
    # Four quarters of the (bytes x ranks) plane over two node ranges: together they cover the last rule.
    quarters = [
        rule(a, b, nranks=(r0, r1), nnodes=n)
        for a, b in ((0, 100), (100, 200))
        for r0, r1 in ((1, 4), (5, 8))
        for n in ((1, 1), (2, 3))
    ]
    assert shadowed([*quarters, rule(50, 150, nranks=(3, 6), nnodes=(1, 3), protocol="Simple")]) == [
        "tuner.rules#9"
    ]
    # One cell missing (ranks 5-8, bytes 100-200, nodes 2-3): not shadowed.
    assert shadowed([*quarters[:-1], rule(50, 150, nranks=(3, 6), nnodes=(1, 3), protocol="Simple")]) == []


def _overlapping(n: int) -> list[TunerRule]:
    """n rules that all overlap in bytes, ranks and nodes, none covered: the sweep's worst kind."""
    return [
        rule(i, i + 1_000_000, nranks=(1 + i % 7, 64 - i % 5), nnodes=(1 + i % 3, 8 - i % 2))
        for i in range(n)
    ]


def test_at_the_cap_the_sweep_stops_at_its_budget_and_says_so():
    rules = _overlapping(MAX_RULES)
    budget = ShadowBudget()
    findings = check_rules(rules, None, None, budget)
    # The last spend may overshoot by at most one slab's boxes.
    assert budget.spent <= SHADOW_BUDGET + MAX_RULES
    assert not [f for f in findings if f.severity == "error"]
    undecided = [f for f in findings if "not checked for shadowing" in f.rule]
    assert undecided and all(f.severity == "warning" for f in undecided)
    assert f"({SHADOW_BUDGET} steps per profile)" in undecided[0].rule


def test_a_small_budget_leaves_rules_undecided_not_wrong():
    rules = _overlapping(12)
    exact = check_rules(rules, None, None)
    assert not [f for f in exact if "not checked" in f.rule or "can never match" in f.rule]
    tiny = ShadowBudget(10)
    assert [f.variable for f in check_rules(rules, None, None, tiny) if "not checked" in f.rule]
    assert shadowed(rules, ShadowBudget(10)) == []


def test_one_dimensional_rules_cost_no_budget():
    # Rules that differ in bytes only are decided by an interval merge, however many.
    rules = [rule(i, i + 1_000_000) for i in range(MAX_RULES)]
    budget = ShadowBudget()
    assert shadowed(rules, budget) == [] and budget.spent == 0
    covering = [rule(i * 10, i * 10 + 10) for i in range(MAX_RULES - 1)] + [
        rule(5, (MAX_RULES - 1) * 10, protocol="Simple")
    ]
    assert shadowed(covering) == [f"tuner.rules#{MAX_RULES}"]


@pytest.mark.parametrize("count,capped", [(MAX_RULES, False), (MAX_RULES + 1, True)])
def test_the_rule_count_is_capped_at_the_bound(count, capped):
    rules = [rule(i * 10, i * 10 + 10) for i in range(count)]
    capped_findings = [f for f in check_rules(rules, None, None) if f.variable == "tuner.rules"]
    assert bool(capped_findings) == capped
    if capped:
        (f,) = capped_findings
        assert (
            f.severity == "error"
            and f.value == f"{count} rules"
            and f"at most {MAX_RULES} tuner rules" in f.rule
        )


def test_a_200_kib_profile_validates_in_a_child_within_a_generous_bound(tmp_path):
    # Every rule overlaps every other in bytes (none covered): cubic work for the old check.
    blocks = [
        f'[[tuner.rules]]\ncollective = "allreduce"\nbytes = [{i}, {i + 1_000_000}]\nalgorithm = "ring"\n'
        f'protocol = "LL"\nnranks = [{1 + i % 7}, {64 - i % 5}]\n'
        for i in range(2100)
    ]
    text = "\n".join(blocks)
    assert 200 * 1024 <= len(text) <= 256 * 1024
    path = tmp_path / "many-rules.toml"
    path.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "sglang_eagle_nccl", "validate", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert f"tuner.rules='2100 rules': a profile holds at most {MAX_RULES} tuner rules" in done.stderr
    assert "Traceback" not in done.stderr
