"""The static call graph that proves what a hook target does, on small synthetic SGLang sources."""

from __future__ import annotations

import textwrap

import pytest

from sglang_eagle_nccl.knowledge.sglang import callgraph


def tree_of(files: dict[str, str]) -> callgraph.SourceTree:
    sources = {path: textwrap.dedent(text) for path, text in files.items()}
    return callgraph.SourceTree(sources.get)


def tree_of_with_helpers(files: dict[str, str]) -> callgraph.SourceTree:
    sources = {path: textwrap.dedent(text) for path, text in files.items()}
    return callgraph.SourceTree(sources.get, callback_helpers={"sglang.p:run_pass"})


def written(tree: callgraph.SourceTree, target: str, **kw) -> dict[str, str]:
    r = callgraph.reach(tree, target, **kw)
    assert r.found, target
    return {w.variable: w.how for w, _ in r.writes}


def test_every_kind_of_environ_write_is_seen():
    tree = tree_of(
        {
            "sglang/w.py": """
        import os
        from os import environ as env

        def f(k):
            os.environ["A"] = "1"
            os.environ.setdefault("B", "1")
            os.environ.pop("C", None)
            del os.environ["D"]
            os.environ.update({"E": "1"})
            os.environ.update(F="1")
            os.putenv("G", "1")
            env["H"] = "1"
            os.environ.__setitem__("I", "1")
            envs.SGLANG_X.set(1)
            os.environ[k] = "dynamic"
            print(os.environ.get("NOT_A_WRITE"))
    """
        }
    )
    assert written(tree, "sglang.w:f") == {
        "A": "assign",
        "B": "setdefault",
        "C": "pop",
        "D": "del",
        "E": "update",
        "F": "update",
        "G": "putenv",
        "H": "assign",
        "I": "assign",
        "SGLANG_X": "envs.set",
    }


def test_a_write_through_a_helper_names_the_constant_passed():
    """An env helper is found by what it does (it writes the variable its parameter names), not by name."""
    tree = tree_of(
        {
            "sglang/util.py": """
            import os
            def put(name, value):
                os.environ[name] = value
            class Env:
                def put(self, key, value):
                    os.environ[key] = value
        """,
            "sglang/main.py": """
            from sglang.util import put, Env
            def go():
                put("NCCL_ALGO", "tree")
                Env().put(key="NCCL_PROTO", value="LL")
        """,
        }
    )
    got = written(tree, "sglang.main:go")
    assert got["NCCL_ALGO"] == "helper:put" and got["NCCL_PROTO"] == "helper:Env.put"


def test_calls_are_followed_through_methods_bases_imports_and_constructors():
    tree = tree_of(
        {
            "sglang/__init__.py": "",
            "sglang/pkg/__init__.py": "from sglang.pkg.impl import *\n",
            "sglang/pkg/impl.py": """
            import os
            def init_distributed_environment():
                os.environ["DEEP"] = "1"
        """,
            "sglang/base.py": """
            from sglang.pkg import init_distributed_environment
            class Base:
                def __init__(self):
                    self.setup()
                def setup(self):
                    init_distributed_environment()
        """,
            "sglang/worker.py": """
            from ..base import Base
            import sglang.pkg.impl as impl

            class Worker(Base):
                def __init__(self):
                    super().__init__()
                    impl.init_distributed_environment()

            class Client:
                pass

            class Record:
                def __post_init__(self):
                    self.resolve()
                def resolve(self):
                    import os
                    os.environ["POST"] = "1"

            def build(overlap):
                cls = Client if overlap else Worker
                cls()
                Record()
        """,
        }
    )
    r = callgraph.reach(tree, "sglang.worker:build", accept=lambda c: True)  # `Client if overlap else Worker`
    assert r.reaches("sglang.pkg.impl:init_distributed_environment") is not None
    path = r.path_to("sglang.pkg.impl:init_distributed_environment")
    assert path[0] == "sglang.worker:build" and "sglang.worker:Worker.__init__" in path
    assert {w.variable for w, _ in r.writes} == {"DEEP", "POST"}
    assert r.reaches("sglang.worker:Worker") is not None and r.reaches("sglang.worker:Record") is not None


def test_callbacks_and_nested_functions_and_third_party_leaves():
    tree = tree_of_with_helpers(
        {
            "sglang/p.py": """
        import torch.distributed as dist
        def step(args):
            import os
            os.environ["FROM_CALLBACK"] = "1"
        def run_pass(args, fn):
            fn(args)
        def pipeline(args):
            def inner():
                dist.new_group([0, 1])
            inner()
            run_pass(args, step)
    """
        }
    )
    r = callgraph.reach(tree, "sglang.p:pipeline")
    assert {w.variable for w, _ in r.writes} == {"FROM_CALLBACK"}  # run_pass is named as calling its argument
    assert r.reaches("torch.distributed.new_group") is not None  # a third-party callable, by its import name


def test_what_is_not_called_is_not_reached():
    """The 0.5.19 shape: the hooked method exists but is empty; the work moved to a sibling method."""
    tree = tree_of(
        {
            "sglang/server_args.py": """
        import os
        class ServerArgs:
            def __post_init__(self):
                \"\"\"Construction leaves the record raw.\"\"\"
            def resolve_once(self):
                self._deterministic()
            def _deterministic(self):
                os.environ["NCCL_ALGO"] = "allreduce:tree"
    """
        }
    )
    assert written(tree, "sglang.server_args:ServerArgs.__post_init__") == {}
    assert written(tree, "sglang.server_args:ServerArgs.resolve_once") == {"NCCL_ALGO": "assign"}
    assert callgraph.reach(tree, "sglang.server_args:ServerArgs.missing").found is False
    writes = callgraph.writes_in_module(tree, "sglang.server_args", ["NCCL_ALGO"])
    assert [(w.function, w.line) for w in writes] == [("sglang.server_args:ServerArgs._deterministic", 9)]


@pytest.mark.parametrize("depth,found", [(3, True), (2, False)])
def test_depth_is_bounded(depth, found):
    tree = tree_of(
        {
            "sglang/chain.py": """
        def a(): b()
        def b(): c()
        def c(): goal()
        def goal(): pass
    """
        }
    )
    r = callgraph.reach(tree, "sglang.chain:a", depth, calls=["sglang.chain:goal"])
    assert (r.reaches("sglang.chain:goal") is not None) is found


def test_the_search_stops_once_every_goal_is_met():
    tree = tree_of(
        {
            "sglang/m.py": """
        import os
        def a():
            os.environ["X"] = "1"
            far()
        def far():
            farther()
        def farther(): pass
    """
        }
    )
    r = callgraph.reach(tree, "sglang.m:a", writes=["X"])
    assert "sglang.m:far" not in r.where  # found at the target: nothing further was parsed or walked
