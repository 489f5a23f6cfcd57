#!/usr/bin/env python3
"""GPU verification: what NCCL itself says each process read, against the plugin's audit.

    ci/gpu-check [--python PY | --wheels DIR [--python BASE]] [--out DIR] [--profile P]
                 [--nccl-env KEY=VALUE ...] [--skip-engine] [--check-only] [--work-dir DIR]
    ci/gpu-check --cpu-rehearsal [--python PY] [--nccl-lib PATH/libnccl.so.2] ...

On one GPU, with NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING and one NCCL_DEBUG_FILE per
process added to the profile (default ``pcie-8gpu``):

  (a) ``sglang-eagle-nccl preflight --tp 1 --backend nccl``: the installed SGLang's own distributed
      init with the plugin, one all-reduce per group, so every group gets a real 1-rank NCCL
      communicator;
  (b) a real SGLang engine (Engine API, plugin enabled by environment): tiny dummy-weight Llama
      target + EAGLE-3 draft from local configs, ``load_format=dummy``, ``skip_tokenizer_init``,
      CUDA graphs on; a few requests, then shutdown;
  (c) every NCCL debug file parsed; per process, each profile variable NCCL reports must equal the
      profile and the plugin's audit of that pid (``sglang-eagle-nccl audit RUN --nccl-debug-dir
      DIR --json``), and NCCL must have run only in audited processes.

``--cpu-rehearsal`` runs the same steps without CUDA: (a) with gloo, (b) on CPU with the test
stand-ins (SGLang >= 0.5.23 built by ci/sglang_venv.py), and for (c), because gloo loads no NCCL, a
process with the plugin enabled that loads the real libnccl.so.2 of the nvidia-nccl-cu13 wheel and
calls ncclGetUniqueId (tests/probes/nccl_real_probe.py): NCCL then logs NCCL_SOCKET_IFNAME, which
goes through the same audit and report code.

The report (gpu-check.json, gpu-check.txt, gpu-check-logs.tar.gz) goes to --out, default $OUT when
set (the device tool brings back what is written there), else ./gpu-check-report.
Exit status: 0 everything agreed; 1 a disagreement or a failed check; 2 something needed is missing
or the arguments are wrong (what is missing and how to fix it is printed and in the report).

This file is the driver: standard library only, so any python3 >= 3.10 runs it. Everything that
needs torch, SGLang or the plugin runs in child processes of the checked interpreter (--python, or
the overlay venv --wheels builds), including this file's own ``--child-engine`` mode.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as _dt
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SUPPORT_DIR = REPO_ROOT / "tests" / "support"
PROBE = REPO_ROOT / "tests" / "probes" / "nccl_real_probe.py"

DEFAULT_PROFILE = "pcie-8gpu"
DEBUG_SUBSYS = "INIT,ENV,TUNING"
# The budget is 8 minutes end to end; steps get what is left of it.
DEFAULT_BUDGET_S = 470.0
REPORT_JSON = "gpu-check.json"
REPORT_TEXT = "gpu-check.txt"
REPORT_LOGS = "gpu-check-logs.tar.gz"
# The device tool brings back files of at most 16 MiB; NCCL INFO files of a run this small are KBs.
MAX_LOG_BYTES = 4 * 2**20

RESULT_MARK = "GPU_CHECK_RESULT "
FACTS_MARK = "GPU_CHECK_FACTS "
PLUGIN_DIST = "sglang-eagle-nccl"
# First SGLang release whose EAGLE path runs on CPU with the stand-ins (tests/support/sglang_cpu_run.py).
FIRST_CPU_EAGLE = (0, 5, 23)

PROMPTS = ([1, 17, 33, 71, 105, 260], [1, 5, 9, 200, 300, 411, 7])
# Engine arguments renamed between SGLang releases: both spellings are passed and the one a release
# lacks is dropped without a note.
RENAMED_ARGS = frozenset({"cuda_graph_max_bs", "cuda_graph_max_bs_decode"})

# Modules whose absence stops a step, and the distribution that provides each (pip names differ).
MODULE_DISTRIBUTIONS = {
    "sgl_kernel": "sglang-kernel (named sgl-kernel up to SGLang 0.5.7)",
    "flashinfer": "flashinfer-python",
    "zmq": "pyzmq",
    "tvm_ffi": "apache-tvm-ffi",
    "partial_json_parser": "partial-json-parser",
    "compressed_tensors": "compressed-tensors",
    "IPython": "ipython",
    "torch_memory_saver": "torch-memory-saver",
    "sglang_eagle_nccl": PLUGIN_DIST,
    "google.protobuf": "protobuf",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "cuda": "cuda-python",
}
PLUGIN_HINT = (
    "build its wheel where pip works (python3 -m pip wheel --no-deps <repo> -w .whl) and pass "
    "--wheels .whl, or pip install it into the checked Python"
)

# Lines in an engine log that mean the plugin itself broke in some SGLang process.
PLUGIN_FAILURE_PATTERNS = (
    re.compile(r"Failed to execute general plugin: sglang_eagle_nccl"),
    re.compile(r"\[sglang-eagle-nccl\] internal error.*"),
    re.compile(r"\[sglang-eagle-nccl\] WARNING: .*"),
)


# ------------------------------------------------------------------------------------------------
# small helpers
# ------------------------------------------------------------------------------------------------


class Progress:
    """Prints one line per event with the time since start: the run is watched live on a device
    whose time is counted, so every step says when it started and how long it took."""

    def __init__(self, stream: Any = None) -> None:
        self.start = time.monotonic()
        self.stream = stream or sys.stdout

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def __call__(self, message: str) -> None:
        print(f"[gpu-check {self.elapsed():6.1f}s] {message}", file=self.stream, flush=True)


@dataclasses.dataclass
class Options:
    mode: str  # "gpu" or "cpu-rehearsal"
    python: str | None
    wheels: Path | None
    out: Path
    work: Path
    profile: str
    nccl_env: list[str]
    skip_engine: bool
    check_only: bool
    nccl_lib: Path | None
    budget_s: float

    @property
    def rehearsal(self) -> bool:
        return self.mode == "cpu-rehearsal"


@dataclasses.dataclass
class Step:
    """One step of the check and everything the report says about it."""

    name: str
    title: str
    status: str = "pending"  # ok / fail / missing / skipped
    wall_s: float = 0.0
    problems: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    def finish(self, started: float) -> Step:
        self.wall_s = round(time.monotonic() - started, 1)
        if self.status == "pending":
            self.status = "fail" if self.problems else "ok"
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def default_out_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env["OUT"]) if env.get("OUT") else Path.cwd() / "gpu-check-report"


def release(version: str | None) -> tuple[int, ...]:
    """(0, 5, 23) for "0.5.23", "0.5.23.post1", "0.5.24rc1", "0.5.23+local"; () for None."""
    match = re.match(r"\d+(?:\.\d+)*", version or "")
    return tuple(int(p) for p in match.group(0).split(".")) if match else ()


def scrubbed_environment(base: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The driver's environment without NCCL_*, TORCH_NCCL_* and the plugin's own variables.

    The check must compare NCCL's reports with the profile alone: a variable inherited from the
    shell or the machine image would show up as a disagreement nobody asked for. The removed names
    go into the report."""
    env = dict(os.environ if base is None else base)
    removed = sorted(k for k in env if k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL")))
    for key in removed:
        del env[key]
    env["PYTHONUNBUFFERED"] = "1"
    return env, removed


def debug_env(nccl_dir: Path) -> list[str]:
    """The NCCL debug settings added to the profile: one file per host and pid (NCCL opens the file
    with mode "w", so a shared name would let processes truncate each other's output)."""
    return [
        "NCCL_DEBUG=INFO",
        f"NCCL_DEBUG_SUBSYS={DEBUG_SUBSYS}",
        f"NCCL_DEBUG_FILE={nccl_dir}/nccl.%h.%p.log",
    ]


def last_json_line(text: str, mark: str = "") -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if mark:
            if line.startswith(mark):
                return json.loads(line[len(mark):])
        elif line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def last_exception_line(text: str) -> str | None:
    """The final ``SomeError: message`` line of the last traceback in ``text``."""
    found = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last):"):
            for follow in lines[i + 1:]:
                if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*", follow):
                    found = follow.strip()
                    break
    return found


