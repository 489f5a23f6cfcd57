"""Would activation accept this profile here? The CLI asks activation itself.

``validate``, ``env`` and ``doctor`` run the functions every process of a launch runs when it
activates -- :func:`~sglang_eagle_nccl.decision.plan.plan` (the profile's checks, the
node rank, the native plugins: another NCCL env or tuner plugin in the environment, tuner rules
without the native library) and the hand-off encoder (the serialised profile against Linux's
limit on one environment entry) -- on the environment those processes would have, instead of a
second copy of the checks that could drift from them. Nothing is written: no key, no launch
directory, no environment variable.

Two environments matter for a launch started from a shell: the launcher's own (the shell's, where
the profile comes from flags or files) and its children's (the shell's plus what
:func:`~sglang_eagle_nccl.decision.child_env.child_environment` adds, read back through the
hand-off decoder the way a child reads it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from sglang_eagle_nccl.contract.findings import Finding, ProfileError
from sglang_eagle_nccl.decision.child_env import child_environment, merged
from sglang_eagle_nccl.decision.plan import plan
from sglang_eagle_nccl.profile.model import Profile

# The longest launch directory name new_launch_dir() makes (<date>-<time>-<pid>-<4 hex>, pid_max
# 2**22): the hand-off carries the launch directory, so its size is checked with one this long.
_LONGEST_LAUNCH_ID = "00000000-000000-4194304-0000"


def _refusals(decide: Callable[[], Any]) -> list[Finding]:
    try:
        decide()
    except ProfileError as exc:
        return [f for f in exc.findings if f.severity == "error"]
    return []


def _unique(findings: list[Finding]) -> list[Finding]:
    seen: set[str] = set()
    out = []
    for f in findings:
        if f.message() not in seen:
            seen.add(f.message())
            out.append(f)
    return out


def environment_problems(environ: Mapping[str, str]) -> list[Finding]:
    """Why a process started with exactly ``environ`` would refuse its profile ([] when it activates)."""
    return _refusals(lambda: plan(None, environ))


def launch_problems(profile: Profile, environ: Mapping[str, str], *, node_rank: int | None = None) -> list[Finding]:
    """Why a launch of ``profile`` started from ``environ`` would be refused, in its launcher or in
    any process it starts ([] when every one of them activates)."""
    findings = _refusals(lambda: plan(profile, environ))
    root = profile.policy.audit_dir or _default_root()
    run_dir = os.path.join(os.path.abspath(root), _LONGEST_LAUNCH_ID)
    try:
        updates = child_environment(profile, run_dir=run_dir, node_rank=node_rank, environ=environ,
                                    root_pid=str(os.getpid()), create_key=False)
    except ProfileError as exc:  # the hand-off itself cannot be written (too large to exec with)
        return _unique(findings + [f for f in exc.findings if f.severity == "error"])
    findings += environment_problems(merged(environ, updates))
    return _unique(findings)


def _default_root() -> str:
    from sglang_eagle_nccl.contract.launch_dir import default_root

    return str(default_root())
