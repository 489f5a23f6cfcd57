"""The one rule every writer obeys: only ``NCCL_*`` and ``TORCH_NCCL_*`` variables.

Kept free of imports: it runs at interpreter start in every process of an enabled launch.
"""

from __future__ import annotations

ALLOWED_PREFIXES = ("NCCL_", "TORCH_NCCL_")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def is_allowed_name(name: str) -> bool:
    """``NCCL_*`` / ``TORCH_NCCL_*`` made of upper-case letters, digits and underscores."""
    return (
        isinstance(name, str)
        and name.startswith(ALLOWED_PREFIXES)
        and len(name) > 5
        and _NAME_CHARS.issuperset(name)
    )


def nccl_snapshot(environ: object = None) -> dict[str, str]:
    """Only the NCCL_* / TORCH_NCCL_* part of an environment (never anything else)."""
    import os

    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if k.startswith(ALLOWED_PREFIXES)}  # type: ignore[attr-defined]


def write_env(desired: dict[str, str], environ: object = None) -> list[tuple[str, str | None, str]]:
    """The plugin's only environment writer: refuses any non-NCCL name before writing anything.

    Returns ``(name, before, after)`` for every desired variable, in name order.
    """
    import os

    env = os.environ if environ is None else environ
    bad = sorted(k for k in desired if not is_allowed_name(k))
    if bad:  # unreachable through validated profiles; kept so no caller can bypass it
        raise ValueError(f"refusing to set non-NCCL variables: {', '.join(bad)}")
    out = []
    for name in sorted(desired):
        before = env.get(name)  # type: ignore[attr-defined]
        after = desired[name]
        if before != after:
            env[name] = after  # type: ignore[index]
        out.append((name, before, after))
    return out
