"""Activation: once per process, from whichever path reaches the process first.

Three paths lead here and all end in :func:`activate`:

- the ``.pth`` line at interpreter start (:func:`interpreter_start`), in every process of
  every SGLang version, multiprocessing ``spawn`` children included;
- SGLang's plugin loader (``sglang.srt.plugins`` entry point, :func:`sglang_plugin`) in
  SGLang >= 0.5.11, which also registers the hooks through SGLang's HookRegistry;
- SGLang's server CLI flags (``--nccl-profile`` ...) read by the ``cli_capture`` hook
  (:func:`activate_from_cli`).

The first activation in a launch resolves and validates the profile, writes it into
``os.environ`` and serialises it into ``SGLANG_EAGLE_NCCL_PROFILE`` so that every process
SGLang spawns re-creates exactly the same profile. Module-level imports are kept to the
minimum: SGLang's entry point imports this module in processes where the plugin is off.
"""

from __future__ import annotations

import os
import sys

from sglang_eagle_nccl import names
from sglang_eagle_nccl.runtime.state import STATE, ProcessState

TYPE_CHECKING = False  # typing is not imported at interpreter start (annotations are strings)
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any



def log(message: str) -> None:
    print(f"[sglang-eagle-nccl] {message}", file=sys.stderr, flush=True)


# --- interpreter start ----------------------------------------------------------------------------


def interpreter_start(*, enabled: bool, cli_flags: bool) -> None:
    """Called by the ``.pth`` gate. Never lets an unexpected error stop the interpreter."""
    try:
        if cli_flags:
            install_cli_hooks()
        if enabled:
            activate(origin="pth")
    except Exception as exc:  # noqa: BLE001 - a plugin bug must not break every Python program
        # Imported only now: these modules are not needed on the successful start-up path.
        from sglang_eagle_nccl.audit.writer import AuditError
        from sglang_eagle_nccl.findings import ProfileError

        if isinstance(exc, (ProfileError, AuditError)):
            _refuse_sglang(exc)
            return
        import traceback

        log(f"internal error while activating (SGLang runs without the plugin): {exc!r}")
        traceback.print_exc()


def _refuse_sglang(exc: BaseException) -> None:
    """The user asked for a profile that cannot be applied: say so now, and stop SGLang itself.

    Unrelated Python programs started from the same environment keep working; importing
    SGLang in this process fails with the same message, so no server starts half-configured.
    """
    from sglang_eagle_nccl.runtime.import_trigger import after_import

    message = str(exc)
    log(message)
    log("SGLang will refuse to start in this process until this is fixed (or unset SGLANG_EAGLE_NCCL).")

    def refuse(_module: Any) -> None:
        raise RuntimeError(f"sglang-eagle-nccl: the requested NCCL profile cannot be applied:\n{message}")

    after_import("sglang", refuse)


# --- activation ---------------------------------------------------------------------------------


def profile_from_environment() -> Any:
    """The profile serialised by the launcher, or else resolved from the plugin's variables."""
    from sglang_eagle_nccl.profile.model import Profile
    from sglang_eagle_nccl.profile.resolve import resolve

    text = os.environ.get(names.ENV_PROFILE)
    if text:
        return Profile.from_json(text)
    resolution = resolve(environ=os.environ)
    for warning in resolution.warnings:
        log(f"warning: {warning.message()}")
    return resolution.profile


def describe_invocation(argv: list[str]) -> str:
    """How this interpreter was started, without its arguments (they may hold secrets)."""
    exe = os.path.basename(argv[0]) if argv else "python"
    for i, arg in enumerate(argv[1:], 1):
        if arg == "-m" and i + 1 < len(argv):
            return f"{exe} -m {argv[i + 1]}"
        if arg == "-c" and i + 1 < len(argv):
            code = argv[i + 1]
            for known in ("multiprocessing.resource_tracker", "multiprocessing.spawn", "multiprocessing.forkserver"):
                if known in code:
                    return f"{exe} -c <{known}>"
            return f"{exe} -c <code>"
        if not arg.startswith("-"):
            return f"{exe} {os.path.basename(arg)}"
    return exe


