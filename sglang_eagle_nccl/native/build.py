"""Compile the native NCCL plugins library (one C file, libc + pthread).

Used by the wheel build hook (``hatch_build.py`` at the repository root loads this file by path,
before the package is importable) and by the native test tier to build variants. Standard library
only, and no import of the package, for that reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE_DIR = HERE / "src"
LIBRARY_NAME = "libsglang_eagle_nccl_nccl.so"
BUILD_INFO_NAME = "build_info.json"
# -fvisibility=hidden: only the NCCL data symbols and the sen_* functions (marked in the source) are
# exported, so nothing else can clash with symbols of libnccl or of other plugins in the process.
CFLAGS = ("-std=c11", "-Wall", "-Wextra", "-O2", "-fPIC", "-fvisibility=hidden", "-pthread")
LDFLAGS = ("-shared", "-pthread")


@dataclass
class BuildInfo:
    """What ``build_info.json`` records next to the library: whether it was built, and if not why."""

    built: bool
    reason: str
    compiler: str
    flags: list[str] = field(default_factory=list)
    library: str = LIBRARY_NAME
    library_version: str = ""
    platform_tag: str = ""
    source_sha256: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


def source_files() -> list[Path]:
    """Every C file and header of the library, in a stable order."""
    return sorted([*SOURCE_DIR.glob("*.c"), *SOURCE_DIR.glob("*.h")])


def source_digest() -> str:
    """sha256 over the names and contents of the sources: what the library was built from."""
    h = hashlib.sha256()
    for src in source_files():
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    return h.hexdigest()


def library_version(package_version: str) -> str:
    """What ``sen_library_version()`` returns: the package version plus the source digest, so ranks
    running different builds of the same release are told apart in the cross-rank check."""
    return f"{package_version}+src.{source_digest()[:12]}"


def platform_tag() -> str:
    """``linux_x86_64`` and the like: the library is plain C, so it depends on the platform only."""
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def compiler_command(environ: Mapping[str, str] | None = None) -> list[str]:
    """``$CC`` split like a shell would (``ccache gcc`` works), else ``cc``, else ``gcc``."""
    env = os.environ if environ is None else environ
    cc = env.get("CC", "").strip()
    if cc:
        return shlex.split(cc)
    for name in ("cc", "gcc"):
        if shutil.which(name):
            return [name]
    return ["cc"]


def compile_library(
    output: Path,
    *,
    package_version: str = "0",
    defines: Sequence[str] = (),
    extra_flags: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    timeout: float = 120.0,
) -> BuildInfo:
    """Compile the library to ``output``. Never raises for a missing or failing compiler: the
    result says ``built=False`` and why, so a wheel can still be built without native plugins."""
    cc = compiler_command(environ)
    version = library_version(package_version)
    flags = [*CFLAGS, *extra_flags, *(f"-D{d}" for d in defines), f'-DSEN_LIBRARY_VERSION="{version}"']
    info = BuildInfo(
        built=False, reason="", compiler=shlex.join(cc), flags=flags, library_version=version,
        platform_tag=platform_tag(), source_sha256=source_digest(),
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    sources = [str(s) for s in source_files() if s.suffix == ".c"]
    cmd = [*cc, *flags, *LDFLAGS, "-o", str(tmp), *sources]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(environ) if environ else None)
    except FileNotFoundError:
        info.reason = f"C compiler {info.compiler!r} not found (set CC to a working compiler, e.g. CC=gcc)"
        return info
    except subprocess.TimeoutExpired:
        info.reason = f"C compiler {info.compiler!r} did not finish within {timeout:.0f} s"
        return info
    if proc.returncode != 0 or not tmp.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        info.reason = f"C compiler {info.compiler!r} failed (exit {proc.returncode})" + (
            ": " + " | ".join(tail) if tail else ""
        )
        tmp.unlink(missing_ok=True)
        return info
    os.replace(tmp, output)
    info.built = True
    info.reason = "compiled" if not proc.stderr.strip() else f"compiled with warnings: {proc.stderr.strip()[:500]}"
    return info
