"""Installing hooks: wrapt function wrappers, or SGLang's HookRegistry (>= 0.5.11) for module functions.

Both mechanisms end in the same call: ``run_hook(hook, original, instance, args, kwargs)``
where ``original(*args, **kwargs)`` calls the patched function (already bound to
``instance`` for methods). Hook handlers live in :mod:`hooks`; this module only adapts the
calling conventions and keeps installation idempotent per process.

**wrapt.** A wrapper lands when the target's module is imported, or at once if it already is,
so patches are in place before any other SGLang module can copy a reference with ``from X
import f`` (spawned children included: the ``.pth`` bootstrap asks for them before SGLang
runs). The wait uses :func:`~sglang_eagle_nccl.inproc.boot.import_trigger.after_import`, not
wrapt's own post-import hooks: wrapt's finder stays first in ``sys.meta_path`` for the rest of
the process and takes a lock on every import (an SGLang scheduler imports ~5,900 modules),
while ours removes itself once nothing is left to watch. wrapt itself is imported only when
the first wrapper is applied. :func:`uninstall_wrapt` is the exact inverse of the
installations: every attribute back to the object it held (an attribute a class only
inherited is removed again), waiting installations cancelled, this module's bookkeeping
emptied.

**HookRegistry.** ``HookRegistry.apply_hooks`` patches a target, then walks every attribute of
every loaded module (``_propagate_patch`` in ``sglang/srt/plugins/hook_registry.py``, 0.5.23) to
replace ``from X import f`` copies: ~20 ms per target in a scheduler, where ~5,900 modules are
loaded. The installer therefore gives it only module-level functions, where that walk is the
point (``sglang/benchmark/one_batch.py`` imports ``_set_envs_and_config`` by name); a method is
reached through its class, no module holds a copy of it, so class members are wrapped with
wrapt even when the policy asks for the registry. HookRegistry cannot unregister: tests that
use it run in subprocesses.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    import inspect

    from sglang_eagle_nccl.knowledge.sglang.patchsets import Hook

Runner = Callable[..., Any]  # runner(hook, original, instance, args, kwargs) -> result
OnResult = Callable[..., None]  # on_result(hook, mechanism, failure or None)


class _Restore:
    """How to undo one wrapt installation."""

    __slots__ = ("target", "parent", "attr", "before", "own")

    def __init__(self, target: str, parent: Any, attr: str, before: Any, own: bool) -> None:
        self.target = target
        self.parent = parent
        self.attr = attr
        self.before = before  # the raw attribute (staticmethod/classmethod objects included)
        self.own = own  # False: a class only inherited it, so the wrapper is removed, not replaced


class InstallState:
    def __init__(self) -> None:
        self.installed: dict[str, str] = {}  # target -> mechanism
        self.failed: dict[str, str] = {}  # target -> reason
        # target -> token of the installation waiting for its module to be imported; a callback
        # whose token is no longer here belongs to an installation that was undone.
        self.pending: dict[str, object] = {}
        self.mechanisms: dict[str, str] = {}  # target -> mechanism asked for (pending, installed or failed)
        self.wrapt_restore: list[_Restore] = []
        self.lock = threading.RLock()


STATE = InstallState()


def _resolve_parent(module: Any, qualname: str) -> tuple[Any, str]:
    parts = qualname.split(".")
    obj = module
    for part in parts[:-1]:
        obj = getattr(obj, part)
    return obj, parts[-1]


@functools.lru_cache(maxsize=256)
def _signature(func: Callable[..., Any]) -> inspect.Signature | None:
    import inspect

    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


def bind(original: Callable[..., Any], args: tuple, kwargs: dict) -> dict[str, Any]:
    """Arguments of a call by parameter name (``arg0``, ``arg1``... when it has no signature)."""
    import inspect

    func, lead = original, ()
    if inspect.ismethod(original):
        # Cache by the underlying function (stable), never by the bound method: a cache keyed
        # by bound methods would keep every instance alive.
        func, lead = original.__func__, (original.__self__,)
    try:
        sig = _signature(func)
    except TypeError:  # unhashable callable
        sig = None
    if sig is not None:
        try:
            bound = dict(sig.bind_partial(*lead, *args, **kwargs).arguments)
            if lead:
                bound.pop(next(iter(sig.parameters)), None)
            return bound
        except TypeError:
            pass
    # C functions (setproctitle) have no readable signature: positional arguments by index.
    return {**{f"arg{i}": a for i, a in enumerate(args)}, **kwargs}


def _when_imported(module_name: str, callback: Callable[[Any], None]) -> None:
    from sglang_eagle_nccl.inproc.boot.import_trigger import after_import

    after_import(module_name, callback)


# --- wrapt ------------------------------------------------------------------------------------


def install_wrapt(hook: Hook, runner: Runner, on_result: OnResult) -> None:
    """Wrap ``hook.target`` with wrapt once its module is imported (at once if it already is)."""
    token = object()
    with STATE.lock:
        if hook.target in STATE.installed or hook.target in STATE.pending:
            return
        STATE.pending[hook.target] = token
        STATE.mechanisms[hook.target] = "wrapt"

    def when_imported(module: Any) -> None:
        with STATE.lock:
            if STATE.pending.get(hook.target) is not token:
                return  # undone (uninstall_wrapt) before the module was imported
            del STATE.pending[hook.target]
            failure = _wrap(hook, module, runner)
        on_result(hook, "wrapt", failure)

    _when_imported(hook.module, when_imported)


def _wrap(hook: Hook, module: Any, runner: Runner) -> str | None:
    """Apply the wrapper (STATE.lock held). Returns why it could not be applied, or None."""
    import wrapt

    try:
        parent, attr = _resolve_parent(module, hook.qualname)
        own = attr in vars(parent) if isinstance(parent, type) else True
        # The raw attribute, so that a staticmethod/classmethod goes back as one on uninstall.
        before = vars(parent)[attr] if own and isinstance(parent, type) else getattr(parent, attr)
    except (AttributeError, TypeError) as exc:
        STATE.failed[hook.target] = f"not found after import: {exc}"
        return STATE.failed[hook.target]

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        return runner(hook, wrapped, instance, args, kwargs)

    wrapt.wrap_function_wrapper(parent, attr, wrapper)
    STATE.wrapt_restore.append(_Restore(hook.target, parent, attr, before, own))
    STATE.installed[hook.target] = "wrapt"
    return None


def uninstall_wrapt() -> int:
    """Undo every wrapt installation of this module (tests). Returns how many wrappers were removed.

    Symmetric to :func:`install_wrapt`: each attribute holds exactly the object it held before
    (an attribute that was only inherited is deleted again), installations still waiting for
    their module are cancelled, and the bookkeeping forgets every wrapt target, so installing
    again behaves like the first time. HookRegistry installations stay (SGLang cannot undo them).
    """
    with STATE.lock:
        count = 0
        for entry in reversed(STATE.wrapt_restore):
            if entry.own:
                setattr(entry.parent, entry.attr, entry.before)
            else:
                delattr(entry.parent, entry.attr)
            count += 1
        STATE.wrapt_restore.clear()
        for target in [t for t, m in STATE.mechanisms.items() if m == "wrapt"]:
            del STATE.mechanisms[target]
            STATE.installed.pop(target, None)
            STATE.pending.pop(target, None)
            STATE.failed.pop(target, None)
        return count


# --- SGLang HookRegistry ----------------------------------------------------------------------


def _is_static(parent: Any, attr: str) -> bool:
    if not isinstance(parent, type):
        return False
    for klass in parent.__mro__:  # the raw attribute where lookup finds it (inherited ones too)
        if attr in vars(klass):
            return isinstance(vars(klass)[attr], staticmethod)
    return False


def install_hook_registry(hook: Hook, runner: Runner, on_result: OnResult) -> None:
    """Register ``hook`` with SGLang's HookRegistry.

    When the target module is not imported yet (an EAGLE worker in a server without
    speculative decoding), registration waits until it is: SGLang's ``apply_hooks`` would
    otherwise import it just to patch it. A late registration is applied at once.
    """
    import sys

    token = object()
    with STATE.lock:
        if hook.target in STATE.installed or hook.target in STATE.pending:
            return
        STATE.mechanisms[hook.target] = "hook_registry"
        if hook.module not in sys.modules:
            STATE.pending[hook.target] = token

            def when_imported(_module: Any) -> None:
                with STATE.lock:
                    if STATE.pending.get(hook.target) is not token:
                        return
                    del STATE.pending[hook.target]
                _register(hook, runner, on_result)
                apply_hook_registry()

            _when_imported(hook.module, when_imported)
            return
    _register(hook, runner, on_result)


def _register(hook: Hook, runner: Runner, on_result: OnResult) -> None:
    import importlib

    from sglang.srt.plugins.hook_registry import HookRegistry, HookType  # type: ignore[import-not-found]

    with STATE.lock:
        if hook.target in STATE.installed:
            return
        # HookRegistry passes an unbound function and puts self/cls first in args for methods
        # (classmethods are unwrapped to __func__ and re-wrapped), nothing for staticmethods.
        try:
            module = importlib.import_module(hook.module)
            parent, attr = _resolve_parent(module, hook.qualname)
            getattr(parent, attr)
        except (ImportError, AttributeError) as exc:
            STATE.failed[hook.target] = f"not found: {exc}"
            on_result(hook, "hook_registry", STATE.failed[hook.target])
            return
        takes_instance = isinstance(parent, type) and not _is_static(parent, attr)

        def around(original_fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            if takes_instance:
                instance, rest = args[0], args[1:]
                # A bound method, like the one wrapt passes: its signature no longer has self/cls,
                # so arguments bind to the right parameter names.
                original = original_fn.__get__(instance) if hasattr(original_fn, "__get__") else functools.partial(original_fn, instance)
                return runner(hook, original, instance, rest, kwargs)
            return runner(hook, original_fn, None, args, kwargs)

        around.__qualname__ = f"sglang_eagle_nccl.{hook.handler}"
        HookRegistry.register(hook.dotted, around, HookType.AROUND)
        STATE.installed[hook.target] = "hook_registry"
    on_result(hook, "hook_registry", None)


def apply_hook_registry() -> None:
    """Apply hooks registered after SGLang's own load_plugins() already ran (CLI activation)."""
    from sglang.srt.plugins.hook_registry import HookRegistry  # type: ignore[import-not-found]

    HookRegistry.apply_hooks()


def is_wrapped(obj: Any) -> bool:
    """True when ``obj`` is a wrapper (wrapt proxy, or a function carrying ``__wrapped__``)."""
    try:
        import wrapt

        # wrapt 2.x FunctionWrapper no longer derives from ObjectProxy: check both.
        if isinstance(obj, (wrapt.ObjectProxy, wrapt.FunctionWrapper)):
            return True
    except ImportError:  # pragma: no cover
        pass
    return hasattr(obj, "__wrapped__")