def _node_rank() -> int | None:
    value = os.environ.get(names.ENV_NODE_RANK, "")
    return int(value) if value.isdigit() else None


def _prepare_run_dir(policy: dict[str, Any], profile_dict: dict[str, Any]) -> str | None:
    from sglang_eagle_nccl.audit.writer import AuditError, run_dir_from_environ

    existing = run_dir_from_environ()
    if existing is not None:
        return existing
    from sglang_eagle_nccl.audit.writer import new_launch_dir, write_launch_meta

    try:
        run_dir = str(new_launch_dir(policy.get("audit_dir")))
        write_launch_meta(
            run_dir,
            {"profile": profile_dict, "launcher_pid": os.getpid(), "invocation": describe_invocation(list(getattr(sys, "orig_argv", sys.argv)))},
        )
    except (OSError, AuditError) as exc:
        if policy.get("audit_required"):
            raise AuditError(f"cannot create the audit directory: {exc} (audit_required is set)") from exc
        log(f"WARNING: cannot create the audit directory ({exc}); continuing without audit")
        return None
    os.environ[names.ENV_RUN_DIR] = run_dir
    return run_dir


def _serialised_profile(text: str) -> dict[str, Any]:
    """The launcher's serialised profile as plain data, checked cheaply.

    Anything unexpected goes through the full :meth:`Profile.from_json`, which raises a
    ProfileError naming the problem; the common case needs nothing beyond ``json``.
    """
    from sglang_eagle_nccl._json_light import loads
    from sglang_eagle_nccl.names import is_allowed_name

    try:
        data = loads(text)
        sections = [data["env"], *data["groups"].values(), *data["nodes"].values()]
        ok = data.get("v") == 1 and isinstance(data.get("policy"), dict) and all(
            isinstance(sec, dict) and all(is_allowed_name(k) and isinstance(v, str) for k, v in sec.items())
            for sec in sections
        )
    except (ValueError, KeyError, AttributeError, TypeError):
        ok = False
    if not ok:
        from sglang_eagle_nccl.profile.model import Profile

        return Profile.from_json(text).to_dict()  # raises ProfileError with the details
    return data


def _process_env(data: dict[str, Any], node_rank: int | None) -> dict[str, str]:
    env = dict(data["env"])
    if node_rank is not None:
        env.update(data["nodes"].get(str(node_rank), {}))
    return env


def activate(profile: Any = None, *, origin: str) -> ProcessState:
    """Apply the profile in this process (idempotent) and schedule the hooks.

    In a process SGLang spawned, the profile arrives serialised in the environment and this
    runs at interpreter start: it uses only ``os``/``sys``/``json`` and the plugin's small
    modules, so the cost is a JSON parse, a few ``putenv`` calls and one audit record.
    """
    from sglang_eagle_nccl.audit.writer import AuditWriter
    from sglang_eagle_nccl.names import nccl_snapshot, write_env

    with STATE.lock:
        if STATE.active:
            return STATE
        text = os.environ.get(names.ENV_PROFILE) if profile is None else None
        if text:
            data = _serialised_profile(text)
            STATE.profile_json, STATE.profile_data = text, data
        else:
            if profile is None:
                profile = profile_from_environment()
            STATE.profile = profile
            data = STATE.profile_data
            text = STATE.profile_json
        node_rank = _node_rank()
        is_root = names.ENV_ROOT_PID not in os.environ
        desired = _process_env(data, node_rank)
        if not is_root:
            # A child inherits what the launcher settled on; for variables where the policy lets
            # SGLang's own write win, the inherited value is that decision and must stay.
            keep = set(data["policy"].get("sglang_wins", ()))
            desired = {k: v for k, v in desired.items() if not (k in keep and k in os.environ)}
        changes = write_env(desired)
        # Everything below is inherited by the processes SGLang spawns from here on.
        os.environ[names.ENV_PROFILE] = text
        if not names.is_enabled():
            os.environ[names.ENV_ENABLE] = "1"
        if is_root:
            os.environ[names.ENV_ROOT_PID] = str(os.getpid())
        policy = data["policy"]
        run_dir = _prepare_run_dir(policy, data)
        STATE.node_rank = node_rank
        STATE.origin = origin
        invocation = describe_invocation(list(getattr(sys, "orig_argv", sys.argv)))
        if "<multiprocessing.resource_tracker>" in invocation or "<multiprocessing.forkserver>" in invocation:
            STATE.role = "multiprocessing-helper"
        else:
            STATE.role = "launcher" if is_root else "child"
        STATE.audit = AuditWriter(run_dir, required=bool(policy.get("audit_required")), role=STATE.role)
        applied = {"added": [], "changed": [], "unchanged": []}
        for name, before, after in changes:
            kind = "unchanged" if before == after else ("added" if before is None else "changed")
            applied[kind].append({"name": name, "kind": kind, "before": before, "after": after})
        STATE.audit.write(
            "process_start",
            ppid=os.getppid(),
            origin=origin,
            python=sys.version.split()[0],
            invocation=invocation,
            profile=data["name"],
            profile_sources=data.get("sources", []),
            node_rank=node_rank,
            applied=applied,
            expected_env=desired,
            env=nccl_snapshot(),
        )
        STATE.active = True
        if is_root:
            log(
                f"profile '{data['name']}' applied ({len(applied['added']) + len(applied['changed'])} NCCL variable(s) set"
                + (f", audit in {run_dir}" if run_dir else "")
                + ")"
            )
    _schedule_patches()
    return STATE