def missing_module_hint(message: str) -> str | None:
    """"No module named 'zmq'" -> the distribution to carry or install."""
    match = re.search(r"No module named '([\w.]+)'", message)
    if not match:
        return None
    module = match.group(1)
    for key, dist in MODULE_DISTRIBUTIONS.items():
        if module == key or module.startswith(key + "."):
            return dist
    return module.split(".")[0].replace("_", "-")


# ------------------------------------------------------------------------------------------------
# processes
# ------------------------------------------------------------------------------------------------


def session_members(sid: int) -> list[tuple[int, str]]:
    """(pid, command) of every live process in session ``sid`` (zombies excluded)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) != sid or fields[0] == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            members.append((int(entry.name), cmd))
        except (OSError, ValueError, IndexError):
            continue
    return members


def reap_session(sid: int, grace: float = 10.0) -> list[str]:
    """Wait up to ``grace`` s for what the step started to exit, then kill what is left (by pid, only
    processes of the session this driver created for the step). Returns the leftovers' commands."""
    deadline = time.monotonic() + grace
    left = session_members(sid)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = session_members(sid)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return [cmd[:160] for _, cmd in left]


@dataclasses.dataclass
class Ran:
    rc: int | None  # None: killed at the timeout
    output: str
    wall_s: float
    leftovers: list[str]


