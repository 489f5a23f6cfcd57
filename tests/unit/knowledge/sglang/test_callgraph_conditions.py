"""The conditions walker (callgraph_conditions): under which conditions each call runs, one rule per small source.

Each case is a function calling ``a()``, ``b()``, ``c()`` ... (functions of the same module) in one
construct; the expected result maps each callee to the conditions on its call (their source
text, in order) or to None when the walker must not count it as run at all. Written from the
rules in the module's docstring, not read back from the code.
"""

from __future__ import annotations

import textwrap

import pytest

from sglang_eagle_nccl.knowledge.sglang import callgraph

DEFS = "\n".join(f"def {n}(*args, **kwargs):\n    pass\n" for n in "abcde") + "\n"
PRELUDE = """
import atexit
import signal
import threading
import typing
import weakref
import multiprocessing
from typing import TYPE_CHECKING
"""

# (body of ``def f(x, y, items, server_args):``, {callee: conditions or None (never runs)})
CASES = {
    "if_false_never_runs": ("if False:\n    a()\nb()", {"a": None, "b": ()}),
    "if_zero_never_runs": ("if 0:\n    a()\nelse:\n    b()", {"a": None, "b": ()}),
    "if_true_always_runs": ("if True:\n    a()\nelse:\n    b()", {"a": (), "b": None}),
    "if_not_true": ("if not True:\n    a()\nelse:\n    b()", {"a": None, "b": ()}),
    "if_not_not_false": ("if not not False:\n    a()\nb()", {"a": None, "b": ()}),
    "type_checking_never_runs": ("if TYPE_CHECKING:\n    a()\nelse:\n    b()", {"a": None, "b": ()}),
    "typing_type_checking": ("if typing.TYPE_CHECKING:\n    a()", {"a": None}),
    "not_type_checking_runs": ("if not TYPE_CHECKING:\n    a()", {"a": ()}),
    "if_and_else": ("if x:\n    a()\nelse:\n    b()\nc()", {"a": ("x",), "b": ("not x",), "c": ()}),
    "if_not_else": ("if not x:\n    a()\nelse:\n    b()", {"a": ("not x",), "b": ("x",)}),
    "nested_ifs": ("if x:\n    if y:\n        a()\n    b()", {"a": ("x", "y"), "b": ("x",)}),
    "early_return": ("if x:\n    return\na()", {"a": ("not x",)}),
    "early_return_in_else": ("if x:\n    a()\nelse:\n    return\nb()", {"a": ("x",), "b": ("x",)}),
    "early_raise_adds_nothing": ("if x:\n    raise ValueError\na()", {"a": ()}),
    "raise_in_else_adds_nothing": ("if x:\n    pass\nelse:\n    raise ValueError\na()", {"a": ()}),
    "nested_both_return": ("if x:\n    if y:\n        return\n    else:\n        return\na()", {"a": ("not x",)}),
    "nested_both_raise": ("if x:\n    if y:\n        raise KeyError\n    else:\n        raise KeyError\na()", {"a": ()}),
    "nested_return_and_raise": ("if x:\n    if y:\n        raise KeyError\n    else:\n        return\na()",
                                {"a": ("not x",)}),
    "try_finally_falls": ("try:\n    a()\nfinally:\n    b()\nc()", {"a": (), "b": (), "c": ()}),
    "comprehension_filter_call": ("v = [i for i in items if a(i)]", {"a": ()}),
    "both_branches_return": ("if x:\n    return\nelse:\n    return\na()", {"a": None}),
    "return_and_raise": ("if x:\n    raise ValueError\nelse:\n    return\na()", {"a": None}),
    "raise_and_return": ("if x:\n    return\nelse:\n    raise ValueError\na()", {"a": None}),
    "both_branches_raise": ("if x:\n    raise ValueError\nelse:\n    raise KeyError\na()", {"a": None}),
    "after_return": ("return a()\nb()", {"a": (), "b": None}),
    "after_raise": ("raise ValueError(a()) from b()\nc()", {"a": (), "b": (), "c": None}),
    "bare_return": ("a()\nreturn\nb()", {"a": (), "b": None}),
    "continue_in_a_loop": ("for i in items:\n    if x:\n        continue\n    a()", {"a": ("not x",)}),
    "break_in_a_loop": ("while y:\n    if x:\n        break\n    a()", {"a": ("y", "not x")}),
    "while_condition": ("while x:\n    a()\nelse:\n    b()\nc()", {"a": ("x",), "b": (), "c": ()}),
    "while_true": ("while True:\n    a()", {"a": ()}),
    "while_false": ("while False:\n    a()\nb()", {"a": None, "b": ()}),
    "while_test_is_evaluated": ("while a():\n    pass", {"a": ()}),
    "for_runs": ("for i in items:\n    a()\nelse:\n    b()", {"a": (), "b": ()}),
    "for_over_empty_bytes": ("for i in b'':\n    a()", {"a": None}),
    "for_over_nothing": ("for i in []:\n    a()\nelse:\n    b()", {"a": None, "b": ()}),
    "for_iter_is_evaluated": ("for i in a():\n    pass", {"a": ()}),
    "try_except_finally": (
        "try:\n    a()\nexcept KeyError:\n    b()\nexcept:\n    c()\nelse:\n    d()\nfinally:\n    e()",
        {"a": (), "b": ("except KeyError",), "c": ("except",), "d": (), "e": ()}),
    "try_returns_handler_falls": ("try:\n    return\nexcept KeyError:\n    pass\na()", {"a": ()}),
    "try_returns_no_else": ("try:\n    return\nexcept KeyError:\n    pass\nelse:\n    a()", {"a": None}),
    "try_and_handlers_leave": ("try:\n    return\nexcept KeyError:\n    raise\na()", {"a": None}),
    "finally_returns": ("try:\n    a()\nfinally:\n    return\nb()", {"a": (), "b": None}),
    "with_block": ("with a():\n    b()\nc()", {"a": (), "b": (), "c": ()}),
    "with_block_returns": ("with a():\n    return\nb()", {"a": (), "b": None}),
    "match_cases": ("match x:\n    case 1:\n        a()\n    case _:\n        b()\nc()",
                    {"a": ("match x case 1",), "b": ("match x case _",), "c": ()}),
    "match_subject_is_evaluated": ("match a():\n    case _:\n        pass", {"a": ()}),
    "nested_def_runs_when_called": ("def g():\n    a()\nclass K:\n    b()\nc()", {"a": None, "b": None, "c": ()}),
    "lambda_runs_when_called": ("g = lambda: a()\nb()", {"a": None, "b": ()}),
    "conditional_expression": ("v = a() if x else b()", {"a": ("x",), "b": ("not x",)}),
    "conditional_expression_test": ("v = 1 if a() else 2", {"a": ()}),
    "and_operands": ("v = x and a() and b()", {"a": ("x",), "b": ("x", "a()")}),
    "or_operands": ("v = x or a()", {"a": ("not x",)}),
    "not_or": ("v = not x or a()", {"a": ("x",)}),
    "comprehension_filter": ("v = [a(i) for i in items if i]", {"a": ("i",)}),
    "comprehension_over_nothing": ("v = [a(i) for i in ()]", {"a": None}),
    "comprehension_iter": ("v = {i: b() for i in a()}", {"a": (), "b": ()}),
    "dict_comprehension_key": ("v = {a(i): 1 for i in items}", {"a": ()}),
    "generator": ("v = sum(a(i) for i in items)", {"a": ()}),
    "set_comprehension_filters": ("v = {a() for i in items if x if y}", {"a": ("x", "y")}),
    "keyword_argument": ("print(sep=a())", {"a": ()}),
    "call_in_an_assignment_target": ("items[a()] = 1", {"a": ()}),
    "augmented_assignment": ("v = 0\nv += a()", {"a": ()}),
    "annotated_assignment": ("v: int = a()", {"a": ()}),
    "delete": ("del items[a()]", {"a": ()}),
    "atexit_is_not_followed": ("atexit.register(a)", {"a": None}),
    "signal_is_not_followed": ("signal.signal(signal.SIGTERM, a)", {"a": None}),
    "finalizer_is_not_followed": ("weakref.finalize(items, a)", {"a": None}),
    "a_value_is_not_a_call": ("print(a)\nv = [b]", {"a": None, "b": None}),
    "thread_target_is_followed": ("threading.Thread(target=a).start()", {"a": ()}),
    "process_target_is_followed": ("multiprocessing.Process(target=a, args=(b,))", {"a": (), "b": None}),
    "context_process": ("multiprocessing.get_context('spawn').Process(target=a)", {"a": ()}),
    "a_callback_under_a_condition": ("if x:\n    threading.Thread(target=a)", {"a": ("x",)}),
    "a_lambda_argument_is_not_followed": ("threading.Thread(target=lambda: a())", {"a": None}),
}