def _schedule_patches() -> None:
    from sglang_eagle_nccl.runtime.import_trigger import after_import

    # Patch sets are chosen when SGLang is first imported: selecting needs SGLang's version,
    # and processes that never import SGLang (pip, the multiprocessing resource tracker ...)
    # pay nothing more.
    after_import("sglang", lambda _m: install_patches())


def _on_hook_result(hook: Any, mechanism: str, failure: str | None) -> None:
    if STATE.audit is None:
        return
    if failure is None:
        STATE.audit.write("hook_installed", target=hook.target, mechanism=mechanism, handler=hook.handler)
    else:
        STATE.uncovered.append({"target": hook.target, "reason": failure, "required": hook.required})
        STATE.audit.write("hook_uncovered", target=hook.target, mechanism=mechanism, reason=failure, required=hook.required)
        if hook.required:
            log(f"required hook target {hook.target} could not be installed: {failure}")


def _select() -> Any:
    from importlib.metadata import PackageNotFoundError, version

    from sglang_eagle_nccl.runtime import patchsets

    if STATE.selection is not None:
        return STATE.selection
    # The installed distribution's metadata is authoritative (it carries local tags such as
    # +cu130); looking it up scans sys.path, so the package's own __version__ is only the
    # fallback for a source checkout without metadata.
    try:
        installed = version("sglang")
    except PackageNotFoundError:
        installed = getattr(sys.modules.get("sglang"), "__version__", None) or "0"
    selection = patchsets.select(installed)
    uncovered: list[dict[str, Any]] = []
    if not selection.tested:
        root = patchsets.installed_root()
        if root is not None:
            coverage = patchsets.check_coverage(selection, root, cli=STATE.cli_hooks)
            patchsets.require_coverage(coverage, allow_partial=bool(STATE.profile and STATE.profile.policy.allow_partial))
            uncovered = [c.to_dict() for c in coverage.missing_required + coverage.missing_optional]
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
        log(
            f"SGLang {installed} is newer than patch set {selection.patch_set.id} was proven on "
            f"(through {selection.patch_set.tested_through}); all required targets were found"
            + (f", {len(uncovered)} uncovered (allow_partial)" if uncovered else "")
        )
    return selection


def _plugins_already_loaded() -> bool:
    plugins = sys.modules.get("sglang.srt.plugins")
    return bool(getattr(plugins, "_plugins_loaded", False))


