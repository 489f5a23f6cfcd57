"""The call graph's small parts, each against a reference written here (the mutation run's survivors).

Relative imports, the callback APIs, loops that never run, instance attributes through the bases,
writes found per module, and the proof's reasons when a write or a call is missing.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

import pytest

from sglang_eagle_nccl.knowledge.sglang import callgraph, proof


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
    assert callgraph._calls_its_arguments(name) is calls


@pytest.mark.parametrize(
    "source,empty",
    [("[]", True), ("()", True), ("{}", True), ("set()", False), ("''", True), ("range(0)", True),
     ("range(1)", False), ("[1]", False), ("(x,)", False), ("{1: 2}", False), ("'ab'", False), ("range(n)", False),
     ("items", False), ("range(0, 5)", False), ("other(0)", False)],
)
def test_a_loop_over_nothing_is_known_without_running_it(source, empty):
    assert callgraph._empty_iterable(ast.parse(source, mode="eval").body) is empty


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
