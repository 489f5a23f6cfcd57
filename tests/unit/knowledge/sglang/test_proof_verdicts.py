"""The proof's verdicts in full (proof.py): which write or call proves a statement, and what the reason says.

Small sources written here; every expected field (path, depth, where, conditions, reason) is
derived by hand from the rules in proof.py's docstring:

- a write is proven by the reachable write with the fewest conditions, then the shallowest;
- the proof lists each stated condition it went through once, with where it is;
- a statement not proven says why: the target is missing; the call or write happens only under a
  condition not stated (named, with where); a namesake is called instead; or nothing reaches it
  (with where the write went instead, and how many calls could not be resolved).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import pytest

from sglang_eagle_nccl.knowledge.sglang import callgraph, proof

SRC = {
    "sglang/__init__.py": "",
    "sglang/p.py": """
import os
from sglang.q import go, Runner

def deep():
    os.environ["NCCL_G"] = "1"

def mid():
    deep()

def start(args):
    if args.x:
        os.environ["NCCL_A"] = "0"
    os.environ["NCCL_A"] = "1"
    mid()
    os.environ["NCCL_B"] = "1"
    if args.y:
        os.environ["NCCL_C"] = "1"
        os.environ["NCCL_D"] = "1"
    if args.y:
        go()

def only_flagged(args):
    if args.x:
        os.environ["NCCL_A"] = "0"
        go()

def both(args):
    if args.x:
        if args.y:
            os.environ["NCCL_A"] = "0"
    if args.y:
        os.environ["NCCL_A"] = "0"

def calls_namesake(w):
    go_other()
    w.go()

def go_other():
    go2()

def go2():
    pass

def unresolved_only(w):
    w.deep_thing()
    w.other()
""",
    "sglang/q.py": """
def go():
    pass

class Runner:
    def go(self):
        pass
""",
    "sglang/r.py": """
import os

def elsewhere():
    os.environ["NCCL_E"] = "1"