ARGS = "x, y, items, server_args"


def module_source() -> str:
    parts = [PRELUDE, DEFS]
    for name, (body, _) in CASES.items():
        parts.append(f"def {name}({ARGS}):\n" + textwrap.indent(body, "    ") + "\n")
    return "\n".join(parts)


# A new tree for every test: a SourceTree memoises what it resolved, so a shared one would answer a
# test (and a mutant under test) from what an earlier test computed.
def fresh_tree() -> callgraph.SourceTree:
    return callgraph.SourceTree({"sglang/__init__.py": "", "sglang/w.py": module_source()}.get)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_call_carries_the_conditions_it_runs_under(name):
    expected = CASES[name][1]
    every = callgraph.reach(fresh_tree(), f"sglang.w:{name}", depth=1, accept=lambda c: True)
    plain = callgraph.reach(fresh_tree(), f"sglang.w:{name}", depth=1)
    for callee, conds in expected.items():
        key = f"sglang.w:{callee}"
        if conds is None:
            assert key not in every.calls, callee
            continue
        assert key in every.calls, callee
        got = every.calls[key][2]
        assert tuple(c.text for c in got) == conds, callee
        assert all(c.file == "sglang/w.py" and c.line > 0 for c in got)
        # By default only unconditional paths are followed.
        assert (key in plain.calls) is (conds == ()), callee


