"""What a Ray worker holds for a ``runtime_env`` ``env_vars`` value: a reference written for the tests from
what Ray 2.60 does when it starts a worker (``ray._private.utils.update_envs``, called by
``RuntimeEnvContext.exec_worker``): Python's ``os.path.expandvars`` over the worker's environment, then
every ``${NAME}`` of upper-case letters, digits and ``_`` still there deleted. The Ray tier checks this
reference against a real worker."""

from __future__ import annotations

import os
import re
from unittest import mock


def worker_value(value: str, worker_environ: dict[str, str]) -> str:
    with mock.patch.object(os, "environ", worker_environ):  # expandvars reads os.environ when called
        expanded = os.path.expandvars(value)
    return re.sub(r"\$\{[A-Z0-9_]+\}", "", expanded)


def references(value: str) -> dict[str, str]:
    """A worker environment that defines every name ``value`` could refer to, each as something else."""
    names = re.findall(r"\$(\w+)", value, re.ASCII) + re.findall(r"\$\{([^}]*)\}", value)
    return {n: "<" + n + ">" for n in names}


def rewritten(value: str) -> bool:
    """Whether some worker environment gives the worker another value."""
    return any(worker_value(value, env) != value for env in ({}, references(value)))
