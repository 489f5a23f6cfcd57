"""Run a callback right after a top-level package is imported, without importing anything.

The ``.pth`` bootstrap uses this to wait for ``import sglang`` in every enabled process: the
plugin chooses its patch set then (it needs SGLang's version), and processes that never
import SGLang pay nothing more. ``wrapt``'s post-import hooks do the same job but import
``asyncio``/``inspect``/``importlib.metadata`` at interpreter start, which is too much for a
line executed by every Python process of the environment.
"""

import sys

TYPE_CHECKING = False  # collections.abc/typing are not imported at interpreter start
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable
    from typing import Any


class _NotifyingLoader:
    """Wraps a module's loader: executes the module, then runs the callbacks for it.

    The original loader is never mutated: other import hooks (wrapt's own post-import hooks)
    may wrap the same loader, and an attribute set on a proxy lands on the object it wraps,
    which would make the two wrappers call each other forever. Everything else is forwarded,
    and the module ends up with its real loader, as if this wrapper had never been there.
    """

    def __init__(self, loader: "Any", finder: "_AfterImport", fullname: str) -> None:
        self._loader = loader
        self._finder = finder
        self._fullname = fullname

    def __getattr__(self, name: str) -> "Any":
        return getattr(self._loader, name)

    def create_module(self, spec: "Any") -> "Any":
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: "Any") -> None:
        # Restore the real loader first, so code run by the module itself sees it.
        module.__loader__ = self._loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        self._loader.exec_module(module)
        self._finder.fire(self._fullname, module)


class _AfterImport:
    """One meta-path finder per process: watches the names with callbacks, provides nothing."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callable[[Any], None]]] = {}

    def find_spec(self, fullname: str, path: "Any" = None, target: "Any" = None) -> "Any":
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
        if spec is None or getattr(loader, "exec_module", None) is None or isinstance(loader, _NotifyingLoader):
            return spec
        spec.loader = _NotifyingLoader(loader, self, fullname)
        return spec

    def fire(self, name: str, module: "Any") -> None:
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


def after_import(name: str, callback: "Callable[[Any], None]") -> None:
    """Call ``callback(module)`` once ``name`` is imported (now, if it already is)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    _FINDER.callbacks.setdefault(name, []).append(callback)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def cancel(name: str, callback: "Callable[[Any], None]") -> None:
    """Withdraw ``callback`` from the callbacks waiting for ``name`` (nothing if it is not waiting)."""
    waiting = _FINDER.callbacks.get(name)
    if not waiting or callback not in waiting:
        return
    waiting.remove(callback)
    if not waiting:
        del _FINDER.callbacks[name]
    if not _FINDER.callbacks and _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