def test_a_condition_says_where_and_which_flag_it_reads():
    tree = callgraph.SourceTree({"sglang/f.py": textwrap.dedent("""
        def a():
            pass
        def f(server_args, x):
            if server_args.enable_x:
                a()
            if x:
                a()
            if not x:
                a()
            if x():
                a()
    """)}.get)
    summary = callgraph.callgraph_conditions.summary(tree, tree.function("sglang.f:f"))
    got = [(e.conditions[-1].text, e.conditions[-1].flag, e.conditions[-1].line) for e in summary.calls
           if e.text == "a"]
    assert got == [("server_args.enable_x", "enable_x", 5), ("x", "x", 7), ("not x", None, 9), ("x()", None, 11)]
    assert summary.calls[0].conditions[-1].where() == "`server_args.enable_x` at sglang/f.py:5"


def test_a_handler_and_a_case_are_located_at_their_own_line():
    tree = callgraph.SourceTree({"sglang/f.py": textwrap.dedent("""
        def a():
            pass
        def f(x):
            try:
                pass
            except KeyError:
                a()
            match x:
                case 1:
                    a()
    """)}.get)
    summary = callgraph.callgraph_conditions.summary(tree, tree.function("sglang.f:f"))
    assert [(e.conditions[-1].text, e.conditions[-1].line) for e in summary.calls if e.text == "a"] == [
        ("except KeyError", 7), ("match x case 1", 10)]


