"""``allow_partial`` on a real SGLang whose release is newer than every patch set and which lacks one
required hook target, for every way a user can ask for it.

The SGLang under test is the installed wheel's package, copied (file by file, as symbolic links) to
a private site directory that children find first on ``sys.path``, with a dist-info claiming a
release newer than its patch set was proven on (e.g. 0.5.99) so the plugin must check its targets
in the source, and exactly one change: ``PyNcclCommunicator.__init__`` (a required target of every
patch set) renamed in the copied ``pynccl.py``. Nothing else of SGLang is replaced.

Strict (the default): SGLang's launcher is refused, naming the missing target, and nothing starts.
``allow_partial`` (``--nccl-allow-partial`` on SGLang's CLI, ``SGLANG_EAGLE_NCCL_ALLOW_PARTIAL=1``,
``sglang-eagle-nccl launch --allow-partial``, and with SGLang's HookRegistry as the mechanism; the flag
also when the gate variable is set too): SGLang's
real launcher runs past the plugin's decision into ``_set_envs_and_config`` (the last step before it
spawns its processes), with the profile in force, its children import the same SGLang under the same
decision, and the audit marks the target uncovered. The server is stopped there; whether the model
would load is not the question.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from importlib.metadata import version as dist_version
from pathlib import Path

import pytest
from packaging.version import Version

from sglang_eagle_nccl.knowledge.sglang import patchsets
from sglang_eagle_nccl.offline.audit.judge import MARK, load_report
from sglang_eagle_nccl.offline.audit.read import ProcessRecords, read_launch
from sglang_eagle_nccl.offline.audit.render import format_text
from support import sglang_cpu_run as cpu

# The decision does not depend on the release beyond which targets it gates in; ci/test proves it
# on 0.5.23 (the tests also run on any other release they are given).
pytestmark = pytest.mark.newest_only

REMOVED = "sglang.srt.distributed.device_communicators.pynccl:PyNcclCommunicator.__init__"
REMOVED_REASON = "'__init__' not defined"
SET_ENVS = "sglang.srt.entrypoints.engine:_set_envs_and_config"
EXE = str(Path(sys.executable).parent / "sglang-eagle-nccl")
DEADLINE_S = 300.0

# SGLang's plugin loader (>= 0.5.11): the launch flags without any variable, and its HookRegistry.
NATIVE = Version(dist_version("sglang")).release >= (0, 5, 11)
MODES = ["flag", "env", "launch"] + (["hook_registry"] if NATIVE else [])
# The flag on SGLang's CLI in a shell that also sets the gate (the patch set is chosen at `import
# sglang`, before SGLang parses the flag). Its strict form is the "env" case.
ALLOW_MODES = [*MODES, "gate+flag"]


def _newer_release(patch_set: patchsets.PatchSet) -> str:
    """A release this patch set still selects but was never proven on (0.5.99; x.y.z.post99 for a set
    with an upper bound)."""
    proven = Version(patch_set.tested_through)
    for candidate in (
        f"{proven.major}.{proven.minor}.99",
        f"{proven.base_version}.post{(proven.post or 0) + 99}",
    ):
        if patch_set.contains(Version(candidate)) and Version(candidate) > proven:
            return candidate
    raise AssertionError(f"no untested release inside {patch_set.id} ({patch_set.versions})")


def _rename_target(path: Path, class_name: str, method: str) -> None:
    source = path.read_text("utf-8")
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == class_name)
    node = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == method)
    lines = source.splitlines(keepends=True)
    old = lines[node.lineno - 1]
    assert f"def {method}(" in old, old
    lines[node.lineno - 1] = old.replace(f"def {method}(", f"def _{method.strip('_')}_renamed_by_test(", 1)
    path.unlink()  # a symbolic link into the shared venv: replaced, never written through
    path.write_text("".join(lines), "utf-8")
    for stale in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        stale.unlink()


@pytest.fixture(scope="module")
def damaged_sglang(tmp_path_factory) -> tuple[str, str, list[str]]:
    """(site directory, release it claims, required targets the plugin finds missing there): the
    installed SGLang with REMOVED renamed."""
    installed = patchsets.installed_root()
    assert installed is not None, "this tier runs with SGLang installed"
    site = tmp_path_factory.mktemp("damaged-site")
    # Symbolic links keep the copy cheap (SGLang is ~200 MB) and byte-identical; Python imports each
    # module from its path under `site` (and fixes code objects' file names to it).
    shutil.copytree(installed / "sglang", site / "sglang", copy_function=os.symlink)
    module, qualname = REMOVED.split(":")
    class_name, method = qualname.split(".")
    _rename_target(site / (module.replace(".", "/") + ".py"), class_name, method)
    selection = patchsets.select(dist_version("sglang"))
    claimed = _newer_release(selection.patch_set)
    (dist,) = installed.glob("sglang-*.dist-info")
    meta = re.sub(
        r"^Version: .*$", f"Version: {claimed}", (dist / "METADATA").read_text("utf-8"), count=1, flags=re.M
    )
    (site / f"sglang-{claimed}.dist-info").mkdir()
    (site / f"sglang-{claimed}.dist-info" / "METADATA").write_text(meta, "utf-8")
    # The copy differs from the wheel in this one target, as the plugin's own source check sees it.
    # (Under the claimed release, hooks gated to later releases apply too: an older wheel lacks
    # their targets, e.g. 0.5.17 claiming 0.5.20.post99 has no ServerArgs.resolve_once. Those are
    # missing from the pristine wheel as well and are expected alongside REMOVED.)
    new_selection = patchsets.select(claimed)
    assert new_selection.status == "untested_newer" and new_selection.patch_set.id == selection.patch_set.id
    pristine = [c.target for c in patchsets.check_coverage(new_selection, installed).missing_required]
    missing = [c.target for c in patchsets.check_coverage(new_selection, site).missing_required]
    assert REMOVED not in pristine and sorted(missing) == sorted([*pristine, REMOVED]), (pristine, missing)
    return str(site), claimed, missing


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    from sglang_eagle_nccl.inproc.preflight_rank import write_tiny_config

    return write_tiny_config(str(tmp_path_factory.mktemp("model")))


def _command(mode: str, allow: bool, model: str) -> tuple[list[str], dict[str, str]]:
    server = cpu.server_cmd(model, port=cpu.free_port(), tp_size=1)[
        3:
    ]  # without "python -m sglang.launch_server"
    if mode == "launch":
        return [
            EXE,
            "launch",
            "--profile",
            "pcie-8gpu",
            *(["--allow-partial"] if allow else []),
            "--",
            *server,
        ], {}
    if mode == "flag":
        # SGLang's own CLI carries the profile and the choice; no variable where SGLang loads the
        # plugin itself, the bare gate before that (README).
        flags = ["--nccl-profile", "pcie-8gpu", *(["--nccl-allow-partial"] if allow else [])]
        return [sys.executable, "-W", "ignore", "-m", "sglang.launch_server", *server, *flags], (
            {} if NATIVE else {"SGLANG_EAGLE_NCCL": "1"}
        )
    if mode == "gate+flag":
        flags = ["--nccl-allow-partial"] if allow else []
        return [sys.executable, "-W", "ignore", "-m", "sglang.launch_server", *server, *flags], {
            "SGLANG_EAGLE_NCCL": "pcie-8gpu"
        }
    env = {"SGLANG_EAGLE_NCCL": "pcie-8gpu", **({"SGLANG_EAGLE_NCCL_ALLOW_PARTIAL": "1"} if allow else {})}
    if mode == "hook_registry":
        env["SGLANG_EAGLE_NCCL_MECHANISM"] = "hook_registry"
    return [sys.executable, "-W", "ignore", "-m", "sglang.launch_server", *server], env


def _processes(audit_root: Path) -> list[ProcessRecords]:
    if not audit_root.is_dir():
        return []
    found = []
    for launch in audit_root.iterdir():
        if launch.is_dir():
            try:
                found += read_launch(launch)[1]
            except (OSError, ValueError):
                pass  # a record being written right now: read again on the next poll
    return found


def _launcher_records(audit_root: Path) -> list[ProcessRecords]:
    return [p for p in _processes(audit_root) if p.first("env_restored")]


def _children_with_sglang(audit_root: Path) -> list[ProcessRecords]:
    """Processes SGLang's launcher spawned that imported SGLang (so chose, or refused, the patch set)."""
    return [p for p in _processes(audit_root) if p.first("patch_set") and not p.first("env_restored")]


