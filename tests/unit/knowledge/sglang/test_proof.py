"""The proof of a stated behaviour: definitions, not names; conditions on the path; callbacks only where called.

Small synthetic SGLang sources (never a wheel): each test names the rule of
``sglang_eagle_nccl/knowledge/sglang/proof.py`` / ``callgraph.py`` it checks; the generated
test builds nested blocks and compares with a reference written here.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.knowledge.sglang import callgraph, proof


def tree_of(files: dict[str, str], callbacks: tuple[str, ...] = ()) -> callgraph.SourceTree:
    sources = {path: textwrap.dedent(text) for path, text in files.items()}
    return callgraph.SourceTree(sources.get, callback_helpers=callbacks)


@dataclass
class S:
    kind: str
    subject: tuple[str, ...]
    why: str = "w"
    start: str | None = None
    when: tuple[str, ...] = ()
    callbacks: tuple[str, ...] = ()


def prove(files, target, kind, *subject, when=(), callbacks=(), start=None):
    return proof.prove(tree_of(files, callbacks), target, S(kind, subject, when=when, start=start))


DIST = """
    def init_distributed_environment():
        pass
"""


def test_a_call_proves_only_the_definition_it_resolves_to():
    files = {
        "sglang/dist.py": DIST,
        "sglang/other.py": DIST,
        "sglang/a.py": """
            from sglang.other import init_distributed_environment
            def start():
                init_distributed_environment()
        """,
    }
    p = prove(files, "sglang.a:start", "reaches", "sglang.dist:init_distributed_environment")
    assert not p.ok and "namesake" in p.reason and "sglang.other:init_distributed_environment" in p.reason
    ok = prove(files, "sglang.a:start", "reaches", "sglang.other:init_distributed_environment")
    assert ok.ok and ok.path == "start -> init_distributed_environment" and ok.steps[-1].endswith("other:init_distributed_environment")


def test_resolution_through_aliases_bases_attributes_and_annotations():
    files = {
        "sglang/dist.py": DIST,
        "sglang/pkg/__init__.py": "from sglang.pkg.impl import *\n",
        "sglang/pkg/impl.py": "from sglang.dist import init_distributed_environment as ide\n",
        "sglang/nccl.py": """
            class Lib:
                def init_rank(self):
                    pass
        """,
        "sglang/w.py": """
            import argparse
            import sglang.pkg as pkg
            from sglang.nccl import Lib
            class Base:
                def setup(self):
                    pkg.ide()
            class Worker(Base):
                def __init__(self, parser: argparse.ArgumentParser):
                    self.lib = None
                    self.lib = Lib()
                    self.setup()
                    self.lib.init_rank()
                    parser.add_argument("--x")
        """,
    }
    for subject in ("sglang.dist:init_distributed_environment", "sglang.nccl:Lib.init_rank",
                    "argparse.ArgumentParser.add_argument", "sglang.nccl:Lib"):
        assert prove(files, "sglang.w:Worker.__init__", "reaches", subject).ok, subject


def test_an_unresolvable_call_proves_nothing_and_says_so():
    files = {"sglang/dist.py": DIST, "sglang/a.py": """
        def start(worker):
            worker.init_distributed_environment()
    """}
    p = prove(files, "sglang.a:start", "reaches", "sglang.dist:init_distributed_environment")
    assert not p.ok and "cannot be resolved statically" in p.reason and "worker.init_distributed_environment" in p.reason


@pytest.mark.parametrize(
    "body,ok",
    [
        ("go()", True),
        ("if flag:\n    go()", False),
        ("if False:\n    go()", False),
        ("if True:\n    go()", True),
        ("if TYPE_CHECKING:\n    go()", False),
        ("if flag:\n    go()\nelse:\n    go()", True),
        ("if flag:\n    return\ngo()", False),
        ("if flag:\n    raise ValueError\ngo()", True),
        ("return\ngo()", False),
        ("while flag:\n    go()", False),
        ("while True:\n    go()\n    break", True),
        ("for x in items:\n    go()", True),
        ("for x in []:\n    go()", False),
        ("for x in range(0):\n    go()", False),
        ("try:\n    go()\nexcept Exception:\n    pass", True),
        ("try:\n    pass\nexcept Exception:\n    go()", False),
        ("with ctx:\n    go()", True),
        ("flag and go()", False),
        ("go() if flag else None", False),
        ("[go() for x in items]", True),
        ("[go() for x in items if x]", False),
        ("import atexit\natexit.register(go)", False),
        ("import signal\nsignal.signal(2, go)", False),
        ("import weakref\nweakref.finalize(self, go)", False),
        ("import threading\nthreading.Thread(target=go).start()", True),
        ("import multiprocessing as mp\nmp.Process(target=go).start()", True),
        ("import multiprocessing as mp\nmp.get_context('spawn').Process(target=go).start()", True),
        ("helper(go)", False),
        ("f = lambda: go()\n", False),
        ("match flag:\n    case 1:\n        go()", False),
    ],
)
def test_conditions_are_part_of_the_path(body, ok):
    files = {"sglang/m.py": "from typing import TYPE_CHECKING\ndef go():\n    pass\ndef helper(fn):\n    pass\n"
             "def start(self, flag, items, ctx):\n" + textwrap.indent(body, "    ") + "\n"}
    p = proof.prove(tree_of(files), "sglang.m:start", S("reaches", ("sglang.m:go",)))
    assert p.ok is ok, (body, p.reason)


def test_a_stated_condition_is_accepted_and_reported_with_its_line():
    files = {"sglang/m.py": """
        import os
        def start(server_args, backend):
            if server_args.enable_deterministic_inference:
                os.environ["NCCL_ALGO"] = "tree"
            if backend  !=  'mooncake':
                go()
        def go():
            pass
    """}
    bare = prove(files, "sglang.m:start", "writes", "NCCL_ALGO")
    assert not bare.ok and "`server_args.enable_deterministic_inference` at sglang/m.py:4" in bare.reason
    flag = prove(files, "sglang.m:start", "writes", "NCCL_ALGO", when=("--enable-deterministic-inference",))
    assert flag.ok and flag.conditions == ("`server_args.enable_deterministic_inference` at sglang/m.py:4",)
    assert not prove(files, "sglang.m:start", "writes", "NCCL_ALGO", when=("--enable-other",)).ok
    text = prove(files, "sglang.m:start", "reaches", "sglang.m:go", when=("backend != 'mooncake'",))
    assert text.ok and text.conditions == ("`backend != 'mooncake'` at sglang/m.py:6",)
    negated = prove(files, "sglang.m:start", "reaches", "sglang.m:go", when=("backend == 'mooncake'",))
    assert not negated.ok and "only under a condition" in negated.reason


def test_a_negated_flag_is_not_the_flag():
    files = {"sglang/m.py": """
        import os
        def start(args):
            if not args.enable_x:
                os.environ["NCCL_ALGO"] = "tree"
    """}
    assert not prove(files, "sglang.m:start", "writes", "NCCL_ALGO", when=("--enable-x",)).ok
    assert prove(files, "sglang.m:start", "writes", "NCCL_ALGO", when=("not args.enable_x",)).ok


def test_a_choice_between_callees_is_a_condition_unless_both_branches_reach_it():
    files = {"sglang/m.py": """
        class Base:
            def __init__(self):
                pass
        class A(Base):
            pass
        class B(Base):
            pass
        def pick(overlap):
            W = A if overlap else B
            W()
        def branches(overlap):
            if overlap:
                A()
            else:
                B()
    """}
    assert not prove(files, "sglang.m:pick", "reaches", "sglang.m:A").ok
    assert "`W is A`" in prove(files, "sglang.m:pick", "reaches", "sglang.m:A").reason
    assert prove(files, "sglang.m:pick", "reaches", "sglang.m:A", when=("W is A",)).ok
    assert prove(files, "sglang.m:branches", "reaches", "sglang.m:Base.__init__").ok
    assert not prove(files, "sglang.m:branches", "reaches", "sglang.m:A").ok


def test_a_named_helper_calls_its_argument_and_only_that_one():
    files = {"sglang/p.py": """
        import os
        def step(args):
            os.environ["NCCL_ALGO"] = "tree"
        def run_hook(fn, args):
            fn(args)
        def other(fn, args):
            pass
        def pipeline(args):
            run_hook(step, args)
        def elsewhere(args):
            other(step, args)
    """}
    assert not prove(files, "sglang.p:pipeline", "writes", "NCCL_ALGO").ok
    assert prove(files, "sglang.p:pipeline", "writes", "NCCL_ALGO", callbacks=("sglang.p:run_hook",)).ok
    assert not prove(files, "sglang.p:elsewhere", "writes", "NCCL_ALGO", callbacks=("sglang.p:run_hook",)).ok


def test_a_write_moved_to_another_class_is_not_reached():
    files = {"sglang/s.py": """
        import os
        class ServerArgs:
            def __post_init__(self):
                self._deterministic()
        class Other:
            def _deterministic(self):
                os.environ["NCCL_ALGO"] = "tree"
    """}
    p = prove(files, "sglang.s:ServerArgs.__post_init__", "writes", "NCCL_ALGO")
    assert not p.ok and "no write of NCCL_ALGO" in p.reason


def test_missing_target_and_helper_writes_under_conditions():
    files = {"sglang/u.py": """
        import os
        def put(name, value):
            if value is not None:
                os.environ[name] = value
        def start():
            put("NCCL_ALGO", "tree")
    """}
    assert prove(files, "sglang.u:absent", "writes", "NCCL_ALGO").reason == "sglang.u:absent not found"
    assert prove(files, "sglang.u:absent", "reaches", "sglang.u:put").reason == "sglang.u:absent not found"
    p = prove(files, "sglang.u:start", "writes", "NCCL_ALGO")
    assert not p.ok and "`value is not None`" in p.reason
    assert prove(files, "sglang.u:start", "writes", "NCCL_ALGO", when=("value is not None",)).ok


def test_the_proof_is_a_dict_for_the_matrix_and_doctor():
    files = {"sglang/m.py": "import os\ndef f():\n    os.environ['NCCL_A'] = '1'\n    g()\ndef g():\n    pass\n"}
    w = prove(files, "sglang.m:f", "writes", "NCCL_A").to_dict()
    assert w["ok"] and w["depth"] == 0 and w["proofs"][0]["at"] == "sglang/m.py:3 (f)" and "reason" not in w
    r = prove(files, "sglang.m:f", "reaches", "sglang.m:g", start="sglang.m:f").to_dict()
    assert r["path"] == "f -> g" and r["depth"] == 1 and r["steps"] == ["sglang.m:f", "sglang.m:g"]
    assert r["statement"] == "reaches sglang.m:g (from sglang.m:f)"
    bad = prove(files, "sglang.m:f", "reaches", "sglang.m:h").to_dict()
    assert bad["ok"] is False and "depth" not in bad and bad["reason"]


def test_normalize_condition_is_pythons_spelling():
    assert proof.normalize_condition("a  and(b)") == "a and b"
    assert proof.normalize_condition(" not (x == 1) ") == "not x == 1"


# --- generated: nested blocks against a reference ------------------------------------------------

WRAPPERS = {
    # wrapper -> (header, reached unconditionally, reached at all)
    "if_flag": ("if flag:", False, True),
    "if_true": ("if True:", True, True),
    "if_false": ("if False:", False, False),
    "while_flag": ("while flag:", False, True),
    "for_items": ("for x in items:", True, True),
    "for_empty": ("for x in ():", False, False),
    "with": ("with ctx:", True, True),
    "try": ("try:", True, True),
}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(sorted(WRAPPERS)), max_size=5))
def test_nested_blocks_match_the_reference(wrappers):
    lines, indent = [], "    "
    for w in wrappers:
        lines.append(indent + WRAPPERS[w][0])
        indent += "    "
    lines.append(indent + "go()")
    for w in reversed(wrappers):
        indent = indent[:-4]
        if w == "try":
            lines.append(indent + "except Exception:")
            lines.append(indent + "    pass")
    source = "def go():\n    pass\ndef start(flag, items, ctx):\n" + "\n".join(lines) + "\n"
    tree = tree_of({"sglang/m.py": source})
    strict = proof.prove(tree, "sglang.m:start", S("reaches", ("sglang.m:go",)))
    loose = callgraph.reach(tree, "sglang.m:start", accept=lambda c: True).reaches("sglang.m:go")
    assert strict.ok is all(WRAPPERS[w][1] for w in wrappers), source
    assert (loose is not None) is all(WRAPPERS[w][2] for w in wrappers), source
