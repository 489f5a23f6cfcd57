"""Choosing the patch set for the installed SGLang and installing its hooks in this process.

Patch sets are chosen when SGLang is first imported (selection needs SGLang's version), so
processes that never import SGLang (pip, the multiprocessing resource tracker ...) pay nothing.
Installation is idempotent per hook. Hooks run through :func:`~sglang_eagle_nccl.inproc.hooks.handlers.run_hook`
whichever mechanism installed them (wrapt, or SGLang's HookRegistry on >= 0.5.11).

This runs once in every SGLang process, so it avoids what the offline tools may spend: the
version comes from the ``METADATA`` file next to the imported package
(:func:`~sglang_eagle_nccl.contract.versions.installed_sglang_version`; ``importlib.metadata``
scans every distribution on ``sys.path``: ~18 M instructions in an SGLang venv), and the manifests
from their checked JSON index (:mod:`~sglang_eagle_nccl.contract.manifests`) instead of
parsing the TOML files; :mod:`~sglang_eagle_nccl.knowledge.sglang.patchsets` is imported only when the
index cannot answer (a stale index, an SGLang newer than every proven release).
"""

from __future__ import annotations

import sys

from sglang_eagle_nccl.contract.log import log
from sglang_eagle_nccl.inproc.boot.state import STATE, fault_point
from sglang_eagle_nccl.inproc.hooks import patching
from sglang_eagle_nccl.inproc.hooks.handlers import run_hook
from sglang_eagle_nccl.knowledge.sglang.plugin_loader import entry_point_allowed

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from sglang_eagle_nccl.knowledge.sglang.patchsets import Hook, Selection


def _on_hook_result(hook: Hook, mechanism: str, failure: str | None) -> None:
    if STATE.audit is None:
        return
    if failure is None:
        STATE.audit.write("hook_installed", target=hook.target, mechanism=mechanism, handler=hook.handler)
    else:
        STATE.uncovered.append({"target": hook.target, "reason": failure, "required": hook.required})
        STATE.audit.write("hook_uncovered", target=hook.target, mechanism=mechanism, reason=failure, required=hook.required)
        if hook.required:
            log(f"required hook target {hook.target} could not be installed: {failure}")


def _cli_allows_partial() -> bool:
    """SGLang's server CLI given ``--nccl-allow-partial``: the patch set is chosen at ``import sglang``,
    before SGLang parses its arguments, so with the gate set the flag would come too late."""
    from sglang_eagle_nccl.contract.names import is_sglang_server_cli

    argv = list(getattr(sys, "orig_argv", sys.argv))
    return is_sglang_server_cli(argv) and "--nccl-allow-partial" in argv


def select() -> Selection:
    """The patch set for the installed SGLang; an untested release must pass the source check."""
    from sglang_eagle_nccl.contract import manifests as manifest_index

    if STATE.selection is not None:
        return STATE.selection
    from sglang_eagle_nccl.contract.versions import installed_sglang_version

    # "0" when nothing says which SGLang this is: refused as older than every supported release.
    installed = installed_sglang_version() or "0"
    selection: Any = manifest_index.select(installed)
    uncovered: list[dict[str, Any]] = []
    if selection is None:
        from sglang_eagle_nccl.knowledge.sglang import patchsets

        selection = patchsets.select(installed)
    missing_required: list[str] = []
    if not selection.tested:
        from sglang_eagle_nccl.knowledge.sglang import patchsets

        root = patchsets.installed_root()
        if root is not None:
            # Names, parameters and each hook's stated behaviour (cached per installed wheel; SGLang's
            # spawned children read the launcher's result and never parse SGLang themselves).
            coverage = patchsets.check_coverage(selection, root, cli=STATE.cli_hooks, prove=True)
            allow_partial = bool(STATE.policy.get("allow_partial")) or _cli_allows_partial()
            patchsets.require_coverage(coverage, allow_partial=allow_partial)
            uncovered = [c.to_dict() for c in coverage.missing_required + coverage.missing_optional]
            missing_required = [c.target for c in coverage.missing_required]
    STATE.selection = selection
    STATE.uncovered.extend(uncovered)
    if STATE.audit is not None:
        STATE.audit.write(
            "patch_set",
            sglang_version=installed,
            patch_set=selection.patch_set.id,
            status=selection.status,
            mechanism=selection.patch_set.mechanism,
            uncovered=uncovered,
        )
    if not selection.tested:
        optional = len(uncovered) - len(missing_required)
        log(
            f"{selection.why_untested}; "
            + (f"running with {len(missing_required)} required hook target(s) missing (allow_partial): "
               + ", ".join(missing_required) if missing_required else "all required targets were found in its source")
            + (f"; {optional} optional target(s) uncovered" if optional else "")
        )
    return selection


def mechanism_for(hook: Hook, wanted: str) -> str:
    """The mechanism that installs ``hook`` when ``wanted`` is asked for.

    HookRegistry only for module-level functions: for a class member (``Class.method``) its
    ``apply_hooks`` would walk every loaded module looking for copies that cannot exist (a method
    is reached through its class), ~20 ms per target in a scheduler; wrapt wraps it in place
    instead (see :mod:`~sglang_eagle_nccl.inproc.hooks.patching`).
    """
    if wanted == "hook_registry" and "." in hook.qualname:
        return "wrapt"
    return wanted


def _plugins_already_loaded() -> bool:
    plugins = sys.modules.get("sglang.srt.plugins")
    return bool(getattr(plugins, "_plugins_loaded", False))


