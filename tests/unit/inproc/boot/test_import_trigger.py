"""The start-up import trigger: fires after a real import, wraps the loader instead of mutating it,
and coexists with wrapt's own post-import hooks on the same module (both fire, no recursion)."""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types

import pytest
import wrapt

from sglang_eagle_nccl.inproc.boot import import_trigger as trigger
from sglang_eagle_nccl.inproc.boot.import_trigger import after_import


@pytest.fixture
def fresh_module(tmp_path, monkeypatch):
    name = f"trigger_probe_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_callback_runs_after_the_module_executed(fresh_module):
    seen = []
    after_import(fresh_module, lambda m: seen.append(m.VALUE))
    module = importlib.import_module(fresh_module)
    assert seen == [41]
    # The module keeps its real loader: nothing of the trigger is left behind.
    assert type(module.__loader__).__name__ == "SourceFileLoader"
    assert module.__spec__.loader is module.__loader__


def test_coexists_with_wrapt_post_import_hooks_on_the_same_module(fresh_module):
    order = []
    after_import(fresh_module, lambda m: order.append("ours"))
    wrapt.register_post_import_hook(lambda m: order.append("wrapt"), fresh_module)
    after_import(fresh_module, lambda m: order.append("ours-again"))
    importlib.import_module(fresh_module)
    assert sorted(order) == ["ours", "ours-again", "wrapt"]


def test_callback_error_makes_the_import_fail(fresh_module):
    def refuse(_m):
        raise RuntimeError("refused by the plugin")

    after_import(fresh_module, refuse)
    with pytest.raises(RuntimeError, match="refused by the plugin"):
        importlib.import_module(fresh_module)
    assert fresh_module not in sys.modules


def test_already_imported_module_fires_at_once(fresh_module):
    importlib.import_module(fresh_module)
    seen = []
    after_import(fresh_module, lambda m: seen.append(m.__name__))
    assert seen == [fresh_module]


def test_cancel_withdraws_one_callback_and_the_finder_with_the_last(fresh_module):
    from sglang_eagle_nccl.inproc.boot import import_trigger

    seen = []
    first, second = (lambda m: seen.append("first")), (lambda m: seen.append("second"))
    after_import(fresh_module, first)
    after_import(fresh_module, second)
    import_trigger.cancel(fresh_module, first)
    assert import_trigger._FINDER.callbacks[fresh_module] == [second]
    assert import_trigger._FINDER in sys.meta_path
    import_trigger.cancel(fresh_module, first)  # not waiting any more: nothing
    import_trigger.cancel("never_watched_module", first)
    import_trigger.cancel(fresh_module, second)
    assert fresh_module not in import_trigger._FINDER.callbacks
    assert import_trigger._FINDER not in sys.meta_path
    importlib.import_module(fresh_module)
    assert seen == []


def test_cancel_keeps_the_finder_while_another_name_waits(fresh_module):
    from sglang_eagle_nccl.inproc.boot import import_trigger

    def callback(_m):
        pass

    after_import(fresh_module, callback)
    after_import("another_never_imported_module", callback)
    try:
        import_trigger.cancel(fresh_module, callback)
        assert import_trigger._FINDER in sys.meta_path
        assert list(import_trigger._FINDER.callbacks) == ["another_never_imported_module"]
    finally:
        import_trigger.cancel("another_never_imported_module", callback)
    assert import_trigger._FINDER not in sys.meta_path


# --- the finder and the loader wrapper, piece by piece ------------------------------------------------------


class Recorder:
    """A meta-path finder after ours: records what it is asked, answers ``spec``."""

    def __init__(self, spec=None):
        self.spec = spec
        self.asked = []

    def find_spec(self, fullname, path=None, target=None):
        self.asked.append((fullname, path, target))
        return self.spec


class LegacyFinder:
    """A finder of the old protocol (no find_spec): skipped, never a crash."""


class SourcelessLoader:
    """A loader of the old protocol: load_module only."""

    def load_module(self, name):  # pragma: no cover - never called here
        raise AssertionError


@pytest.fixture
def finder():
    """A fresh finder first on sys.meta_path, and what follows it."""
    ours = trigger._AfterImport()
    ours.callbacks["watched_name"] = [lambda m: None]
    return ours


