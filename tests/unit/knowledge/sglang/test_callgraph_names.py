"""Name resolution (callgraph_names): which definition a call reaches, one rule per small source.

Each case is a function of ``sglang/use.py`` calling something defined in the small modules below;
the expected callees are the definitions Python would run, named "module:Qualified.name" (third
party: its dotted import name), written here from the rule, not read back from the code. A call
that resolves to nothing is unresolved, never a namesake.
"""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.knowledge.sglang import callgraph

LIB = """
import ray
from sglang import other

class Lib:
    def init(self):
        pass
    @staticmethod
    def static():
        pass

class Base:
    def __init__(self):
        pass
    def run(self):
        pass

class Child(Base):
    def run(self):
        super().run()
    @classmethod
    def make(cls):
        return cls()

@ray.remote
class Actor:
    def work(self):
        pass

def helper():
    pass

def twice():
    pass

def twice():
    pass

class Shadow:
    def __init__(self):
        pass

def Shadow():
    pass

def Plain():
    pass

class Plain:
    pass

alias = other.helper
own_alias = helper
loop_one = loop_two
loop_two = loop_one
"""

HEADER = """
import argparse
import torch.distributed
import sglang.lib as lib_mod
import ray
from typing import Optional
from sglang import lib
from sglang.lib import Lib, Child, Actor, helper, alias, own_alias, loop_one, twice, Shadow, Plain
from . import pkg
"""

FILES = {
    "sglang/__init__.py": "",
    "sglang/lib.py": LIB,
    "sglang/other.py": "def helper():\n    pass\n",
    "sglang/pkg/__init__.py": "from .impl import *\n",  # relative to the package itself
    "sglang/pkg/impl.py": "def exported():\n    pass\n",
    "sglang/pkg/sub.py": "def deep():\n    pass\n",
    "sglang/broken.py": "def f(:\n",
    "sglang/loop_a.py": "from sglang.loop_b import *\n",
    "sglang/loop_b.py": "from sglang.loop_a import *\n",
}