def run_logged(cmd: Sequence[str], *, env: Mapping[str, str], log: Path, timeout: float,
               stdout_to: Path | None = None) -> Ran:
    """Run ``cmd`` in its own session with stdout+stderr into ``log`` (stdout into ``stdout_to``
    instead, when given: a JSON document must not be interleaved with SGLang's warnings); kill the
    whole session at the timeout (SGLang leaves schedulers behind when its launcher is killed alone)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log.open("w"))
        out.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
        out.flush()
        stdout = stack.enter_context(stdout_to.open("w")) if stdout_to else out
        proc = subprocess.Popen(list(cmd), stdout=stdout, stderr=out, env=dict(env), start_new_session=True)
        rc: int | None
        try:
            rc = proc.wait(timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired:
            rc = None
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
    wall = time.monotonic() - started
    leftovers = reap_session(proc.pid)
    return Ran(rc, log.read_text(errors="replace"), wall, leftovers)


def run_json(cmd: Sequence[str], *, env: Mapping[str, str], timeout: float,
             log: Path | None = None) -> tuple[int | None, dict[str, Any] | list[Any] | None, str]:
    """Run a command that prints one JSON document on stdout; (rc, parsed or None, stderr)."""
    try:
        proc = subprocess.run(list(cmd), env=dict(env), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return None, None, f"timed out after {timeout:.0f}s: {exc}"
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("$ " + " ".join(shlex.quote(c) for c in cmd) + f"\n[rc {proc.returncode}]\n"
                       + proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    try:
        data = json.loads(proc.stdout) if proc.stdout.strip() else None
    except ValueError:
        data = None
    return proc.returncode, data, proc.stderr


# ------------------------------------------------------------------------------------------------
# the Python that runs the checks
# ------------------------------------------------------------------------------------------------


def resolve_python(name: str | None) -> str:
    candidate = name or "python3"
    found = shutil.which(candidate) if os.sep not in candidate else candidate
    if not found or not os.access(found, os.X_OK):
        raise SystemExit(f"gpu-check: Python interpreter {candidate!r} not found or not executable; "
                         "pass --python /path/to/python (the one with torch and SGLang)")
    # No resolve(): a venv's bin/python is a symlink to the base interpreter, and following it would
    # leave the venv.
    return str(Path(found).absolute())


def rehearsal_default_python() -> str | None:
    """The CPU test venv of ci/sglang_venv.py (newest SGLang with CPU EAGLE), if it was built."""
    sys.path.insert(0, str(REPO_ROOT / "ci"))
    try:
        import sglang_venv  # type: ignore[import-not-found]
    except Exception:  # noqa: BLE001 - a missing helper only means no default
        return None
    finally:
        sys.path.pop(0)
    for version in sorted(sglang_venv.VERSIONS, key=release, reverse=True):
        python = sglang_venv.venv_dir(version) / "bin" / "python"
        if release(version) >= FIRST_CPU_EAGLE and python.exists():
            return str(python)
    return None


def build_overlay(base_python: str, wheels: Path, venv_dir: Path, env: Mapping[str, str],
                  say: Callable[[str], None]) -> str:
    """A venv whose own site-packages holds the carried wheels, layered over ``base_python``'s
    packages (torch etc. of the machine image).

    Why not ``pip install --target DIR`` + PYTHONPATH: site-packages ``.pth`` files are processed
    only in site directories, never in PYTHONPATH entries, so the plugin's interpreter-start
    bootstrap would not run in the processes SGLang spawns. Why not ``--system-site-packages``: when
    ``base_python`` is itself a venv (the H200 image's python3 is /opt/torch/.venv/bin/python3), the
    new venv would see the base interpreter's packages, not that venv's. So the base's site
    directories are added by a ``.pth`` that runs first, behind the venv's own directory."""
    wheel_files = sorted(wheels.glob("*.whl"))
    if not wheel_files:
        raise SystemExit(f"gpu-check: no *.whl files in {wheels}; put the plugin wheel and every missing "
                         "package there (docs/gpu-check.md lists them)")
    code = ("import json, site, sys; print(json.dumps({'site': site.getsitepackages() + "
            "([site.getusersitepackages()] if site.ENABLE_USER_SITE else []), "
            "'ver': '%d.%d' % sys.version_info[:2]}))")
    rc, info, err = run_json([base_python, "-c", code], env=env, timeout=60)
    if rc != 0 or not isinstance(info, dict):
        raise SystemExit(f"gpu-check: cannot query {base_python}: {err.strip()[-500:]}")
    subprocess.run([base_python, "-m", "venv", "--without-pip", "--clear", str(venv_dir)], check=True, env=dict(env))
    site_packages = venv_dir / "lib" / f"python{info['ver']}" / "site-packages"
    lines = [f"import site; site.addsitedir({d!r})\n" for d in info["site"] if Path(d).is_dir()]
    (site_packages / "00-gpu-check-base.pth").write_text("".join(lines))
    python = str(venv_dir / "bin" / "python")
    # The base's own pip installs into the overlay's site-packages: --target never uninstalls the
    # base's copy of a package (outside this venv, read-only on some images), and the overlay needs
    # no pip of its own. --no-deps --no-index: nothing is fetched, ever.
    cmd = [base_python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target",
           str(site_packages), "--no-compile", "--disable-pip-version-check", "--no-warn-script-location",
           *map(str, wheel_files)]
    proc = subprocess.run(cmd, env=dict(env), capture_output=True, text=True)
    if proc.returncode != 0:
        output = (proc.stdout + proc.stderr)[-2000:]
        raise SystemExit(f"gpu-check: installing the wheels from {wheels} failed (two versions of one package "
                         f"in the folder also stop pip):\n{output}")
    say(f"overlay venv {venv_dir}: {len(wheel_files)} wheel(s) over {base_python}")
    return python


# Runs inside the checked interpreter; prints one FACTS line. Each import is tried on its own so the
# report names the first missing module of every step, not just the first of all.
INSPECT_SOURCE = r"""
import importlib, importlib.metadata as md, json, os, site, sys
facts = {"python": sys.executable, "python_version": sys.version.split()[0], "dists": {}, "imports": {}}
for name in ("torch", "sglang", "sglang-eagle-nccl", "sglang-kernel", "sgl-kernel", "flashinfer-python",
             "triton", "nvidia-nccl-cu13", "nvidia-nccl-cu12"):
    try:
        facts["dists"][name] = md.version(name)
    except md.PackageNotFoundError:
        facts["dists"][name] = None
def attempt(module):
    try:
        importlib.import_module(module)
        return None
    except BaseException as exc:
        return {"error": type(exc).__name__ + ": " + str(exc)[:400],
                "missing": getattr(exc, "name", None) if isinstance(exc, ImportError) else None}
for module in json.loads(sys.argv[1]):
    facts["imports"][module] = attempt(module)
try:
    import torch
    cuda = torch.cuda.is_available()
    facts["torch"] = {"version": torch.__version__, "cuda_build": torch.version.cuda, "cuda_available": cuda,
                      "devices": torch.cuda.device_count() if cuda else 0,
                      "device_name": torch.cuda.get_device_name(0) if cuda else None}
    try:
        facts["torch"]["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else None
    except Exception as exc:
        facts["torch"]["nccl"] = "unknown: " + str(exc)[:100]
except BaseException as exc:
    facts["torch"] = {"error": type(exc).__name__ + ": " + str(exc)[:300]}
dirs = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
facts["plugin_pth"] = [d for d in dirs if os.path.isfile(os.path.join(d, "sglang_eagle_nccl.pth"))]
facts["libnccl"] = None
for name in ("nvidia-nccl-cu13", "nvidia-nccl-cu12"):
    try:
        path = str(md.distribution(name).locate_file("nvidia/nccl/lib/libnccl.so.2"))
    except md.PackageNotFoundError:
        continue
    if os.path.isfile(path):
        facts["libnccl"] = path
        break
print("GPU_CHECK_FACTS " + json.dumps(facts), flush=True)
"""

PREFLIGHT_MODULES = ("sglang_eagle_nccl", "sglang", "sglang.srt.distributed.parallel_state")
ENGINE_MODULES = ("sglang.srt.entrypoints.engine",)


def inspect_python(python: str, env: Mapping[str, str], *, mode: str, log: Path) -> dict[str, Any]:
    modules = list(PREFLIGHT_MODULES) + list(ENGINE_MODULES)
    if mode == "gpu":
        # SGLang's CUDA layers (RMSNorm, activations, rotary) import sgl_kernel unguarded.
        modules.append("sgl_kernel")
    else:
        modules.append("sglang_cpu_standins")
    ran = run_logged([python, "-c", INSPECT_SOURCE, json.dumps(modules)], env=env, log=log, timeout=240)
    facts = last_json_line(ran.output, FACTS_MARK)
    if facts is None:
        raise SystemExit(f"gpu-check: {python} could not report what it has (exit {ran.rc}); see {log}:\n"
                         + ran.output[-1500:])
    return facts


def _import_problem(facts: Mapping[str, Any], module: str) -> str | None:
    failure = (facts.get("imports") or {}).get(module)
    if not failure:
        return None
    dist = missing_module_hint(failure["error"]) if failure.get("missing") else None
    fix = f"; carry/install {dist}" if dist else ""
    return f"import {module} fails: {failure['error']}{fix}"


def requirements(facts: Mapping[str, Any], *, mode: str, want_engine: bool) -> dict[str, list[str]]:
    """What stops each step, as messages that name the missing thing and the fix. Pure.

    Keys: "all" (nothing can run), "engine" (step b cannot run). In the CPU rehearsal a missing
    engine prerequisite means the step is skipped with the reason, not that the check failed."""
    torch_facts = facts.get("torch") or {}
    stop: list[str] = []
    if "error" in torch_facts:
        stop.append(f"torch does not import: {torch_facts['error']}; use the Python that has torch (--python)")
    if facts.get("dists", {}).get(PLUGIN_DIST) is None or _import_problem(facts, "sglang_eagle_nccl"):
        stop.append(f"the plugin ({PLUGIN_DIST}) is not installed in {facts.get('python')}: {PLUGIN_HINT}")
    if facts.get("dists", {}).get("sglang") is None:
        stop.append("sglang is not installed: carry its wheel (docs/gpu-check.md names the release that "
                    "matches this torch) or pass --python with an SGLang environment")
    else:
        for module in ("sglang", "sglang.srt.distributed.parallel_state"):
            problem = _import_problem(facts, module)
            if problem:
                stop.append(problem)
                break
    if mode == "gpu" and "error" not in torch_facts:
        if not torch_facts.get("cuda_build"):
            stop.append(f"torch {torch_facts.get('version')} is a CPU-only build: use a CUDA build of torch, "
                        "or run --cpu-rehearsal")
        elif not torch_facts.get("cuda_available") or torch_facts.get("devices", 0) < 1:
            stop.append(f"torch {torch_facts.get('version')} sees no CUDA device: run on the GPU machine "
                        "(nvidia-smi must list one), or use --cpu-rehearsal")
    engine: list[str] = []
    if want_engine and not stop:
        problem = _import_problem(facts, "sglang.srt.entrypoints.engine")
        if problem:
            engine.append(problem)
        if mode == "gpu":
            problem = _import_problem(facts, "sgl_kernel")
            if problem:
                engine.append(problem + " (SGLang's CUDA layers need it; its wheel is 300+ MiB, see "
                              "docs/gpu-check.md)")
        else:
            version = facts.get("dists", {}).get("sglang")
            if release(version) < FIRST_CPU_EAGLE:
                engine.append(f"sglang {version} cannot run EAGLE on CPU (its KV pool launches a Triton "
                              "kernel); the CPU rehearsal of step (b) needs SGLang >= 0.5.23 "
                              "(python3 ci/sglang_venv.py build 0.5.23)")
            problem = _import_problem(facts, "sglang_cpu_standins")
            if problem:
                engine.append("the CPU stand-ins are not installed in this Python (they come with the "
                              "venvs of ci/sglang_venv.py): " + problem)
    return {"all": stop, "engine": engine}


# ------------------------------------------------------------------------------------------------
# judging (pure)
# ------------------------------------------------------------------------------------------------

# compare()'s kinds that count as a disagreement here: "error" ones (another value) and "warning"
# ones (NCCL ran in a pid the audit does not know, or read a variable the audit lacks). A
# "not_reported" variable is only a notice: NCCL logs a variable only where and when it reads it.
FAILING_SEVERITIES = frozenset({"error", "warning"})


def judge_nccl(
    audit: Mapping[str, Any] | None,
    nccl_logs: Sequence[Mapping[str, Any]],
    expected_env: Mapping[str, str],
    *,
    required_pids: Mapping[int, str] = {},  # noqa: B006 - read only
    require_nccl: bool = False,
    require_comm_inits: bool = False,
    nccl_dir: str = "",
) -> dict[str, Any]:
    """Judge one step from the plugin's audit (``audit --nccl-debug-dir --json``) and the parsed
    NCCL debug files (``python -m sglang_eagle_nccl.nccl.debug_log DIR``). Pure.

    Returns {"problems", "notes", "processes"}: one entry per process NCCL ran in, with the profile
    variables NCCL confirmed, those it did not report, and every disagreement."""
    problems: list[str] = []
    notes: list[str] = []
    if audit is None:
        return {"problems": ["the plugin's audit could not be read"], "notes": [], "processes": []}
    if audit.get("verdict") == "fail":
        problems += [f"plugin audit: {p}" for p in audit.get("problems") or ["verdict fail"]]
    elif audit.get("verdict") == "warn":
        notes.append("plugin audit verdict: warn (see the audit text)")
    roles = {int(p["pid"]): p.get("role", "?") for p in audit.get("processes", [])}
    disagreements = (audit.get("nccl_debug") or {}).get("disagreements", [])
    by_pid: dict[int, list[Mapping[str, Any]]] = {}
    for d in disagreements:
        by_pid.setdefault(int(d["pid"]), []).append(d)
    processes = []
    for log in nccl_logs:
        pid = int(log["pid"])
        role = roles.get(pid, "not audited")
        found = by_pid.get(pid, [])
        different = {d["name"] for d in found if d["kind"] in ("different", "audit_mismatch")}
        reported = log.get("env") or {}
        confirmed = {k: reported[k] for k in sorted(expected_env) if k in reported and k not in different}
        comms = log.get("comms") or []
        entry = {
            "pid": pid,
            "host": log.get("host"),
            "role": role,
            "nccl_version": log.get("version"),
            "comm_inits": len(comms),
            "comm_inits_complete": sum(1 for c in comms if c.get("completed")),
            "nranks": sorted({c.get("nranks") for c in comms if c.get("nranks") is not None}),
            "channels": [c.get("channels") for c in comms if c.get("channels")][:8],
            "confirmed": confirmed,
            "not_reported": sorted(d["name"] for d in found if d["kind"] == "not_reported"),
            "unverifiable": sorted(d["name"] for d in found if d["kind"] == "unverifiable"),
            "reported_not_in_profile": {k: v for k, v in sorted(reported.items()) if k not in expected_env},
            "disagreements": [dict(d) for d in found if d.get("severity") in FAILING_SEVERITIES],
            "nccl_warnings": [w.get("message") for w in log.get("warnings") or []][:5],
            "sources": [Path(s).name for s in log.get("sources") or []],
        }
        processes.append(entry)
        for d in entry["disagreements"]:
            values = " ".join(f"{k}={d[k]!r}" for k in ("expected", "reported", "audit") if d.get(k) is not None)
            problems.append(f"pid {pid} ({role}): {d['kind']} {d.get('name') or ''} {values} "
                            f"({d.get('detail', '')})".replace("  ", " "))
        if entry["nccl_warnings"]:
            notes.append(f"pid {pid} ({role}): NCCL WARN: {entry['nccl_warnings'][0]}")
        if pid in required_pids:
            if require_comm_inits and entry["comm_inits_complete"] == 0:
                problems.append(f"pid {pid} ({required_pids[pid]}): NCCL logged no completed communicator "
                                "init (was the collective run on NCCL?)")
            if not confirmed:
                problems.append(f"pid {pid} ({required_pids[pid]}): NCCL confirmed none of the profile's "
                                f"variables (reported: {sorted(reported) or 'nothing'}); "
                                "is NCCL_DEBUG_SUBSYS missing ENV?")
    logged = {int(log["pid"]) for log in nccl_logs}
    for pid, role in sorted(required_pids.items()):
        if pid not in logged:
            problems.append(f"{role} pid {pid} left no NCCL debug file in {nccl_dir or 'the NCCL directory'}")
    if require_nccl and not nccl_logs:
        problems.append(f"no NCCL debug file was written to {nccl_dir or 'the NCCL directory'} "
                        "(NCCL never initialised, or NCCL_DEBUG_FILE did not reach the process)")
    return {"problems": problems, "notes": notes, "processes": processes}


def scan_plugin_failures(text: str) -> list[str]:
    """Lines of an SGLang log in which the plugin reported that it broke, each with the exception that
    follows it within a traceback, if any (deduplicated)."""
    found: list[str] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        for pattern in PLUGIN_FAILURE_PATTERNS:
            match = pattern.search(line)
            if not match:
                continue
            message = match.group(0)
            if lines[i + 1:i + 2] == ["Traceback (most recent call last):"]:
                cause = last_exception_line("\n".join(lines[i + 1:i + 80]))
                message += f" ({cause})" if cause else ""
            if message not in found:
                found.append(message)
    return found


def overall_exit(steps: Iterable[Step]) -> int:
    """1 if any step failed (a disagreement wins over anything missing), 2 if a step could not run
    for a missing prerequisite, else 0."""
    statuses = [s.status for s in steps]
    if "fail" in statuses:
        return 1
    if "missing" in statuses:
        return 2
    return 0


# ------------------------------------------------------------------------------------------------
# steps (doers)
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Context:
    opts: Options
    python: str
    env: dict[str, str]
    say: Progress
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    profile: dict[str, Any] = dataclasses.field(default_factory=dict)

    def timeout(self, wanted: float) -> float:
        """``wanted`` seconds, or what is left of the budget (minus a margin for the report)."""
        left = self.opts.budget_s - self.say.elapsed() - 15.0
        return max(10.0, min(wanted, left))

    def cli(self, *args: str) -> list[str]:
        # ``-m ...cli`` rather than the console script: an install with --target has no bin/ entry.
        return [self.python, "-m", "sglang_eagle_nccl.cli.main", *args]


def resolve_profile(ctx: Context, step: Step) -> None:
    """Validate the profile once, with the checked plugin, before anything starts."""
    args = ["profiles", "show", ctx.opts.profile, "--json"]
    for item in ctx.opts.nccl_env:
        args += ["--nccl-env", item]
    rc, data, err = run_json(ctx.cli(*args), env=ctx.env, timeout=ctx.timeout(120),
                             log=ctx.opts.work / "logs" / "profile.log")
    if rc != 0 or not isinstance(data, dict) or "env" not in data:
        detail = (data or {}).get("error") if isinstance(data, dict) else None
        step.status = "missing" if rc == 2 else "fail"
        step.problems.append(f"profile {ctx.opts.profile!r} with {ctx.opts.nccl_env or 'no --nccl-env'} is not "
                             f"usable: {detail or err.strip()[-800:]}")
        return
    ctx.profile = data
    step.details.update(name=data.get("name"), env=data.get("env"))
    debug_set = [k for k in data["env"] if k.startswith("NCCL_DEBUG")]
    if debug_set:
        step.notes.append(f"the profile sets {debug_set}; gpu-check replaces them per step so each step's "
                          "NCCL files land in its own directory")


def expected_env(ctx: Context, extra: Sequence[str]) -> dict[str, str]:
    env = {k: str(v) for k, v in (ctx.profile.get("env") or {}).items()}
    for item in extra:
        key, _, value = item.partition("=")
        env[key] = value
    return env


def audit_and_parse(ctx: Context, name: str, audit_root: Path, nccl_dir: Path) -> tuple[dict[str, Any] | None,
                                                                                        list[dict[str, Any]], str]:
    """The plugin's audit with its NCCL cross-check, and the parsed NCCL files of one step."""
    logs_dir = ctx.opts.work / "logs"
    rc, audit, err = run_json(ctx.cli("audit", str(audit_root), "--nccl-debug-dir", str(nccl_dir), "--json"),
                              env=ctx.env, timeout=ctx.timeout(120), log=logs_dir / f"{name}-audit.log")
    problem = ""
    if not isinstance(audit, dict) or "verdict" not in audit:
        audit = None
        problem = f"`sglang-eagle-nccl audit {audit_root} --nccl-debug-dir {nccl_dir} --json` gave no report " \
                  f"(exit {rc}): {err.strip()[-600:]}"
    else:
        # The text form too, for people reading the logs tarball.
        run_json(ctx.cli("audit", str(audit_root), "--nccl-debug-dir", str(nccl_dir)), env=ctx.env,
                 timeout=ctx.timeout(120), log=logs_dir / f"{name}-audit.txt")
    logs: list[dict[str, Any]] = []
    if any(p.is_file() for p in nccl_dir.glob("*")):
        rc, parsed, err = run_json([ctx.python, "-m", "sglang_eagle_nccl.nccl.debug_log", str(nccl_dir)], env=ctx.env,
                                   timeout=ctx.timeout(120))
        if isinstance(parsed, list):
            logs = parsed
        else:
            problem = problem or f"the NCCL debug files in {nccl_dir} could not be parsed: {err.strip()[-600:]}"
    return audit, logs, problem


def step_preflight(ctx: Context, step: Step) -> None:
    base = ctx.opts.work / "preflight"
    nccl_dir, audit_root = base / "nccl", base / "audit"
    nccl_dir.mkdir(parents=True, exist_ok=True)
    backend = "gloo" if ctx.opts.rehearsal else "nccl"
    extra = debug_env(nccl_dir)
    args = ["preflight", "--tp", "1", "--backend", backend, "--profile", ctx.opts.profile,
            "--audit-dir", str(audit_root), "--timeout", str(int(ctx.timeout(180))), "--json"]
    for item in [*ctx.opts.nccl_env, *extra]:
        args += ["--nccl-env", item]
    ctx.say(f"(a) preflight --tp 1 --backend {backend} --profile {ctx.opts.profile} (+ NCCL debug to {nccl_dir})")
    stdout = ctx.opts.work / "logs" / "preflight.json"
    ran = run_logged(ctx.cli(*args), env=ctx.env, log=ctx.opts.work / "logs" / "preflight.log",
                     timeout=ctx.timeout(240), stdout_to=stdout)
    try:
        result = json.loads(stdout.read_text())
    except (OSError, ValueError):
        result = None
    step.details.update(backend=backend, exit_code=ran.rc, run_wall_s=round(ran.wall_s, 1), nccl_dir=str(nccl_dir))
    if ran.rc is None:
        step.problems.append(f"preflight did not finish within {ctx.timeout(240):.0f}s (killed)")
    if not isinstance(result, dict):
        step.problems.append(f"preflight printed no JSON result (exit {ran.rc}): "
                             f"{last_exception_line(ran.output) or ran.output.strip()[-600:]}")
        return
    ranks = result.get("ranks", [])
    step.details.update(run_dir=result.get("run_dir"), ranks=[
        {k: r.get(k) for k in ("rank", "status", "init_path", "exercised", "message")} for r in ranks])
    for r in ranks:
        if r.get("status") != "ok":
            step.problems.append(f"preflight rank {r.get('rank')}: {r.get('status')}: {r.get('message')}")
        elif not r.get("exercised"):
            step.problems.append(f"preflight rank {r.get('rank')} ran no collective: no NCCL communicator was forced")
    if not result.get("ok") and not step.problems:
        step.problems.append("preflight verdict: fail (see the audit in the logs)")
    audit, logs, problem = audit_and_parse(ctx, "preflight", audit_root, nccl_dir)
    if problem:
        step.problems.append(problem)
    rank_pids = {int(p["pid"]): p["role"] for p in (audit or {}).get("processes", [])
                 if str(p.get("role", "")).startswith("preflight_TP")}
    if audit is not None and not rank_pids:
        step.problems.append("the audit holds no preflight rank process (the plugin did not activate in the rank)")
    if ctx.opts.rehearsal:
        judged = judge_nccl(audit, logs, expected_env(ctx, extra), nccl_dir=str(nccl_dir))
        step.notes.append("gloo backend: no NCCL communicator exists here, so no NCCL file is expected; "
                          "step (c) feeds real NCCL output through the same code")
    else:
        judged = judge_nccl(audit, logs, expected_env(ctx, extra), required_pids=rank_pids, require_nccl=True,
                            require_comm_inits=True, nccl_dir=str(nccl_dir))
        exercised = sum(len(r.get("exercised") or []) for r in ranks)
        inits = sum(p["comm_inits_complete"] for p in judged["processes"] if p["pid"] in rank_pids)
        step.details.update(groups_exercised=exercised, nccl_comm_inits_complete=inits)
        if inits and exercised and inits != exercised:
            step.notes.append(f"{exercised} group(s) exercised, {inits} NCCL communicator init(s) logged "
                              "(torch may split or reuse communicators)")
    _merge(step, judged, audit)


def _merge(step: Step, judged: Mapping[str, Any], audit: Mapping[str, Any] | None) -> None:
    step.problems += judged["problems"]
    step.notes += judged["notes"]
    step.details["nccl_processes"] = judged["processes"]
    if audit is not None:
        step.details["audit"] = {
            "verdict": audit.get("verdict"),
            "run_dir": audit.get("run_dir"),
            "processes": [{k: p.get(k) for k in ("pid", "role", "verdict", "patch_set", "sglang_version")}
                          for p in audit.get("processes", [])],
            "communicators": [{k: c.get(k) for k in ("pid", "group", "kind", "backend", "verdict")}
                              for c in audit.get("communicators", [])],
            "eagle": audit.get("eagle", []),
            "problems": audit.get("problems", []),
            "nccl_processes": (audit.get("nccl_debug") or {}).get("processes"),
        }


def step_engine(ctx: Context, step: Step) -> None:
    base = ctx.opts.work / "engine"
    nccl_dir, audit_root = base / "nccl", base / "audit"
    nccl_dir.mkdir(parents=True, exist_ok=True)
    extra = debug_env(nccl_dir)
    env = dict(ctx.env)
    # The Engine API path users take: the plugin is enabled by environment in the launching script.
    env.update({
        "SGLANG_EAGLE_NCCL": ctx.opts.profile,
        "SGLANG_EAGLE_NCCL_ENV": " ".join([*ctx.opts.nccl_env, *extra]),
        "SGLANG_EAGLE_NCCL_AUDIT_DIR": str(audit_root),
    })
    spec = {"mode": ctx.opts.mode, "work": str(base), "prompts": PROMPTS,
            "max_new_tokens": 8 if ctx.opts.rehearsal else 16}
    where = "CPU (stand-ins)" if ctx.opts.rehearsal else "CUDA, CUDA graphs on"
    ctx.say(f"(b) engine: tiny Llama + EAGLE-3 draft, dummy weights, TP=1, {where}")
    timeout = ctx.timeout(300 if ctx.opts.rehearsal else 360)
    ran = run_logged([ctx.python, str(Path(__file__).resolve()), "--child-engine", json.dumps(spec)], env=env,
                     log=ctx.opts.work / "logs" / "engine.log", timeout=timeout)
    result = last_json_line(ran.output, RESULT_MARK) or {}
    step.details.update(exit_code=ran.rc, run_wall_s=round(ran.wall_s, 1), leftover_processes=ran.leftovers,
                        nccl_dir=str(nccl_dir), **{k: v for k, v in result.items() if k != "ok"})
    if ran.rc is None:
        step.problems.append(f"the engine did not finish within {timeout:.0f}s (killed with its processes)")
    elif ran.rc != 0 or not result.get("ok"):
        error = result.get("error") or last_exception_line(ran.output) or ran.output.strip()[-600:]
        hint = missing_module_hint(error or "")
        step.problems.append(f"the engine failed (exit {ran.rc}): {error}"
                             + (f"; carry/install {hint}" if hint else ""))
    if ran.leftovers:
        step.problems.append(f"processes left after shutdown (killed): {ran.leftovers}")
    if result.get("ok"):
        if not all(result.get("outputs") or [[]]):
            step.problems.append("a request generated no tokens")
        if not ctx.opts.rehearsal and result.get("cuda_graph") is not True:
            step.problems.append(f"CUDA graphs were not on in the engine (disable_cuda_graph="
                                 f"{result.get('disable_cuda_graph')!r})")
        dropped = result.get("dropped_kwargs") or []
        if dropped:
            step.notes.append(f"this SGLang has no server argument(s) {dropped}; left at their defaults")
    failures = scan_plugin_failures(ran.output)
    if failures:
        message = "the plugin reported failures in the engine's log: " + "; ".join(failures[:3])
        # The CPU stand-ins cover only what the CPU runs call; an import-only gap there (a module the
        # plugin resolves eagerly) is noted, on a GPU it is a real defect.
        (step.notes if ctx.opts.rehearsal else step.problems).append(message)
    audit, logs, problem = audit_and_parse(ctx, "engine", audit_root, nccl_dir)
    if problem:
        step.problems.append(problem)
    if audit is not None:
        roles = [p.get("role", "") for p in audit.get("processes", [])]
        if not any(r.startswith("scheduler") for r in roles):
            step.problems.append(f"no scheduler process in the plugin's audit (roles: {roles})")
        if not audit.get("eagle"):
            step.problems.append("the audit holds no EAGLE worker record (the EAGLE hook did not run)")
    judged = judge_nccl(audit, logs, expected_env(ctx, extra), nccl_dir=str(nccl_dir))
    if not logs:
        step.notes.append("no NCCL debug file from the engine: at TP=1 SGLang runs no collective on its "
                          "one-rank groups and builds no PyNccl communicator, so NCCL is never initialised"
                          if not ctx.opts.rehearsal else "CPU engine: gloo only, NCCL is never loaded")
    _merge(step, judged, audit)


def step_nccl_probe(ctx: Context, step: Step) -> None:
    """CPU rehearsal of (c): real NCCL output from a process the plugin activated in."""
    lib = ctx.opts.nccl_lib or (Path(ctx.facts["libnccl"]) if ctx.facts.get("libnccl") else None)
    if lib is None:
        step.status = "skipped"
        step.notes.append("no libnccl.so.2: the nvidia-nccl-cu13 wheel is not installed in the checked Python; "
                          "pip install nvidia-nccl-cu13 (about 300 MB) or pass --nccl-lib PATH/libnccl.so.2")
        return
    if not lib.is_file():
        step.status = "missing"
        step.problems.append(f"--nccl-lib {lib} does not exist")
        return
    base = ctx.opts.work / "nccl-probe"
    nccl_dir, audit_root = base / "nccl", base / "audit"
    nccl_dir.mkdir(parents=True, exist_ok=True)
    # NCCL logs NCCL_SOCKET_IFNAME when ncclGetUniqueId picks the bootstrap interface: the one variable
    # a CPU-only process can make NCCL report. "lo" exists everywhere.
    extra = ["NCCL_SOCKET_IFNAME=lo", *debug_env(nccl_dir)]
    env = dict(ctx.env)
    env.update({
        "SGLANG_EAGLE_NCCL": ctx.opts.profile,
        "SGLANG_EAGLE_NCCL_ENV": " ".join([*ctx.opts.nccl_env, *extra]),
        "SGLANG_EAGLE_NCCL_AUDIT_DIR": str(audit_root),
    })
    ctx.say(f"(c) real libnccl.so.2 in a process with the plugin: {lib}")
    ran = run_logged([ctx.python, str(PROBE), str(lib)], env=env, log=ctx.opts.work / "logs" / "nccl-probe.log",
                     timeout=ctx.timeout(120))
    result = last_json_line(ran.output) or {}
    code = int(result.get("version_code") or 0)
    version = f"{code // 10000}.{code % 10000 // 100}.{code % 100}" if code >= 20000 else None
    step.details.update(lib=str(lib), exit_code=ran.rc, probe=result, nccl_dir=str(nccl_dir), nccl_version=version)
    if ran.rc != 0 or "pid" not in result:
        step.problems.append(f"the NCCL probe failed (exit {ran.rc}): {result or ran.output.strip()[-600:]}")
        return
    audit, logs, problem = audit_and_parse(ctx, "nccl-probe", audit_root, nccl_dir)
    if problem:
        step.problems.append(problem)
    judged = judge_nccl(audit, logs, expected_env(ctx, extra), required_pids={int(result["pid"]): "probe"},
                        require_nccl=True, nccl_dir=str(nccl_dir))
    for proc in judged["processes"]:
        # ncclGetUniqueId alone logs no "NCCL version" line; the probe asked the library itself.
        proc["nccl_version"] = proc["nccl_version"] or version
    _merge(step, judged, audit)


# ------------------------------------------------------------------------------------------------
# engine child (runs under the checked interpreter)
# ------------------------------------------------------------------------------------------------


def _server_arg_names() -> set[str] | None:
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]

    if hasattr(ServerArgs, "__struct_fields__"):  # msgspec Struct (0.5.23)
        return set(ServerArgs.__struct_fields__)
    if dataclasses.is_dataclass(ServerArgs):
        return {f.name for f in dataclasses.fields(ServerArgs)}
    return None


