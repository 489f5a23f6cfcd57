"""The graph (callgraph.reach): breadth first from a target, within a depth, along accepted conditions only.

Rules checked on one small module: a callee that may be several definitions is a condition of its
own ("W is A"); an unresolved call is listed only where its path is accepted; a function is visited
once, at its shallowest depth; the search stops at the depth bound and, when given goals, as soon
as they are met; definitions defined in a function's body (nested functions, classes, Ray actors)
are resolved there.
"""

from __future__ import annotations

import textwrap

from sglang_eagle_nccl.knowledge.sglang import callgraph

SRC = {
    "sglang/lib2.py": """
class A:
    def __init__(self):
        pass

class B:
    pass
""",
    "sglang/g.py": """
import os
import torch
from sglang.lib2 import A, B

def leaf():
    os.environ["NCCL_L"] = "1"

def mid():
    leaf()

def start(c, w):
    W = A if c else B
    W()
    f2 = torch.x if c else torch.y
    f2()
    w.unknown()
    if c:
        w.hidden()
    mid()
    mid()

def nested():
    import ray
    class Local:
        def __init__(self):
            pass
        def m(self):
            pass
    @ray.remote
    class Act:
        pass
    def inner():
        pass
    inner()
    Local()
    Local.m(None)
    Local.nothing()
    Act.remote()

def shadowed():
    def inner():
        pass
    inner = mid
    inner()
""",
}

# A new tree for every test: a SourceTree memoises what it resolved, so a shared one would answer a
# test (and a mutant under test) from what an earlier test computed.
def fresh_tree() -> callgraph.SourceTree:
    return callgraph.SourceTree({p: textwrap.dedent(t) for p, t in SRC.items()}.get)


def line(text: str) -> int:
    return next(i + 1 for i, x in enumerate(SRC["sglang/g.py"].splitlines()) if text in x)


def every(c: callgraph.Condition) -> bool:
    return True


def test_a_choice_between_definitions_is_a_condition_named_by_the_choice():
    r = callgraph.reach(fresh_tree(), "sglang.g:start", accept=every)
    assert r.calls["sglang.lib2:A"] == (1, "sglang.g:start", r.calls["sglang.lib2:A"][2])
    assert [c.text for c in r.calls["sglang.lib2:A"][2]] == ["W is A"]
    assert [c.text for c in r.calls["sglang.lib2:B"][2]] == ["W is B"]
    assert [c.text for c in r.calls["torch.x"][2]] == ["f2 is torch.x"]
    assert [(c.file, c.line) for c in r.calls["torch.y"][2]] == [("sglang/g.py", line("f2()"))]
    assert [c.text for c in r.calls["sglang.lib2:A.__init__"][2]] == ["W is A"]
    plain = callgraph.reach(fresh_tree(), "sglang.g:start")
    assert not {"sglang.lib2:A", "sglang.lib2:B", "torch.x", "torch.y", "sglang.lib2:A.__init__"} & set(plain.calls)


def test_an_unresolved_call_is_listed_where_its_path_is_accepted():
    plain = callgraph.reach(fresh_tree(), "sglang.g:start")
    assert plain.unresolved == [("w.unknown", "sglang.g:start", line("w.unknown()"))]
    every_path = callgraph.reach(fresh_tree(), "sglang.g:start", accept=every)
    assert [u[0] for u in every_path.unresolved] == ["w.unknown", "w.hidden"]


def test_each_function_once_at_its_shallowest_depth_with_its_path_and_place():
    r = callgraph.reach(fresh_tree(), "sglang.g:start")
    assert r.found and r.target == "sglang.g:start" and r.depth == callgraph.MAX_DEPTH
    assert r.functions["sglang.g:start"] == (0, None, ())
    assert r.functions["sglang.g:mid"] == (1, "sglang.g:start", ())
    assert r.functions["sglang.g:leaf"] == (2, "sglang.g:mid", ())
    assert r.calls["sglang.g:mid"] == (1, "sglang.g:start", ())
    assert r.where["sglang.g:mid"] == ("sglang/g.py", line("def mid"))
    assert r.path_to("sglang.g:leaf") == ["sglang.g:start", "sglang.g:mid", "sglang.g:leaf"]
    assert [(w.variable, w.function, d) for w, d in r.writes] == [("NCCL_L", "sglang.g:leaf", 2)]
    assert r.writes_of("NCCL_L") == r.writes and r.writes_of("NCCL_M") == []
    assert r.reaches("sglang.g:leaf") == (2, "sglang.g:mid", ()) and r.reaches("sglang.g:nothing") is None


