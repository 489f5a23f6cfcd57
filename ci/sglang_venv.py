#!/usr/bin/env python3
"""Build one cached virtual environment per SGLang version for CPU testing.

    python3 ci/sglang_venv.py build 0.5.23 [0.5.4 ...] [--plugin-wheel PATH] [--force]
    python3 ci/sglang_venv.py path 0.5.23          # prints the venv directory
    python3 ci/sglang_venv.py freeze 0.5.23        # rewrites ci/sglang_venv_pins/sglang-0.5.23.txt
    python3 ci/sglang_venv.py versions             # the versions this script knows

A venv lives in ``<cache>/venvs/sglang-<ver>``, never in the repository; ``<cache>`` is
``$SGLANG_EAGLE_NCCL_CACHE``, else ``$XDG_CACHE_HOME/sglang-eagle-nccl``, else
``~/.cache/sglang-eagle-nccl`` (one rule for every CI script: ``ci/cache_root.py``). It holds the CPU build of torch, ``sglang==<ver>`` installed ``--no-deps``, the few
dependencies SGLang really needs to import and run an engine on CPU (see
``tests/support/sglang_cpu_standins.py`` says which and why), pytest, the plugin's runtime dependencies, and the CPU test stand-ins
(``tests/support/sglang_cpu_standins.py``) copied into site-packages with a ``.pth`` line that activates
them in every interpreter of the venv -- spawned SGLang children included -- when
``SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS=1`` is set in the environment.

Why ``--no-deps``: SGLang's own requirements pull a CUDA torch and GPU kernels (several GB). Every pip
call gets a constraints file that pins torch to the CPU build, so no dependency can drag CUDA torch in.

One shared base: torch, torchvision and triton (about 1.2 GB installed, a minute or two to unpack and
byte-compile each time) and the dependency set of the newest release (``BASE_VERSION``) are installed
once, into ``venvs/base``. Each version's venv sees the base through a ``.pth`` line
(``site.addsitedir``: after the venv's own site-packages, its ``.pth`` files processed too), so pip in
that venv finds torch and the rest already installed and adds only what the version pins differently
(transformers, openai, xgrammar ...: about 10 packages) and SGLang itself. A version's own copy of a
package shadows the base's. The 92 of ~100 pinned packages that every version shares are installed
once instead of four times.

Caching: a stamp file in the venv holds a hash of everything that decides its installed packages
(version, dependency lists, pins, this script's layout version, the Python version, the base's own
hash) and a hash of the stand-in source. When the package hash matches, ``build`` reuses the venv without touching the network;
if only the stand-ins changed it re-copies them (a second, not a rebuild).

Standard library only: this script has to run before any venv exists.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import progress  # noqa: E402 - ci/ is not a package; this script runs before any venv
from cache_root import cache_root  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
STANDINS_SOURCE = REPO_ROOT / "tests" / "support" / "sglang_cpu_standins.py"
PINS_DIR = Path(__file__).resolve().parent / "sglang_venv_pins"
STANDINS_ENV_VAR = "SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS"
STAMP_NAME = "sglang-venv.stamp.json"
# Bump when the way a venv is laid out changes (not its package lists: those are hashed anyway).
LAYOUT_VERSION = 3

TORCH_PIN = "torch==2.13.0+cpu"
# The PyPI torchvision wheel is built against CUDA torch; imported against CPU torch it only works
# because the stand-ins pre-seed ``torchvision._meta_registrations``. Pinned to the release that pairs
# with torch 2.13.
TORCHVISION_PIN = "torchvision==0.28.0"

# Installed in every venv, whatever the SGLang version: the test runner and the plugin's runtime deps
# (so ``--plugin-wheel`` can install the plugin with ``--no-deps`` and stay offline).
COMMON_DEPS = (
    "pytest",
    "click",
    "packaging",
    "wrapt",
    'tomli; python_version < "3.11"',
)

# .pth line: one environment lookup at interpreter start; the module is imported only when the gate is
# set, so ordinary interpreters of the venv (pip, pytest collection without the variable) stay untouched.
PTH_NAME = "sglang_cpu_standins.pth"
PTH_LINE = (
    f"import os; os.environ.get({STANDINS_ENV_VAR!r}) == '1' "
    "and __import__('sglang_cpu_standins').activate()\n"
)


@dataclasses.dataclass(frozen=True)
class VersionSpec:
    """What one SGLang version needs on a CPU-only machine."""

    version: str
    deps: tuple[str, ...]
    # Installed with --no-deps: their own requirements would pull triton / CUDA packages.
    no_deps: tuple[str, ...] = ()
    # Installed into this version's venv only, never into the shared base (whose hash, and so every
    # other version's venv, stays as it is), with their own pins file as constraints.
    extras: tuple[str, ...] = ()
    extras_pins: str | None = None


_DEPS_0_5_23 = (
    "numpy", "orjson", "psutil", "pybase64", "requests", "packaging", "pillow", "msgspec", "pydantic",
    "pyzmq", "tqdm", "ipython", "aiohttp", "uvloop", "transformers==5.19.0", "tokenizers==0.23.2",
    TORCHVISION_PIN, "dill", "apache-tvm-ffi==0.1.11", "sentencepiece==0.2.1", "compressed-tensors==0.18.0",
    "gguf", "openai==2.8.0", "partial_json_parser", "uvicorn", "fastapi", "setproctitle", "einops",
    # HTTP server (python -m sglang.launch_server)
    "jsonschema", "soundfile", "python-multipart",
)

_DEPS_0_5_4 = (
    "numpy", "orjson", "psutil", "pybase64", "requests", "packaging", "pillow", "msgspec", "pydantic",
    "pyzmq", "tqdm", "ipython", "aiohttp", "safetensors", "fastapi", "openai==1.99.1", "partial_json_parser",
    "transformers==4.57.1", TORCHVISION_PIN, "sentencepiece", "uvloop", "setproctitle", "dill",
    "compressed-tensors", "einops",
    # HTTP server (python -m sglang.launch_server)
    "uvicorn", "python-multipart", "jsonschema",
)

# Set B (0.5.5-0.5.10.post1). As 0.5.23 with SGLang's own transformers / openai pins; no
# apache-tvm-ffi (only its GPU JIT kernels import it). Needs the sgl_kernel stand-in (kvcacheio).
_DEPS_0_5_10 = (
    "numpy", "orjson", "psutil", "pybase64", "requests", "packaging", "pillow", "msgspec", "pydantic",
    "pyzmq", "tqdm", "ipython", "aiohttp", "uvloop", "transformers==5.3.0", TORCHVISION_PIN, "dill",
    "sentencepiece", "compressed-tensors", "gguf", "openai==2.6.1", "partial_json_parser", "uvicorn",
    "fastapi", "setproctitle", "einops",
    # HTTP server (python -m sglang.launch_server)
    "jsonschema", "soundfile", "python-multipart",
)

# Set C (0.5.11-0.5.20). As 0.5.23 with SGLang's own transformers / openai pins (its wheel is cp311:
# three compiled ``_core`` modules that import on CPU).
_DEPS_0_5_17 = (
    "numpy", "orjson", "psutil", "pybase64", "requests", "packaging", "pillow", "msgspec", "pydantic",
    "pyzmq", "tqdm", "ipython", "aiohttp", "uvloop", "transformers==5.12.1", TORCHVISION_PIN, "dill",
    "apache-tvm-ffi==0.1.11", "sentencepiece", "compressed-tensors", "gguf", "openai==2.6.1",
    "partial_json_parser", "uvicorn", "fastapi", "setproctitle", "einops",
    # HTTP server (python -m sglang.launch_server)
    "jsonschema", "soundfile", "python-multipart",
)

# 0.5.19: the first release resolving its arguments in ``resolve_once`` (the arg_groups pipeline); as
# 0.5.17 with its own tokenizers / compressed-tensors pins. Light: only the argument-resolution tests
# run here (tests/sglang/test_sglang_writes.py), so it needs what ``sglang.srt.server_args`` and
# ``sglang.srt.entrypoints.engine`` import.
_DEPS_0_5_19 = tuple(
    {"compressed-tensors": "compressed-tensors==0.18.0"}.get(d, d) for d in _DEPS_0_5_17
) + ("tokenizers==0.22.2",)

# The real triton wheel (imports on CPU; only kernel launches fail). SGLang imports it unguarded, and at
# TP > 1 it torch.compile()s its vocab-parallel embedding, which makes torch's inductor probe triton in
# depth -- more than any stub survives. --no-deps: it has no runtime deps on Python >= 3.10.
TRITON_PIN = "triton==3.9.0"

# Ray for the tests/ray tier (SGLang's Ray backend: RayEngine, launch_server --use-ray). SGLang 0.5.23's
# own extra asks for ``ray[default]>=2.55.1``; the core package of that range is what the backend
# imports (``ray``, ``ray.util.placement_group``, ``ray.cluster_utils`` for the tests) -- ``[default]``
# adds the dashboard and its ~20 packages, which nothing here starts. 2.60.0 is the release checked on
# CPU with Python 3.11 (tests/ray). Only the newest release's tier runs on Ray.
RAY_PIN = "ray==2.60.0"

VERSIONS: dict[str, VersionSpec] = {
    "0.5.23": VersionSpec("0.5.23", _DEPS_0_5_23, no_deps=(TRITON_PIN, "xgrammar==0.2.7"), extras=(RAY_PIN,),
                          extras_pins="ray.txt"),
    "0.5.19": VersionSpec("0.5.19", _DEPS_0_5_19, no_deps=(TRITON_PIN, "xgrammar==0.2.1")),
    "0.5.17": VersionSpec("0.5.17", _DEPS_0_5_17, no_deps=(TRITON_PIN, "xgrammar==0.2.1")),
    "0.5.10": VersionSpec("0.5.10", _DEPS_0_5_10, no_deps=(TRITON_PIN, "xgrammar==0.1.32")),
    "0.5.4": VersionSpec("0.5.4", _DEPS_0_5_4, no_deps=(TRITON_PIN, "xgrammar==0.1.25", "torchao==0.9.0")),
}


def _pinned(deps: tuple[str, ...], **pins: str) -> tuple[str, ...]:
    """``deps`` with a release's own pins of some packages (``transformers="4.57.1"``), added where absent."""
    wanted = {name.replace("_", "-"): f"{name.replace('_', '-')}=={ver}" for name, ver in pins.items()}
    out = [wanted.pop(d.split("==")[0], d) for d in deps]
    return tuple(out) + tuple(wanted.values())