def gpu_engine_kwargs(target: Path, draft: Path) -> dict[str, Any]:
    """Engine arguments on one GPU. Triton attention and PyTorch sampling: they need no FlashInfer
    JIT build (minutes, and nvcc) and no FA3 kernel choice, only what every CUDA SGLang has."""
    return {
        "model_path": str(target),
        "speculative_algorithm": "EAGLE3",
        "speculative_draft_model_path": str(draft),
        "speculative_num_steps": 2,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 3,
        "load_format": "dummy",
        "skip_tokenizer_init": True,
        "tp_size": 1,
        "device": "cuda",
        "dtype": "bfloat16",
        "attention_backend": "triton",
        "sampling_backend": "pytorch",
        "context_length": 256,
        "max_total_tokens": 4096,
        "max_running_requests": 4,
        # The name changed (0.5.11: cuda_graph_max_bs; 0.5.17+: cuda_graph_max_bs_decode); the one this
        # SGLang lacks is dropped. Decode graphs on; the prefill graphs of newer releases go through
        # torch.compile, minutes of the budget for nothing NCCL-related.
        "cuda_graph_max_bs": 4,
        "cuda_graph_max_bs_decode": 4,
        "disable_cuda_graph": False,
        "disable_decode_cuda_graph": False,
        "disable_prefill_cuda_graph": True,
        "random_seed": 0,
        "log_level": "info",
        "decode_log_interval": 1,
    }


