"""One decision, asked everywhere: :func:`decide` returns the whole answer for a launch.

The rule: ``validate``, ``env``, ``doctor``, the launchers (``launch``, ``preflight``) and
activation give the same answer on the same inputs because they ask the same function. Given the
profile sources (names, files, ``--nccl-env``, policy flags; or none: the ``SGLANG_EAGLE_NCCL*``
variables of ``environ``, as activation reads them), the environment the launch starts from and
the node rank, :func:`decide` returns:

- the profile, or every problem that stops it from being one (the resolver's findings, in the
  order the user wrote them);
- what the launch's first process gets (the values of :func:`~.plan.process_env`, the native
  plugin variables: activation's own :func:`~.plan.plan`) and each group's values;
- the hand-off every other process gets (:mod:`.child_env`, signed through contract/handoff.py),
  its size against Linux's limit on one environment entry, and what a child started with it
  decides (the same :func:`~.plan.plan`, through the hand-off decoder);
- every refusal, in that order (the launcher's own, then its children's), each once; the first
  one is what every command names first.

Activation in each process runs :func:`~.plan.plan` (the per-process core of this function,
cheap enough for interpreter start) and the hand-off encoder, so it refuses exactly what is
refused here. Nothing is written: no environment variable, no key, no launch directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.contract.findings import Finding, ProfileError
from sglang_eagle_nccl.decision.child_env import Handoff
from sglang_eagle_nccl.decision.plan import Plan, plan
from sglang_eagle_nccl.profile.model import Profile

# As long as every launch directory name a launcher decides (contract/launch_dir.py launch_name) and
# the longest new_launch_dir() makes: the hand-off carries the launch directory, so its size is
# decided with one this long where no launch is opened (validate, doctor), and is the same.
LONGEST_LAUNCH_ID = "00000000-000000-4194304-0000"


@dataclass(frozen=True)
class Inputs:
    """What a launch is decided from.

    ``specs`` / ``env_flags`` / ``policy_flags``: the command's profile options (``--profile``,
    ``--nccl-env``, the policy flags). ``from_environment``: the profile is the one a process
    started from ``environ`` would apply (its serialised hand-off, else its ``SGLANG_EAGLE_NCCL*``
    variables): doctor without ``--profile``, activation itself.
    """

    environ: Mapping[str, str]
    specs: tuple[str, ...] = ()
    env_flags: tuple[str, ...] = ()
    policy_flags: Mapping[str, Any] | None = None
    node_rank: int | None = None
    from_environment: bool = False
    # The launch directory: a launcher that opens one (launch, preflight, env --audit-dir) gets its
    # name chosen here, under ``audit_root`` (default: the profile's audit root); the others are
    # decided with a name of the same length, so the hand-off has the size it will have.
    opens_launch: bool = False
    audit_root: str | None = None
    # The processes it starts: ``root_pid`` None makes the first one the launch's root (the server
    # ``launch`` starts); ``standalone``: they see only what is handed to them (``env`` output).
    root_pid: str | None = field(default_factory=lambda: str(os.getpid()))
    standalone: bool = False


@dataclass
class Decision:
    """The whole answer for one launch (see the module docstring)."""

    inputs: Inputs
    profile: Profile | None = None
    warnings: tuple[Finding, ...] = ()
    # The resolver refused the profile itself (all its findings, warnings included, as it raised them).
    resolution_error: ProfileError | None = None
    # Activation would refuse it: in the launcher, then in the processes it starts.
    refusals: tuple[Finding, ...] = ()
    launcher_plan: Plan | None = None
    values: dict[str, str] = field(default_factory=dict)
    group_values: dict[str, dict[str, str]] = field(default_factory=dict)
    handoff_chars: int | None = None
    handoff_limit: int = 0
    # The launch directory chosen (Inputs.opens_launch; not made yet), and the environment of the
    # processes the launch starts, decided with it (its hand-off signed with the key there was).
    run_dir: str | None = None
    handoff: Handoff | None = None

    @property
    def problems(self) -> tuple[Finding, ...]:
        """Every error, in order: the profile's own, else activation's (launcher, then children)."""
        if self.resolution_error is not None:
            return self.resolution_error.errors
        return self.refusals

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first(self) -> Finding | None:
        return self.problems[0] if self.problems else None

    def launch_name(self) -> str | None:
        """The name of the launch directory to make (:func:`~sglang_eagle_nccl.contract.launch_dir.open_launch`)."""
        return os.path.basename(self.run_dir) if self.run_dir else None

    def child_environment(self, run_dir: str | None, *, create_key: bool = True) -> dict[str, str | None]:
        """The environment of the processes this launch starts, once ``run_dir`` is what was opened.

        The decided one, signed (``create_key``: with this user's key, created if need be); only a
        launch that could not open the chosen directory (no audit: ``run_dir`` None), a dry run, or
        a launch whose refusals were not asked for (``--python``) is decided again for that directory.
        """
        assert self.profile is not None, "a refused profile hands nothing down"
        if self.handoff is None or run_dir != self.handoff.run_dir:
            # (no decided hand-off: a launch with another interpreter, which the refusals do not stop;
            # deciding it again raises the same ProfileError for the caller to show)
            from sglang_eagle_nccl.decision.child_env import decide_child_environment

            handoff = decide_child_environment(self.profile, run_dir=run_dir, node_rank=self.inputs.node_rank,
                                               environ=self.inputs.environ, root_pid=self.inputs.root_pid,
                                               standalone=self.inputs.standalone)
        else:
            handoff = self.handoff
        return handoff.signed() if create_key else dict(handoff.updates)


def _errors(exc: ProfileError) -> list[Finding]:
    return [f for f in exc.findings if f.severity == "error"]


def _unique(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    seen: set[str] = set()
    out = []
    for f in findings:
        if f.message() not in seen:
            seen.add(f.message())
            out.append(f)
    return tuple(out)


def environment_refusals(environ: Mapping[str, str]) -> list[Finding]:
    """Why a process started with exactly ``environ`` would refuse its profile ([] when it activates)."""
    try:
        plan(None, environ)
    except ProfileError as exc:
        return _errors(exc)
    return []


def launch_root(profile: Profile) -> str:
    """The audit root this launch's directory will be made under (absolute)."""
    from sglang_eagle_nccl.contract.launch_dir import default_root

    return os.path.abspath(profile.policy.audit_dir or str(default_root()))


def decide(inputs: Inputs) -> Decision:
    """The whole decision for ``inputs`` (see the module docstring); never raises ProfileError."""
    decision = Decision(inputs)
    environ = inputs.environ
    findings: list[Finding] = []
    if inputs.from_environment:
        try:
            decision.launcher_plan = plan(None, environ)
        except ProfileError as exc:
            decision.refusals = _unique(_errors(exc))
            return decision
        the_plan = decision.launcher_plan
        decision.profile = the_plan.profile or Profile.from_validated_data(the_plan.data)
    else:
        from sglang_eagle_nccl.profile.resolve import resolve

        try:
            resolution = resolve(list(inputs.specs), env_flags=list(inputs.env_flags),
                                 policy_flags=inputs.policy_flags, environ=environ)
        except ProfileError as exc:
            decision.resolution_error = exc
            return decision
        decision.profile, decision.warnings = resolution.profile, resolution.warnings
        try:
            decision.launcher_plan = plan(resolution.profile, environ)
        except ProfileError as exc:
            findings += _errors(exc)
    profile = decision.profile
    if decision.launcher_plan is not None:
        decision.values = dict(decision.launcher_plan.desired)
    decision.group_values = {g: dict(e) for g, e in profile.groups}
    # The processes it starts: the hand-off as they get it (with the launch directory chosen, or a
    # name just as long), read back by each one's activation.
    from sglang_eagle_nccl.contract.handoff import MAX_WIRE_CHARS
    from sglang_eagle_nccl.decision.child_env import decide_child_environment, merged

    decision.handoff_limit = MAX_WIRE_CHARS
    root = os.path.abspath(inputs.audit_root) if inputs.audit_root else launch_root(profile)
    if inputs.opens_launch:
        from sglang_eagle_nccl.contract.launch_dir import launch_name

        decision.run_dir = os.path.join(root, launch_name())
    run_dir = decision.run_dir or os.path.join(root, LONGEST_LAUNCH_ID)
    try:
        handoff = decide_child_environment(profile, run_dir=run_dir, node_rank=inputs.node_rank, environ=environ,
                                           root_pid=inputs.root_pid, standalone=inputs.standalone)
    except ProfileError as exc:  # the hand-off itself cannot be written (too large to start a process with)
        findings += _errors(exc)
    else:
        decision.handoff = handoff
        decision.handoff_chars = len(handoff.updates[names.ENV_PROFILE] or "")
        findings += environment_refusals(merged(environ, handoff.updates))
    decision.refusals = _unique(findings)
    return decision
