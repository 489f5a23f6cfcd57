"""Applying a profile in this process: decide everything first, then write.

Every way into an enabled process ends here: interpreter start (the ``.pth`` line, or SGLang's
plugin loader on >= 0.5.11), SGLang's server CLI flags (``--nccl-profile`` ...), and the ranks of
``preflight``. :func:`plan` reads the profile (the serialised one a parent handed down, through
the one wire decoder, or the ``SGLANG_EAGLE_NCCL*`` variables) and runs every check; it writes
nothing. :func:`apply` then writes ``os.environ`` in one go and puts every variable back if
anything fails half-way, so a process whose profile cannot be applied is exactly as it was.

The first activated process of a launch is its *root* (``SGLANG_EAGLE_NCCL_ROOT_PID`` is not
set yet); it signs the serialised profile for its children. Children inherit the root's
decisions, including values SGLang was allowed to win (``sglang_wins``).
"""

import os
import sys

from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.contract.log import log
from sglang_eagle_nccl.decision.plan import Plan, node_rank_from, plan, process_env
from sglang_eagle_nccl.inproc.boot.state import STATE

TYPE_CHECKING = False  # typing is not imported at interpreter start (annotations are strings)
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping
    from typing import Any

    from sglang_eagle_nccl.profile.model import Profile

__all__ = ["Plan", "apply", "node_rank_from", "plan", "process_env", "publish", "reconfigure"]


# --- deciding (sglang_eagle_nccl/decision/plan.py) ---------------------------------------------


def _with_native(env: dict[str, str]) -> dict[str, str]:
    """A new expectation keeps this process's own native plugin variables (decided at activation)."""
    from sglang_eagle_nccl.inproc.boot.native import PLUGIN_VARS

    env.update({k: v for k, v in STATE.expected_env.items() if k in PLUGIN_VARS})
    return env


# --- doing --------------------------------------------------------------------------------------


def _write_atomically(updates: "Mapping[str, str | None]") -> list[tuple[str, str | None, str | None]]:
    """Write (None: unset) every variable, or none of them (the one writer: inproc/boot/environ.py)."""
    from sglang_eagle_nccl.inproc.boot import environ

    return environ.write(updates)


def _signed_wire(data: "Mapping[str, Any]", run_dir: str | None, environ_after: "Mapping[str, str]") -> str:
    from sglang_eagle_nccl.contract.handoff import current_inputs, encode

    return encode(data, inputs=current_inputs(environ_after), run_dir=run_dir)


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


def invocation() -> str:
    return describe_invocation(list(getattr(sys, "orig_argv", sys.argv)))


def _record_activation(the_plan: "Plan", origin: str, written: "list[tuple[str, str | None, str | None]]",
                       wire_text: str, audit: "Any", role: str, how: str) -> None:
    """After the write: this process's state and its process_start record (may raise under audit_required)."""
    # Nothing below can leave os.environ half-written: it only records.
    for name, before, _after in written:
        STATE.saved_before.setdefault(name, before)
    STATE.set_profile(the_plan.data, the_plan.profile)
    STATE.wire = wire_text
    STATE.node_rank = the_plan.node_rank
    STATE.is_root = the_plan.is_root
    STATE.run_dir = the_plan.run_dir
    STATE.expected_env = dict(the_plan.desired)
    STATE.origin = origin
    STATE.role = role
    policy = the_plan.data.get("policy", {})
    STATE.audit = audit
    STATE.active = True
    applied: dict[str, list[dict[str, Any]]] = {"added": [], "changed": [], "unchanged": []}
    for name, before, after in written:
        if name in the_plan.desired:
            kind = "unchanged" if before == after else ("added" if before is None else "changed")
            applied[kind].append({"name": name, "kind": kind, "before": before, "after": after})
    from sglang_eagle_nccl.contract.names import nccl_snapshot

    STATE.audit.write(
        "process_start",
        ppid=os.getppid(),
        origin=origin,
        python=sys.version.split()[0],
        invocation=how,
        profile=the_plan.data.get("name"),
        profile_sources=the_plan.data.get("sources", []),
        node_rank=the_plan.node_rank,
        applied=applied,
        expected_env=STATE.expected_env,
        group_envs=the_plan.data.get("groups", {}),
        sglang_wins=list(policy.get("sglang_wins", ())),
        env=nccl_snapshot(),
    )