def test_a_callback_helper_named_by_a_manifest_calls_its_argument():
    files = {"sglang/h.py": textwrap.dedent("""
        def a():
            pass
        def run_hook(fn):
            pass
        def other(fn):
            pass
        def f():
            run_hook(a)
            other(a)
    """)}
    plain = callgraph.SourceTree(files.get)
    helped = callgraph.SourceTree(files.get, callback_helpers={"sglang.h:run_hook"})
    assert "sglang.h:a" not in callgraph.reach(plain, "sglang.h:f", depth=1).calls
    assert "sglang.h:a" in callgraph.reach(helped, "sglang.h:f", depth=1).calls
    edges = [e for e in callgraph.callgraph_conditions.summary(helped, helped.function("sglang.h:f")).calls
             if e.call is None]
    assert [(e.text, e.line) for e in edges] == [("a", 9)]  # the function passed, at the helper's call


# (body, the writes {(variable, how)} the walker records): what changes os.environ, and nothing else.
WRITES = {
    "update_from_a_mapping_it_cannot_read": ("os.environ.update(other)", {("?", "update")}),
    "update_with_a_spread": ("os.environ.update({**base, 'A': '1'})", {("A", "update")}),
    "update_with_keywords": ("os.environ.update({'A': '1'}, B='2')", {("A", "update"), ("B", "update")}),
    "update_spread_keywords": ("os.environ.update(**extra)", set()),
    "unsetenv": ("os.unsetenv('A')", {("A", "unsetenv")}),
    "putenv_of_another_module": ("sys.putenv('A', '1')", set()),
    "os_rebound_by_a_from_import": ("from fake import os\nos.putenv('A', '1')\nos.environ['B'] = '1'", set()),
    "environ_rebound_by_a_from_import": ("from fake import environ\nenviron['A'] = '1'", set()),
    "putenv_through_a_module_alias": ("operating_system.putenv('A', '1')", {("A", "putenv")}),
    "putenv_of_an_attribute": ("x.os.putenv('A', '1')\nx.os.environ['B'] = '1'", set()),
    "an_unbound_name_is_not_os": ("nowhere.putenv('A', '1')", set()),
    "putenv_without_arguments": ("os.putenv()", set()),
    "setdefault_without_arguments": ("os.environ.setdefault()", set()),
    "reads_are_not_writes": ("os.environ.get('A')\nos.environ.copy()\nv = os.environ['A']", set()),
    "pop_through_from_import": ("environ.pop('A', None)", {("A", "pop")}),
    "delete_through_from_import": ("del environ['A']", {("A", "del")}),
    "a_local_dict_named_environ_is_not_os": ("env = {}\nenv['A'] = '1'\nos.environ_copy['B'] = '1'", set()),
    "augmented_assignment": ("os.environ['A'] += ':x'", {("A", "assign")}),
    "key_named_by_a_module_constant": ("os.environ[NAME] = '1'", {("NCCL_X", "assign")}),
    "key_computed_at_run_time": ("os.environ[name()] = '1'", {("?", "assign")}),
    "typed_env_fields": ("envs.A.set(1)\nenvs.B.override(2)\nenvs.C.clear()",
                         {("A", "envs.set"), ("B", "envs.override"), ("C", "envs.clear")}),
    "typed_env_field_read": ("envs.A.get()", set()),
    "another_objects_fields": ("self_envs.A.set(1)\nx.envs.B.set(1)", set()),
}

WRITES_PRELUDE = "import os\nimport os as operating_system\nimport sys\nfrom os import environ\nNAME = 'NCCL_X'\n"


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_write_is_a_change_of_os_environ_and_only_that(name):
    body, expected = WRITES[name]
    source = WRITES_PRELUDE + "def f(other, base, extra, x, self_envs):\n" + textwrap.indent(body, "    ") + "\n"
    tree = callgraph.SourceTree({"sglang/e.py": source}.get)
    writes = callgraph.reach(tree, "sglang.e:f", depth=0, accept=lambda c: True).writes
    assert {(w.variable, w.how) for w, _ in writes} == expected
    assert all(w.file == "sglang/e.py" and w.function == "sglang.e:f" and w.line >= 6 for w, _ in writes)


