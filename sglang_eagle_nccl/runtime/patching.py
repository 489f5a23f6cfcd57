"""Installing hooks: through SGLang's HookRegistry (>= 0.5.11) or wrapt post-import hooks.

Both mechanisms end in the same call: ``run_hook(hook, original, instance, args, kwargs)``
where ``original(*args, **kwargs)`` calls the patched function (already bound to
``instance`` for methods). Hook handlers live in :mod:`hooks`; this module only adapts the
calling conventions and keeps installation idempotent per process.

wrapt post-import hooks fire when the target module is imported, or at once if it already
is, so patches land whenever SGLang imports the module (including in spawned children,
where the ``.pth`` bootstrap registers them before any SGLang code runs). Installed wrappers
can be removed again (:func:`uninstall_wrapt`) so tests can patch and unpatch.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Callable
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from sglang_eagle_nccl.runtime.patchsets import Hook

# Set by bootstrap: run_hook(hook, original, instance, args, kwargs) -> result.
Runner = Callable[..., Any]  # runner(hook, original, instance, args, kwargs) -> result

PLUGIN_NAME = "sglang_eagle_nccl"


class InstallState:
    def __init__(self) -> None:
        self.installed: dict[str, str] = {}  # target -> mechanism
        self.failed: dict[str, str] = {}  # target -> reason
        self.pending: set[str] = set()  # hooks waiting for their module to be imported
        self.wrapt_restore: list[tuple[Any, str, Any]] = []
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


# --- wrapt ------------------------------------------------------------------------------------


def install_wrapt(hook: Hook, runner: Runner, on_result: Callable[[Hook, str, str | None], None]) -> None:
    """Register a post-import hook that wraps ``hook.target`` when its module is imported."""
    import wrapt

    with STATE.lock:
        if hook.target in STATE.installed or hook.target in STATE.pending:
            return
        STATE.pending.add(hook.target)

    def when_imported(module: Any) -> None:
        with STATE.lock:
            if hook.target in STATE.installed:
                return
            STATE.pending.discard(hook.target)
            try:
                parent, attr = _resolve_parent(module, hook.qualname)
                before = parent.__dict__.get(attr) if isinstance(parent, type) else getattr(parent, attr)
                if before is None:
                    before = getattr(parent, attr)
            except AttributeError as exc:
                STATE.failed[hook.target] = f"not found after import: {exc}"
                on_result(hook, "wrapt", STATE.failed[hook.target])
                return

            def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
                return runner(hook, wrapped, instance, args, kwargs)

            wrapt.wrap_function_wrapper(parent, attr, wrapper)
            STATE.wrapt_restore.append((parent, attr, before))
            STATE.installed[hook.target] = "wrapt"
        on_result(hook, "wrapt", None)

    wrapt.register_post_import_hook(when_imported, hook.module)


def uninstall_wrapt() -> int:
    """Remove every wrapt wrapper installed by this module (tests). Returns how many."""
    with STATE.lock:
        count = 0
        for parent, attr, original in reversed(STATE.wrapt_restore):
            setattr(parent, attr, original)
            count += 1
        for target, mech in list(STATE.installed.items()):
            if mech == "wrapt":
                del STATE.installed[target]
        STATE.wrapt_restore.clear()
        return count


# --- SGLang HookRegistry ----------------------------------------------------------------------


def _is_static(parent: Any, attr: str) -> bool:
    return isinstance(parent, type) and isinstance(inspect.getattr_static(parent, attr, None), staticmethod)


def install_hook_registry(
    hook: Hook, runner: Runner, on_result: Callable[[Hook, str, str | None], None], *, apply_now: bool = False
) -> None:
    """Register ``hook`` with SGLang's HookRegistry.

    When the target module is not imported yet (an EAGLE worker in a server without
    speculative decoding), registration waits until it is: SGLang's ``apply_hooks`` would
    otherwise import it just to patch it. A late registration is applied at once.
    """
    import sys

    with STATE.lock:
        if hook.target in STATE.installed or hook.target in STATE.pending:
            return
        if hook.module not in sys.modules:
            from sglang_eagle_nccl.runtime.import_trigger import after_import

            STATE.pending.add(hook.target)

            def when_imported(_module: Any) -> None:
                with STATE.lock:
                    STATE.pending.discard(hook.target)
                _register(hook, runner, on_result)
                apply_hook_registry()

            after_import(hook.module, when_imported)
            return
    _register(hook, runner, on_result)
    if apply_now:
        apply_hook_registry()


def _register(hook: Hook, runner: Runner, on_result: Callable[[Hook, str, str | None], None]) -> None:
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


def sglang_plugins_allowlist(environ: Any = None) -> frozenset[str] | None:
    """``SGLANG_PLUGINS`` read exactly as SGLang reads it; None means "no restriction".

    SGLang >= 0.5.11 (``sglang/srt/plugins/__init__.py`` ``load_plugins_by_group``, unchanged
    through 0.5.23) takes ``envs.SGLANG_PLUGINS.get()`` (the raw string, default ""), and only
    when it is non-empty builds ``{x.strip() for x in value.split(",") if x.strip()}``; entry
    point names are compared case-sensitively. So an unset or empty variable allows every
    plugin, while a value of only spaces or commas is non-empty and allows none.
    """
    env = os.environ if environ is None else environ
    value = env.get("SGLANG_PLUGINS")
    if not value:
        return None
    return frozenset(x.strip() for x in value.split(",") if x.strip())


def entry_point_allowed(environ: Any = None) -> bool:
    """Will SGLang's load_plugins() call our entry point? (``SGLANG_PLUGINS`` is an allow-list.)"""
    allowed = sglang_plugins_allowlist(environ)
    return allowed is None or PLUGIN_NAME in allowed


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
