"""The rules a patch manifest is held to, and the target checks in SGLang's source (knowledge/sglang/patchsets.py).

A manifest decides which hooks run on which release; each rule below refuses one way a manifest can be
wrong (named with the file and what to write instead), and each target check says exactly what it found.
"""

from __future__ import annotations

import textwrap

import pytest

from sglang_eagle_nccl.knowledge.sglang import patchsets
from sglang_eagle_nccl.knowledge.sglang.patchsets import ManifestError, Reliance, TargetCheck, check_source

HEAD = """
[patch_set]
id = "s"
title = "T"
versions = ">=0.5.0,<0.6"
tested_through = "0.5.2"
tested = ["0.5.1", "0.5.2"]
mechanism = "wrapt"
"""

HOOK = """
[[hook]]
target = "sglang.srt.x:f"
kind = "before"
handler = "h"
required = true
relies_on = [{ reaches = "sglang.srt.x:g", why = "f calls g" }]
"""


def manifest(head: str = HEAD, *hooks: str) -> patchsets.PatchSet:
    return patchsets.parse_manifest(head + "".join(hooks), "m.toml")


def refused(text: str) -> str:
    with pytest.raises(ManifestError) as info:
        patchsets.parse_manifest(text, "m.toml")
    return str(info.value)


def test_a_good_manifest_is_read_field_by_field():
    extra = HEAD.replace(
        'mechanism = "wrapt"',
        'mechanism = "wrapt"\nsglang_writes = ["NCCL_CUMEM_ENABLE"]\n'
        'notes = "n"\ncorrectness_writes = { zeta = ["NCCL_ALGO"], alpha = ["NCCL_PROTO", "NCCL_X"] }',
    )
    hook = HOOK.replace(
        "required = true",
        'required = 1\nparams = ["a", "b"]\nversions = ">=0.5.1"\nwhen = "cli"\n'
        'mechanism = "hook_registry"\nprocess = "scheduler"',
    )
    ps = manifest(extra, hook, HOOK.replace("x:f", "y:g").replace("required = true", "required = false"))
    assert (ps.id, ps.title, ps.versions, ps.tested_through, ps.tested, ps.mechanism, ps.notes, ps.path) == (
        "s",
        "T",
        ">=0.5.0,<0.6",
        "0.5.2",
        ("0.5.1", "0.5.2"),
        "wrapt",
        "n",
        "m.toml",
    )
    assert ps.sglang_writes == ("NCCL_CUMEM_ENABLE",)
    assert ps.correctness_writes == (("alpha", ("NCCL_PROTO", "NCCL_X")), ("zeta", ("NCCL_ALGO",)))
    first, second = ps.hooks
    assert (
        first.target,
        first.kind,
        first.handler,
        first.required,
        first.params,
        first.versions,
        first.when,
        first.mechanism,
        first.process,
    ) == ("sglang.srt.x:f", "before", "h", True, ("a", "b"), ">=0.5.1", "cli", "hook_registry", "scheduler")
    assert first.relies_on == (Reliance("reaches", ("sglang.srt.x:g",), "f calls g"),)
    assert (
        second.required,
        second.params,
        second.versions,
        second.when,
        second.mechanism,
        second.process,
    ) == (False, (), None, "always", None, "")
    bare = manifest(HEAD)
    assert (bare.sglang_writes, bare.correctness_writes, bare.notes, bare.hooks) == ((), (), "", ())


@pytest.mark.parametrize(
    "change,why",
    [
        (lambda t: t + "\n[other]\nx = 1\n", "m.toml: unknown sections ['other']"),
        (
            lambda t: t.replace('mechanism = "wrapt"', 'mechanism = "magic"'),
            "m.toml: mechanism must be one of ('hook_registry', 'wrapt')",
        ),
        (lambda t: t.replace('id = "s"\n', ""), "m.toml: missing key 'id'"),
        (lambda t: t.replace(">=0.5.0,<0.6", "~~0.5"), "m.toml: Invalid specifier: '~~0.5'"),
    ],
)
def test_the_set_itself_is_checked(change, why):
    assert refused(change(HEAD)) == why


def test_a_manifest_without_a_patch_set_is_refused():
    assert refused(HOOK) == "m.toml: missing key 'patch_set'"