def test_a_new_finder_watches_nothing():
    assert trigger._AfterImport().callbacks == {}


def test_the_finder_goes_first_on_the_meta_path(fresh_module):
    after_import(fresh_module, lambda m: None)
    try:
        assert sys.meta_path[0] is trigger._FINDER
    finally:
        trigger.cancel(fresh_module, trigger._FINDER.callbacks[fresh_module][0])


def test_the_finder_asks_the_others_with_the_same_path_and_target(finder, monkeypatch):
    recorder = Recorder()
    monkeypatch.setattr(sys, "meta_path", [finder, LegacyFinder(), recorder])
    path, target = ["/somewhere"], types.ModuleType("watched_name")
    assert finder.find_spec("watched_name", path, target) is None  # nobody has it: exactly None
    assert recorder.asked == [("watched_name", path, target)]
    assert finder.find_spec("not_watched") is None and len(recorder.asked) == 1  # never asked for others
    monkeypatch.setattr(sys, "meta_path", [finder, LegacyFinder()])  # nobody could even be asked
    assert finder.find_spec("watched_name", path, target) is None


def test_a_spec_without_a_modern_loader_is_returned_unwrapped(finder, monkeypatch):
    spec = importlib.machinery.ModuleSpec("watched_name", SourcelessLoader())
    monkeypatch.setattr(sys, "meta_path", [finder, Recorder(spec)])
    assert finder.find_spec("watched_name") is spec and isinstance(spec.loader, SourcelessLoader)
    no_loader = importlib.machinery.ModuleSpec("watched_name", None)
    monkeypatch.setattr(sys, "meta_path", [finder, Recorder(no_loader)])
    assert finder.find_spec("watched_name") is no_loader and no_loader.loader is None


def test_a_spec_is_wrapped_once(finder, monkeypatch, fresh_module):
    spec = importlib.machinery.PathFinder.find_spec(fresh_module)
    real = spec.loader
    monkeypatch.setattr(sys, "meta_path", [finder, Recorder(spec)])
    assert finder.find_spec("watched_name") is spec and isinstance(spec.loader, trigger._NotifyingLoader)
    wrapped = spec.loader
    assert finder.find_spec("watched_name").loader is wrapped and wrapped._loader is real


def test_fire_for_a_name_nobody_watches_does_nothing(finder):
    finder.fire("not_watched", types.ModuleType("not_watched"))
    assert list(finder.callbacks) == ["watched_name"]


class ModernLoader:
    def __init__(self):
        self.executed = []
        self.marker = "forwarded"

    def create_module(self, spec):
        return types.ModuleType(f"made_by_the_loader_for_{spec.name}")

    def exec_module(self, module):
        self.executed.append(module)


class ExecOnlyLoader:
    def exec_module(self, module):
        pass


def test_the_wrapper_forwards_everything_else_to_the_real_loader(finder):
    real = ModernLoader()
    wrapper = trigger._NotifyingLoader(real, finder, "watched_name")
    assert wrapper.marker == "forwarded"
    spec = importlib.machinery.ModuleSpec("watched_name", real)
    assert wrapper.create_module(spec).__name__ == "made_by_the_loader_for_watched_name"
    assert trigger._NotifyingLoader(ExecOnlyLoader(), finder, "x").create_module(spec) is None


def test_the_wrapper_executes_modules_with_or_without_a_spec(finder):
    real = ModernLoader()
    seen = []
    finder.callbacks["watched_name"] = [seen.append]
    wrapper = trigger._NotifyingLoader(real, finder, "watched_name")
    bare = types.SimpleNamespace()  # no __spec__ at all
    wrapper.exec_module(bare)
    assert real.executed == [bare] and seen == [bare] and bare.__loader__ is real
    finder.callbacks["watched_name"] = [seen.append]
    spec_less = types.ModuleType("watched_name")  # __spec__ is None
    wrapper.exec_module(spec_less)
    other = types.ModuleType("watched_name")
    other.__spec__ = importlib.machinery.ModuleSpec("watched_name", ExecOnlyLoader())
    keep = other.__spec__.loader
    wrapper.exec_module(other)
    assert other.__spec__.loader is keep  # not ours: left as it is
