"""The start-up import trigger: fires after a real import, wraps the loader instead of mutating it,
and coexists with wrapt's own post-import hooks on the same module (both fire, no recursion)."""

from __future__ import annotations

import importlib
import sys

import pytest
import wrapt

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
