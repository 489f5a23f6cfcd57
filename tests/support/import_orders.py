"""Import orders in a fresh interpreter of an enabled environment, and what each must end with.

The rule (issue 25, item 2): whatever order a program imports ``ctypes``, numpy, torch, SGLang, SGLang's modules
and the plugin's own CLI in -- or never imports some of them -- under spawn, fork and forkserver children, with
this installation's native library present or absent, every process ends with the profile applied and, where
the library is present and ``ctypes`` was loaded, NCCL's library configured exactly once; or refused through the
door table. Never an internal error. :func:`verdict` is that rule, written here from the outside (it reads only
the probe's report: tests/probes/import_order_probe.py).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().parents[1] / "probes" / "import_order_probe.py"
METHODS = ("spawn", "fork", "forkserver")
PLUGIN_PREFIXES = ("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL")
LIBRARY_FILE = "libsglang_eagle_nccl_nccl.so"


def orders(modules: tuple[str, ...], longest: int) -> list[tuple[str, ...]]:
    """Every order of every subset of ``modules`` up to ``longest`` long (the empty order: nothing imported)."""
    out: list[tuple[str, ...]] = []
    for size in range(longest + 1):
        out += list(itertools.permutations(modules, size))
    return out


def cases(modules: tuple[str, ...], longest: int) -> list[tuple[tuple[str, ...], bool, str]]:
    """(order, library present, start method): every order with and without the library; the start method
    turns with the case, so every method meets every kind of order without multiplying the cost by three."""
    out = []
    for i, order in enumerate(orders(modules, longest)):
        for present in (True, False):
            out.append((order, present, METHODS[(2 * i + present) % len(METHODS)]))
    return out


def case_id(case: tuple[tuple[str, ...], bool, str]) -> str:
    order, present, method = case
    return f"{'+'.join(order) or 'nothing'}-{'library' if present else 'no-library'}-{method}"


def installation_without_library(where: Path) -> Path:
    """A copy of the installed package without its native library (a ``CC=false`` install): a folder to put
    first on ``PYTHONPATH``, so the ``.pth`` line imports this copy."""
    import sglang_eagle_nccl

    source = Path(sglang_eagle_nccl.__file__).parent
    target = where / "sglang_eagle_nccl"
    if not target.exists():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(LIBRARY_FILE, "__pycache__", "*.so"))
    assert not (target / "native" / LIBRARY_FILE).exists()
    return where


def run(order: tuple[str, ...], method: str, env: dict[str, str], cwd: Path, timeout: float = 600) -> tuple[str, list[dict]]:
    done = subprocess.run(
        [sys.executable, "-W", "ignore", str(PROBE), ",".join(order), method],
        capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd,
    )
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and len(reports) == (1 if method == "none" else 2), (done.returncode, done.stderr[-4000:])
    return done.stderr, reports


def verdict(report: dict, *, present: bool, profile_env: dict[str, str]) -> list[str]:
    """What is wrong with one process's report (empty: it holds the rule)."""
    problems = []
    if report["error"] is not None:
        problems.append(f"import of {report['error']['module']} raised {report['error']['type']}: {report['error']['message']}")
    if report["refused"] is not None:
        problems.append(f"refused: {report['refused']}")
    if not report["active"]:
        problems.append("the profile is not active")
    expected_configurations = 1 if present and report["ctypes_loaded"] else 0
    if report["configured"] != expected_configurations:
        problems.append(f"the library was configured {report['configured']} time(s), not {expected_configurations}")
    if report["library_bound"] != bool(expected_configurations):
        problems.append(f"bound to the library: {report['library_bound']}")
    nccl = {k: v for k, v in report["environ"].items() if k.startswith(("NCCL_", "TORCH_NCCL_"))}
    plugin = nccl.pop("NCCL_ENV_PLUGIN", None)
    if nccl != profile_env:
        problems.append(f"NCCL environment {nccl} is not the profile's {profile_env}")
    if present != (plugin is not None and os.path.basename(plugin) == LIBRARY_FILE):
        problems.append(f"NCCL_ENV_PLUGIN={plugin!r} with the library {'present' if present else 'absent'}")
    return problems


def clean_environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(PLUGIN_PREFIXES)}
    env.pop("PYTHONPATH", None)
    env.update(extra)
    return env


def check(order: tuple[str, ...], present: bool, method: str, env: dict[str, str], cwd: Path,
          profile_env: dict[str, str]) -> None:
    stderr, reports = run(order, method, env, cwd)
    problems = {r["who"]: verdict(r, present=present, profile_env=profile_env) for r in reports}
    assert not any(problems.values()), (order, present, method, problems, stderr[-3000:])
    assert "internal error" not in stderr and "not applied" not in stderr, stderr[-3000:]