@pytest.mark.parametrize(
    "tested,why",
    [
        (
            "[]",
            "m.toml: tested must be a non-empty list of the releases the matrix checked (written by `python "
            "ci/matrix.py --sync`)",
        ),
        ('"0.5.2"', "m.toml: tested must be a non-empty list"),
        ('["0.5.2", 5]', "m.toml: tested must be a non-empty list"),
        ('["0.5.02"]', "m.toml: tested release '0.5.02' must be a published release in normal form (0.5.2)"),
        (
            '["0.5.2rc1"]',
            "m.toml: tested release '0.5.2rc1' must be a published release in normal form (0.5.2rc1)",
        ),
        ('["0.5.2.dev1"]', "m.toml: tested release '0.5.2.dev1' must be a published release"),
        ('["0.5.2+cu1"]', "m.toml: tested release '0.5.2+cu1' must be a published release"),
        ('["0.6.0"]', "m.toml: tested release 0.6.0 is outside the set's versions '>=0.5.0,<0.6'"),
        ('["0.5.2", "0.5.1"]', "m.toml: tested releases must be in ascending order without repeats"),
        ('["0.5.1", "0.5.1", "0.5.2"]', "m.toml: tested releases must be in ascending order without repeats"),
        ('["0.5.1"]', "m.toml: tested_through = '0.5.2' but the newest tested release is 0.5.1"),
    ],
)
def test_the_tested_releases_are_checked(tested, why):
    assert refused(HEAD.replace('["0.5.1", "0.5.2"]', tested)).startswith(why)


def test_a_post_release_may_be_tested():
    ps = manifest(
        HEAD.replace('["0.5.1", "0.5.2"]', '["0.5.1", "0.5.2.post1"]').replace(
            'tested_through = "0.5.2"', 'tested_through = "0.5.2.post1"'
        )
    )
    assert ps.tested == ("0.5.1", "0.5.2.post1")


@pytest.mark.parametrize(
    "change,why",
    [
        (lambda h: h + 'colour = "red"\n', "m.toml: hook sglang.srt.x:f has unknown keys ['colour']"),
        (
            lambda h: h.replace('"sglang.srt.x:f"', '"sglang.srt.x.f"'),
            "m.toml: target 'sglang.srt.x.f' must be 'module:qualname'",
        ),
        (
            lambda h: h.replace('kind = "before"', 'kind = "instead"'),
            "m.toml: hook kind 'instead' not in ('before', 'after', 'around')",
        ),
        (lambda h: h + 'versions = "=>1"\n', "m.toml: Invalid specifier: '=>1'"),
        (lambda h: h + 'mechanism = "magic"\n', "m.toml: hook mechanism 'magic'"),
        (lambda h: h.replace('handler = "h"\n', ""), "m.toml: missing key 'handler'"),
        (lambda h: h.replace("required = true\n", ""), "m.toml: missing key 'required'"),
    ],
)
def test_each_hook_is_checked(change, why):
    assert refused(HEAD + change(HOOK)) == why


def test_an_empty_hook_version_gate_is_no_gate():
    (hook,) = manifest(HEAD, HOOK + 'versions = ""\n').hooks
    assert hook.versions == ""


# --- relies_on --------------------------------------------------------------------------------------------


def reliance(entry: str, kind: str = "before", target: str = "sglang.srt.x:f") -> str:
    hook = HOOK.replace('relies_on = [{ reaches = "sglang.srt.x:g", why = "f calls g" }]', f"relies_on = {entry}")
    return HEAD + hook.replace('kind = "before"', f'kind = "{kind}"').replace("sglang.srt.x:f", target)


def test_an_sglang_target_must_say_what_it_relies_on():
    assert refused(reliance("[]")).startswith("m.toml: hook sglang.srt.x:f must state relies_on = [")
    assert refused(reliance('"writes"')).startswith("m.toml: hook sglang.srt.x:f must state relies_on")
    # A third-party target (setproctitle) has nothing in SGLang to rely on.
    (hook,) = patchsets.parse_manifest(reliance("[]", target="setproctitle:setproctitle"), "m.toml").hooks
    assert hook.relies_on == ()
    no_key = HOOK.replace('relies_on = [{ reaches = "sglang.srt.x:g", why = "f calls g" }]\n', "")
    assert refused(HEAD + no_key).startswith("m.toml: hook sglang.srt.x:f must state relies_on")