def test_a_parameter_named_key_is_the_caller_s_constant():
    tree = callgraph.SourceTree({"sglang/e.py": textwrap.dedent("""
        import os
        def put(value, key):
            if value:
                os.environ[key] = value
        def f():
            put("1", "NCCL_A")
            put("1", key="NCCL_B")
            put("1", other)
    """)}.get)
    r = callgraph.reach(tree, "sglang.e:f", depth=1, accept=lambda c: True)
    got = sorted((w.variable, w.how, w.line, tuple(c.text for c in w.conditions)) for w, _ in r.writes)
    assert got == [("?", "helper:put", 9, ("value",)), ("NCCL_A", "helper:put", 7, ("value",)),
                   ("NCCL_B", "helper:put", 8, ("value",))]


@pytest.mark.parametrize("name,calls", [("multiprocessing.Ctx().Process", True), ("threading.Make().Thread", True),
                                        ("multiprocessing.Ctx().Other", False)])
def test_a_factory_call_on_the_way_to_a_callback_api_is_skipped_whatever_its_case(name, calls):
    assert callgraph.callgraph_conditions._calls_its_arguments(name) is calls


BOTH = {
    "sglang/__init__.py": "",
    "sglang/b.py": """
import os
import torch

class Base:
    def __init__(self):
        pass

class Sub(Base):
    pass

class Other(Base):
    pass

class Plain:
    pass

def put(key, value):
    os.environ[key] = value

def f(c, outer):
    os.environ["NCCL_B"] = "0"
    os.environ["NCCL_C"] = "0"
    if outer:
        if c:
            Sub()
            Plain()
            torch.x()
            torch.same()
            put("NCCL_H", "1")
            os.environ["NCCL_A"] = "1"
            os.environ["NCCL_A"] = "2"
        else:
            Other()
            Plain()
            torch.y()
            torch.same()
            put("NCCL_H", "2")
            os.environ["NCCL_A"] = "3"
""",
}


def test_what_both_branches_do_runs_under_the_enclosing_conditions_only():
    """Both branches construct Base (Sub and Other inherit its __init__) and Plain, call torch.same and the
    helper, and write NCCL_A: each of those runs whenever ``outer`` holds, once; torch.x and torch.y
    (different leaves) and Sub and Other (different classes) stay conditional."""
    tree = callgraph.SourceTree({p: textwrap.dedent(t) for p, t in BOTH.items()}.get)
    outer = ["outer"]
    accept = lambda c: c.text == "outer"  # noqa: E731 - a one-line acceptor
    r = callgraph.reach(tree, "sglang.b:f", depth=1, accept=accept)
    for key in ("sglang.b:Base.__init__", "sglang.b:Plain", "torch.same", "sglang.b:put"):
        assert [c.text for c in r.calls[key][2]] == outer, key
    for key in ("sglang.b:Sub", "sglang.b:Other", "torch.x", "torch.y"):
        assert key not in r.calls, key
    lines = textwrap.dedent(BOTH["sglang/b.py"]).splitlines()
    first = next(i + 1 for i, x in enumerate(lines) if 'os.environ["NCCL_A"] = "1"' in x)
    got = [(w.variable, w.how, w.file, w.line, w.function, [c.text for c in w.conditions]) for w, _ in r.writes
           if w.variable in ("NCCL_A", "NCCL_H")]
    put_line = next(i + 1 for i, x in enumerate(lines) if 'put("NCCL_H", "1")' in x)
    assert sorted(got) == [("NCCL_A", "assign", "sglang/b.py", first, "sglang.b:f", outer),
                           ("NCCL_H", "helper:put", "sglang/b.py", put_line, "sglang.b:f", outer)]
    # The edge added for both branches is the first branch's call, with its line and text.
    summary = callgraph.callgraph_conditions.summary(tree, tree.function("sglang.b:f"))
    common = [e for e in summary.calls if [c.text for c in e.conditions] == outer]
    assert {(e.text, e.line) for e in common} >= {("torch.same", first - 2), ("put", first - 1)}
    assert all(e.call is not None for e in common)