def install_patches(*, from_entry_point: bool = False) -> None:
    """Install the selected patch set's hooks (idempotent per hook)."""
    from packaging.version import Version

    from sglang_eagle_nccl.runtime import patching
    from sglang_eagle_nccl.runtime.hooks import run_hook

    with STATE.lock:
        if not STATE.active:
            return
        selection = _select()
        patch_set = selection.patch_set
        version = Version(selection.version)
        register_now = from_entry_point or _plugins_already_loaded()
        registered_late = False
        forced = STATE.profile_data["policy"].get("mechanism", "auto") if STATE.profile_data else "auto"
        for hook in patch_set.hooks_for(version, cli=False):
            mechanism = "wrapt" if forced == "wrapt" else patch_set.mechanism_of(hook)
            if mechanism == "hook_registry":
                if register_now:
                    patching.install_hook_registry(hook, run_hook, _on_hook_result)
                    registered_late = registered_late or not from_entry_point
                elif not patching.entry_point_allowed():
                    # SGLANG_PLUGINS excludes our entry point: SGLang will never call us, so
                    # patch through wrapt instead and say so.
                    patching.install_wrapt(hook, run_hook, _on_hook_result)
                    if STATE.audit and hook.target not in patching.STATE.installed:
                        STATE.audit.write("mechanism_fallback", target=hook.target, reason="SGLANG_PLUGINS excludes sglang_eagle_nccl")
                # else: SGLang's load_plugins() calls sglang_plugin(), which registers it.
            else:
                patching.install_wrapt(hook, run_hook, _on_hook_result)
        if registered_late:
            # load_plugins() already ran apply_hooks(); hooks registered afterwards need this.
            patching.apply_hook_registry()
        STATE.patches_installed = True


def ensure_hooks() -> None:
    """Make sure the hooks are in place in a process SGLang did not start itself (preflight).

    SGLang's own processes call ``load_plugins()`` (>= 0.5.11), which reaches
    :func:`sglang_plugin`; a process we spawn does the same, and registers directly when the
    entry point is not installed (a source checkout).
    """
    install_patches()
    selection = STATE.selection
    if selection is None or selection.patch_set.mechanism != "hook_registry":
        return
    try:
        from sglang.srt.plugins import load_plugins  # type: ignore[import-not-found]

        load_plugins()
    except ImportError:
        pass
    from sglang_eagle_nccl.runtime import patching

    if not any(m == "hook_registry" for m in patching.STATE.installed.values()) and not patching.STATE.pending:
        install_patches(from_entry_point=True)
        patching.apply_hook_registry()


def sglang_plugin() -> None:
    """``sglang.srt.plugins`` entry point: SGLang >= 0.5.11 calls it in its processes.

    With the plugin not enabled it returns at once. SGLang's loader swallows exceptions from
    plugins, so a profile that cannot be applied ends the process with SystemExit instead:
    the user asked for it, so it must not be lost in a log line.
    """
    if not STATE.active and not names.is_enabled():
        return
    from sglang_eagle_nccl.audit.writer import AuditError
    from sglang_eagle_nccl.findings import ProfileError
    from sglang_eagle_nccl.runtime.patchsets import PatchSetError

    try:
        activate(origin="entry_point")
        install_patches(from_entry_point=True)
    except (ProfileError, PatchSetError, AuditError) as exc:
        log(str(exc))
        raise SystemExit(2) from exc


# --- SGLang CLI flags -----------------------------------------------------------------------------


def cli_hooks() -> list[Any]:
    """The launch-flag hooks (same targets in every supported SGLang, proven by the matrix)."""
    from sglang_eagle_nccl.runtime.patchsets import load_manifests

    seen: dict[str, Any] = {}
    for patch_set in load_manifests():
        for hook in patch_set.hooks:
            if hook.when == "cli":
                seen[hook.target] = hook
    return list(seen.values())


def install_cli_hooks(mechanism: str = "wrapt") -> None:
    """Add --nccl-* to SGLang's server CLI in this process.

    ``wrapt`` from the ``.pth`` bootstrap (enabled processes, every SGLang version);
    ``hook_registry`` from SGLang's plugin loader (>= 0.5.11, plugin not enabled by environment).
    """
    from sglang_eagle_nccl.runtime import patching
    from sglang_eagle_nccl.runtime.hooks import run_hook

    with STATE.lock:
        if STATE.cli_hooks:
            return
        STATE.cli_hooks = True
        for hook in cli_hooks():
            if mechanism == "hook_registry":
                patching.install_hook_registry(hook, run_hook, lambda *_: None)
            else:
                patching.install_wrapt(hook, run_hook, lambda *_: None)