def child_engine(spec: dict[str, Any]) -> int:
    """Start one Engine in this process, send the requests, shut down, print one RESULT line."""
    sys.path.insert(0, str(SUPPORT_DIR))
    import tiny_models  # type: ignore[import-not-found]

    work = Path(spec["work"])
    target = tiny_models.write_target(work / "models" / "target")
    draft = tiny_models.write_eagle_draft(work / "models" / "eagle3", kind="EAGLE3")
    result: dict[str, Any] = {"ok": False}
    try:
        t = time.monotonic()
        import sglang  # type: ignore[import-not-found]

        result.update(sglang=sglang.__version__, import_s=round(time.monotonic() - t, 1))
        if spec["mode"] == "cpu-rehearsal":
            import sglang_cpu_run  # type: ignore[import-not-found]

            kwargs = sglang_cpu_run.engine_kwargs(target, tp_size=1, draft_path=draft,
                                                  speculative_algorithm="EAGLE3")
        else:
            kwargs = gpu_engine_kwargs(target, draft)
        names = _server_arg_names()
        if names is not None:
            dropped = sorted(k for k in kwargs if k not in names)
            if RENAMED_ARGS - set(dropped):  # one spelling was accepted: the other is no news
                dropped = [k for k in dropped if k not in RENAMED_ARGS]
            result["dropped_kwargs"] = dropped
            kwargs = {k: v for k, v in kwargs.items() if k in names}
        t = time.monotonic()
        engine = sglang.Engine(**kwargs)
        result["engine_start_s"] = round(time.monotonic() - t, 1)
        server_args = getattr(engine, "server_args", None)
        disabled = getattr(server_args, "disable_cuda_graph", None)
        decode_disabled = getattr(server_args, "disable_decode_cuda_graph", False)
        result.update(disable_cuda_graph=disabled, disable_decode_cuda_graph=decode_disabled,
                      cuda_graph=(disabled is False and not decode_disabled) if disabled is not None else None,
                      speculative_algorithm=str(getattr(server_args, "speculative_algorithm", None)),
                      attention_backend=getattr(server_args, "attention_backend", None))
        outputs, times, accept = [], [], []
        sampling = {"max_new_tokens": spec["max_new_tokens"], "temperature": 0}
        try:
            # Two single requests, then both as one batch (batch size 2: another CUDA graph).
            for prompt in [*spec["prompts"], None]:
                t = time.monotonic()
                answer = engine.generate(input_ids=prompt if prompt is not None else list(spec["prompts"]),
                                         sampling_params=sampling)
                times.append(round(time.monotonic() - t, 2))
                for one in answer if isinstance(answer, list) else [answer]:
                    outputs.append(one.get("output_ids"))
                    meta = one.get("meta_info") or {}
                    if meta.get("spec_accept_length") is not None:
                        accept.append(round(float(meta["spec_accept_length"]), 2))
        finally:
            t = time.monotonic()
            engine.shutdown()
            result["shutdown_s"] = round(time.monotonic() - t, 1)
        result.update(ok=True, outputs=outputs, request_s=times, accept_length=accept)
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, then re-raised as exit 1
        result["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        print(RESULT_MARK + json.dumps(result), flush=True)
        raise
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


# ------------------------------------------------------------------------------------------------
# report
# ------------------------------------------------------------------------------------------------


VERDICT_WORDS = {0: "PASS", 1: "FAIL", 2: "INCOMPLETE (something needed is missing)"}


def format_text(report: Mapping[str, Any]) -> str:
    env = report.get("environment") or {}
    torch_facts = env.get("torch") or {}
    dists = env.get("dists") or {}
    if torch_facts.get("cuda_build"):
        devices = f"{torch_facts.get('devices', 0)} device(s)" + (
            f" {torch_facts['device_name']}" if torch_facts.get("device_name") else "")
        torch_text = f"CUDA {torch_facts['cuda_build']}, {devices}, NCCL {torch_facts.get('nccl')}"
    else:
        torch_text = "CPU build"
    lines = [
        f"gpu-check ({report['mode']}): {VERDICT_WORDS.get(report['exit_code'], 'FAIL')} "
        f"(exit {report['exit_code']}) in {report['total_s']:.1f}s",
        f"python {env.get('python')} {env.get('python_version', '')}; torch {torch_facts.get('version')} "
        f"({torch_text}); sglang {dists.get('sglang')}; plugin {dists.get(PLUGIN_DIST)}",
        f"profile {report.get('profile', {}).get('spec')} + {report.get('profile', {}).get('nccl_env') or []} "
        f"+ NCCL debug (INFO, {DEBUG_SUBSYS}, one file per process)",
    ]
    if report.get("scrubbed_env"):
        lines.append(f"removed from the inherited environment: {', '.join(report['scrubbed_env'])}")
    lines.append("")
    for step in report["steps"]:
        lines.append(f"[{step['status'].upper():7}] {step['title']} ({step['wall_s']:.1f}s)")
        details = step.get("details") or {}
        for proc in details.get("nccl_processes") or []:
            confirmed = ", ".join(f"{k}={v}" for k, v in proc["confirmed"].items()) or "none"
            lines.append(f"    pid {proc['pid']} {proc['role']}: NCCL {proc['nccl_version'] or '?'}, "
                         f"{proc['comm_inits_complete']}/{proc['comm_inits']} comm init(s) complete; "
                         f"confirmed: {confirmed}")
            if proc["not_reported"]:
                lines.append(f"        not reported by NCCL in this process: {', '.join(proc['not_reported'])}")
        if "request_s" in details:
            lines.append(f"    sglang {details.get('sglang')}: start {details.get('engine_start_s')}s, requests "
                         f"{details.get('request_s')}s, accept length {details.get('accept_length')}, "
                         f"cuda graph {details.get('cuda_graph')}, shutdown {details.get('shutdown_s')}s")
        audit = details.get("audit")
        if audit:
            roles = ", ".join(f"{p['role']}:{p['verdict']}" for p in audit["processes"])
            lines.append(f"    plugin audit {audit['verdict']}: {roles}; "
                         f"{len(audit['communicators'])} communicator record(s)")
        for problem in step["problems"]:
            lines.append(f"    ✗ {problem}")
        for note in step["notes"]:
            lines.append(f"    · {note}")
    lines.append("")
    lines.append(f"timings: {json.dumps(report['timings'])}")
    lines.append(f"work directory: {report.get('work_dir')}")
    return "\n".join(lines) + "\n"


def pack_logs(work: Path, target: Path) -> list[str]:
    """The step logs, NCCL debug files and audit records in one tarball (the device tool returns at
    most 8 files); files over MAX_LOG_BYTES are left out and listed."""
    left_out = []
    with tarfile.open(target, "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            if not path.is_file() or "venv" in path.relative_to(work).parts[:1] or "models" in path.parts:
                continue
            if path.stat().st_size > MAX_LOG_BYTES:
                left_out.append(str(path))
                continue
            tar.add(path, arcname=str(path.relative_to(work)))
    return left_out


def write_report(opts: Options, report: dict[str, Any]) -> tuple[Path, Path]:
    opts.out.mkdir(parents=True, exist_ok=True)
    report["logs_left_out"] = pack_logs(opts.work, opts.out / REPORT_LOGS)
    json_path, text_path = opts.out / REPORT_JSON, opts.out / REPORT_TEXT
    json_path.write_text(json.dumps(report, indent=1, sort_keys=False, default=str) + "\n")
    text_path.write_text(format_text(report))
    return json_path, text_path


# ------------------------------------------------------------------------------------------------
# main
# ------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    parser = argparse.ArgumentParser(
        prog="ci/gpu-check", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(__doc__ or "").split("\nThis file is the driver")[0],
        epilog="docs/gpu-check.md: what to carry to a GPU machine without internet, and how.")
    parser.add_argument("--python", help="the interpreter with torch, SGLang and the plugin (default python3); "
                        "with --wheels: the base the wheels are layered over")
    parser.add_argument("--wheels", type=Path, help="install every *.whl in DIR (--no-index --no-deps) into an "
                        "overlay venv over --python, and check with that")
    parser.add_argument("--out", type=Path, help="report directory (default: $OUT if set, else ./gpu-check-report)")
    parser.add_argument("--work-dir", type=Path, help="scratch directory (default: a new temporary directory)")
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help=f"profile name or TOML file (default {DEFAULT_PROFILE})")
    parser.add_argument("--nccl-env", action="append", default=[], metavar="KEY=VALUE",
                        help="extra NCCL setting on top of the profile (repeatable)")
    parser.add_argument("--skip-engine", action="store_true", help="leave out step (b) on purpose")
    parser.add_argument("--check-only", action="store_true", help="only report what the checked Python has")
    parser.add_argument("--cpu-rehearsal", action="store_true", help="run the steps without CUDA (see above)")
    parser.add_argument("--nccl-lib", type=Path, help="rehearsal: libnccl.so.2 to load for step (c)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds for the whole run")
    parser.add_argument("--child-engine", help=argparse.SUPPRESS)
    return parser.parse_args(argv), parser