@pytest.mark.parametrize(
    "entry,why",
    [
        ('["x"]', "m.toml: hook sglang.srt.x:f: each relies_on entry is a table"),
        (
            '[{ why = "w" }]',
            "m.toml: hook sglang.srt.x:f: a relies_on entry has exactly one of ('writes', 'reaches', "
            "'precedes'), a why, and optionally from / versions (got ['why'])",
        ),
        (
            '[{ reaches = "sglang.srt.x:g", writes = ["A"], why = "w" }]',
            "m.toml: hook sglang.srt.x:f: a relies_on entry has exactly one of",
        ),
        (
            '[{ reaches = "sglang.srt.x:g", why = "w", colour = 1 }]',
            "m.toml: hook sglang.srt.x:f: a relies_on entry has exactly one of",
        ),
        ('[{ writes = [], why = "w" }]', "m.toml: hook sglang.srt.x:f: writes must name variables"),
        ('[{ writes = ["A", ""], why = "w" }]', "m.toml: hook sglang.srt.x:f: writes must name variables"),
        ('[{ reaches = "", why = "w" }]', "m.toml: hook sglang.srt.x:f: reaches must name a callable"),
        ('[{ reaches = 5, why = "w" }]', "m.toml: hook sglang.srt.x:f: reaches must name a callable"),
        (
            '[{ reaches = "sglang.srt.x:g" }]',
            "m.toml: hook sglang.srt.x:f: relies_on reaches 'sglang.srt.x:g' needs a why (in SGLang's terms)",
        ),
        ('[{ reaches = "sglang.srt.x:g", why = "  " }]', "m.toml: hook sglang.srt.x:f: relies_on reaches 'sglang.srt.x:g' needs a why"),
        ('[{ reaches = "sglang.srt.x:g", why = 5 }]', "m.toml: hook sglang.srt.x:f: relies_on reaches 'sglang.srt.x:g' needs a why"),
        ('[{ reaches = "sglang.srt.x:g", why = "w", versions = "=>1" }]', "m.toml: Invalid specifier: '=>1'"),
        (
            '[{ reaches = "sglang.srt.x:g", why = "w", from = "a.b" }]',
            "m.toml: hook sglang.srt.x:f: from must be 'module:Qualified.name'",
        ),
        (
            '[{ reaches = "sglang.srt.x:g", why = "w", from = 5 }]',
            "m.toml: hook sglang.srt.x:f: from must be 'module:Qualified.name'",
        ),
    ],
)
def test_each_reliance_is_checked(entry, why):
    assert refused(reliance(entry)).startswith(why)


def test_an_after_hook_cannot_precede():
    assert refused(reliance('[{ precedes = "sglang.srt.x:g", why = "w" }]', kind="after")) == (
        "m.toml: hook sglang.srt.x:f: an after hook cannot precede sglang.srt.x:g; use reaches"
    )
    for kind in ("before", "around"):
        (hook,) = patchsets.parse_manifest(
            reliance('[{ precedes = "sglang.srt.x:g", why = "w" }]', kind=kind), "m.toml"
        ).hooks
        assert hook.relies_on[0].kind == "precedes"


def test_reliances_are_read_whole():
    entry = (
        '[{ writes = ["NCCL_A", "NCCL_B"], why = " sets them ", from = "sglang.srt.y:Y.z", versions = ">=0.5.1" },'
        ' { reaches = "sglang.srt.x:g", why = "w" }]'
    )
    (hook,) = patchsets.parse_manifest(reliance(entry), "m.toml").hooks
    writes, reaches = hook.relies_on
    assert writes == Reliance("writes", ("NCCL_A", "NCCL_B"), "sets them", "sglang.srt.y:Y.z", ">=0.5.1")
    assert (
        writes.describe() == "writes NCCL_A, NCCL_B (from sglang.srt.y:Y.z)"
        and reaches.describe() == "reaches sglang.srt.x:g"
    )
    assert writes.to_dict() == {
        "kind": "writes",
        "subject": ["NCCL_A", "NCCL_B"],
        "why": "sets them",
        "from": "sglang.srt.y:Y.z",
        "versions": ">=0.5.1",
        "when": [],
        "callbacks": [],
    }
    from packaging.version import Version

    assert not writes.applies_to(Version("0.5.0")) and writes.applies_to(Version("0.5.1rc1"))
    assert reaches.applies_to(Version("0.1"))


# --- target checks in source --------------------------------------------------------------------------------


SOURCE = textwrap.dedent("""
    import x

    def plain(a, b=1, *args, c, **kw):
        pass

    async def coro(a, /, b):
        pass

    def positional(a, /, b, *, c):
        pass

    class Outer:
        def method(self, x):
            pass

        class Inner:
            def deep(self):
                pass

        attr = 1

    alias = plain

    if TYPE_CHECKING:
        def typed(q):
            pass
    else:
        def fallback(r):
            pass

    def twice(old):
        pass

    def twice(new):
        pass

    class Rebound:
        def m(self, y):
            pass

    Rebound = make(Rebound)
""")


def check(qualname: str, params=()) -> TargetCheck:
    return check_source(SOURCE, f"m:{qualname}", params, "m.py")