def test_a_helper_method_s_parameters_are_counted_after_self_or_cls():
    tree = callgraph.SourceTree({"sglang/h.py": textwrap.dedent("""
        import os
        class Env:
            def put(self, key):
                os.environ[key] = "1"
            @classmethod
            def cput(cls, key):
                os.environ[key] = "1"
            @staticmethod
            def sput(key):
                os.environ[key] = "1"
        def f(e: Env):
            e.put("NCCL_A")
            Env.cput("NCCL_B")
            Env.sput("NCCL_C")
    """)}.get)
    r = callgraph.reach(tree, "sglang.h:f", depth=1)
    assert sorted((w.variable, w.how, w.file, w.line) for w, _ in r.writes) == [
        ("NCCL_A", "helper:Env.put", "sglang/h.py", 13), ("NCCL_B", "helper:Env.cput", "sglang/h.py", 14),
        ("NCCL_C", "helper:Env.sput", "sglang/h.py", 15)]


def test_a_path_is_listed_for_any_key_and_bounded():
    chain = "".join(f"def f{i}():\n    f{i + 1}()\n" for i in range(70)) + "def f70():\n    pass\n"
    tree = callgraph.SourceTree({"sglang/c.py": chain}.get)
    r = callgraph.reach(tree, "sglang.c:f0", depth=80)
    assert r.path_to("torch.x") == ["torch.x"]  # not a function of the search: itself only
    assert len(r.path_to("sglang.c:f70")) == 64
    assert r.path_to("sglang.c:f3") == ["sglang.c:f0", "sglang.c:f1", "sglang.c:f2", "sglang.c:f3"]


def test_a_method_s_own_imports_resolve_what_it_assigns_to_self():
    tree = callgraph.SourceTree({"sglang/__init__.py": "", "sglang/lib.py": "class Lib:\n    def go(self):\n        pass\n",
                                 "sglang/k.py": textwrap.dedent("""
        class K:
            def __init__(self):
                from .lib import Lib
                self.lib = Lib()
            def run(self):
                self.lib.go()
    """)}.get)
    assert "sglang.lib:Lib.go" in callgraph.reach(tree, "sglang.k:K.run", depth=1).calls


def test_writes_carry_their_conditions_whatever_their_kind():
    tree = callgraph.SourceTree({"sglang/e.py": WRITES_PRELUDE + textwrap.dedent('''
        def f(x, other):
            if x:
                os.environ.update(other)
                os.environ.update(B="1")
                envs.C.set(1)
                os.environ["D"] = "1"
    ''')}.get)
    writes = callgraph.reach(tree, "sglang.e:f", depth=0, accept=lambda c: True).writes
    assert sorted((w.variable, [c.text for c in w.conditions]) for w, _ in writes) == [
        ("?", ["x"]), ("B", ["x"]), ("C", ["x"]), ("D", ["x"])]


def test_both_branches_look_past_calls_that_resolve_to_nothing_or_to_several():
    tree = callgraph.SourceTree({"sglang/b2.py": textwrap.dedent('''
        class A:
            pass
        class B:
            pass
        def helper():
            pass
        def f(c, w):
            W = A if c else B
            if c:
                w.unknown()
                W()
                helper()
            else:
                helper()
    ''')}.get)
    r = callgraph.reach(tree, "sglang.b2:f", depth=1)
    assert r.calls["sglang.b2:helper"] == (1, "sglang.b2:f", ())


def test_depths_of_leaves_helper_writes_and_a_recursive_function():
    tree = callgraph.SourceTree({"sglang/r.py": textwrap.dedent('''
        import os
        import torch
        def put(key):
            os.environ[key] = "1"
        def again(n):
            os.environ["NCCL_R"] = "1"
            again(n)
        def mid():
            torch.x()
            put("NCCL_P")
        def f():
            mid()
    ''')}.get)
    r = callgraph.reach(tree, "sglang.r:f")
    assert r.calls["torch.x"] == (2, "sglang.r:mid", ())
    assert [(w.variable, d) for w, d in r.writes] == [("NCCL_P", 2)]
    r = callgraph.reach(tree, "sglang.r:again")
    assert [(w.variable, d) for w, d in r.writes] == [("NCCL_R", 0)]  # visited once, though it calls itself