# The releases the "ran" tier (ci/ran.py) runs beyond the five above: every boundary the patch manifests
# draw and the newest of each minor line. Each takes its patch set's dependency list with SGLang's own
# pins of the packages its import reads (transformers, openai, tokenizers; xgrammar and torchao --no-deps),
# from the wheel's Requires-Dist (0.4.x and 0.5.2: its "runtime-common" extra).
VERSIONS.update({
    "0.4.3": VersionSpec("0.4.3", _pinned(_DEPS_0_5_4, transformers="4.48.3"),
                         no_deps=(TRITON_PIN, "xgrammar==0.1.10", "torchao==0.9.0")),
    # Both sides of the bounds the proof's conditions drew (issue 26.2: 0.4.3.post4 / 0.4.4, 0.4.9.post6 /
    # 0.4.10, 0.4.10.post1, 0.5.4.post1 / 0.5.4.post2), each with its wheel's own pins.
    "0.4.3.post4": VersionSpec("0.4.3.post4", _pinned(_DEPS_0_5_4, transformers="4.48.3"),
                               no_deps=(TRITON_PIN, "xgrammar==0.1.14", "torchao==0.9.0")),
    "0.4.4": VersionSpec("0.4.4", _pinned(_DEPS_0_5_4, transformers="4.48.3"),
                         no_deps=(TRITON_PIN, "xgrammar==0.1.15", "torchao==0.9.0")),
    "0.4.9.post6": VersionSpec("0.4.9.post6", _pinned(_DEPS_0_5_4, transformers="4.54.0"),
                               no_deps=(TRITON_PIN, "xgrammar==0.1.21", "torchao==0.9.0")),
    "0.4.10": VersionSpec("0.4.10", _pinned(_DEPS_0_5_4, transformers="4.54.1"),
                          no_deps=(TRITON_PIN, "xgrammar==0.1.21", "torchao==0.9.0")),
    "0.4.10.post1": VersionSpec("0.4.10.post1", _pinned(_DEPS_0_5_4, transformers="4.54.1"),
                                no_deps=(TRITON_PIN, "xgrammar==0.1.21", "torchao==0.9.0")),
    "0.5.4.post1": VersionSpec("0.5.4.post1", _pinned(_DEPS_0_5_4, openai="1.99.1"),
                               no_deps=(TRITON_PIN, "xgrammar==0.1.25", "torchao==0.9.0")),
    "0.5.4.post2": VersionSpec("0.5.4.post2", _pinned(_DEPS_0_5_4, openai="2.6.1"),
                               no_deps=(TRITON_PIN, "xgrammar==0.1.25", "torchao==0.9.0")),
    "0.4.10.post2": VersionSpec("0.4.10.post2", _pinned(_DEPS_0_5_4, transformers="4.54.1"),
                                no_deps=(TRITON_PIN, "xgrammar==0.1.22", "torchao==0.9.0")),
    "0.5.2": VersionSpec("0.5.2", _pinned(_DEPS_0_5_4, transformers="4.56.1"),
                         no_deps=(TRITON_PIN, "xgrammar==0.1.24", "torchao==0.9.0")),
    "0.5.3": VersionSpec("0.5.3", _pinned(_DEPS_0_5_4, transformers="4.57.0"),
                         no_deps=(TRITON_PIN, "xgrammar==0.1.24", "torchao==0.9.0")),
    "0.5.3.post1": VersionSpec("0.5.3.post1", _pinned(_DEPS_0_5_4, transformers="4.57.0"),
                               no_deps=(TRITON_PIN, "xgrammar==0.1.25", "torchao==0.9.0")),
    "0.5.3.post2": VersionSpec("0.5.3.post2", _pinned(_DEPS_0_5_4, transformers="4.57.1"),
                               no_deps=(TRITON_PIN, "xgrammar==0.1.25", "torchao==0.9.0")),
    "0.5.4.post3": VersionSpec("0.5.4.post3", _pinned(_DEPS_0_5_4, openai="2.6.1"),
                               no_deps=(TRITON_PIN, "xgrammar==0.1.25", "torchao==0.9.0")),
    "0.5.5": VersionSpec("0.5.5", _pinned(_DEPS_0_5_10, transformers="4.57.1"),
                         no_deps=(TRITON_PIN, "xgrammar==0.1.25", "torchao==0.9.0")),
    "0.5.6.post2": VersionSpec("0.5.6.post2", _pinned(_DEPS_0_5_10, transformers="4.57.1"),
                               no_deps=(TRITON_PIN, "xgrammar==0.1.27", "torchao==0.9.0")),
    "0.5.7": VersionSpec("0.5.7", _pinned(_DEPS_0_5_10, transformers="4.57.1"),
                         no_deps=(TRITON_PIN, "xgrammar==0.1.27", "torchao==0.9.0")),
    # 0.5.8: the ledger's out-of-place all-reduce statement changes definition here (ci/ran.py boundary);
    # SGLang pins what 0.5.9 pins (transformers 4.57.1, xgrammar 0.1.27, torch 2.9.1).
    "0.5.8": VersionSpec("0.5.8", _pinned(_DEPS_0_5_10, transformers="4.57.1"),
                         no_deps=(TRITON_PIN, "xgrammar==0.1.27", "torchao==0.9.0")),
    "0.5.9": VersionSpec("0.5.9", _pinned(_DEPS_0_5_10, transformers="4.57.1"),
                         no_deps=(TRITON_PIN, "xgrammar==0.1.27", "torchao==0.9.0")),
    "0.5.10.post1": VersionSpec("0.5.10.post1", _DEPS_0_5_10, no_deps=(TRITON_PIN, "xgrammar==0.1.32")),
    "0.5.11": VersionSpec("0.5.11", _pinned(_DEPS_0_5_17, transformers="5.6.0"),
                          no_deps=(TRITON_PIN, "xgrammar==0.1.32")),
    "0.5.12.post1": VersionSpec("0.5.12.post1", _pinned(_DEPS_0_5_17, transformers="5.6.0"),
                                no_deps=(TRITON_PIN, "xgrammar==0.2.0")),
    "0.5.13": VersionSpec("0.5.13", _pinned(_DEPS_0_5_17, transformers="5.8.1"),
                          no_deps=(TRITON_PIN, "xgrammar==0.2.1")),
    "0.5.14": VersionSpec("0.5.14", _pinned(_DEPS_0_5_17, transformers="5.8.1"),
                          no_deps=(TRITON_PIN, "xgrammar==0.2.1")),
    "0.5.15": VersionSpec("0.5.15", _DEPS_0_5_17, no_deps=(TRITON_PIN, "xgrammar==0.2.1")),
    "0.5.18": VersionSpec("0.5.18", _DEPS_0_5_17, no_deps=(TRITON_PIN, "xgrammar==0.2.1")),
    "0.5.20": VersionSpec("0.5.20", _DEPS_0_5_19, no_deps=(TRITON_PIN, "xgrammar==0.2.1")),
    "0.5.21": VersionSpec("0.5.21", _DEPS_0_5_19, no_deps=(TRITON_PIN, "xgrammar==0.2.7")),
})