def test_a_function_and_its_parameters():
    got = check("positional", ["a", "c"])
    assert (got.found, got.ok, got.signature, got.missing_params, got.file, got.line, got.reason) == (
        True,
        True,
        ("a", "b", "c"),
        (),
        "m.py",
        10,
        "",
    )
    missing = check("positional", ["a", "d", "e"])
    assert (missing.found, missing.ok, missing.missing_params, missing.reason) == (
        True,
        False,
        ("d", "e"),
        "parameters ['d', 'e'] not in signature",
    )
    assert missing.to_dict() == {
        "target": "m:positional",
        "ok": False,
        "found": True,
        "reason": "parameters ['d', 'e'] not in signature",
        "signature": ["a", "b", "c"],
        "missing_params": ["d", "e"],
        "file": "m.py",
        "line": 10,
    }


def test_varargs_and_kwargs_are_part_of_the_signature_and_kwargs_accepts_any_name():
    got = check("plain", ["anything"])
    assert got.signature == ("a", "b", "c", "*args", "**kw") and got.ok
    assert check("coro", ["a", "b"]).signature == ("a", "b") and check("coro", ["z"]).missing_params == ("z",)


def test_methods_nested_classes_and_branches():
    assert check("Outer.method", ["x"]).ok and check("Outer.method").line == 14
    assert check("Outer.Inner.deep").ok
    assert check("typed", ["q"]).ok and check("fallback", ["r"]).ok
    assert check("twice", ["new"]).ok and not check("twice", ["old"]).ok  # the last definition wins
    assert check("Rebound.m", ["y"]).ok  # a class rebound by assignment keeps its methods


def test_what_is_not_a_hookable_function_is_said():
    assert check("nothing").reason == "'nothing' not defined" and not check("nothing").found
    assert check("Outer.missing").reason == "'missing' not defined"
    assert check("plain.inner").reason == "'plain' not defined"  # only a class is walked into
    cls = check("Outer")
    assert (cls.found, cls.reason, cls.line) == (False, "is a class; hooks need a function or method", 13)
    alias = check("alias", ["zzz"])
    assert (alias.found, alias.ok, alias.reason, alias.line) == (
        True,
        True,
        "defined by assignment; signature not checked",
        23,
    )
    attr = check("Outer.attr")
    assert attr.found and attr.reason == "defined by assignment; signature not checked"
    assert check("x").reason == "'x' not defined"  # an import is not a definition


def test_a_source_that_does_not_parse():
    got = check_source("def (", "m:f", [], "m.py")
    assert not got.found and got.reason.startswith("source does not parse: ") and got.file == "m.py"


def test_module_candidates_and_the_directory_reader(tmp_path):
    assert patchsets.module_candidates("a.b.c") == ("a/b/c.py", "a/b/c/__init__.py")
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "__init__.py").write_text("def f(x):\n    pass\n")
    hook = patchsets.Hook("a.b:f", "before", "h", True, ("x",))
    got = patchsets.check_target_in_tree(tmp_path, hook)
    assert got.ok and got.file == "a/b/__init__.py"
    (tmp_path / "a" / "b.py").write_text("def g():\n    pass\n")
    assert patchsets.check_target_in_tree(tmp_path, hook).reason == "'f' not defined"  # the module file wins
    gone = patchsets.check_target_in_tree(tmp_path, patchsets.Hook("a.zz:f", "before", "h", True))
    assert (gone.found, gone.reason) == (False, "module a.zz not found")
    read = patchsets.directory_reader(tmp_path)
    assert read("a/missing.py") is None and read("a") is None


