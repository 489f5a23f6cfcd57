"""The Python that runs the checks: find it, optionally layer carried wheels over it (overlay venv),
ask it what it has, and say what stops each step (with the package to carry or install)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpu_check.common import FACTS_MARK, FIRST_CPU_EAGLE, PLUGIN_DIST, REPO_ROOT, last_json_line, release
from gpu_check.procs import run_json, run_logged

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