def main(argv: Sequence[str] | None = None) -> int:
    args, parser = parse_args(argv)
    if args.child_engine:
        return child_engine(json.loads(args.child_engine))
    for item in args.nccl_env:
        if "=" not in item or not item.split("=", 1)[0].strip():
            parser.error(f"--nccl-env {item!r}: expected KEY=VALUE")
        if item.startswith("NCCL_DEBUG"):
            parser.error(f"--nccl-env {item}: gpu-check sets NCCL_DEBUG* itself (one file per process and step)")
    mode = "cpu-rehearsal" if args.cpu_rehearsal else "gpu"
    say = Progress()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    work = work.absolute()
    if re.search(r"\s", str(work)):
        parser.error(f"--work-dir {work}: NCCL_DEBUG_FILE paths must not contain whitespace")
    work.mkdir(parents=True, exist_ok=True)
    opts = Options(mode=mode, python=args.python, wheels=args.wheels, out=(args.out or default_out_dir()).absolute(),
                   work=work, profile=args.profile, nccl_env=list(args.nccl_env), skip_engine=args.skip_engine,
                   check_only=args.check_only, nccl_lib=args.nccl_lib, budget_s=args.budget)
    env, scrubbed = scrubbed_environment()
    if opts.rehearsal:
        sys.path.insert(0, str(SUPPORT_DIR))
        import sglang_cpu_run  # type: ignore[import-not-found]

        # SGLang's CPU engine switch, the stand-in gate, no torch.compile (2 cores); TP=1: no core binding.
        env.pop(sglang_cpu_run.OMP_BIND_VAR, None)
        env.update(sglang_cpu_run.env_for(1))
    say(f"mode {mode}; report -> {opts.out}; work -> {opts.work}")

    timings: dict[str, float] = {}
    steps: list[Step] = []
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    def finish() -> int:
        code = overall_exit(steps)
        report = {
            "tool": "ci/gpu-check", "mode": mode, "exit_code": code, "ok": code == 0, "started": started_at,
            "total_s": round(say.elapsed(), 1), "timings": timings, "work_dir": str(opts.work),
            "environment": ctx.facts if ctx else {}, "scrubbed_env": scrubbed,
            "profile": {"spec": opts.profile, "nccl_env": opts.nccl_env,
                        "resolved_env": (ctx.profile.get("env") if ctx else None)},
            "steps": [s.to_dict() for s in steps],
        }
        json_path, text_path = write_report(opts, report)
        sys.stdout.write("\n" + format_text(report))
        say(f"report: {json_path} {text_path} {opts.out / REPORT_LOGS}")
        return code

    ctx: Context | None = None
    # --- environment ------------------------------------------------------------------------------
    step = Step("environment", "environment: the checked Python")
    t0 = time.monotonic()
    base_python = resolve_python(opts.python or (rehearsal_default_python() if opts.rehearsal else None))
    python = base_python
    if opts.wheels:
        python = build_overlay(base_python, opts.wheels.absolute(), opts.work / "venv", env, say)
    ctx = Context(opts, python, env, say)
    say(f"inspecting {python} (torch, CUDA, SGLang, plugin imports)")
    ctx.facts = inspect_python(python, env, mode=mode, log=opts.work / "logs" / "environment.log")
    needs = requirements(ctx.facts, mode=mode, want_engine=not opts.skip_engine)
    step.details.update(python=python, base_python=base_python, wheels=str(opts.wheels) if opts.wheels else None,
                        needs=needs)
    if not ctx.facts.get("plugin_pth"):
        step.notes.append("the plugin's .pth bootstrap is not in a site directory of this Python (installed with "
                          "--target + PYTHONPATH?): SGLang's plugin entry point (>= 0.5.11) must carry it alone")
    if needs["all"]:
        step.status = "missing"
        step.problems += needs["all"]
    steps.append(step.finish(t0))
    timings["environment"] = step.wall_s
    t = ctx.facts.get("torch") or {}
    say(f"environment: torch {t.get('version')} cuda={t.get('cuda_available')} devices={t.get('devices')} "
        f"nccl={t.get('nccl')}; sglang {ctx.facts['dists'].get('sglang')}; plugin {ctx.facts['dists'].get(PLUGIN_DIST)}"
        f" ({step.wall_s:.1f}s)")
    for problem in step.problems:
        say(f"MISSING: {problem}")
    if step.status == "missing" or opts.check_only:
        for message in needs["engine"]:
            say(f"MISSING for (b): {message}")
        return finish()

    # --- profile ----------------------------------------------------------------------------------
    step = Step("profile", f"profile '{opts.profile}' validated by the plugin")
    t0 = time.monotonic()
    resolve_profile(ctx, step)
    steps.append(step.finish(t0))
    timings["profile"] = step.wall_s
    if step.status != "ok":
        for problem in step.problems:
            say(f"PROFILE: {problem}")
        return finish()

    # --- (a) (b) (c) ------------------------------------------------------------------------------
    # On a GPU, (c) is part of (a) and (b): each step's NCCL files against its own audit.
    cross_check = "" if opts.rehearsal else "; (c) its NCCL files vs the audit"
    plan: list[tuple[str, str, Callable[[Context, Step], None]]] = [
        ("preflight", "(a) preflight --tp 1, " + ("gloo" if opts.rehearsal else "NCCL")
         + ", one collective per group" + cross_check, step_preflight),
        ("engine", "(b) SGLang engine, tiny Llama + EAGLE-3 draft, dummy weights" + cross_check, step_engine),
    ]
    if opts.rehearsal:
        plan.append(("nccl-probe", "(c) real libnccl.so.2 output through the audit cross-check", step_nccl_probe))
    for name, title, run_step in plan:
        step = Step(name, title)
        t0 = time.monotonic()
        if name == "engine" and opts.skip_engine:
            step.status = "skipped"
            step.notes.append("left out on request (--skip-engine)")
        elif name == "engine" and needs["engine"]:
            # Asked for but impossible here: missing on a GPU (exit 2); in the rehearsal a skip.
            step.status = "skipped" if opts.rehearsal else "missing"
            (step.notes if opts.rehearsal else step.problems).extend(needs["engine"])
        else:
            try:
                run_step(ctx, step)
            except Exception as exc:  # noqa: BLE001 - one broken step must not lose the others' report
                step.problems.append(f"gpu-check itself failed in this step: {type(exc).__name__}: {exc}")
        steps.append(step.finish(t0))
        timings[name] = step.wall_s
        say(f"{title}: {step.status.upper()} in {step.wall_s:.1f}s")
        for problem in step.problems:
            say(f"  ✗ {problem}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