def _stop_session(proc: subprocess.Popen) -> None:
    """SIGKILL everything in the server's session (it was started in its own)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pids = subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True, text=True).stdout.split()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)


def _run_until_decided(
    cmd: list[str], env: dict[str, str], audit_root: Path, log: Path
) -> tuple[int | None, str]:
    """Run until the process exits, or SGLang's launcher has run ``_set_envs_and_config`` and a process
    it spawned has imported SGLang under the same decision; then stop it."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + DEADLINE_S
            while proc.poll() is None and not (
                _launcher_records(audit_root) and _children_with_sglang(audit_root)
            ):
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"neither refused nor launched within {DEADLINE_S:.0f}s:\n{log.read_text()[-4000:]}"
                    )
                time.sleep(1)
        finally:
            code = proc.poll()
            _stop_session(proc)
    return code, log.read_text()


def _env(plugin_env: dict[str, str], site: str, extra: dict[str, str]) -> dict[str, str]:
    env = cpu.full_env(1, base=plugin_env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, plugin_env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


@pytest.mark.parametrize("mode", MODES)
def test_strict_refuses_and_names_the_missing_target(plugin_env, damaged_sglang, model_dir, tmp_path, mode):
    site, claimed, missing = damaged_sglang
    cmd, extra = _command(mode, False, model_dir)
    audit_root = Path(plugin_env["SGLANG_EAGLE_NCCL_AUDIT_DIR"])
    code, output = _run_until_decided(cmd, _env(plugin_env, site, extra), audit_root, tmp_path / "server.log")
    assert code == 2, (code, output[-4000:])
    assert "Traceback" not in output, output[-4000:]
    assert f"SGLang {claimed} is newer than the releases patch set" in output
    assert f"and {len(missing)} required hook target(s) are missing:" in output
    assert f"  - {REMOVED}: {REMOVED_REASON}" in output
    assert all(f"  - {target}: " in output for target in missing)
    # The fix is offered in the words the plugin uses.
    assert "run anyway with --allow-partial / SGLANG_EAGLE_NCCL_ALLOW_PARTIAL=1" in output
    # Nothing started: SGLang's launcher never reached the step before spawning.
    assert _launcher_records(audit_root) == []
    assert "Uvicorn running" not in output and "Load weight" not in output


@pytest.mark.parametrize("mode", ALLOW_MODES)
def test_allow_partial_runs_and_the_audit_marks_the_target_uncovered(
    plugin_env, damaged_sglang, model_dir, tmp_path, mode
):
    site, claimed, missing = damaged_sglang
    cmd, extra = _command(mode, True, model_dir)
    audit_root = Path(plugin_env["SGLANG_EAGLE_NCCL_AUDIT_DIR"])
    code, output = _run_until_decided(cmd, _env(plugin_env, site, extra), audit_root, tmp_path / "server.log")
    assert code is None, (code, output[-4000:])  # still running when it was stopped: not refused
    (launcher,) = _launcher_records(audit_root)
    # SGLang's launcher ran with the profile in force and the hooks that exist installed.
    restored = launcher.first("env_restored")
    assert restored["env"]["NCCL_PROTO"] == "LL" and restored["env"]["NCCL_ALGO"] == "Ring"
    installed = {r["target"]: r["mechanism"] for r in launcher.events("hook_installed")}
    assert installed[SET_ENVS] == ("hook_registry" if mode == "hook_registry" else "wrapt"), installed
    # The missing target is uncovered, with the reason the source check found, and nothing claims
    # to have hooked it.
    patch = launcher.first("patch_set")
    assert patch["sglang_version"] == claimed and patch["status"] == "untested_newer"
    (uncovered,) = [u for u in patch["uncovered"] if u["target"] == REMOVED]
    assert uncovered["found"] is False and uncovered["reason"] == REMOVED_REASON
    assert not set(missing) & set(installed), installed
    # The processes SGLang spawned inherited the decision: they imported the same copy, ran, and
    # recorded the same uncovered target.
    children = _children_with_sglang(audit_root)
    assert children and all(c.first("process_start")["role"] == "child" for c in children)
    for child in children:
        assert set(missing) <= {u["target"] for u in child.first("patch_set")["uncovered"]}
        assert REMOVED not in {r["target"] for r in child.events("hook_installed")}
    # Said on stderr, naming the target, without claiming every required target was found.
    said = [
        ln
        for ln in output.splitlines()
        if ln.startswith(f"[sglang-eagle-nccl] SGLang {claimed} is newer than")
    ]
    assert said and (
        f"; running with {len(missing)} required hook target(s) missing (allow_partial): {', '.join(missing)}"
        in said[0]
    ), said
    assert "all required targets were found" not in output
    # The audit shows it: a warning on the launcher, never a clean pass.
    report = load_report(_launch_dir(audit_root, launcher))
    (proc,) = [p for p in report.processes if p.pid == launcher.pid]
    assert proc.verdict == "warn" and f"uncovered (allow_partial): {REMOVED}" in proc.notes, proc
    assert f"{MARK['warn']} launcher" in format_text(report)


def _launch_dir(audit_root: Path, proc: ProcessRecords) -> Path:
    (launch,) = [d for d in audit_root.iterdir() if (d / proc.file).exists()]
    return launch
