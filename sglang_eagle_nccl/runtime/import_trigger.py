"""Run a callback right after a top-level package is imported, without importing anything.

The ``.pth`` bootstrap uses this to wait for ``import sglang`` in every enabled process: the
plugin chooses its patch set then (it needs SGLang's version), and processes that never
import SGLang pay nothing more. ``wrapt``'s post-import hooks do the same job but import
``asyncio``/``inspect``/``importlib.metadata`` at interpreter start, which is too much for a
line executed by every Python process of the environment.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # collections.abc/typing are not imported at interpreter start
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable
    from typing import Any


class _AfterImport:
    """One meta-path finder per process: watches the names with callbacks, provides nothing."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callable[[Any], None]]] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.callbacks:
            return None
        spec = None
        for finder in sys.meta_path:
            if isinstance(finder, _AfterImport):
                continue
            find = getattr(finder, "find_spec", None)
            if find is not None:
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if spec is None or exec_module is None:
            return spec

        def exec_then_notify(module: Any) -> None:
            exec_module(module)
            self.fire(fullname, module)

        # The loader object belongs to this one module (FileFinder makes one per spec), so an
        # instance attribute changes nothing for any other import.
        loader.exec_module = exec_then_notify
        return spec

    def fire(self, name: str, module: Any) -> None:
        callbacks = self.callbacks.pop(name, [])
        if not self.callbacks:
            # Nothing left to watch: stop being consulted on every import of the process.
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass
        for callback in callbacks:
            callback(module)


_FINDER = _AfterImport()


def after_import(name: str, callback: Callable[[Any], None]) -> None:
    """Call ``callback(module)`` once ``name`` is imported (now, if it already is)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    _FINDER.callbacks.setdefault(name, []).append(callback)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