# The base venv holds the dependency set of this release (its pins decide the versions); it is the
# release the most test tiers run on, so its venv adds nothing but SGLang and xgrammar.
BASE_VERSION = "0.5.23"
BASE_NAME = "base"
BASE_PTH_NAME = "00-sglang-base.pth"


def base_spec() -> VersionSpec:
    """What the shared base holds: torch + the newest release's dependencies and triton, no SGLang."""
    newest = VERSIONS[BASE_VERSION]
    return VersionSpec(BASE_NAME, newest.deps, no_deps=(TRITON_PIN,))


def cache_dir() -> Path:
    """The CI scripts' one cache folder (ci/cache_root.py: SGLANG_EAGLE_NCCL_CACHE, else XDG_CACHE_HOME's, else ~/.cache's)."""
    return cache_root()


def venv_dir(version: str) -> Path:
    if version == BASE_NAME:
        return cache_dir() / "venvs" / BASE_NAME
    return cache_dir() / "venvs" / f"sglang-{version}"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def pins_file(version: str) -> Path:
    return PINS_DIR / f"sglang-{BASE_VERSION if version == BASE_NAME else version}.txt"


def _log(version: str, message: str) -> None:
    print(f"[sglang-venv {version}] {message}", flush=True)


def _run(cmd: list[str], *, version: str, what: str, env: dict[str, str] | None = None) -> None:
    """Run one step, saying how it progresses (ci/progress.py: pip's counts, a line at least every
    10 s) and how long it took; stop with the tail of its output if it fails."""
    code, lines, elapsed = progress.run(cmd, what=what, say=lambda text: _log(version, text), env=env)
    if code != 0:
        tail = "\n".join(lines[-40:])
        sys.exit(f"[sglang-venv {version}] FAILED ({elapsed:.1f}s): {what}\n$ {' '.join(cmd)}\n{tail}")
    _log(version, f"{what}: done in {elapsed:.1f}s")