# (the function's source, the definitions its calls reach)
CASES = {
    "module_function": ("def f():\n    helper()", {"sglang.lib:helper"}),
    "attribute_of_an_imported_submodule": ("def f():\n    lib.helper()", {"sglang.lib:helper"}),
    "module_alias_of_an_imported_function": ("def f():\n    alias()", {"sglang.other:helper"}),
    "module_alias_in_its_own_module": ("def f():\n    own_alias()", {"sglang.lib:helper"}),
    "alias_cycle_ends": ("def f():\n    loop_one()", set()),
    "import_as": ("def f():\n    lib_mod.helper()", {"sglang.lib:helper"}),
    "third_party_is_a_dotted_leaf": ("def f():\n    torch.distributed.new_group()", {"torch.distributed.new_group"}),
    "method_of_a_new_instance": ("def f():\n    Lib().init()", {"sglang.lib:Lib", "sglang.lib:Lib.init"}),
    "static_method_through_the_class": ("def f():\n    Lib.static()", {"sglang.lib:Lib.static"}),
    "annotated_parameter": ("def f(p: Lib):\n    p.init()", {"sglang.lib:Lib.init"}),
    "string_annotation": ("def f(p: 'Lib'):\n    p.init()", {"sglang.lib:Lib.init"}),
    "optional_annotation": ("def f(p: Optional[Lib]):\n    p.init()", {"sglang.lib:Lib.init"}),
    "union_with_none": ("def f(p: Lib | None):\n    p.init()", {"sglang.lib:Lib.init"}),
    "none_first_union": ("def f(p: 'None | Lib'):\n    p.init()", {"sglang.lib:Lib.init"}),
    "third_party_annotation": ("def f(p: argparse.ArgumentParser):\n    p.parse_args()",
                               {"argparse.ArgumentParser.parse_args"}),
    "broken_string_annotation_is_nothing": ("def f(p: 'Lib ('):\n    p.init()", set()),
    "unannotated_parameter_is_not_its_namesake": ("def f(helper):\n    helper()", set()),
    "star_args_are_parameters": ("def f(*helper):\n    helper()", set()),
    "keyword_args_are_parameters": ("def f(**helper):\n    helper()", set()),
    "keyword_only_parameter": ("def f(*, helper):\n    helper()", set()),
    "positional_only_parameter": ("def f(helper, /):\n    helper()", set()),
    "function_level_import": ("def f():\n    from sglang.pkg.sub import deep\n    deep()", {"sglang.pkg.sub:deep"}),
    "function_level_import_as": ("def f():\n    import sglang.pkg.sub as s\n    s.deep()", {"sglang.pkg.sub:deep"}),
    "star_reexport_of_a_package": ("def f():\n    pkg.exported()", {"sglang.pkg.impl:exported"}),
    "submodule_of_a_package": ("def f():\n    pkg.sub.deep()", {"sglang.pkg.sub:deep"}),
    "local_alias_either_class": ("def f(c):\n    W = Lib if c else Child\n    W()",
                                 {"sglang.lib:Lib", "sglang.lib:Child", "sglang.lib:Base.__init__"}),
    "local_alias_or": ("def f(c):\n    W = c and Lib or Child\n    W()",
                       {"sglang.lib:Lib", "sglang.lib:Child", "sglang.lib:Base.__init__"}),
    "inherited_constructor_and_override": ("def f():\n    Child().run()",
                                           {"sglang.lib:Child", "sglang.lib:Base.__init__", "sglang.lib:Child.run"}),
    "ray_actor_method": ("def f():\n    Actor.remote()", {"sglang.lib:Actor.remote"}),
    "ray_actor_options": ("def f():\n    Actor.options(name='x')", {"sglang.lib:Actor.options"}),
    "ray_remote_of_a_class": ("def f():\n    ray.remote(Lib).options()",
                              {"ray.remote", "sglang.lib:Lib", "sglang.lib:Lib.options"}),
    "a_plain_class_has_no_ray_methods": ("def f():\n    Lib.remote()", set()),
    "third_party_instance_method": ("def f():\n    torch.cuda.Stream().wait()",
                                    {"torch.cuda.Stream", "torch.cuda.Stream().wait"}),
    "a_class_is_kept_over_a_later_function": ("def f():\n    Shadow()", {"sglang.lib:Shadow", "sglang.lib:Shadow.__init__"}),
    "a_later_class_replaces_a_function": ("def f():\n    Plain()", {"sglang.lib:Plain"}),
    "unknown_name_is_nothing": ("def f():\n    nowhere()", set()),
    # A module that cannot be read is a leaf named by its dotted name, like third-party code: it never
    # matches a definition ("module:name").
    "a_broken_module_is_a_leaf": ("def f():\n    from sglang.broken import g\n    g()", {"sglang.broken.g"}),
    "a_star_import_cycle_ends": ("def f():\n    from sglang.loop_a import g\n    g()", set()),
    "a_missing_module_is_a_leaf": ("def f():\n    from sglang.gone import g\n    g()", {"sglang.gone.g"}),
}


# A new tree for every test: a SourceTree memoises what it resolved, so a shared one would answer a
# test (and a mutant under test) from what an earlier test computed.
def tree() -> callgraph.SourceTree:
    use = HEADER + "\n\n".join(src.replace("def f", f"def {name}", 1) for name, (src, _) in CASES.items())
    files = {p: textwrap.dedent(t) for p, t in {**FILES, "sglang/use.py": use}.items()}
    return callgraph.SourceTree(files.get)



@pytest.mark.parametrize("name", sorted(CASES))
def test_a_call_reaches_the_definition_python_would_run(name):
    r = callgraph.reach(tree(), f"sglang.use:{name}", depth=1, accept=lambda c: True)
    assert r.found
    assert set(r.calls) == CASES[name][1]
    # Every call of the case is either resolved or listed as unresolved, never silently dropped.
    if not CASES[name][1]:
        assert r.unresolved, name


def test_the_later_of_two_definitions_is_the_one_the_name_holds():
    fn = tree().function("sglang.lib:twice")
    lines = [i + 1 for i, line in enumerate(textwrap.dedent(LIB).splitlines()) if line == "def twice():"]
    assert len(lines) == 2 and fn is not None and fn.node.lineno == lines[1]


def test_a_classmethod_cls_constructs_the_class():
    r = callgraph.reach(tree(), "sglang.lib:Child.make", depth=1, accept=lambda c: True)
    assert set(r.calls) == {"sglang.lib:Child", "sglang.lib:Base.__init__"}


def test_super_skips_the_class_itself():
    r = callgraph.reach(tree(), "sglang.lib:Child.run", depth=1, accept=lambda c: True)
    assert "sglang.lib:Base.run" in r.calls and "sglang.lib:Child.run" not in r.calls


