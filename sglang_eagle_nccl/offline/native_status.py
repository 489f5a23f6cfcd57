"""Whether the native NCCL plugins (env + tuner, native/) can be used here, and why not."""

from __future__ import annotations

from typing import Any


def native_status() -> dict[str, Any]:
    """Availability of the installed library, for ``doctor``.

    ``available`` is True only when the library also loads and answers (not just exists);
    ``reason`` says why not, naming the fix. Loading it is cheap and has no side effect: NCCL
    is not involved until a process sets NCCL_ENV_PLUGIN / NCCL_TUNER_PLUGIN.
    """
    from sglang_eagle_nccl.native import library

    ok, reason = library.status()
    info = library.build_info() or {}
    report: dict[str, Any] = {
        "available": False,
        "reason": reason,
        "library": str(library.library_path()),
        "library_version": None,
        "exported": None,
        "built": info.get("built"),
        "compiler": info.get("compiler"),
        "build_reason": info.get("reason"),
    }
    if not ok:
        return report
    try:
        lib = library.load()
    except library.NativeUnavailable as exc:
        report["reason"] = str(exc)
        return report
    report.update(
        available=True,
        reason="loaded",
        library_version=lib.library_version(),
        exported=lib.exported_abis(),
    )
    return report


def format_native_status(status: dict[str, Any]) -> list[str]:
    """Text lines for doctor's report."""
    if not status["available"]:
        return ["Native NCCL plugins (env + tuner): unavailable", f"  ✗ {status['reason']}"]
    exported = status["exported"] or {}
    env = ", ".join(f"v{v}" for v in exported.get("env", []))
    tuner = ", ".join(f"v{v}" for v in exported.get("tuner", []))
    return [
        f"Native NCCL plugins (env + tuner): available, version {status['library_version']}",
        f"  library  {status['library']}",
        f"  exports  ncclEnvPlugin {env or '-'} (NCCL >= 2.28.7); ncclTunerPlugin {tuner or '-'} (NCCL >= 2.21)",
    ]