def stamp_payload(spec: VersionSpec, python: str, base_hash: str | None = None) -> dict[str, object]:
    """Everything that decides a venv's content; its hash is the cache key. A version's venv also
    depends on the base it layers over (``base_hash``): a rebuilt base rebuilds it."""
    pins = pins_file(spec.version)
    payload: dict[str, object] = {
        "layout": LAYOUT_VERSION,
        "sglang": spec.version,
        "python": python,
        "torch": TORCH_PIN,
        "deps": list(COMMON_DEPS) + list(spec.deps),
        "no_deps": list(spec.no_deps),
        "pins": pins.read_text() if pins.is_file() else "",
    }
    if base_hash is not None:
        payload["base"] = base_hash
    if spec.extras:
        extras_pins = PINS_DIR / spec.extras_pins if spec.extras_pins else None
        payload["extras"] = list(spec.extras)
        payload["extras_pins"] = extras_pins.read_text() if extras_pins and extras_pins.is_file() else ""
    return payload


def standins_hash() -> str:
    """The stand-ins are re-copied (no rebuild) when only they change."""
    return hashlib.sha256((STANDINS_SOURCE.read_text() + PTH_LINE).encode()).hexdigest()


def stamp_hash(payload: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _read_stamp(venv: Path) -> dict[str, str]:
    try:
        return json.loads((venv / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return {}


def _write_stamp(venv: Path, payload: dict[str, object]) -> None:
    stamp = {"hash": stamp_hash(payload), "standins": standins_hash(), "payload": payload}
    (venv / STAMP_NAME).write_text(json.dumps(stamp, indent=1))


def _python_tag(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        check=True, capture_output=True, text=True,
    )
    return out.stdout.strip()


def _complete_wheel(path: Path) -> bool:
    """A wheel another process (ci/matrix.py's ``pip download``) may still be writing has no zip
    central directory yet: only a file that opens as a zip counts."""
    try:
        with zipfile.ZipFile(path) as zf:
            return bool(zf.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def sglang_wheel(version: str) -> Path:
    """The SGLang wheel from the shared wheel cache; downloaded (no deps) if missing.

    Downloaded into a private directory and renamed into the cache, so a concurrent reader (the
    compatibility matrix, another build) never sees half a file from here."""
    wheels = cache_dir() / "wheels"
    found = [Path(f) for f in sorted(glob.glob(str(wheels / f"sglang-{version}-*.whl")))]
    complete = [f for f in found if _complete_wheel(f)]
    if complete:
        return complete[-1]
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".download-{version}-", dir=wheels) as tmp:
        _run(
            [sys.executable, "-m", "pip", "download", "--no-deps", f"sglang=={version}", "-d", tmp],
            version=version, what=f"downloading the sglang {version} wheel",
        )
        got = sorted(Path(tmp).glob(f"sglang-{version}-*.whl"))
        if not got:
            sys.exit(f"[sglang-venv {version}] pip download left no sglang-{version}-*.whl in {tmp}")
        target = wheels / got[-1].name
        os.replace(got[-1], target)
    return target


def _site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    )
    return Path(out.stdout.strip())


def install_standins(venv: Path) -> None:
    """Copy the stand-in module into site-packages and add the gated .pth line."""
    site = _site_packages(venv_python(venv))
    shutil.copyfile(STANDINS_SOURCE, site / "sglang_cpu_standins.py")
    (site / PTH_NAME).write_text(PTH_LINE)


# Console scripts of packages that live in the base: pip writes them into the base's bin/, so a
# version's venv gets its own, bound to its own interpreter (``<venv>/bin/pytest`` keeps working).
BASE_SCRIPTS = {"pytest": "pytest:console_main", "py.test": "pytest:console_main"}


def _link_base_scripts(venv: Path) -> None:
    for name, target in BASE_SCRIPTS.items():
        script = venv / "bin" / name
        if script.exists():
            continue
        module, func = target.split(":")
        # The __main__ guard matters: a multiprocessing "spawn" child imports the parent's main
        # module, and without it every child of a test would start a pytest session of its own.
        script.write_text(f"#!{venv_python(venv)}\nimport sys\nfrom {module} import {func}\n\n"
                          f"if __name__ == \"__main__\":\n    sys.exit({func}())\n")
        script.chmod(0o755)


@contextlib.contextmanager
def _build_lock(venv: Path):
    """One builder per venv at a time (a test session and a person may both call ``build``)."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build(version: str, *, python: str, force: bool = False) -> Path:
    """Build the venv of ``version`` (and the shared base first) unless its stamp says it is current;
    returns its directory. ``force`` rebuilds this version's venv, not the base."""
    if version not in VERSIONS:
        sys.exit(f"unknown SGLang version {version!r}; known: {', '.join(VERSIONS)}")
    base = venv_dir(BASE_NAME)
    with _build_lock(base):
        base_hash = _build_locked(base_spec(), base, python=python, force=False)
    venv = venv_dir(version)
    with _build_lock(venv):
        _build_locked(VERSIONS[version], venv, python=python, force=force, base=base, base_hash=base_hash)
    return venv


def _build_locked(spec: VersionSpec, venv: Path, *, python: str, force: bool, base: Path | None = None,
                  base_hash: str | None = None) -> str:
    """Build one venv (the base when ``base`` is None); returns its stamp hash."""
    version = spec.version
    started = time.monotonic()
    payload = stamp_payload(spec, _python_tag(python), base_hash)
    wanted = stamp_hash(payload)
    stamp = _read_stamp(venv)
    if not force and venv_python(venv).exists() and stamp.get("hash") == wanted:
        if base is not None and stamp.get("standins") != standins_hash():
            install_standins(venv)
            _write_stamp(venv, payload)
            _log(version, "cached venv: re-copied the changed CPU stand-ins")
        _log(version, f"cached venv is up to date ({time.monotonic() - started:.1f}s): {venv}")
        return wanted

    if venv.exists():
        _log(version, f"removing stale venv {venv}")
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    _run([python, "-m", "venv", str(venv)], version=version, what="creating the venv")
    vpy = str(venv_python(venv))
    if base is not None:
        # Before any pip call: pip must see the base's packages as installed.
        base_site = _site_packages(venv_python(base))
        (_site_packages(venv_python(venv)) / BASE_PTH_NAME).write_text(f"import site; site.addsitedir({str(base_site)!r})\n")

    # Constraints: the CPU torch pin, then (if present) the frozen pins of a known-good set.
    constraints = venv / "constraints.txt"
    pins = pins_file(version)
    constraints.write_text(TORCH_PIN + "\n" + (pins.read_text() if pins.is_file() else ""))
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    # Not --quiet: ci/progress.py condenses pip's lines into counts (collected, downloaded, installing).
    pip = [vpy, "-m", "pip", "install", "-c", str(constraints)]

    deps = [TORCH_PIN, *COMMON_DEPS, *spec.deps]
    what = f"installing {len(deps)} dependencies" + (" (those the base lacks or pins differently)" if base else "")
    _run(pip + deps, version=version, what=what, env=env)
    if base is None:
        _run(pip + ["--no-deps", *spec.no_deps], version=version,
             what=f"installing {len(spec.no_deps)} more with --no-deps", env=env)
        # torchvision is not imported: against CPU torch it needs the stand-ins (sglang_cpu_standins.py).
        _run([vpy, "-c", "import torch, triton; assert torch.version.cuda is None, torch.__version__"],
             version=version, what="checking the base (CPU torch, triton)", env=dict(env, **{STANDINS_ENV_VAR: ""}))
        _write_stamp(venv, payload)
        _log(version, f"base venv ready in {time.monotonic() - started:.1f}s: {venv}")
        return wanted
    _run(pip + ["--no-deps", *spec.no_deps, str(sglang_wheel(version))], version=version,
         what=f"installing sglang=={version} and {len(spec.no_deps)} more with --no-deps", env=env)
    if spec.extras:
        extras_constraints = venv / "constraints-extras.txt"
        extras_pins = PINS_DIR / spec.extras_pins if spec.extras_pins else None
        extras_constraints.write_text(
            constraints.read_text() + "\n" + (extras_pins.read_text() if extras_pins and extras_pins.is_file() else ""))
        _run([vpy, "-m", "pip", "install", "-c", str(extras_constraints), *spec.extras], version=version,
             what=f"installing {', '.join(spec.extras)} (this version's venv only)", env=env)
    install_standins(venv)
    _log(version, f"installed the CPU stand-ins (active when {STANDINS_ENV_VAR}=1)")
    _link_base_scripts(venv)

    # A venv is only stamped once SGLang imports in it with the stand-ins on.
    check = (
        "import torch, sglang; from sglang.srt.server_args import ServerArgs; "
        "import sglang.srt.entrypoints.engine; "
        "assert torch.version.cuda is None, torch.__version__; "
        "print('torch', torch.__version__, 'sglang', sglang.__version__)"
    )
    _run([vpy, "-c", check], version=version, what="checking that sglang imports",
         env=dict(env, **{STANDINS_ENV_VAR: "1"}))
    _write_stamp(venv, payload)
    _log(version, f"venv ready in {time.monotonic() - started:.1f}s: {venv}")
    return wanted


PLUGIN_STAMP = "plugin-wheel.sha256"


def install_plugin_wheel(version: str, wheel: Path) -> None:
    """Reinstall the plugin from its built wheel (deps are already in the base venv: stays offline).

    Skipped when the venv already holds exactly this wheel (same sha256; the build is reproducible):
    a second ``./ci/quickstart``, or its test running inside the venv while another test process
    uses the same venv, never rewrites the plugin's files under a running process.
    """
    venv = venv_dir(version)
    vpy = str(venv_python(venv))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    stamp = venv / PLUGIN_STAMP
    installed = (_site_packages(venv_python(venv)) / "sglang_eagle_nccl" / "__init__.py").is_file()
    if installed and stamp.is_file() and stamp.read_text().strip() == digest:
        _log(version, f"plugin wheel {wheel.name} already installed (same sha256)")
        return
    _run(
        [vpy, "-m", "pip", "install", "--no-deps", "--force-reinstall", str(wheel)],
        version=version, what=f"installing plugin wheel {wheel.name}",
        env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"),
    )
    stamp.write_text(digest + "\n")


def freeze(version: str) -> Path:
    """Write the resolved versions of a built venv as pins (constraints) for later builds.

    The venv was built from exactly these versions, so its stamp is refreshed to the new payload
    (otherwise the next ``build`` would rebuild an identical venv).
    """
    venv = venv_dir(version)
    spec = VERSIONS[version]
    stamp = _read_stamp(venv)
    base_hash = _read_stamp(venv_dir(BASE_NAME)).get("hash")
    tag = _python_tag(str(venv_python(venv)))
    was_current = stamp.get("hash") == stamp_hash(stamp_payload(spec, tag, base_hash))
    out = subprocess.run(
        [str(venv_python(venv)), "-m", "pip", "freeze", "--exclude-editable"],
        check=True, capture_output=True, text=True,
    ).stdout
    skip = ("sglang==", "sglang-eagle-nccl", "torch==", "pip==", "setuptools==")
    lines = [ln for ln in out.splitlines() if ln and "==" in ln and not ln.lower().startswith(skip)]
    PINS_DIR.mkdir(exist_ok=True)
    target = pins_file(version)
    target.write_text(
        f"# Versions resolved for the sglang {version} CPU test venv (ci/sglang_venv.py freeze {version}).\n"
        "# Used as pip constraints: they fix versions, they do not add packages.\n"
        + "\n".join(sorted(lines, key=str.lower)) + "\n"
    )
    if was_current:
        _write_stamp(venv, stamp_payload(spec, tag, base_hash))
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="build (or reuse) the venvs of these SGLang versions, one after another")
    p_build.add_argument("version", nargs="+")
    p_build.add_argument("--plugin-wheel", type=Path, help="install this plugin wheel into the venv")
    p_build.add_argument("--force", action="store_true", help="rebuild even if the stamp matches")
    p_build.add_argument("--python", default=sys.executable, help="interpreter to base the venv on")
    p_path = sub.add_parser("path", help="print the venv directory of one SGLang version")
    p_path.add_argument("version")
    p_freeze = sub.add_parser("freeze", help="write the pins file from a built venv")
    p_freeze.add_argument("version")
    sub.add_parser("versions", help="list the supported SGLang versions")
    args = parser.parse_args(argv)

    if args.command == "path":
        print(venv_dir(args.version))
    elif args.command == "versions":
        print("\n".join(VERSIONS))
    elif args.command == "freeze":
        print(freeze(args.version))
    else:
        for version in args.version:
            build(version, python=args.python, force=args.force)
            if args.plugin_wheel is not None:
                install_plugin_wheel(version, args.plugin_wheel.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
