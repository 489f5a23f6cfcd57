"""The call graph's small parts, each against a reference written here (the mutation run's survivors).

Relative imports, the callback APIs, loops that never run, instance attributes through the bases,
writes found per module, and the proof's reasons when a write or a call is missing.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

import pytest

from sglang_eagle_nccl.knowledge.sglang import callgraph, callgraph_conditions, proof


def tree_of(files: dict[str, str]) -> callgraph.SourceTree:
    return callgraph.SourceTree({p: textwrap.dedent(t) for p, t in files.items()}.get)


@pytest.mark.parametrize(
    "package,module,level,expected",
    [
        ("sglang.srt", "x", 0, "x"),
        ("sglang.srt", None, 0, ""),
        ("sglang.srt", "x", 1, "sglang.srt.x"),
        ("sglang.srt", None, 1, "sglang.srt"),
        ("sglang.srt.a", "x", 2, "sglang.srt.x"),
        ("sglang.srt.a", None, 2, "sglang.srt"),
        ("sglang.srt.a.b", "y", 3, "sglang.srt.y"),
    ],
)
def test_relative_imports_name_the_module_python_would(package, module, level, expected):
    assert callgraph._absolute(package, module, level) == expected


@pytest.mark.parametrize(
    "name,calls",
    [
        ("multiprocessing.Process", True),
        ("multiprocessing.get_context().Process", True),
        ("multiprocessing.Pool.apply_async", True),
        ("torch.multiprocessing.spawn", True),
        ("torch.multiprocessing.Process", True),
        ("threading.Thread", True),
        ("threading.Timer", True),
        ("concurrent.futures.ThreadPoolExecutor.submit", True),
        ("asyncio.get_event_loop().run_in_executor", True),
        ("ray.remote", True),
        ("atexit.register", False),
        ("signal.signal", False),
        ("weakref.finalize", False),
        ("mymod.Process", False),
        ("multiprocessing", False),
        ("threading.Thread.start", False),
        ("asyncio.sleep", False),
        ("torch.spawn", False),
    ],
)
def test_only_apis_that_call_a_function_count_it_as_called(name, calls):
    assert callgraph_conditions._calls_its_arguments(name) is calls


@pytest.mark.parametrize(
    "source,empty",
    [("[]", True), ("()", True), ("{}", True), ("set()", False), ("''", True), ("range(0)", True),
     ("range(1)", False), ("[1]", False), ("(x,)", False), ("{1: 2}", False), ("'ab'", False), ("range(n)", False),
     ("items", False), ("range(0, 5)", False), ("other(0)", False)],
)
def test_a_loop_over_nothing_is_known_without_running_it(source, empty):
    assert callgraph_conditions._empty_iterable(ast.parse(source, mode="eval").body) is empty


ATTRS = {
    "sglang/lib.py": """
        class Lib:
            def init(self):
                pass
        class Other:
            def init(self):
                pass
    """,
    "sglang/w.py": """
        from sglang.lib import Lib, Other
        class Base:
            def __init__(self):
                self.lib = None
                self.lib = Lib()
                self.a = self.b = Other()
                other.lib = Other()
        class Child(Base):
            def go(self):
                self.lib.init()
            def both(self):
                self.x = Lib()
                self.x = Other()
                self.x.init()
            def chained(self):
                self.a.init()
    """,
}


def test_an_instance_attribute_is_what_the_class_and_its_bases_assign():
    tree = tree_of(ATTRS)
    cls = tree.lookup("sglang.w", "Child")[0]
    held = tree.instance_attribute(cls, "lib")
    assert [x.cls.key for x in held] == ["sglang.lib:Lib"]  # None skipped, `other.lib` is not self's
    assert [x.cls.key for x in tree.instance_attribute(cls, "x")] == ["sglang.lib:Lib", "sglang.lib:Other"]
    assert [x.cls.key for x in tree.instance_attribute(cls, "a")] == ["sglang.lib:Other"]
    assert tree.instance_attribute(cls, "missing") == []
    r = callgraph.reach(tree, "sglang.w:Child.go", calls=["sglang.lib:Lib.init"])
    assert r.reaches("sglang.lib:Lib.init") is not None
    choice = callgraph.reach(tree, "sglang.w:Child.both", accept=lambda c: True)
    assert choice.reaches("sglang.lib:Lib.init")[2][-1].text == "self.x.init is Lib.init"
    assert callgraph.reach(tree, "sglang.w:Child.both").reaches("sglang.lib:Lib.init") is None


def test_the_method_resolution_order_and_super():
    tree = tree_of({"sglang/m.py": """
        class A:
            def f(self):
                pass
            def g(self):
                pass
        class B(A):
            def f(self):
                super().f()
        class C(B):
            pass
    """})
    c = tree.lookup("sglang.m", "C")[0]
    assert [k.key for k in tree.mro(c)] == ["sglang.m:C", "sglang.m:B", "sglang.m:A"]
    assert tree.method(c, "f").key == "sglang.m:B.f" and tree.method(c, "g").key == "sglang.m:A.g"
    b = tree.lookup("sglang.m", "B")[0]
    assert tree.method(c, "f", after=b).key == "sglang.m:A.f"
    assert tree.method(c, "nothing") is None
    assert [x.key for x in tree.bases(c)] == ["sglang.m:B"]
    r = callgraph.reach(tree, "sglang.m:C.f", calls=["sglang.m:A.f"])
    assert r.path_to("sglang.m:A.f") == ["sglang.m:B.f", "sglang.m:A.f"]


def test_writes_in_a_module_are_found_wherever_they_are_defined():
    tree = tree_of({"sglang/env.py": """
        import os
        def top():
            os.environ["NCCL_A"] = "1"
            os.environ["OTHER"] = "1"
            def inner():
                os.environ["NCCL_B"] = "1"
        class K:
            def m(self):
                os.environ["NCCL_C"] = "1"
            class Nested:
                def n(self):
                    os.environ["NCCL_D"] = "1"
        if True:
            def under_if():
                os.environ["NCCL_E"] = "1"
        try:
            def under_try():
                os.environ["NCCL_F"] = "1"
        except ImportError:
            def in_handler():
                os.environ["NCCL_G"] = "1"
        else:
            def in_else():
                os.environ["NCCL_H"] = "1"
        finally:
            def in_finally():
                os.environ["NCCL_I"] = "1"
        with open("x") as f:
            def under_with():
                os.environ["NCCL_J"] = "1"
    """})
    wanted = [f"NCCL_{c}" for c in "ABCDEFGHIJ"]
    found = {w.variable: w.function for w in callgraph.writes_in_module(tree, "sglang.env", wanted)}
    assert found == {
        "NCCL_A": "sglang.env:top", "NCCL_B": "sglang.env:top.<locals>.inner", "NCCL_C": "sglang.env:K.m",
        "NCCL_D": "sglang.env:K.Nested.n", "NCCL_E": "sglang.env:under_if", "NCCL_F": "sglang.env:under_try",
        "NCCL_G": "sglang.env:in_handler", "NCCL_H": "sglang.env:in_else", "NCCL_I": "sglang.env:in_finally",
        "NCCL_J": "sglang.env:under_with",
    }
    assert callgraph.writes_in_module(tree, "sglang.absent", wanted) == []
    assert [w.line for w in callgraph.writes_in_module(tree, "sglang.env", ["NCCL_A"])] == [4]


@dataclass
class S:
    kind: str
    subject: tuple[str, ...]
    why: str = "w"
    start: str | None = None
    when: tuple[str, ...] = ()


def test_the_reason_for_a_missing_write_says_where_it_went_and_what_was_unresolved():
    tree = tree_of({"sglang/a.py": """
        import os
        def start(worker):
            worker.run()
            if flag:
                os.environ["NCCL_A"] = "1"
        def elsewhere():
            os.environ["NCCL_B"] = "1"
    """})
    where = [callgraph.EnvWrite("NCCL_B", "assign", "sglang/a.py", 8, "sglang.a:elsewhere")]
    p = proof.prove(tree, "sglang.a:start", S("writes", ("NCCL_A", "NCCL_B")), elsewhere=lambda v: where)
    assert p.reason == (
        "NCCL_A is written at sglang/a.py:6 (start) only under a condition the statement does not state: "
        "`flag` at sglang/a.py:5; no write of NCCL_B reachable from sglang.a:start within 12 calls "
        "(NCCL_B is written at sglang/a.py:8 (elsewhere)) (1 call(s) on the way cannot be resolved statically)"
    )
    nowhere = proof.prove(tree, "sglang.a:start", S("writes", ("NCCL_C",)))
    assert nowhere.reason.endswith("(SGLang writes it nowhere) (1 call(s) on the way cannot be resolved statically)")
    stated = proof.prove(tree, "sglang.a:start", S("writes", ("NCCL_A", "NCCL_C"), when=("flag",)))
    assert not stated.ok and [x["variable"] for x in stated.proofs] == ["NCCL_A"]
    assert stated.proofs[0]["conditions"] == ["`flag` at sglang/a.py:5"]


def test_what_both_branches_do_is_unconditional_and_only_that():
    tree = tree_of({"sglang/b.py": """
        import os
        class Base:
            def __init__(self):
                pass
        class A(Base):
            pass
        class B(Base):
            pass
        def go():
            pass
        def other():
            pass
        def start(flag):
            if flag:
                go()
                A()
                os.environ["NCCL_X"] = "1"
                os.environ["NCCL_Y"] = "1"
                os.environ[name] = "1"
            else:
                go()
                B()
                other()
                os.environ["NCCL_X"] = "2"
                os.environ[name] = "2"
    """})
    r = callgraph.reach(tree, "sglang.b:start")
    assert r.reaches("sglang.b:go") == (1, "sglang.b:start", ())
    assert r.reaches("sglang.b:Base.__init__") is not None  # A() and B() run one inherited __init__
    assert r.reaches("sglang.b:A") is None and r.reaches("sglang.b:other") is None
    assert sorted({w.variable for w, _ in r.writes}) == ["NCCL_X"]  # NCCL_Y only in one branch; "?" never merged
    [(x, _)] = [(w, d) for w, d in r.writes if w.variable == "NCCL_X"]
    assert x.conditions == () and x.line == 18  # where the first branch writes it


def test_a_helper_writes_the_variable_its_caller_names_under_the_helpers_conditions():
    tree = tree_of({"sglang/h.py": """
        import os
        def put(name, value=None):
            os.environ[name] = value
        class Env:
            def put(self, key, value):
                if value:
                    os.environ[key] = value
            @staticmethod
            def plain(key):
                os.environ[key] = "1"
        def start(v):
            put("NCCL_A", "1")
            put(name="NCCL_B")
            put(v)
            Env().put("NCCL_C", "1")
    """})
    r = callgraph.reach(tree, "sglang.h:start", accept=lambda c: True)
    got = {w.variable: (w.how, tuple(c.text for c in w.conditions)) for w, _ in r.writes}
    assert got == {"NCCL_A": ("helper:put", ()), "NCCL_B": ("helper:put", ()), "?": ("helper:put", ()),
                   "NCCL_C": ("helper:Env.put", ("value",))}
    assert {w.variable for w, _ in callgraph.reach(tree, "sglang.h:start").writes} == {"NCCL_A", "NCCL_B", "?"}


def test_imports_inside_a_function_and_os_aliases():
    tree = tree_of({"sglang/i.py": """
        def start():
            import os as o
            from os import environ as e
            from sglang.j import go
            o.environ["NCCL_A"] = "1"
            e["NCCL_B"] = "1"
            o.putenv("NCCL_C", "1")
            go()
        def not_os():
            import json as os
            os.environ["NCCL_D"] = "1"
    """, "sglang/j.py": "def go():\n    pass\n"})
    r = callgraph.reach(tree, "sglang.i:start")
    assert {w.variable for w, _ in r.writes} == {"NCCL_A", "NCCL_B", "NCCL_C"}
    assert r.reaches("sglang.j:go") is not None
    assert callgraph.reach(tree, "sglang.i:not_os").writes == []


@pytest.mark.parametrize("test,known", [("True", True), ("0", False), ("None", False), ("'x'", True),
                                        ("TYPE_CHECKING", False), ("typing.TYPE_CHECKING", False),
                                        ("not TYPE_CHECKING", True), ("not flag", None), ("flag", None)])
def test_a_test_known_without_running_it(test, known):
    assert callgraph_conditions._constant(ast.parse(test, mode="eval").body) is known


def test_the_proof_dict_and_short_names():
    assert proof._short("sglang.m:A.f") == "f" and proof._short("torch.distributed.new_group") == "new_group"
    assert proof._short("sglang.m:g") == "g"
    p = proof.Proof("s", "w", True, depth=2, conditions=("c",))
    assert p.to_dict() == {"statement": "s", "why": "w", "ok": True, "conditions": ["c"], "depth": 2}
    assert proof.Proof("s", "w", False, reason="r").to_dict() == {"statement": "s", "why": "w", "ok": False, "reason": "r"}
    tree = tree_of({"sglang/u.py": "def start(w):\n    w.go()\n    w.run()\n"})
    r = proof.prove(tree, "sglang.u:start", S("reaches", ("sglang.x:go",)))
    assert r.reason.endswith("the call `w.go` in start (line 2) cannot be resolved statically to a definition, "
                             "so it proves nothing")
    r = proof.prove(tree, "sglang.u:start", S("reaches", ("sglang.x:other",)))
    assert r.reason.endswith("within 12 calls (through SGLang's own calls) (2 call(s) on the way cannot be resolved "
                             "statically)")
