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