def apply(the_plan: "Plan", *, origin: str) -> None:
    """Write the planned environment (all or nothing) and start this process's audit."""
    from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter

    with STATE.lock:
        if STATE.active:
            return
        updates: dict[str, str | None] = dict(the_plan.desired)
        updates.update({k: None for k in the_plan.unset})
        if not names.is_enabled():
            updates[names.ENV_ENABLE] = "1"  # children must activate too
        if the_plan.is_root:
            updates[names.ENV_ROOT_PID] = str(os.getpid())
        wire_text = the_plan.wire
        if wire_text is None:
            after = dict(os.environ)
            after.update({k: v for k, v in updates.items() if v is not None})
            wire_text = _signed_wire(the_plan.data, the_plan.run_dir, after)
        updates[names.ENV_PROFILE] = wire_text
        # Every check that can refuse runs before the one write: the one writer's guard (names, values a
        # C environment can hold) and, under audit_required, the audit file itself.
        from sglang_eagle_nccl.inproc.boot import environ

        environ.check(updates)
        if the_plan.wire is not None and the_plan.profile is not None and the_plan.run_dir is not None:
            # An inherited hand-off that had to be validated (no valid signature of this user: a decoded
            # signed one carries no Profile object) names a launch directory: refused unless a launch of
            # this user opened it. A hand-edited hand-off does not choose where this process writes.
            from sglang_eagle_nccl.contract.launch_dir import check_handed_launch_dir

            check_handed_launch_dir(the_plan.run_dir)
        policy = the_plan.data.get("policy", {})
        how = invocation()
        if "<multiprocessing.resource_tracker>" in how or "<multiprocessing.forkserver>" in how:
            role = "multiprocessing-helper"
        else:
            role = "launcher" if the_plan.is_root else "child"
        audit = AuditWriter(the_plan.run_dir, required=bool(policy.get("audit_required")), role=role)
        audit.prepare()
        # The env plugin gets its values before the environment points NCCL at it.
        from sglang_eagle_nccl.inproc.boot.native import start

        start(the_plan.desired, the_plan.data, the_plan.run_dir)
        written = _write_atomically(updates)
        try:
            from sglang_eagle_nccl.inproc.boot.state import fault_point

            fault_point("activation.written")
            _record_activation(the_plan, origin, written, wire_text, audit, role, how)
            fault_point("activation.recorded")
        except BaseException:
            # Whatever raised after the write (the audit under audit_required, a full disk ...): the
            # process is exactly as it was.
            environ.put_back({name: before for name, before, _after in written})
            STATE.__init__()  # type: ignore[misc]
            # The door's refusal records itself in this process's audit, where it can.
            STATE.audit = audit
            raise
    for warning in the_plan.warnings:
        log(f"warning: {warning}", once=warning)


def publish() -> None:
    """Root only: re-sign the serialised profile after the root changed an input or its launch."""
    with STATE.lock:
        if not STATE.is_root or STATE.data is None:
            return
        wire = _signed_wire(STATE.data, STATE.run_dir, os.environ)
        _write_atomically({names.ENV_PROFILE: wire})
        STATE.wire = wire


def _change_expectation(new_desired: dict[str, str], *, reason: str, profile_name: str | None) -> None:
    """Move this process to a new expected environment (all or nothing), and record it."""
    from sglang_eagle_nccl.contract.names import nccl_snapshot

    updates: dict[str, str | None] = {
        # Variables the old expectation set and the new one does not: give back what was there
        # before the plugin wrote them (a user's own export is not dropped).
        k: STATE.saved_before.get(k) for k in STATE.expected_env if k not in new_desired
    }
    updates.update(new_desired)
    written = _write_atomically(updates)
    for name, before, _after in written:
        STATE.saved_before.setdefault(name, before)
    STATE.expected_env = dict(new_desired)
    publish()
    from sglang_eagle_nccl.inproc.boot.native import resync

    resync()
    if STATE.audit is not None:
        STATE.audit.write(
            "profile_changed",
            reason=reason,
            profile=profile_name,
            node_rank=STATE.node_rank,
            expected_env=STATE.expected_env,
            group_envs=(STATE.data or {}).get("groups", {}),
            sglang_wins=list(STATE.policy.get("sglang_wins", ())),
            changes=[{"name": n, "before": b, "after": a} for n, b, a in written if b != a],
            env=nccl_snapshot(),
        )


def reconfigure(profile: "Profile", *, reason: str) -> None:
    """Replace the active profile (launch flags on top of an environment activation).

    Only before anything was spawned (argument parsing precedes every launch), so re-applying is
    safe; the change is recorded with the environment expected from now on.
    """
    with STATE.lock:
        old = (STATE.data or {}).get("name")
        STATE.node_rank = node_rank_from(os.environ)
        data = profile.to_dict()
        from sglang_eagle_nccl.decision.plugins import plugin_env

        new_desired = process_env(data, STATE.node_rank, STATE.run_dir)
        new_desired.update({k: v for k, v in plugin_env(data, os.environ, new_desired).items() if v is not None})
        STATE.set_profile(data, profile)
        _change_expectation(new_desired, reason=reason, profile_name=profile.name)
    log(f"profile '{profile.name}' from {reason} replaces '{old or '-'}'")


def set_node_rank(node_rank: int, *, reason: str) -> None:
    """The node rank became known late (Engine API on a multi-node launch): select its section."""
    with STATE.lock:
        if STATE.node_rank == node_rank or STATE.data is None:
            return
        _write_atomically({names.ENV_NODE_RANK: str(node_rank)})
        STATE.node_rank = node_rank
        _change_expectation(_with_native(process_env(STATE.data, node_rank, STATE.run_dir)), reason=reason,
                            profile_name=STATE.data.get("name"))


def join_launch(run_dir: str) -> None:
    """This process (a root) opened its launch: audit there, and tell the children."""
    with STATE.lock:
        STATE.run_dir = run_dir
        if STATE.audit is not None:
            STATE.audit.attach(run_dir)
        if STATE.data is not None:
            new = _with_native(process_env(STATE.data, STATE.node_rank, run_dir))
            if new != STATE.expected_env:
                # Values naming {audit_dir} (the debug profile's NCCL_DEBUG_FILE) can be written now.
                _change_expectation(new, reason="the launch directory was opened", profile_name=STATE.data.get("name"))
                return
        publish()
        from sglang_eagle_nccl.inproc.boot.native import resync

        resync()