def test_the_depth_bound_stops_the_search():
    r = callgraph.reach(fresh_tree(), "sglang.g:start", depth=1)
    assert "sglang.g:mid" in r.calls and "sglang.g:leaf" not in r.calls and r.writes == []
    assert "sglang.g:mid" in r.where  # a function at the bound is read (its writes count), not followed
    r = callgraph.reach(fresh_tree(), "sglang.g:start", depth=2)
    assert [w.variable for w, _ in r.writes] == ["NCCL_L"]


def test_the_search_stops_when_its_goals_are_met():
    r = callgraph.reach(fresh_tree(), "sglang.g:start", calls=["sglang.g:mid"])
    assert "sglang.g:mid" in r.calls and "sglang.g:leaf" not in r.functions
    r = callgraph.reach(fresh_tree(), "sglang.g:start", writes=["NCCL_L"], calls=["sglang.g:mid"])
    assert r.writes_of("NCCL_L")
    r = callgraph.reach(fresh_tree(), "sglang.g:start", writes=["NCCL_L"], calls=["sglang.g:nothing"])
    assert "sglang.g:leaf" in r.functions


def test_a_missing_target_reaches_nothing():
    r = callgraph.reach(fresh_tree(), "sglang.g:missing", accept=every)
    assert not r.found and r.functions == {} and r.calls == {} and r.writes == [] and r.unresolved == []


def test_definitions_in_a_function_body_are_resolved_there():
    r = callgraph.reach(fresh_tree(), "sglang.g:nested", depth=1)
    assert set(r.calls) == {"sglang.g:nested.<locals>.inner", "sglang.g:nested.<locals>.Local",
                            "sglang.g:nested.<locals>.Local.__init__", "sglang.g:nested.<locals>.Local.m",
                            "sglang.g:nested.<locals>.Act.remote"}
    assert [u[0] for u in r.unresolved] == ["Local.nothing"]
    # A local assignment wins over a nested definition of the same name (the later binding).
    assert set(callgraph.reach(fresh_tree(), "sglang.g:shadowed", depth=1).calls) == {"sglang.g:mid"}


def test_one_definition_twice_is_no_choice_and_a_module_is_no_callee():
    t = callgraph.SourceTree({"sglang/__init__.py": "", "sglang/lib2.py": textwrap.dedent(SRC["sglang/lib2.py"]),
                              "sglang/u.py": textwrap.dedent("""
        from sglang import lib2
        from sglang.lib2 import A
        def helper():
            pass
        def same(c):
            W = A if c else A
            W()
        def module_or_function(c):
            W = lib2 if c else helper
            W()
        class K:
            def other(self):
                pass
            def m(self):
                def inner():
                    self.other()
                inner()
    """)}.get)
    assert [c.text for c in callgraph.reach(t, "sglang.u:same", depth=1).calls["sglang.lib2:A"][2]] == []
    assert callgraph.reach(t, "sglang.u:module_or_function", depth=1).calls["sglang.u:helper"][2] == ()
    # A function defined in a method sees the method's self.
    r = callgraph.reach(t, "sglang.u:K.m", depth=2)
    assert r.calls["sglang.u:K.other"][1] == "sglang.u:K.m.<locals>.inner" and r.unresolved == []


def test_a_choice_of_methods_and_a_function_s_relative_import_resolve_in_its_own_scope():
    t = callgraph.SourceTree({"sglang/__init__.py": "", "sglang/lib2.py": textwrap.dedent(SRC["sglang/lib2.py"]),
                              "sglang/u.py": textwrap.dedent("""
        class K:
            def one(self):
                pass
            def two(self):
                pass
            def three(self):
                pass
            def pick(self, c):
                W = self.one if c else self.two
                W()
                V = c and self.three
                V()
        def g():
            from .lib2 import A
            A()
    """)}.get)
    r = callgraph.reach(t, "sglang.u:K.pick", depth=1, accept=lambda c: True)
    assert {"sglang.u:K.one", "sglang.u:K.two", "sglang.u:K.three"} <= set(r.calls)
    assert set(callgraph.reach(t, "sglang.u:g", depth=1).calls) == {"sglang.lib2:A", "sglang.lib2:A.__init__"}
