"""Edges of the manifest decisions (patchsets.py, the TOML reader; manifests.py, the start-up index reader).

Which set and status a version selects, which targets are found in SGLang's source and which are refused
(and what the refusal names), where the manifests are looked for, and that the index the SGLang processes
read carries every field patchsets parses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import sglang_eagle_nccl
from sglang_eagle_nccl.contract import manifests as manifest_index
from sglang_eagle_nccl.knowledge.sglang import manifest_index as index_writer
from sglang_eagle_nccl.knowledge.sglang import patchsets

REPO = Path(__file__).resolve().parents[4]
MANIFESTS = REPO / "patches"
# Where the imported package lives (the checkout, or the tree a tool copied it to).
PACKAGE = Path(sglang_eagle_nccl.__file__).resolve().parent

HEAD = """
[patch_set]
id = "s"
title = "T"
versions = ">=0.5.0,<0.6"
tested_through = "0.5.2"
tested = ["0.5.1", "0.5.2"]
mechanism = "wrapt"
"""


def _hook(target: str, relies_on: str | None = None) -> str:
    text = f'\n[[hook]]\ntarget = "{target}"\nkind = "before"\nhandler = "h"\nrequired = true\n'
    if relies_on is not None:
        text += f"relies_on = {relies_on}\n"
    return text


def _copy_manifests(tmp_path: Path) -> Path:
    folder = tmp_path / "patches"
    shutil.copytree(MANIFESTS, folder)
    return folder


def _env(pythonpath: Path, *, c_locale: bool = False) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    if c_locale:
        # A container without locales: the locale encoding is ASCII, no UTF-8 mode, no coercion.
        env.update(LC_ALL="C", LANG="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    return env


# --- selection (patchsets.select) -----------------------------------------------------------------


def _refusal(version: str) -> str:
    sets = patchsets.load_manifests(str(MANIFESTS))
    with pytest.raises(patchsets.PatchSetError) as info:
        patchsets.select(version, sets)
    return str(info.value)


def test_a_release_older_than_every_set_is_refused_naming_the_supported_ranges():
    sets = patchsets.load_manifests(str(MANIFESTS))
    supported = ", ".join(s.versions for s in sets)
    oldest = min(sets, key=lambda s: patchsets.Version(s.tested_through))
    message = _refusal("0.4.2")
    assert message.startswith(
        f"SGLang 0.4.2 is older than every supported release (supported: {supported}); "
    )
    assert message.endswith(f"(oldest patch set: {oldest.id}).")


def test_a_post_release_older_than_every_set_is_not_called_a_pre_release():
    assert _refusal("0.4.2.post1").startswith("SGLang 0.4.2.post1 is older than every supported release")


def test_a_pre_release_of_the_oldest_release_is_refused_as_its_pre_release():
    message = _refusal("0.4.3rc1")
    assert message.startswith("SGLang 0.4.3rc1, a pre-release or development build of 0.4.3, is older than")


def test_an_overlong_version_is_quoted_to_64_characters():
    message = _refusal("x" * 100)
    assert f"installed SGLang reports version {'x' * 64!r}, which is not a PEP 440 version" in message


# --- manifest rules (patchsets.parse_manifest) ------------------------------------------------------


def test_parse_manifest_without_a_path_names_the_manifest_placeholder():
    assert patchsets.parse_manifest(HEAD + _hook("setproctitle:setproctitle")).path == "<manifest>"
    with pytest.raises(patchsets.ManifestError) as info:
        patchsets.parse_manifest(HEAD.replace('mechanism = "wrapt"', 'mechanism = "x"'))
    assert str(info.value).startswith("<manifest>: mechanism must be one of")


@pytest.mark.parametrize("target", ["sglang:launch_server", "sglang:a:b", "sglang.srt.x:f"])
def test_a_target_in_the_sglang_package_must_state_relies_on(target):
    # The top-level module itself ("sglang:...") is SGLang too, whatever follows the first colon.
    with pytest.raises(patchsets.ManifestError) as info:
        patchsets.parse_manifest(HEAD + _hook(target), "m.toml")
    assert str(info.value).startswith(f"m.toml: hook {target} must state relies_on")


@pytest.mark.parametrize("target", ["setproctitle:setproctitle", "sglangx:f", "sglang_router:f"])
def test_a_target_outside_sglang_may_omit_relies_on(target):
    (hook,) = patchsets.parse_manifest(HEAD + _hook(target), "m.toml").hooks
    assert hook.target == target and hook.relies_on == ()


@pytest.mark.parametrize(
    "kind,subject,start,expected",
    [
        ("precedes", ("init_distributed_environment",), None, "precedes init_distributed_environment"),
        ("reaches", ("g",), "m:Cls.f", "reaches g (from m:Cls.f)"),
        ("writes", ("NCCL_A", "NCCL_B"), None, "writes NCCL_A, NCCL_B"),
    ],
    ids=["precedes", "reaches-from", "writes"],
)
def test_reliance_describe(kind, subject, start, expected):
    assert patchsets.Reliance(kind, subject, "why", start).describe() == expected


# --- target checks in source (patchsets.check_source) ---------------------------------------------

SOURCE = textwrap.dedent(
    """
    import os

    LIMIT: int = 3
    alias = os.getenv

    class Kls:
        def m(self):
            pass

    def g(a):
        pass

    def x():
        pass

    if os.name == "posix":
        class A:
            def m(self, a):
                pass
        A = wrap(A)
    else:
        class B:
            def m(self, b):
                pass
        B = wrap(B)
    """
)


@pytest.mark.parametrize("qualname,param", [("A.m", "a"), ("B.m", "b")])
def test_a_class_rebound_inside_an_if_branch_is_still_searched(qualname, param):
    check = patchsets.check_source(SOURCE, f"m:{qualname}", [param], "m.py")
    assert check.ok and check.signature == ("self", param) and check.file == "m.py"


@pytest.mark.parametrize("qualname,line", [("LIMIT", 4), ("alias", 5)])
def test_a_target_defined_by_assignment_is_found_unchecked(qualname, line):
    check = patchsets.check_source(SOURCE, f"m:{qualname}", ["anything"], "m.py")
    assert check.to_dict() == {
        "target": f"m:{qualname}",
        "ok": True,
        "found": True,
        "reason": "defined by assignment; signature not checked",
        "signature": [],
        "missing_params": [],
        "file": "m.py",
        "line": line,
    }


def test_a_class_target_is_refused_with_its_file_and_line():
    check = patchsets.check_source(SOURCE, "m:Kls", [], "m.py")
    assert check.to_dict() == {
        "target": "m:Kls",
        "ok": False,
        "found": False,
        "reason": "is a class; hooks need a function or method",
        "signature": [],
        "missing_params": [],
        "file": "m.py",
        "line": 7,
    }


@pytest.mark.parametrize(
    "target,reason",
    [
        ("m:nope", "'nope' not defined"),
        ("m:Kls.nope", "'nope' not defined"),
        # Everything after the first colon is the qualname: "g:x" names neither g nor x.
        ("m:g:x", "'g:x' not defined"),
    ],
    ids=["function", "method", "two-colons"],
)
def test_a_missing_target_is_refused_naming_the_missing_part(target, reason):
    check = patchsets.check_source(SOURCE, target, [], "m.py")
    assert check.to_dict() == {
        "target": target,
        "ok": False,
        "found": False,
        "reason": reason,
        "signature": [],
        "missing_params": [],
        "file": "m.py",
        "line": None,
    }


def test_source_that_does_not_parse_is_refused_with_its_file():
    d = patchsets.check_source("def (", "m:f", [], "m.py").to_dict()
    assert (d["target"], d["ok"], d["found"], d["file"], d["line"]) == ("m:f", False, False, "m.py", None)
    assert d["reason"].startswith("source does not parse: ")


def _sglang_tree(root: Path, data: bytes) -> patchsets.Hook:
    (root / "sglang" / "srt").mkdir(parents=True)
    (root / "sglang" / "srt" / "x.py").write_bytes(data)
    return patchsets.Hook(target="sglang.srt.x:f", kind="before", handler="h", required=True, params=("a",))


def test_a_source_file_with_bytes_that_are_not_utf8_is_still_checked(tmp_path):
    hook = _sglang_tree(tmp_path, b"# caf\xe9 (latin-1)\ndef f(a):\n    pass\n")
    check = patchsets.check_target_in_tree(tmp_path, hook)
    assert (check.ok, check.file, check.line) == (True, "sglang/srt/x.py", 2)
    assert patchsets.directory_reader(tmp_path)("sglang/srt/x.py").startswith("# caf\ufffd ")


def test_installed_root_is_none_for_a_missing_package_or_a_plain_module():
    assert patchsets.installed_root("no_such_package_ptmf") is None
    assert patchsets.installed_root("textwrap") is None
    assert patchsets.installed_root("sglang_eagle_nccl") == PACKAGE.parent


# --- where the manifests are ----------------------------------------------------------------------


def test_a_checkout_reads_the_top_level_patches_folder():
    assert not (PACKAGE / "patches").exists()  # a source checkout: nothing packaged
    assert patchsets._manifest_dir() == MANIFESTS
    assert manifest_index.manifest_dir() == str(MANIFESTS)


def test_an_installed_package_reads_its_packaged_manifests(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(PACKAGE, site / "sglang_eagle_nccl", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copytree(MANIFESTS, site / "sglang_eagle_nccl" / "patches")
    code = (
        "from sglang_eagle_nccl.knowledge.sglang import patchsets; from sglang_eagle_nccl.contract import manifests;"
        "print(patchsets._manifest_dir()); print(manifests.manifest_dir());"
        "print(manifests.select('0.5.23').patch_set.path)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=_env(site), check=True
    )
    packaged = site / "sglang_eagle_nccl" / "patches"
    assert out.stdout.splitlines() == [
        str(packaged),
        str(packaged),
        str(packaged / "sglang-0.5.21-latest.toml"),
    ]


# --- the start-up index (contract/manifests.py) ---------------------------------------------------


def test_the_index_carries_every_field_patchsets_parses(tmp_path):
    folder = _copy_manifests(tmp_path)  # a folder no earlier load cached
    fast = manifest_index.load(str(folder))
    slow = patchsets.load_manifests(str(folder))
    assert fast is not None and len(fast) == len(slow)
    assert any(s.correctness_writes for s in slow)
    for f, s in zip(fast, slow, strict=True):
        assert f.path == s.path == str(folder / Path(s.path).name)
        for name in manifest_index.SET_FIELDS:
            assert getattr(f, name) == getattr(s, name), name
        assert len(f.hooks) == len(s.hooks)
        for fh, sh in zip(f.hooks, s.hooks, strict=True):
            for name in manifest_index.HOOK_FIELDS:
                assert getattr(fh, name) == getattr(sh, name), (sh.target, name)


def test_an_indexed_hook_has_the_defaults_of_a_hook():
    fast = manifest_index.IndexedHook("sglang.srt.x:f", "before", "h", True)
    slow = patchsets.Hook("sglang.srt.x:f", "before", "h", True)
    for name in manifest_index.HOOK_FIELDS:
        assert getattr(fast, name) == getattr(slow, name), name
    assert fast.to_dict() == slow.to_dict()


def test_the_index_never_says_tested_for_a_pre_release_or_an_epoch(tmp_path):
    # Even an index that lists them: pre-releases and epochs are patchsets' to judge.
    folder = _copy_manifests(tmp_path)
    path = folder / manifest_index.INDEX_NAME
    index = json.loads(path.read_text("utf-8"))
    latest = index["patch_sets"][-1]
    latest["tested"] = [*latest["tested"], "0.5.23rc1", "0.5.23.dev1", "1!0.5.23"]
    path.write_text(json.dumps(index), "utf-8")
    assert manifest_index.select("0.5.23", str(folder)).status == "tested"
    for version in ("0.5.23rc1", "0.5.23.dev1", "1!0.5.23"):
        assert manifest_index.select(version, str(folder)) is None, version


def test_a_c_locale_reads_a_non_ascii_index_and_sglang_source(tmp_path):
    # SGLang processes in a container without locales: the index (written with ensure_ascii=False)
    # and SGLang's source are UTF-8 whatever the locale says.
    folder = _copy_manifests(tmp_path)
    manifest = folder / "sglang-0.5.21-latest.toml"
    text = manifest.read_text("utf-8")
    manifest.write_text(text.replace('notes = """', 'notes = """caf\u00e9 \u2014 ', 1), "utf-8")
    assert index_writer.main([str(folder)]) == 0
    assert "caf\u00e9" in (folder / manifest_index.INDEX_NAME).read_text("utf-8")
    tree = tmp_path / "tree"
    _sglang_tree(tree, "def caf\u00e9(a):\n    pass\n".encode())
    code = textwrap.dedent(
        f"""
        import locale
        from pathlib import Path
        from sglang_eagle_nccl.contract import manifests
        from sglang_eagle_nccl.knowledge.sglang import patchsets
        assert locale.getpreferredencoding(False) != "UTF-8"
        sets = manifests._read({str(folder)!r})
        print(sets is not None and sets[-1].notes.startswith("caf\\u00e9 \\u2014 "))
        hook = patchsets.Hook(target="sglang.srt.x:caf\\u00e9", kind="before", handler="h", required=True)
        print(patchsets.check_target_in_tree(Path({str(tree)!r}), hook).ok)
        """
    )
    env = _env(PACKAGE.parent, c_locale=True)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, check=True
    )
    assert out.stdout.split() == ["True", "True"]