""",
}


def tree() -> callgraph.SourceTree:
    return callgraph.SourceTree({p: textwrap.dedent(t) for p, t in SRC.items()}.get)


def line(text: str, nth: int = 0, file: str = "sglang/p.py") -> int:
    """The line of the ``nth`` occurrence of ``text`` in a fixture (1-based, as ast counts)."""
    return [i + 1 for i, x in enumerate(SRC[file].splitlines()) if text in x][nth]


@dataclass
class S:
    kind: str
    subject: tuple[str, ...]
    why: str = "because"
    start: str | None = None
    when: tuple[str, ...] = ()


def test_a_write_is_proven_by_the_least_conditional_write_and_a_call_chain_by_its_path():
    p = proof.prove(tree(), "sglang.p:start", S("writes", ("NCCL_A", "NCCL_G"), when=("--x",)))
    a = line('os.environ["NCCL_A"] = "1"')
    assert p.ok and p.statement == "writes NCCL_A, NCCL_G when --x" and p.why == "because"
    assert p.proofs == (
        {"variable": "NCCL_A", "depth": 0, "at": f"sglang/p.py:{a} (start)", "path": "start",
         "steps": ["sglang.p:start"]},
        {"variable": "NCCL_G", "depth": 2, "at": f"sglang/p.py:{line('NCCL_G')} (deep)", "path": "start -> mid -> deep",
         "steps": ["sglang.p:start", "sglang.p:mid", "sglang.p:deep"]},
    )
    assert p.depth == 2 and p.conditions == ()
    assert p.to_dict()["depth"] == 2 and "reason" not in p.to_dict()


def test_a_stated_condition_is_listed_once_with_where():
    p = proof.prove(tree(), "sglang.p:start", S("writes", ("NCCL_C", "NCCL_D"), when=("args.y",)))
    where = f"`args.y` at sglang/p.py:{line('if args.y:')}"
    assert p.ok and p.conditions == (where,)
    assert [x["conditions"] for x in p.proofs] == [[where]] * 2
    assert p.depth == 0
    d = p.to_dict()
    assert d["conditions"] == [where] and d["proofs"] == list(p.proofs)


def test_a_call_under_a_stated_flag_is_proven_with_its_path():
    p = proof.prove(tree(), "sglang.p:start", S("reaches", ("sglang.q:go",), when=("--y",)))
    where = f"`args.y` at sglang/p.py:{line('if args.y:', 1)}"
    assert p.ok and p.path == "start -> go" and p.depth == 1
    assert p.steps == ("sglang.p:start", "sglang.q:go")
    assert p.conditions == (where,)
    assert p.to_dict() == {"statement": "reaches sglang.q:go when --y", "why": "because", "ok": True,
                           "path": "start -> go", "conditions": [where], "depth": 1,
                           "steps": ["sglang.p:start", "sglang.q:go"]}


def test_an_unstated_condition_is_the_reason():
    p = proof.prove(tree(), "sglang.p:start", S("reaches", ("sglang.q:go",)))
    assert not p.ok and p.depth == 0 and p.path == "" and p.steps == ()
    assert p.reason == ("sglang.q:go is reached only under a condition the statement does not state: "
                        f"`args.y` at sglang/p.py:{line('if args.y:', 1)} (path start -> go)")
    assert "depth" not in p.to_dict()


def test_only_the_unstated_conditions_are_named():
    p = proof.prove(tree(), "sglang.p:both", S("writes", ("NCCL_A",), when=("--x",)))
    # Two writes, under (x, y) and under (y): each has one unstated condition (`args.y`) at the same depth, so
    # the first found is named, with only its unstated condition (`args.x` is stated).
    assert not p.ok
    first = line('os.environ["NCCL_A"] = "0"', 2)
    assert p.reason == (f"NCCL_A is written at sglang/p.py:{first} (both) only under a condition the statement does "
                        f"not state: `args.y` at sglang/p.py:{line('if args.y:', 2)}")


def test_a_write_reached_only_under_an_unstated_flag():
    p = proof.prove(tree(), "sglang.p:only_flagged", S("writes", ("NCCL_A",)))
    assert not p.ok and p.proofs == ()
    assert p.reason == (f"NCCL_A is written at sglang/p.py:{line('NCCL_A', 2)} (only_flagged) only under a condition "
                        f"the statement does not state: `args.x` at sglang/p.py:{line('if args.x:', 1)}")


def test_a_missing_write_says_where_it_went():
    found = [callgraph.EnvWrite("NCCL_E", "assign", "sglang/r.py", 5, "sglang.r:elsewhere")]
    p = proof.prove(tree(), "sglang.p:start", S("writes", ("NCCL_B", "NCCL_E")),
                    elsewhere=lambda variables: [w for w in found if w.variable in variables])
    assert not p.ok
    assert p.proofs == ({"variable": "NCCL_B", "depth": 0, "at": f"sglang/p.py:{line('NCCL_B')} (start)",
                         "path": "start", "steps": ["sglang.p:start"]},)
    assert p.ok is False and p.to_dict()["ok"] is False
    assert p.reason == ("no write of NCCL_E reachable from sglang.p:start within 12 calls "
                        "(NCCL_E is written at sglang/r.py:5 (elsewhere))")
    p = proof.prove(tree(), "sglang.p:start", S("writes", ("NCCL_E", "NCCL_F")))
    assert p.reason == "no write of NCCL_E, NCCL_F reachable from sglang.p:start within 12 calls (SGLang writes it nowhere)"


def test_both_reasons_when_one_write_is_conditional_and_one_is_missing():
    p = proof.prove(tree(), "sglang.p:start", S("writes", ("NCCL_C", "NCCL_F")))
    assert p.reason == (f"NCCL_C is written at sglang/p.py:{line('NCCL_C')} (start) only under a condition the "
                        f"statement does not state: `args.y` at sglang/p.py:{line('if args.y:')}; no write of NCCL_F "
                        "reachable from sglang.p:start within 12 calls (SGLang writes it nowhere)")


def test_a_namesake_is_not_the_definition():
    p = proof.prove(tree(), "sglang.p:calls_namesake", S("reaches", ("sglang.q:Runner.go2",)))
    assert not p.ok
    assert p.reason == ("sglang.q:Runner.go2 is not called from sglang.p:calls_namesake; the call named go2 in "
                        "go_other resolves to sglang.p:go2, a namesake, not the stated definition")


def test_an_unresolved_call_of_that_name_is_named():
    p = proof.prove(tree(), "sglang.p:unresolved_only", S("reaches", ("sglang.x:deep_thing",)))
    assert p.reason == (f"sglang.x:deep_thing is not called from sglang.p:unresolved_only within 12 calls (through "
                        f"SGLang's own calls); the call `w.deep_thing` in unresolved_only (line {line('w.deep_thing')}) cannot be resolved "
                        "statically to a definition, so it proves nothing")


@pytest.mark.parametrize("kind,subject", [("writes", ("NCCL_A",)), ("reaches", ("sglang.q:go",))])
def test_a_missing_start_is_the_reason(kind, subject):
    statement = S(kind, subject, start="sglang.p:nowhere")
    p = proof.prove(tree(), "sglang.p:start", statement)
    assert p == proof.Proof(statement=f"{kind} {subject[0]} (from sglang.p:nowhere)", why="because", ok=False,
                            reason="sglang.p:nowhere not found")


def test_describe_names_the_kind_subject_start_and_conditions():
    assert proof.describe(S("writes", ("A", "B"))) == "writes A, B"
    assert proof.describe(S("reaches", ("m:f",), start="m:g", when=("--x", "a and b"))) == \
        "reaches m:f (from m:g) when --x and a and b"

    class Bare:
        kind, subject = "precedes", ("m:f",)

    assert proof.describe(Bare()) == "precedes m:f"


@pytest.mark.parametrize("when,text,flag,accepted", [
    (("--enable-x",), "server_args.enable_x", "enable_x", True),
    (("--enable-x",), "enable_x", "enable_x", True),
    (("--enable-x",), "not server_args.enable_x", None, False),
    (("--enable-x",), "server_args.enable_y", "enable_y", False),
    (("a  and(b)",), "a and b", None, True),
    (("a and b",), "a or b", None, False),
    (("--a",), "a", None, False),
    ((), "x", "x", False),
])
def test_a_statement_accepts_its_exact_tests_and_its_flags(when, text, flag, accepted):
    assert proof.acceptor(when)(callgraph.Condition(text, "f.py", 1, flag)) is accepted


def test_a_condition_is_an_expression():
    assert proof.normalize_condition("  a  and(b) ") == "a and b"
    with pytest.raises(SyntaxError):
        proof.normalize_condition("x = 1")


def test_several_unstated_conditions_and_several_writes_elsewhere_are_each_named():
    t = callgraph.SourceTree({"sglang/v.py": textwrap.dedent("""
        import os
        def start(a, b, w):
            if a:
                if b:
                    os.environ["NCCL_V"] = "1"
            w.x.go()
    """)}.get)
    p = proof.prove(t, "sglang.v:start", S("writes", ("NCCL_V",)))
    assert p.reason == ("NCCL_V is written at sglang/v.py:6 (start) only under a condition the statement does not "
                        "state: `a` at sglang/v.py:4; `b` at sglang/v.py:5")
    found = [callgraph.EnvWrite("NCCL_W", "assign", "sglang/r.py", 5, "sglang.r:one"),
             callgraph.EnvWrite("NCCL_W", "pop", "sglang/r.py", 9, "sglang.r:two")]
    p = proof.prove(t, "sglang.v:start", S("writes", ("NCCL_W",)), elsewhere=lambda variables: found)
    assert p.reason == ("no write of NCCL_W reachable from sglang.v:start within 12 calls (NCCL_W is written at "
                        "sglang/r.py:5 (one); NCCL_W is written at sglang/r.py:9 (two)) (1 call(s) on the way cannot "
                        "be resolved statically)")
    # The unresolved call is named when its last name is the stated definition's.
    p = proof.prove(t, "sglang.v:start", S("reaches", ("sglang.q:go",)))
    assert "the call `w.x.go` in start (line 7) cannot be resolved" in p.reason


def test_each_variable_s_stated_condition_is_listed_and_when_is_optional():
    t = callgraph.SourceTree({"sglang/v.py": textwrap.dedent("""
        import os
        def two(a, b):
            if a:
                os.environ["NCCL_P"] = "1"
            if b:
                os.environ["NCCL_Q"] = "1"
            os.environ["NCCL_R"] = "1"
    """)}.get)
    p = proof.prove(t, "sglang.v:two", S("writes", ("NCCL_P", "NCCL_Q"), when=("a", "b")))
    assert p.ok and p.conditions == ("`a` at sglang/v.py:4", "`b` at sglang/v.py:6")

    class Bare:  # a statement without `when`: no condition is accepted
        kind, subject, why, start = "writes", ("NCCL_R",), "w", None

    assert proof.prove(t, "sglang.v:two", Bare()).ok
    Bare.subject = ("NCCL_P",)
    assert not proof.prove(t, "sglang.v:two", Bare()).ok


def test_the_search_for_a_write_stops_at_the_shallowest_one_found():
    """reach stops as soon as every stated variable has a write (breadth first), so a proof and a reason cite
    the shallowest write found, even when a deeper one has fewer conditions."""
    t = callgraph.SourceTree({"sglang/s.py": textwrap.dedent("""
        import os
        def deep():
            os.environ["NCCL_A"] = "1"
        def deep_z(c):
            if c:
                os.environ["NCCL_Z"] = "1"
        def start(args, a, b):
            if args.x:
                os.environ["NCCL_A"] = "0"
            if a:
                if b:
                    os.environ["NCCL_Z"] = "0"
            deep()
            deep_z(a)
    """)}.get)
    p = proof.prove(t, "sglang.s:start", S("writes", ("NCCL_A",), when=("--x",)))
    assert p.ok and p.depth == 0 and p.conditions == ("`args.x` at sglang/s.py:9",)
    p = proof.prove(t, "sglang.s:start", S("writes", ("NCCL_Z",)))
    assert p.reason.startswith("NCCL_Z is written at sglang/s.py:13 (start) only under a condition the statement "
                               "does not state: `a` at sglang/s.py:11; `b` at sglang/s.py:12")