def install_patches(*, from_entry_point: bool = False) -> None:
    """Install the selected patch set's hooks (idempotent per hook). Raises PatchSetError."""
    from sglang_eagle_nccl.contract.versions import parse

    with STATE.lock:
        if not STATE.active:
            return
        selection = select()
        patch_set = selection.patch_set
        version = parse(selection.version)
        register_now = from_entry_point or _plugins_already_loaded()
        registered_late = False
        # SGLang's HookRegistry only on request: it reaches only processes that call load_plugins()
        # (not custom scripts, SGLang's benchmark scripts or Ray actors) and scans every loaded
        # module once per target. The default installs the same hooks with wrapt everywhere.
        use_registry = STATE.policy.get("mechanism", "auto") == "hook_registry"
        # Targets the source check rejected (allow_partial) stay unhooked: attribute lookup could
        # still find something under that name (a removed __init__ resolves to a base class's),
        # and hooking that would record a hook on code that is not the target.
        rejected = {u.get("target") for u in STATE.uncovered if u.get("ok") is False}
        ledger_on = bool(STATE.policy.get("ledger"))
        for hook in patch_set.hooks_for(version, cli=False):
            if hook.target in rejected:
                continue
            if hook.when == "ledger":
                # The ledger's hooks run once per collective: installed only when it is on
                # (nothing at all when off), always with wrapt (class members), without
                # binding arguments by name.
                if ledger_on:
                    from sglang_eagle_nccl.inproc.hooks import hook_ledger

                    hook_ledger.start()
                    patching.install_wrapt(hook, hook_ledger.run_ledger_hook, _on_hook_result)
                continue
            mechanism = mechanism_for(hook, patch_set.mechanism_of(hook) if use_registry else (hook.mechanism or "wrapt"))
            if mechanism == "hook_registry":
                if register_now:
                    patching.install_hook_registry(hook, run_hook, _on_hook_result)
                    registered_late = registered_late or not from_entry_point
                elif not entry_point_allowed():
                    # SGLANG_PLUGINS excludes our entry point: SGLang will never call us, so
                    # patch through wrapt instead and say so.
                    patching.install_wrapt(hook, run_hook, _on_hook_result)
                    if STATE.audit and hook.target not in patching.STATE.installed:
                        STATE.audit.write("mechanism_fallback", target=hook.target, reason="SGLANG_PLUGINS excludes sglang_eagle_nccl")
                # else: SGLang's load_plugins() calls the entry point, which registers it.
            else:
                patching.install_wrapt(hook, run_hook, _on_hook_result)
        if registered_late:
            # load_plugins() already ran apply_hooks(); hooks registered afterwards need this.
            patching.apply_hook_registry()
        STATE.patches_installed = True


def ensure_hooks() -> None:
    """Make sure the hooks are in place in a process SGLang did not start itself (preflight ranks).

    SGLang's own processes call ``load_plugins()`` (>= 0.5.11), which reaches the entry point; a
    process we spawn does the same, and registers directly when the entry point is not installed
    (a source checkout).
    """
    install_patches()
    selection = STATE.selection
    if selection is None or selection.patch_set.mechanism != "hook_registry" or STATE.policy.get("mechanism") != "hook_registry":
        return
    try:
        from sglang.srt.plugins import load_plugins  # type: ignore[import-not-found]

        load_plugins()
    except ImportError:
        pass
    if not any(m == "hook_registry" for m in patching.STATE.mechanisms.values()):
        install_patches(from_entry_point=True)
        patching.apply_hook_registry()


# --- SGLang CLI flags -----------------------------------------------------------------------------


def cli_hooks() -> list[Hook]:
    """The launch-flag hooks (same targets in every supported SGLang, proven by the matrix)."""
    from sglang_eagle_nccl.contract import manifests as manifest_index

    sets: Any = manifest_index.load()
    if sets is None:
        from sglang_eagle_nccl.knowledge.sglang.patchsets import load_manifests

        sets = load_manifests()
    seen: dict[str, Hook] = {}
    for patch_set in sets:
        for hook in patch_set.hooks:
            if hook.when == "cli":
                seen[hook.target] = hook
    return list(seen.values())


def _run_cli_hook(hook: Hook, original: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """A launch-flag hook, then the patch set once the flags activated the plugin in this process."""
    result = run_hook(hook, original, instance, args, kwargs)
    if STATE.active and not STATE.patches_installed and hook.handler == "cli_capture":
        try:
            install_patches()
            fault_point("cli_hooks.installed")
        except Exception as exc:  # noqa: BLE001 - fail closed, through the door table
            # The launch flags asked for a profile that cannot be in force here: refused like a flag
            # that cannot be applied (exit 2, the environment put back, recorded, said once).
            from sglang_eagle_nccl.inproc.refusal import refuse

            refuse("cli_hooks", exc)
    return result


def install_cli_hooks(mechanism: str = "wrapt") -> None:
    """Add --nccl-* wherever SGLang's server arguments are parsed in this process.

    ``wrapt`` from the ``.pth`` bootstrap (enabled processes, every SGLang version: SGLang's own
    CLI, custom scripts calling ``prepare_server_args`` / ``ServerArgs.add_cli_args``, SGLang's
    benchmark scripts); ``hook_registry`` from SGLang's plugin loader (>= 0.5.11, plugin not
    enabled by environment).
    """
    with STATE.lock:
        if STATE.cli_hooks:
            return
        STATE.cli_hooks = True
        for hook in cli_hooks():
            if mechanism_for(hook, mechanism) == "hook_registry":
                patching.install_hook_registry(hook, _run_cli_hook, lambda *_: None)
            else:
                patching.install_wrapt(hook, _run_cli_hook, lambda *_: None)