def test_coverage_checks_only_sglang_targets_and_refuses_missing_required_ones(tmp_path):
    ps = patchsets.PatchSet(
        "s",
        "T",
        ">=0.5",
        "0.5.2",
        "wrapt",
        ("0.5.2",),
        (
            patchsets.Hook("sglang.a:f", "before", "h", True),
            patchsets.Hook("sglang.a:g", "before", "h", False),
            patchsets.Hook("setproctitle:setproctitle", "before", "h", True),
            patchsets.Hook("sglang.a:cli_only", "before", "h", True, when="cli"),
        ),
    )
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "a.py").write_text("def other():\n    pass\n")
    sel = patchsets.Selection("0.5.3", ps, "untested_newer")
    cov = patchsets.check_coverage(sel, tmp_path)
    assert [h.target for h, _ in cov.checks] == ["sglang.a:f", "sglang.a:g", "sglang.a:cli_only"]
    assert [c.target for c in cov.missing_required] == ["sglang.a:f", "sglang.a:cli_only"]
    assert [c.target for c in cov.missing_optional] == ["sglang.a:g"]
    assert [h.target for h, _ in patchsets.check_coverage(sel, tmp_path, cli=False).checks] == [
        "sglang.a:f",
        "sglang.a:g",
    ]
    with pytest.raises(patchsets.PatchSetError) as info:
        patchsets.require_coverage(cov, allow_partial=False)
    assert str(info.value).splitlines()[:3] == [
        "SGLang 0.5.3 is newer than the releases patch set s was proven on (through 0.5.2), and 2 required hook "
        "target(s) are missing:",
        "  - sglang.a:f: 'f' not defined",
        "  - sglang.a:cli_only: 'cli_only' not defined",
    ]
    assert [c.target for c in info.value.missing] == ["sglang.a:f", "sglang.a:cli_only"]
    assert patchsets.require_coverage(cov, allow_partial=True) is None
    optional_only = patchsets.Coverage(sel, tuple((h, c) for h, c in cov.checks if not h.required))
    assert patchsets.require_coverage(optional_only, allow_partial=False) is None


def test_why_untested_says_which_kind_of_untested():
    ps = patchsets.PatchSet("s", "T", ">=0.5", "0.5.2", "wrapt", ("0.5.1", "0.5.2"), ())
    assert patchsets.Selection("0.5.2", ps, "tested").why_untested == ""
    assert patchsets.Selection("0.5.2", ps, "tested").tested
    assert not patchsets.Selection("0.5.3", ps, "untested_newer").tested
    assert patchsets.Selection("0.5.3rc1", ps, "untested_prerelease").why_untested == (
        "SGLang 0.5.3rc1 is a pre-release or development build of 0.5.3; patch set s was proven on releases only"
    )
    assert patchsets.Selection("0.5.0", ps, "untested_unchecked").why_untested == (
        "SGLang 0.5.0 is not one of the 2 releases patch set s was checked on (0.5.1 ... 0.5.2; it may never have "
        "been published, or is missing from the compatibility matrix)"
    )


def test_a_hook_says_what_it_is():
    hook = patchsets.Hook("sglang.a:B.f", "around", "h", False, ("x",), ">=0.5", "cli", "wrapt", "scheduler")
    assert hook.to_dict() == {
        "target": "sglang.a:B.f",
        "kind": "around",
        "handler": "h",
        "required": False,
        "params": ["x"],
        "versions": ">=0.5",
        "when": "cli",
        "mechanism": "wrapt",
    }
    ps = patchsets.PatchSet("s", "T", ">=0.5", "0.5.2", "hook_registry", ("0.5.2",), (hook,))
    assert ps.mechanism_of(hook) == "wrapt"
    assert ps.mechanism_of(patchsets.Hook("a:f", "before", "h", True)) == "hook_registry"


@pytest.mark.parametrize(
    "entry,message",
    [
        ('[{ reaches = "g", why = "w" }]', "reaches 'g' must name a definition"),
        ('[{ precedes = "init_distributed_environment", why = "w" }]', "must name a definition"),
        ('[{ reaches = "sglang.srt.x:g", why = "w", when = "c" }]', "when must be a list of non-empty strings"),
        ('[{ reaches = "sglang.srt.x:g", why = "w", when = [""] }]', "when must be a list of non-empty strings"),
        ('[{ reaches = "sglang.srt.x:g", why = "w", when = ["if x:"] }]', "is neither a --flag nor a Python expression"),
        ('[{ reaches = "sglang.srt.x:g", why = "w", callbacks = ["run_hook"] }]', "callbacks name SGLang functions"),
        ('[{ reaches = "sglang.srt.x:g", why = "w", callbacks = [3] }]', "callbacks must be a list"),
    ],
)
def test_statements_name_definitions_and_valid_conditions(entry, message):
    """A bare name would be proven by any namesake; a condition must be an expression or a --flag."""
    assert message in refused(reliance(entry))


def test_conditions_and_callbacks_are_read():
    hook = patchsets.parse_manifest(reliance(
        '[{ writes = ["NCCL_A"], why = "w", when = ["--enable-x", " a and b "], '
        'callbacks = ["sglang.srt.p:run_hook"] }, { reaches = "torch.distributed.new_group", why = "w" }]'
    ), "m.toml").hooks[0]
    writes, reaches = hook.relies_on
    assert writes.when == ("--enable-x", "a and b") and writes.callbacks == ("sglang.srt.p:run_hook",)
    assert writes.describe() == "writes NCCL_A when --enable-x and a and b"
    assert reaches.when == () and reaches.subject == ("torch.distributed.new_group",)
