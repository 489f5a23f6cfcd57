"""What runs at each hook point: the dispatcher every installed wrapper calls, and the handler table.

Handlers live in modules by where they run (``hook_launcher``: SGLang's launcher process;
``hook_groups``: communicator creation in ranks; ``hook_workers``: scheduler / worker set-up;
``hook_cli``: the server CLI; ``hook_ray``: the Ray actors SGLang creates). The patch manifests
name handlers by the keys of :data:`HANDLERS`.

Handler conventions (the manifest ``kind`` says which one a handler follows):

- ``before``: ``handler(instance, arguments)`` runs before the original; its return is ignored;
- ``after``: ``handler(result, instance, arguments)`` runs after the original; the result is
  never replaced;
- ``around``: ``handler(original, instance, args, kwargs, arguments)`` calls ``original``.

``arguments`` maps parameter names to values (bound from the real signature, so positional
and keyword calls look the same). Only ``__init__`` methods, the launcher's env set-up, argument
resolution and the CLI are hooked: never a collective, never a forward pass -- except the phase
ledger's hooks (``hook_ledger``), installed only when the ledger is on and run by their own runner.

A bug in a before/after handler is reported and swallowed so it cannot take SGLang down;
deliberate stops (ranks that disagree, a profile that cannot be applied) always propagate.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.log import log
from sglang_eagle_nccl.inproc.boot.state import STATE, record
from sglang_eagle_nccl.inproc.hooks import (
    hook_cli,
    hook_groups,
    hook_launcher,
    hook_ledger,
    hook_ray,
    hook_workers,
)
from sglang_eagle_nccl.inproc.hooks.patching import bind

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from sglang_eagle_nccl.knowledge.sglang.patchsets import Hook

DELIBERATE = (PluginStop, SystemExit, KeyboardInterrupt)

HANDLERS: dict[str, Callable[..., Any]] = {
    "engine_env": hook_launcher.engine_env,
    "server_args_resolution": hook_launcher.server_args_resolution,
    "scheduler_env": hook_workers.scheduler_env,
    "process_role": hook_workers.process_role,
    "eagle_worker": hook_workers.eagle_worker,
    "group_created": hook_groups.group_created,
    "pynccl_created": hook_groups.pynccl_created,
    "torch_pg_options": hook_groups.torch_pg_options,
    "cli_add_flags": hook_cli.cli_add_flags,
    "cli_capture": hook_cli.cli_capture,
    "ray_scheduler_actors": hook_ray.scheduler_actors,
    "ray_engine_actor": hook_ray.engine_actor,
    "ray_actor_options": hook_ray.actor_options,
    # The phase ledger's hooks (installed only when it is on; run by hook_ledger.run_ledger_hook).
    **hook_ledger.HANDLERS,
}


def _report_bug(hook: Hook, exc: BaseException) -> None:
    log(f"internal error in hook {hook.handler} on {hook.target} (ignored, SGLang continues): {exc!r}")
    record("plugin_error", hook=hook.target, handler=hook.handler, error=repr(exc), traceback=traceback.format_exc())


def run_hook(hook: Hook, original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """Entry point of every installed wrapper (both mechanisms)."""
    handler = HANDLERS[hook.handler]
    if not STATE.active and hook.when != "cli":
        return original(*args, **kwargs)
    if hook.kind == "around":
        return handler(original, instance, args, kwargs, bind(original, args, kwargs))
    if hook.kind == "before":
        try:
            handler(instance, bind(original, args, kwargs))
        except DELIBERATE:
            raise
        except Exception as exc:  # noqa: BLE001 - isolation of plugin bugs
            _report_bug(hook, exc)
        return original(*args, **kwargs)
    result = original(*args, **kwargs)
    try:
        handler(result, instance, bind(original, args, kwargs))
    except DELIBERATE:
        raise
    except Exception as exc:  # noqa: BLE001
        _report_bug(hook, exc)
    return result
