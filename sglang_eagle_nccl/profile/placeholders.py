"""The one placeholder a profile may use: ``{audit_dir}``, the launch's audit directory.

A profile is data: nothing in it is executed, and no value is expanded except this one.
``{audit_dir}`` may appear only as the leading path component of ``NCCL_DEBUG_FILE``
(``NCCL_DEBUG_FILE = "{audit_dir}/nccl.%h.%p.log"``), so NCCL's debug output of a launch lands
next to its audit records, in the launch's private 0700 directory, instead of a shared
temporary directory where another user could pre-create the file or plant a symlink. Where
it may appear is checked with every value (:func:`sglang_eagle_nccl.knowledge.nccl.parsing.check_placeholder_use`);
the profile keeps the placeholder, and each process expands it when it writes the variable into
its environment, with the launch directory it belongs to.

Without a launch directory there is nothing safe to expand it to (falling back to a shared
temporary directory is what the placeholder exists to avoid), so :func:`expand_placeholders`
raises a :class:`~sglang_eagle_nccl.contract.findings.ProfileError` naming the variable: set
``NCCL_DEBUG_FILE`` to an absolute path instead, or run inside a launch.
"""

from __future__ import annotations

import os

from sglang_eagle_nccl.contract.findings import ProfileError, error
from sglang_eagle_nccl.contract.names import ENV_PROFILE, ENV_ROOT_PID
from sglang_eagle_nccl.knowledge.nccl.parsing import (
    AUDIT_DIR_PLACEHOLDER,
    PLACEHOLDER_VARIABLES,
    check_placeholder_use,
    placeholder_prefix_rest,
)

__all__ = ["AUDIT_DIR_PLACEHOLDER", "PLACEHOLDER_VARIABLES", "expand_placeholders", "has_placeholder"]


def has_placeholder(value: str) -> bool:
    """True when ``value`` needs :func:`expand_placeholders` before it goes into an environment."""
    return AUDIT_DIR_PLACEHOLDER in value


def expand_placeholders(name: str, value: str, run_dir: str | None) -> str:
    """``value`` with ``{audit_dir}`` replaced by ``run_dir``; values without it are returned as is.

    ``run_dir`` is the launch's audit directory (absolute). A ``%`` in it is doubled, because NCCL
    expands ``%h``/``%p``/``%%`` in the whole NCCL_DEBUG_FILE string. Raises ProfileError when the
    placeholder is misplaced or there is no usable launch directory; never touches os.environ.
    """
    if not has_placeholder(value):
        return value
    misplaced = check_placeholder_use(name, value)
    if misplaced:
        raise ProfileError(misplaced)
    rest = placeholder_prefix_rest(value)
    assert rest is not None  # guaranteed by check_placeholder_use
    if not run_dir:
        raise ProfileError([
            error(
                name, value,
                f"{AUDIT_DIR_PLACEHOLDER} stands for the launch's audit directory, and this process has none "
                "(no launch, or its audit directory could not be created)",
                f"start it through a launch (sglang-eagle-nccl launch, SGLang's launcher), or set {name} to an "
                "absolute path in a directory only you can write, e.g. <your log dir>/nccl.%h.%p.log",
            )
        ])
    if not os.path.isabs(run_dir) or "\x00" in run_dir or "\n" in run_dir:
        raise ProfileError([
            error(
                name, value,
                f"the launch directory {run_dir!r} is not an absolute path, so {AUDIT_DIR_PLACEHOLDER} cannot "
                "be expanded safely",
                f"let the plugin create the launch directory: it travels in {ENV_PROFILE}, which only a launcher "
                f"writes (unset {ENV_PROFILE} {ENV_ROOT_PID} and start the process through a launch)",
            )
        ])
    return os.path.join(run_dir.replace("%", "%%"), rest)