@pytest.mark.parametrize(
    "target,found",
    [("sglang.lib:Child.run", True), ("sglang.lib:Child.init", False), ("sglang.lib:helper.x", False),
     ("sglang.lib:missing", False), ("sglang.lib:Child.make", True), ("sglang.lib:Child.__init__", True),
     ("sglang.lib:Lib", False), ("torch.distributed:new_group", False), ("sglang.nowhere:f", False)],
)
def test_a_target_is_a_function_or_a_method_through_the_bases(target, found):
    assert (tree().function(target) is not None) is found


@pytest.mark.parametrize("name,inside", [("sglang", True), ("sglang.lib", True), ("sglangx.lib", False),
                                         ("sglangx", False), ("torch", False), ("sglang.gone", True)])
def test_only_the_package_s_own_modules_are_read(name, inside):
    asked: list[str] = []

    def read(rel: str) -> str | None:
        asked.append(rel)
        return FILES.get(rel)

    callgraph.SourceTree(read).module(name)
    assert bool(asked) is inside


def test_an_import_binds_what_python_binds():
    t = callgraph.SourceTree({"sglang/i.py": textwrap.dedent("""
        import a.b
        import c.d as e
        from f import g as h
        from sglang.lib import *
        import a
        try:
            import k
        except ImportError:
            import m
        finally:
            import r
        if X:
            from n import o
        def inner():
            import p
        class C:
            import q
    """)}.get)
    module = t.module("sglang.i")
    assert module.imports == {"a": ("a", None), "e": ("c.d", None), "h": ("f", "g"), "k": ("k", None),
                              "m": ("m", None), "o": ("n", "o"), "r": ("r", None)}
    assert module.stars == ["sglang.lib"]


@pytest.mark.parametrize("nesting,resolves", [(1, True), (2, True), (3, False), (4, False)])
def test_resolution_is_bounded_in_depth(nesting, resolves):
    """An annotation nested deeper than the resolver's bound resolves to nothing (never to a guess)."""
    annotation = "Lib"
    for _ in range(nesting):
        annotation = f"Optional[{annotation}]"
    t = callgraph.SourceTree({"sglang/lib.py": textwrap.dedent(LIB), "sglang/d.py": textwrap.dedent(f"""
        from typing import Optional
        from sglang.lib import Lib
        def f(p: {annotation}):
            p.init()
    """)}.get)
    r = callgraph.reach(t, "sglang.d:f", depth=1)
    assert ("sglang.lib:Lib.init" in r.calls) is resolves


def test_an_import_cycle_resolves_to_nothing_and_ends():
    t = callgraph.SourceTree({"sglang/c.py": "from sglang.d import g\n", "sglang/d.py": "from sglang.c import g\n",
                              "sglang/u.py": "from sglang.c import g\ndef f():\n    g()\n"}.get)
    r = callgraph.reach(t, "sglang.u:f", depth=1)
    assert r.calls == {} and [u[0] for u in r.unresolved] == ["g"]


def test_a_local_assigned_in_two_places_may_be_either():
    t = callgraph.SourceTree({"sglang/lib.py": textwrap.dedent(LIB), "sglang/other.py": "def helper():\n    pass\n",
                              "sglang/u.py": textwrap.dedent("""
        from sglang.lib import Lib, Child
        def f(c):
            if c:
                W = Lib
            else:
                W = Child
            W()
        class K:
            def run(self):
                pass
            def go(self):
                run = self.run
                run()
    """)}.get)
    assert set(callgraph.reach(t, "sglang.u:f", depth=1, accept=lambda c: True).calls) == {
        "sglang.lib:Lib", "sglang.lib:Child", "sglang.lib:Base.__init__"}
    # A local bound to a method of self resolves in the method's own scope (self is the instance).
    assert set(callgraph.reach(t, "sglang.u:K.go", depth=1).calls) == {"sglang.u:K.run"}


def test_the_method_resolution_order_visits_each_class_once_and_goes_on():
    t = callgraph.SourceTree({"sglang/m.py": textwrap.dedent("""
        class A:
            pass
        class E:
            def only_in_e(self):
                pass
        class B(A):
            pass
        class C(A, E):
            pass
        class D(B, C):
            pass
        class Other:
            pass
    """)}.get)
    d = t.lookup("sglang.m", "D")[0]
    assert [c.qualname for c in t.mro(d)] == ["D", "B", "A", "C", "E"]
    assert t.method(d, "only_in_e").key == "sglang.m:E.only_in_e"
    # super() past a class that is not in the chain finds nothing (rather than starting over).
    assert t.method(d, "only_in_e", after=t.lookup("sglang.m", "Other")[0]) is None


