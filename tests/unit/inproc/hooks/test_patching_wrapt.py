"""The wrapt mechanism on a real module imported from disk: post-import hooks, binding, unpatch.

Runs under every supported wrapt major version (CI runs it with wrapt 1.17 and 2.x).
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
import wrapt

from sglang_eagle_nccl.inproc.hooks import patching
from sglang_eagle_nccl.knowledge.sglang.patchsets import Hook

MODULE = textwrap.dedent(
    """
    class Coordinator:
        created = []
        def __init__(self, group_ranks, local_rank, backend, group_name=None):
            self.group_name = group_name
            Coordinator.created.append(group_name)

        def all_reduce(self, x):
            return x

    class Args:
        @staticmethod
        def add_cli_args(parser):
            parser.append("--base")

        @classmethod
        def from_cli_args(cls, args):
            return (cls.__name__, args)

    def set_envs(server_args):
        return "set:" + server_args

    class Sub(Coordinator):
        pass  # inherits __init__: a wrapper on Sub.__init__ shadows the base class one
    """
)


@pytest.fixture
def fake_module(tmp_path, monkeypatch):
    name = f"fake_sglang_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    patching.uninstall_wrapt()
    sys.modules.pop(name, None)


def _hook(module: str, qual: str, kind: str = "around") -> Hook:
    return Hook(target=f"{module}:{qual}", kind=kind, handler="x", required=True)


def test_hook_lands_when_module_is_imported_later(fake_module):
    calls = []

    def runner(hook, original, instance, args, kwargs):
        calls.append((hook.qualname, type(instance).__name__ if instance is not None else None, args, kwargs))
        return original(*args, **kwargs)

    patching.install_wrapt(_hook(fake_module, "Coordinator.__init__"), runner, lambda *a: None)
    assert fake_module not in sys.modules  # nothing imported yet: the hook waits
    mod = importlib.import_module(fake_module)
    c = mod.Coordinator([[0, 1]], 0, "gloo", group_name="tp")
    assert c.group_name == "tp"
    assert calls == [("Coordinator.__init__", "Coordinator", ([[0, 1]], 0, "gloo"), {"group_name": "tp"})]
    assert patching.STATE.installed[f"{fake_module}:Coordinator.__init__"] == "wrapt"


def test_hook_lands_at_once_when_module_already_imported(fake_module):
    mod = importlib.import_module(fake_module)
    seen = []
    patching.install_wrapt(
        _hook(fake_module, "set_envs"), lambda h, o, i, a, k: seen.append(a) or o(*a, **k), lambda *a: None
    )
    assert mod.set_envs("x") == "set:x" and seen == [("x",)]


def test_staticmethod_and_classmethod_keep_their_binding(fake_module):
    mod = importlib.import_module(fake_module)
    log = []

    def runner(hook, original, instance, args, kwargs):
        log.append(hook.qualname)
        return original(*args, **kwargs)

    patching.install_wrapt(_hook(fake_module, "Args.add_cli_args"), runner, lambda *a: None)
    patching.install_wrapt(_hook(fake_module, "Args.from_cli_args"), runner, lambda *a: None)
    parser: list[str] = []
    mod.Args.add_cli_args(parser)
    assert parser == ["--base"]
    assert mod.Args.from_cli_args("ns") == ("Args", "ns")
    assert log == ["Args.add_cli_args", "Args.from_cli_args"]


def test_install_is_idempotent(fake_module):
    mod = importlib.import_module(fake_module)
    count = []
    for _ in range(3):
        patching.install_wrapt(
            _hook(fake_module, "set_envs"),
            lambda h, o, i, a, k: count.append(1) or o(*a, **k),
            lambda *a: None,
        )
    mod.set_envs("y")
    assert count == [1]


def test_uninstall_restores_originals(fake_module):
    mod = importlib.import_module(fake_module)
    original = mod.Coordinator.__dict__["__init__"]
    patching.install_wrapt(
        _hook(fake_module, "Coordinator.__init__"), lambda h, o, i, a, k: o(*a, **k), lambda *a: None
    )
    assert isinstance(mod.Coordinator.__dict__["__init__"], wrapt.FunctionWrapper)
    assert patching.is_wrapped(mod.Coordinator.__init__)
    assert patching.uninstall_wrapt() == 1
    assert mod.Coordinator.__dict__["__init__"] is original


def test_missing_target_is_reported_not_raised(fake_module):
    results = []
    patching.install_wrapt(
        _hook(fake_module, "Nope.__init__"), lambda *a: None, lambda h, m, failure: results.append(failure)
    )
    importlib.import_module(fake_module)
    assert results and "not found" in results[0]


def test_hot_path_method_is_left_alone(fake_module):
    mod = importlib.import_module(fake_module)
    before = mod.Coordinator.__dict__["all_reduce"]
    patching.install_wrapt(
        _hook(fake_module, "Coordinator.__init__"), lambda h, o, i, a, k: o(*a, **k), lambda *a: None
    )
    assert mod.Coordinator.__dict__["all_reduce"] is before
    assert not patching.is_wrapped(mod.Coordinator.all_reduce)


def test_import_trigger_fires_once_per_callback_even_with_several_waiters(tmp_path, monkeypatch):
    from sglang_eagle_nccl.inproc.boot.import_trigger import after_import

    name = f"trig_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    after_import(name, lambda m: seen.append(("a", m.VALUE)))
    after_import(name, lambda m: seen.append(("b", m.VALUE)))
    assert seen == []
    importlib.import_module(name)
    assert seen == [("a", 42), ("b", 42)]
    after_import(name, lambda m: seen.append(("c", m.VALUE)))  # already imported: at once
    assert seen[-1] == ("c", 42)
    sys.modules.pop(name, None)


def test_bind_maps_positional_arguments_of_bound_methods_to_names():
    class C:
        def __init__(self, group_ranks, local_rank, backend, group_name=None):
            pass

        @classmethod
        def from_cli_args(cls, args):
            return args

    c = C.__new__(C)
    assert patching.bind(C.__init__.__get__(c), ([[0]], 0, "gloo"), {"group_name": "tp"}) == {
        "group_ranks": [[0]],
        "local_rank": 0,
        "backend": "gloo",
        "group_name": "tp",
    }
    assert patching.bind(C.from_cli_args, ("ns",), {}) == {"args": "ns"}


# --- uninstall is the exact inverse of install ---------------------------------------------------

TARGETS = (
    "set_envs",
    "Coordinator.__init__",
    "Args.add_cli_args",
    "Args.from_cli_args",
    "Sub.__init__",
    "Nope.__init__",
)


def _namespace(mod) -> dict:
    """Every attribute of the module and of its classes, as the objects themselves (compared with `is`)."""
    snap = {("module", k): v for k, v in vars(mod).items()}
    for cls in (mod.Coordinator, mod.Args, mod.Sub):
        snap.update({(cls.__name__, k): v for k, v in vars(cls).items()})
    return snap


def _bookkeeping() -> tuple:
    s = patching.STATE
    return (dict(s.installed), dict(s.failed), dict(s.pending), dict(s.mechanisms), list(s.wrapt_restore))


def _exercise(mod) -> None:
    mod.set_envs("a")
    mod.Coordinator([[0]], 0, "gloo")
    mod.Sub([[0]], 0, "gloo", group_name="sub")
    mod.Args.add_cli_args([])
    mod.Args.from_cli_args("ns")


def test_uninstall_is_symmetric_to_install(fake_module):
    mod = importlib.import_module(fake_module)
    before, state_before = _namespace(mod), _bookkeeping()
    calls, failures = [], []

    def runner(hook, original, instance, args, kwargs):
        calls.append(hook.qualname)
        return original(*args, **kwargs)

    for qual in TARGETS:
        patching.install_wrapt(
            _hook(fake_module, qual), runner, lambda h, m, f: failures.append(f) if f else None
        )
    _exercise(mod)
    assert sorted(set(calls)) == sorted(t for t in TARGETS if t != "Nope.__init__")
    assert "__init__" in vars(mod.Sub)  # the wrapper shadows the inherited __init__ ...
    assert len(failures) == 1 and patching.STATE.failed

    assert patching.uninstall_wrapt() == 5
    assert "__init__" not in vars(mod.Sub)  # ... and is removed again, not replaced by a copy
    after = _namespace(mod)
    assert after.keys() == before.keys()
    assert all(after[k] is before[k] for k in before), [k for k in before if after[k] is not before[k]]
    assert isinstance(vars(mod.Args)["add_cli_args"], staticmethod) and isinstance(
        vars(mod.Args)["from_cli_args"], classmethod
    )
    assert _bookkeeping() == state_before == ({}, {}, {}, {}, [])
    calls.clear()
    _exercise(mod)
    assert calls == []  # nothing of the plugin left on the call path


def test_uninstall_cancels_installations_waiting_for_their_module(fake_module):
    stale, fresh = [], []
    patching.install_wrapt(
        _hook(fake_module, "set_envs"), lambda h, o, i, a, k: stale.append(a) or o(*a, **k), lambda *a: None
    )
    assert fake_module not in sys.modules and patching.STATE.pending
    assert patching.uninstall_wrapt() == 0
    assert _bookkeeping() == ({}, {}, {}, {}, [])
    mod = importlib.import_module(fake_module)
    assert not patching.is_wrapped(mod.set_envs)
    mod.set_envs("x")
    assert stale == []
    # Installing again behaves like the first time, with the new runner only.
    patching.install_wrapt(
        _hook(fake_module, "set_envs"), lambda h, o, i, a, k: fresh.append(a) or o(*a, **k), lambda *a: None
    )
    assert mod.set_envs("y") == "set:y" and fresh == [("y",)] and stale == []


def test_install_uninstall_cycles_restore_the_same_objects(fake_module):
    mod = importlib.import_module(fake_module)
    before = _namespace(mod)
    for _ in range(3):
        for qual in TARGETS[:-1]:
            patching.install_wrapt(
                _hook(fake_module, qual), lambda h, o, i, a, k: o(*a, **k), lambda *a: None
            )
        assert patching.is_wrapped(mod.Coordinator.__init__) and patching.is_wrapped(mod.set_envs)
        assert patching.uninstall_wrapt() == 5
        after = _namespace(mod)
        assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)
