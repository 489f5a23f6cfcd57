"""Shared helpers for the benchmark scripts: the Python under test, timing child processes,
instruction counts (callgrind), medians, machine facts and load.

Every script measures the plugin of THIS checkout: ``--python`` names an interpreter that has it
installed; without it, :func:`plugin_python` builds this checkout's wheel and installs it into a
private venv layered on the CPU SGLang venv that ``ci/sglang_venv.py`` builds (that venv's own
copy of the plugin is shadowed, never modified).

Wall time on a shared 2-core machine moves with whatever else runs; the scripts prefer CPU time
of the measured process and, where a figure must be comparable across runs, instructions counted
by valgrind's callgrind (deterministic up to a few thousand instructions with
``PYTHONHASHSEED=0``). The load average is recorded with every result.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
PLUGIN_PREFIXES = ("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL")


# --- the interpreter under test --------------------------------------------------------------------


def sglang_venv_python(version: str = "0.5.23") -> Path:
    """Python of the CPU SGLang venv built by ci/sglang_venv.py (./ci/quickstart builds it)."""
    out = subprocess.run([sys.executable, str(REPO / "ci" / "sglang_venv.py"), "path", version], capture_output=True, text=True, check=True)
    python = Path(out.stdout.strip()) / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"no venv for SGLang {version}: run ./ci/quickstart (or python3 ci/sglang_venv.py build {version}) first")
    return python


def build_wheel(dest: Path) -> Path:
    """This checkout's wheel (native library included when a C compiler is there)."""
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", str(dest)], check=True,
                   stdout=subprocess.DEVNULL)
    return next(dest.glob("sglang_eagle_nccl-*.whl"))


def _purelib(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def layered_venv(base_python: Path, wheel: Path, dest: Path) -> Path:
    """A venv that sees ``base_python``'s packages (their .pth files run too) with ``wheel`` first on sys.path.

    ``site.addsitedir`` from a .pth of the new venv, not ``--system-site-packages``: the base is a
    venv itself, and a venv of a venv does not chain to it.
    """
    venv.EnvBuilder(with_pip=False).create(dest)
    python = dest / "bin" / "python"
    site = Path(_purelib(python))
    (site / "00-base-venv.pth").write_text(f"import site; site.addsitedir({_purelib(base_python)!r})\n")
    # --ignore-installed: the base venv may hold a plugin of the same version (ci/ installs one), which
    # pip would call "already satisfied" and skip -- the benchmark would then measure that older copy.
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed",
                    "--disable-pip-version-check", str(wheel)], check=True, stdout=subprocess.DEVNULL)
    found = subprocess.run([str(python), "-c", "import sglang_eagle_nccl; print(sglang_eagle_nccl.__file__)"],
                           check=True, capture_output=True, text=True, cwd=str(dest)).stdout.strip()
    if not found.startswith(str(site)):
        raise SystemExit(f"the layered venv imports the plugin from {found}, not from the wheel in {site}")
    return python


def plugin_python(python: str | None, sglang: str, workdir: Path) -> Path:
    """``--python`` as given, or a layered venv with this checkout's wheel over the SGLang venv."""
    if python:
        return Path(python)
    wheel = build_wheel(workdir / "dist")
    return layered_venv(sglang_venv_python(sglang), wheel, workdir / "plugin-venv")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(PLUGIN_PREFIXES)}
    env.update(extra)
    return env


def profile_env(python: Path, profile: str, **inputs: str) -> dict[str, str]:
    """What ``sglang-eagle-nccl env --profile P --format json`` prints (the gate, the signed
    serialised profile, the NCCL variables): the environment every SGLang child inherits."""
    out = subprocess.run(
        [str(python), "-m", "sglang_eagle_nccl", "env", "--profile", profile, "--format", "json"],
        env=clean_env(**inputs), capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)


# --- measuring ------------------------------------------------------------------------------------


def run_measured(cmd: Sequence[str], env: dict[str, str], cwd: str | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child and its descendants) of one run."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def time_command(cmd: Sequence[str], env: dict[str, str], cwd: str | None = None) -> float:
    return run_measured(cmd, env, cwd)[0]