def test_the_method_resolution_order_is_bounded():
    chain = "class C0:\n    pass\n" + "".join(f"class C{i}(C{i - 1}):\n    pass\n" for i in range(1, 70))
    t = callgraph.SourceTree({"sglang/m.py": chain}.get)
    assert len(t.mro(t.lookup("sglang.m", "C69")[0])) == 64


def test_a_base_named_by_a_dotted_path_is_followed():
    t = callgraph.SourceTree({"sglang/__init__.py": "", "sglang/a/__init__.py": "", "sglang/a/b/__init__.py": "",
                              "sglang/a/b/c.py": "class Base:\n    def run(self):\n        pass\n",
                              "sglang/u.py": "import sglang.a.b.c\nclass K(sglang.a.b.c.Base):\n    pass\n"}.get)
    k = t.lookup("sglang.u", "K")[0]
    assert [b.key for b in t.bases(k)] == ["sglang.a.b.c:Base"]
    assert t.method(k, "run").key == "sglang.a.b.c:Base.run"


# --- generated: chains of bindings across modules, against a reference that follows them -------------

# How module i binds the name ``target``: defines it, imports it from module j, aliases module j's, or
# star-imports module j.
BINDING = st.one_of(st.just(("def", 0)), st.tuples(st.sampled_from(["from", "alias", "star"]), st.integers(0, 5)))


def binding_source(kind: str, j: int) -> str:
    return {"def": "def target():\n    pass\n",
            "from": f"from sglang.m{j} import target\n",
            "alias": f"import sglang.m{j} as mod_{j}\ntarget = mod_{j}.target\n",
            "star": f"from sglang.m{j} import *\n"}[kind]


def reference(bindings: list[tuple[str, int]]) -> set[str]:
    """Follow module 0's binding to the module that defines ``target``; a module seen twice is a cycle."""
    i, seen = 0, set()
    while i not in seen:
        seen.add(i)
        kind, j = bindings[i]
        if kind == "def":
            return {f"sglang.m{i}:target"}
        i = j
    return set()


@settings(max_examples=80, deadline=None)
@given(st.lists(BINDING, min_size=1, max_size=6))
def test_a_name_is_followed_through_imports_aliases_and_stars_to_its_definition(bindings):
    bindings = [(kind, j % len(bindings)) for kind, j in bindings]
    files = {f"sglang/m{i}.py": binding_source(kind, j) for i, (kind, j) in enumerate(bindings)}
    files["sglang/__init__.py"] = ""
    files["sglang/use.py"] = "from sglang.m0 import target\ndef f():\n    target()\n"
    r = callgraph.reach(callgraph.SourceTree(files.get), "sglang.use:f", depth=1)
    assert set(r.calls) == reference(bindings)
    assert bool(r.unresolved) is (not reference(bindings))


ATTR_FILES = {
    "sglang/__init__.py": "",
    "sglang/a/__init__.py": "",
    "sglang/a/b/__init__.py": "",
    "sglang/a/b/c.py": "from ray import remote\nclass Base:\n    def run(self):\n        pass\n",
    "sglang/lib.py": LIB,
    "sglang/other.py": "def helper():\n    pass\n",
    "sglang/k.py": """
import ray
import sglang.a.b.c
from sglang import a
from sglang.a import b
from sglang.lib import Lib, Child

class K:
    LIMIT = 3
    def __init__(self, given: Lib):
        cb = lambda: None
        self.lib = Lib()
        self.given = given
        self.same = self.lib
        self.near = b.c.Base()
        self.far = a.b.c.Base()
        self.node = self.node.next
        def later():
            self.hidden = Lib()

class J:
    def __init__(self):
        self.lib = Child()

@sglang.a.b.c.remote
class Deep:
    pass

@ray.remote(num_gpus=1)
class WithOptions:
    pass

def uses(k: K):
    k.lib.init()
""",
}


def attr_tree() -> callgraph.SourceTree:
    return callgraph.SourceTree({p: textwrap.dedent(t) for p, t in ATTR_FILES.items()}.get)


def held(t: callgraph.SourceTree, cls: str, attr: str) -> list[str]:
    return [x.cls.key for x in t.instance_attribute(t.lookup("sglang.k", cls)[0], attr)]


