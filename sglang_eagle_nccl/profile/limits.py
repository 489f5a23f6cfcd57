"""Will a child process with this environment and these arguments start at all?

Linux ``execve`` refuses (E2BIG, "Argument list too long") when

- one argument or one ``NAME=value`` environment entry, with its terminating NUL, is longer
  than ``MAX_ARG_STRLEN`` (131072 bytes, ``include/uapi/linux/binfmts.h``), or
- all argument and environment strings, with their NULs and one pointer each, exceed the
  argument space: ``sysconf(_SC_ARG_MAX)`` (a quarter of the stack limit), which the kernel
  additionally caps at three quarters of ``_STK_LIM`` (6 MiB; ``fs/exec.c``
  ``bprm_stack_limits``).

A serialised profile is one environment entry, so a large profile (many nodes, long values)
can break every process SGLang starts, far from the place that made it large. Launchers call
:func:`check_exec_size` before starting a child; it is pure apart from reading ``sysconf``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from sglang_eagle_nccl.contract.findings import Finding, error
from sglang_eagle_nccl.contract.names import MAX_ARG_STRLEN

# fs/exec.c: limit = min(_STK_LIM / 4 * 3, rlimit(STACK) / 4), never below ARG_MAX (128 KiB).
KERNEL_ARG_SPACE_CAP = 8 * 1024 * 1024 // 4 * 3
POINTER_BYTES = 8


def _size(text: str) -> int:
    # surrogatepass: os.environ holds undecodable bytes as surrogates; count every one as a byte
    # or more rather than fail on it.
    return len(text.encode("utf-8", "surrogatepass"))


def arg_space() -> int:
    """Bytes available to a child's arguments and environment on this machine."""
    try:
        value = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        value = -1
    if value <= 0:
        value = MAX_ARG_STRLEN  # POSIX minimum-ish fallback: the kernel never allows less
    return max(MAX_ARG_STRLEN, min(value, KERNEL_ARG_SPACE_CAP))


def check_exec_size(
    env: Mapping[str, str], argv: Sequence[str], *, arg_max: int | None = None
) -> list[Finding]:
    """Errors for a child started with environment ``env`` and arguments ``argv``; [] when it fits.

    Each entry over MAX_ARG_STRLEN is named (the variable, or the argument's position); a total
    over the argument space names the largest environment entries, the usual culprits.
    """
    limit = arg_space() if arg_max is None else arg_max
    findings: list[Finding] = []
    entries: list[tuple[int, str]] = []
    for name, value in env.items():
        size = _size(name) + 1 + _size(value) + 1
        entries.append((size, name))
        if size > MAX_ARG_STRLEN:
            findings.append(
                error(
                    name, value,
                    f"{name}=<value> takes {size} bytes with its NUL; Linux refuses to start a process with any "
                    f"single environment entry over MAX_ARG_STRLEN ({MAX_ARG_STRLEN} bytes): 'Argument list too long'",
                    f"shorten {name} to under {MAX_ARG_STRLEN - _size(name) - 2} bytes",
                )
            )
    arg_total = 0
    for index, arg in enumerate(argv):
        size = _size(arg) + 1
        arg_total += size
        if size > MAX_ARG_STRLEN:
            findings.append(
                error(
                    f"argument {index}", arg,
                    f"a command-line argument of {size} bytes is over MAX_ARG_STRLEN ({MAX_ARG_STRLEN} bytes); "
                    "Linux refuses to start the process: 'Argument list too long'",
                    "pass the data through a file instead of the command line",
                )
            )
    env_total = sum(size for size, _ in entries)
    total = env_total + arg_total + POINTER_BYTES * (max(len(argv), 1) + len(env) + 2)
    if total > limit:
        largest = sorted(entries, reverse=True)[:3]
        named = ", ".join(f"{n} ({s} bytes)" for s, n in largest) or "none"
        findings.append(
            error(
                "environment + arguments", f"{total} bytes",
                f"the child's arguments ({arg_total} bytes) and environment ({env_total} bytes) exceed the "
                f"{limit} bytes Linux allows for starting a process (sysconf ARG_MAX, capped by the kernel): "
                "'Argument list too long'",
                f"unset large variables you do not need in the child; the largest are: {named}",
            )
        )
    return findings