def interleaved(
    variants: dict[str, tuple[Sequence[str], dict[str, str]]], repeat: int, warmup: int = 2, *, cpu: bool = False
) -> dict[str, list[float]]:
    """Run the variants alternately (A B A B ...) so drift on the machine hits both equally.

    ``cpu=True`` records the children's CPU time instead of wall time: less sensitive to other
    load on a small machine.
    """
    for _ in range(warmup):
        for cmd, env in variants.values():
            run_measured(cmd, env)
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeat):
        for name, (cmd, env) in variants.items():
            wall, used = run_measured(cmd, env)
            times[name].append(used if cpu else wall)
    return times


def have_valgrind() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def instructions(cmd: Sequence[str], env: dict[str, str]) -> int | None:
    """Instructions executed by ``cmd`` under valgrind's callgrind (deterministic), or None."""
    if shutil.which("valgrind") is None:
        return None
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        env={**env, "PYTHONHASHSEED": "0"}, capture_output=True, text=True, check=True,
    )
    m = re.search(r"Collected : (\d+)", out.stderr)
    return int(m.group(1)) if m else None


def _callgrind_control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True, text=True, timeout=120)


def _last_dump_total(out_dir: Path) -> int:
    dumps = sorted(out_dir.glob("cg.out.*"), key=lambda p: int(p.name.rsplit(".", 1)[1]) if p.name.rsplit(".", 1)[1].isdigit() else -1)
    text = dumps[-1].read_text(errors="replace")
    m = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
    if m is None:
        raise RuntimeError(f"no instruction total in {dumps[-1].name}")
    return int(m.group(1))


def run_windows(cmd: Sequence[str], env: dict[str, str], *, count_instructions: bool = False,
                cwd: str | None = None, timeout: float = 3600) -> dict[str, object]:
    """Run a child that uses ``_probe.window(name)``; returns its report, with ``<name>_instructions``.

    The child stops at the start and end of each window and waits for a line on stdin. With
    ``count_instructions`` it runs under callgrind with instrumentation off; the parent switches
    it on for each window only (``callgrind_control``), so the counts cover exactly the measured
    code, whatever the child imported before.
    """
    with tempfile.TemporaryDirectory(prefix="bench-cg-") as d:
        out_dir = Path(d)
        full = list(cmd)
        if count_instructions:
            full = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out_dir / 'cg.out'}", *full]
            env = {**env, "PYTHONHASHSEED": "0"}
        with open(out_dir / "stderr", "w+") as err:
            proc = subprocess.Popen(full, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=cwd)
            assert proc.stdin is not None and proc.stdout is not None
            counts: dict[str, object] = {}
            report: dict[str, object] | None = None
            deadline = time.monotonic() + timeout
            for line in proc.stdout:
                if time.monotonic() > deadline:
                    proc.kill()
                    raise TimeoutError(" ".join(cmd))
                parts = line.split()
                if not parts or not parts[0].startswith("BENCH-"):
                    continue
                if parts[0] == "BENCH-RESULT":
                    report = json.loads(line.split(" ", 1)[1])
                    continue
                what, name, pid = parts[0], parts[1], parts[2]
                if count_instructions and what == "BENCH-BEGIN":
                    _callgrind_control("--instr=on", pid)
                elif count_instructions and what == "BENCH-END":
                    _callgrind_control("--dump", pid)
                    _callgrind_control("--instr=off", pid)
                    counts[f"{name}_instructions"] = _last_dump_total(out_dir)
                proc.stdin.write("\n")
                proc.stdin.flush()
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            if proc.returncode != 0 or report is None:
                err.seek(0)
                raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err.read()[-4000:]}")
    return {**report, **counts}


# --- reporting ------------------------------------------------------------------------------------


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def git_state() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+uncommitted changes" if dirty else "")


def machine() -> dict[str, object]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }


def emit(result: dict[str, object], as_json: bool) -> None:
    print(json.dumps(result, indent=None if as_json else 1))