def activate_from_cli(
    profiles: list[str], env_flags: list[str], *, audit_dir: str | None, allow_partial: bool,
    node_rank: int | None = None,
) -> None:
    """The server CLI got --nccl-* flags: resolve, validate, activate; exit 2 on a bad profile."""
    if node_rank is not None and not os.environ.get(names.ENV_NODE_RANK):
        # --node-rank of this launcher selects [nodes.<rank>.env], here and in every child.
        os.environ[names.ENV_NODE_RANK] = str(node_rank)
    from sglang_eagle_nccl.findings import ProfileError
    from sglang_eagle_nccl.profile.resolve import resolve
    from sglang_eagle_nccl.runtime.patchsets import PatchSetError

    try:
        resolution = resolve(
            profiles,
            env_flags=env_flags,
            policy_flags={"audit_dir": audit_dir, "allow_partial": True if allow_partial else None},
        )
    except ProfileError as exc:
        log(str(exc))
        raise SystemExit(2) from None
    for warning in resolution.warnings:
        log(f"warning: {warning.message()}")
    if STATE.active:
        # Flags given on top of an environment activation: the flags decide. Nothing has been
        # spawned yet (argument parsing precedes every launch), so re-applying is safe.
        _reconfigure(resolution.profile)
    else:
        if os.environ.get(names.ENV_PROFILE):
            # A stale serialised profile from an outer launch must not override these flags.
            del os.environ[names.ENV_PROFILE]
        activate(resolution.profile, origin="cli")
    try:
        install_patches()
    except PatchSetError as exc:
        log(str(exc))
        raise SystemExit(2) from None


def _remove_abandoned_launch(run_dir: str | None, own_file: str | None) -> None:
    """Delete the launch directory this launcher created at start-up and is leaving now.

    Only when it holds nothing but the launch description and this process's own records
    (nothing has been spawned yet), so no other process's audit is ever removed.
    """
    from sglang_eagle_nccl.audit.writer import LAUNCH_META

    if not run_dir or not os.path.isdir(run_dir):
        return
    allowed = {LAUNCH_META, os.path.basename(own_file or "")}
    entries = set(os.listdir(run_dir))
    if entries <= allowed:
        for name in entries:
            os.unlink(os.path.join(run_dir, name))
        os.rmdir(run_dir)


def _reconfigure(profile: Any) -> None:
    from sglang_eagle_nccl.runtime import environ as envmod

    with STATE.lock:
        old = STATE.profile
        old_rank, STATE.node_rank = STATE.node_rank, _node_rank()
        for name in old.process_env(old_rank) if old else {}:
            if name not in profile.process_env(STATE.node_rank):
                os.environ.pop(name, None)
        report = envmod.apply(profile.process_env(STATE.node_rank))
        os.environ[names.ENV_PROFILE] = profile.to_json()
        STATE.profile = profile
        if profile.policy.audit_dir and STATE.role == "launcher":
            # The flags name another audit root than the one chosen at interpreter start; nothing
            # has been spawned yet, so the launch moves there.
            from sglang_eagle_nccl.audit.writer import AuditWriter

            old_dir = os.environ.pop(names.ENV_RUN_DIR, None)
            run_dir = _prepare_run_dir(profile.policy.to_dict(), profile.to_dict())
            if STATE.audit is not None:
                STATE.audit.close()
                _remove_abandoned_launch(old_dir, STATE.audit.file_path)
            STATE.audit = AuditWriter(run_dir, required=profile.policy.audit_required, role=STATE.role)
            STATE.audit.write("process_start", ppid=os.getppid(), origin="cli", profile=profile.name,
                              expected_env=profile.process_env(STATE.node_rank), env=envmod.nccl_snapshot())
        if STATE.audit:
            STATE.audit.write("profile_replaced", profile=profile.name, applied=report.to_dict(), env=envmod.nccl_snapshot())
        log(f"profile '{profile.name}' from the command line replaces '{old.name if old else '-'}'")