def test_an_instance_attribute_is_resolved_in_the_method_that_assigns_it():
    t = attr_tree()
    assert held(t, "K", "lib") == ["sglang.lib:Lib"]  # after a lambda in the same method
    assert held(t, "K", "given") == ["sglang.lib:Lib"]  # an annotated parameter of that method
    assert held(t, "K", "same") == ["sglang.lib:Lib"]  # another attribute of self
    assert held(t, "K", "hidden") == []  # assigned in a nested function: not the method's own
    assert held(t, "K", "node") == []  # built from itself: nothing, and the search ends
    assert held(t, "J", "lib") == ["sglang.lib:Child"]  # each class its own attributes
    assert held(t, "K", "lib") == ["sglang.lib:Lib"]


def test_an_attribute_path_is_resolved_within_the_bound():
    t = attr_tree()
    assert held(t, "K", "near") == ["sglang.a.b.c:Base"]
    assert held(t, "K", "far") == []  # one name deeper than the resolver follows


def test_a_parameter_annotated_with_a_class_is_an_instance_with_its_attributes():
    t = attr_tree()
    assert set(callgraph.reach(t, "sglang.k:uses", depth=1).calls) == {"sglang.lib:Lib.init"}


def test_a_ray_actor_is_known_by_its_decorator_called_or_not_however_it_is_named():
    t = attr_tree()
    assert t._is_ray_actor(t.lookup("sglang.k", "Deep")[0])
    assert t._is_ray_actor(t.lookup("sglang.k", "WithOptions")[0])
    assert not t._is_ray_actor(t.lookup("sglang.k", "K")[0])


def test_writes_in_a_module_leave_each_method_s_calls_as_reach_finds_them():
    """writes_in_module summarises every function; a later search reuses those summaries, so they must
    carry the method's class (``self.other()``), also for a function nested in a method."""
    t = callgraph.SourceTree({"sglang/x.py": textwrap.dedent("""
        import os
        class K:
            def other(self):
                pass
            def m(self):
                os.environ["NCCL_A"] = "1"
                self.other()
                def inner():
                    self.other()
                inner()
    """)}.get)
    assert [w.function for w in callgraph.writes_in_module(t, "sglang.x", ["NCCL_A"])] == ["sglang.x:K.m"]
    r = callgraph.reach(t, "sglang.x:K.m", depth=2)
    assert r.calls["sglang.x:K.other"][1] == "sglang.x:K.m"
    assert "sglang.x:K.m.<locals>.inner" in r.functions and "sglang.x:None.other" not in r.calls
    assert r.unresolved == []  # inner's self.other() too


# --- generated: how deep the resolver follows an expression ------------------------------------------

ANNOTATION_WRAPPERS = ["Optional[{}]", "({} | None)", "(None | {})", "string"]
LOCAL_WRAPPERS = ["({} if c else None)", "(None if c else {})", "(c and {})", "(c or {})"]


def wrap(inner: str, wrapper: str) -> str:
    return repr(inner) if wrapper == "string" else wrapper.format(inner)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(ANNOTATION_WRAPPERS), max_size=4), st.lists(st.sampled_from(LOCAL_WRAPPERS), max_size=5))
def test_the_resolver_follows_an_expression_four_steps_deep(annotation_wrappers, local_wrappers):
    """Reference: ``p.init()`` reaches the annotation two steps in (the attribute's owner, its annotation) and
    ``W()`` reaches a local's value one step in; each wrapper (Optional[], | None, a string, a conditional
    expression, and / or) is one step more; a name more than four steps in is not followed."""
    annotation, value = "Lib", "Lib"
    for w in annotation_wrappers:
        annotation = wrap(annotation, w)
    for w in local_wrappers:
        value = wrap(value, w)
    t = callgraph.SourceTree({"sglang/lib.py": textwrap.dedent(LIB), "sglang/other.py": "def helper():\n    pass\n",
                              "sglang/d.py": (f"from typing import Optional\nfrom sglang.lib import Lib\n"
                                              f"def f(p: {annotation}):\n    p.init()\n"
                                              f"def g(c):\n    W = {value}\n    W()\n")}.get)
    assert ("sglang.lib:Lib.init" in callgraph.reach(t, "sglang.d:f", depth=1).calls) is (len(annotation_wrappers) <= 2)
    reached = callgraph.reach(t, "sglang.d:g", depth=1, accept=lambda c: True).calls
    assert ("sglang.lib:Lib" in reached) is (len(local_wrappers) <= 3)
