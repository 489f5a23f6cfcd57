"""A real SGLang server / engine (TP=2 on CPU) started the ways users start it, with the plugin
installed the way users install it; every scheduler process and every communicator of every
group must show the profile in the audit, and the EAGLE draft/verify groups must be recorded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sglang_eagle_nccl.offline.audit.judge import Report, load_report
from sglang_eagle_nccl.offline.audit.read import read_launch
from sglang_eagle_nccl.profile.resolve import resolve
from support import sglang_cpu_run as run
from support.ledger_checks import check_ledger

SGLANG_VERSION = run.installed_sglang_version()
EAGLE = run.supports_cpu_eagle(SGLANG_VERSION)

PROMPT = [1, 17, 33, 71, 105, 260]
EXE = str(Path(sys.executable).parent / "sglang-eagle-nccl")
# The built-in seed profile (its exact values are pinned by tests/unit/profile/test_profile.py).
SEED = resolve(["pcie-8gpu"], use_environ=False).profile.env_dict()
START_TIMEOUT = 300


def _server_args(models) -> list[str]:
    target, draft = models
    cmd = run.server_cmd(
        target,
        port=0,
        tp_size=2,
        **({"draft_path": draft, "speculative_algorithm": "EAGLE3"} if EAGLE else {}),
    )
    args = cmd[3:]  # drop "python -m sglang.launch_server"
    i = args.index("--port")
    return args[:i] + args[i + 2 :]


def _serve(cmd: list[str], env: dict[str, str], port: int, log: Path) -> tuple[dict, str]:
    """Start a server command in its own session, send one /generate, stop it cleanly."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            run.wait_http_ready(port, START_TIMEOUT, proc=proc)
            answer = run.generate_http(port, PROMPT, max_new_tokens=6, timeout=180)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            raise AssertionError(log.read_text()[-6000:]) from None
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            raise AssertionError("server did not stop within 90 s of SIGTERM") from None
    leftover = _session_after(proc.pid, grace=20)
    assert not leftover, f"processes left after shutdown: {leftover}"
    return answer, log.read_text()


def _session_after(sid: int, grace: float) -> list[str]:
    """Processes of session ``sid`` still alive after ``grace`` seconds (then killed)."""
    deadline = time.monotonic() + grace
    while True:
        pids = subprocess.run(["pgrep", "-s", str(sid)], capture_output=True, text=True).stdout.split()
        if not pids or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    left = []
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:100].decode()
            left.append(f"{pid} {cmdline}")
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
    return left


def _check_profile_everywhere(report: Report, expected: dict[str, str], *, tp: int = 2) -> None:
    """Every scheduler process and every communicator of every group carries ``expected``."""
    # Exactly ✓: every rank held the profile; nothing on CPU is an NCCL communicator (all "–"), no caveat.
    assert report.verdict == "ok", "\n".join(
        report.problems + [f"{p.role}: {p.notes}" for p in report.processes]
    )
    # Every record the real SGLang processes wrote fits the audit reader's per-event schema.
    assert report.unreadable == [], [u.text() for u in report.unreadable]
    schedulers = [p for p in report.processes if p.role.startswith("scheduler")]
    assert len(schedulers) == tp, [(p.role, p.pid) for p in report.processes]
    _, procs = read_launch(report.run_dir)
    by_pid = {p.pid: p for p in procs}
    for sched in schedulers:
        records = by_pid[sched.pid]
        start = records.first("scheduler_start")
        assert start is not None
        for k, v in expected.items():
            assert start["env"].get(k) == v, (sched.role, k, start["env"].get(k))
        comms = [r for r in records.records if r["event"] in ("group_created", "pynccl_created")]
        groups = {r["group"] for r in comms if r["event"] == "group_created"}
        assert {"world", "tp"} <= groups, groups
        assert any(r["event"] == "pynccl_created" and r["group"] == "tp" for r in comms)
        for r in comms:
            for k, v in expected.items():
                assert r["env"].get(k) == v, (sched.role, r["event"], r["group"], k, r["env"].get(k))
    # On CPU no NCCL communicator exists: gloo device groups and a PyNccl that cannot load its library
    # are "–" (absent), never a ✓; the processes that built them are checked (above) and pass.
    for c in report.communicators:
        assert c.verdict == "absent", (c.role, c.group, c.notes)
    for p in report.processes:
        if p.sglang_rank:
            assert p.verdict == "ok", (p.role, p.notes)


def _check_eagle(report: Report) -> None:
    if not EAGLE:
        return
    assert report.eagle, "EAGLE worker hook did not record the draft/verify groups"
    for e in report.eagle:
        draft = {g["unique_name"] for g in (e["draft"] or {}).values()}
        verify = {g["unique_name"] for g in (e["verify"] or {}).values()}
        # Only what the worker really holds: a group object reachable from it, or its draft layout
        # saying it has none of its own (SGLang 0.5.23 keeps groups in its runtime context, so the
        # verify group is "unknown" there). Never a group guessed from global state.
        assert draft <= {"tp:0", "attention_tp:0", "attn_tp:0"}, e
        assert draft or e.get("draft_note"), e
        assert verify <= {"tp:0", "attention_tp:0", "attn_tp:0"}, e
        assert "EAGLE" in e["worker"].upper(), e  # recorded by the EAGLE worker's own hook
    assert len({e["pid"] for e in report.eagle}) == 2  # one per TP rank


def test_wrapper_launch_with_seed_profile(models, e2e_env, tmp_path):
    port = run.free_port()
    audit_root = tmp_path / "audit"
    cmd = [
        EXE,
        "launch",
        "--profile",
        "pcie-8gpu",
        "--audit-dir",
        str(audit_root),
        "--",
        *_server_args(models),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    answer, log = _serve(cmd, e2e_env, port, tmp_path / "server.log")
    assert len(answer["output_ids"]) == 6
    assert "[sglang-eagle-nccl] audit" in log  # the wrapper printed the verdict at exit
    report = load_report(audit_root)
    _check_profile_everywhere(report, SEED)
    _check_eagle(report)
    launcher = next(p for p in report.processes if p.role == "launcher")
    assert launcher.patch_set is not None


def test_launch_flags_on_sglangs_own_cli(models, e2e_env, tmp_path):
    port = run.free_port()
    audit_root = tmp_path / "audit"
    cmd = [
        sys.executable,
        "-m",
        "sglang.launch_server",
        *_server_args(models),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--nccl-profile",
        "pcie-8gpu",
        "--nccl-env",
        "NCCL_ALGO=Tree",
        "--nccl-audit-dir",
        str(audit_root),
        "--nccl-ledger",
    ]
    native = tuple(int(x) for x in SGLANG_VERSION.split(".")[:3] if x.isdigit()) >= (0, 5, 11)
    # Before 0.5.11 SGLang has no plugin loader: the flags need the gate variable (README).
    env = e2e_env if native else dict(e2e_env, SGLANG_EAGLE_NCCL="1")
    _serve(cmd, env, port, tmp_path / "server.log")
    report = load_report(audit_root)
    _check_profile_everywhere(report, {**SEED, "NCCL_ALGO": "Tree"})
    _check_eagle(report)
    # The phase ledger, turned on by SGLang's own CLI flag: the phases this run went through.
    check_ledger(report.run_dirs, speculative="EAGLE3" if EAGLE else None, target=models[0], draft=models[1])
    # The one screen, through the command users run: the ledger after the verdict, and in --json.
    text = subprocess.run([EXE, "audit", str(audit_root), "--ledger"], capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stdout + text.stderr
    screen = text.stdout[text.stdout.index("Phase ledger (2 processes"):].splitlines()
    first = "target verify" if EAGLE else "decode"
    assert screen[1].startswith(f"{first} (eager, "), screen
    data = json.loads(subprocess.run([EXE, "audit", str(audit_root), "--json"], capture_output=True, text=True,
                                     timeout=120).stdout)
    assert data["ledger"]["processes"] == 2 and data["ledger"]["lines"][0]["phase"] == first


ENGINE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import sglang as sgl

    if __name__ == "__main__":
        kwargs = json.loads(sys.argv[1])
        engine = sgl.Engine(**kwargs)
        out = engine.generate(input_ids=%r, sampling_params={"max_new_tokens": 6, "temperature": 0})
        engine.shutdown()
        print("ENGINE_OUTPUT " + json.dumps(out["output_ids"]))
    """
) % (PROMPT,)


def _engine(models, env: dict[str, str], tmp_path: Path, *, algorithm: str | None = "EAGLE3", **extra
            ) -> tuple[list[int], str]:
    """``algorithm``: the speculative algorithm where this SGLang runs one on CPU (None: plain decoding)."""
    target, draft = models
    if algorithm == "EAGLE" and EAGLE:
        # An EAGLE (not EAGLE-3) draft of the same tiny shape, beside the session's EAGLE-3 one.
        from support import tiny_models

        draft = tiny_models.write_eagle_draft(tmp_path / "eagle-draft", kind="EAGLE")
    kwargs = run.engine_kwargs(
        target,
        tp_size=2,
        **({"draft_path": draft, "speculative_algorithm": algorithm} if EAGLE and algorithm else {}),
        **extra,
    )
    script = tmp_path / "engine_script.py"
    script.write_text(ENGINE_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), json.dumps(kwargs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("ENGINE_OUTPUT "))
    return json.loads(line.split(" ", 1)[1]), proc.stderr


@pytest.fixture(scope="module")
def engine_by_environment(models, e2e_base_env, tmp_path_factory) -> tuple[list[int], str, Path]:
    """One Engine enabled by the environment (``SGLANG_EAGLE_NCCL=pcie-8gpu``): its tokens, its
    stderr (every process lists its imports: PYTHONPROFILEIMPORTTIME) and its audit root. Shared by
    the Engine-API test and the not-enabled comparison, which need the same engine started once."""
    tmp_path = tmp_path_factory.mktemp("engine-by-environment")
    env = dict(
        e2e_base_env,
        PYTHONPROFILEIMPORTTIME="1",
        SGLANG_EAGLE_NCCL="pcie-8gpu",
        SGLANG_EAGLE_NCCL_AUDIT_DIR=str(tmp_path / "audit"),
    )
    output, stderr = _engine(models, env, tmp_path)
    return output, stderr, tmp_path / "audit"


def test_engine_api_enabled_by_environment(engine_by_environment):
    output, _, audit_root = engine_by_environment
    assert len(output) == 6
    report = load_report(audit_root)
    _check_profile_everywhere(report, SEED)
    _check_eagle(report)
    roles = {p.role for p in report.processes}
    assert "launcher" in roles and "detokenizer" in roles, roles


def test_sglang_overwrite_is_reported_and_restored(models, e2e_env, tmp_path):
    """<= 0.5.4 overwrites NCCL_CUMEM_ENABLE unconditionally; >= 0.5.5 overwrites NCCL_NVLS_ENABLE
    when --enable-nccl-nvls is given. The audit shows SGLang's write and the restoration, and the
    workers run with the profile's value."""
    old = tuple(int(x) for x in SGLANG_VERSION.split(".")[:3] if x.isdigit()) < (0, 5, 5)
    var, value, extra = (
        ("NCCL_CUMEM_ENABLE", "1", {}) if old else ("NCCL_NVLS_ENABLE", "0", {"enable_nccl_nvls": True})
    )
    env = dict(
        e2e_env,
        SGLANG_EAGLE_NCCL="pcie-8gpu",
        SGLANG_EAGLE_NCCL_ENV=f"{var}={value}",
        SGLANG_EAGLE_NCCL_AUDIT_DIR=str(tmp_path / "audit"),
        SGLANG_EAGLE_NCCL_LEDGER="1",
    )
    # Plain decoding here (the other engines speculate): the phase ledger shows extend and decode.
    output, stderr = _engine(models, env, tmp_path, algorithm=None, **extra)
    report = load_report(tmp_path / "audit")
    check_ledger(report.run_dirs, speculative=None, target=models[0], draft=None, new_tokens=len(output))
    writes = [w for w in report.sglang_writes if w["name"] == var]
    assert writes and writes[0]["after"] != value, report.sglang_writes
    assert f"restored {var}={value}" in stderr
    _, procs = read_launch(report.run_dir)
    launcher = next(p for p in procs if p.first("env_restored"))
    (restored,) = [o for o in launcher.first("env_restored")["overwrites"] if o["name"] == var]
    assert restored["restored"] is True and restored["foreign_value"] == writes[0]["after"]
    _check_profile_everywhere(report, {**SEED, var: value})


@pytest.mark.newest_only
def test_sglang_wins_policy_keeps_sglangs_value(models, e2e_env, tmp_path):
    old = tuple(int(x) for x in SGLANG_VERSION.split(".")[:3] if x.isdigit()) < (0, 5, 5)
    if old:
        var, value, extra = "NCCL_CUMEM_ENABLE", "1", {}
    else:
        var, value, extra = "NCCL_NVLS_ENABLE", "0", {"enable_nccl_nvls": True}
    env = dict(
        e2e_env,
        SGLANG_EAGLE_NCCL="pcie-8gpu",
        SGLANG_EAGLE_NCCL_ENV=f"{var}={value}",
        SGLANG_EAGLE_NCCL_SGLANG_WINS=var,
        SGLANG_EAGLE_NCCL_AUDIT_DIR=str(tmp_path / "audit"),
        SGLANG_EAGLE_NCCL_LEDGER="1",
    )
    # EAGLE (not EAGLE-3) here: the phase ledger of an EAGLE run.
    _engine(models, env, tmp_path, algorithm="EAGLE", **extra)
    report = load_report(tmp_path / "audit")
    check_ledger(report.run_dirs, speculative="EAGLE" if EAGLE else None, target=models[0],
                 draft=tmp_path / "eagle-draft" if EAGLE else None, new_tokens=6)
    sglang_value = next(w["after"] for w in report.sglang_writes if w["name"] == var)
    _, procs = read_launch(report.run_dir)
    for p in procs:
        start = p.first("scheduler_start")
        if start:
            assert start["env"][var] == sglang_value
    assert any("policy sglang_wins" in n for p in report.processes for n in p.notes)
    # Exactly ⚠, and only for the launcher that kept SGLang's value: the ranks hold what the launcher decided.
    assert report.verdict == "warn", report.problems
    (launcher,) = [p for p in report.processes if p.role == "launcher"]
    assert launcher.verdict == "warn" and any(
        f"kept SGLang's {var}={sglang_value}" in n for n in launcher.notes
    )
    assert all(p.verdict == "ok" for p in report.processes if p.sglang_rank), [
        (p.role, p.notes) for p in report.processes
    ]


@pytest.mark.newest_only
def test_installed_but_not_enabled_changes_nothing(models, e2e_env, tmp_path, engine_by_environment):
    """Same engine without the plugin enabled: no audit directory, no plugin module imported in
    any SGLang process (PYTHONPROFILEIMPORTTIME makes every process list its imports), and the same
    tokens as with the plugin enabled (the Engine-API test's engine)."""
    audit_root = tmp_path / "audit"
    off = dict(e2e_env, PYTHONPROFILEIMPORTTIME="1", SGLANG_EAGLE_NCCL_AUDIT_DIR=str(audit_root))
    off.pop("SGLANG_EAGLE_NCCL", None)
    out_off, stderr_off = _engine(models, off, tmp_path)
    assert not audit_root.exists()
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in stderr_off.splitlines()
        if line.startswith("import time:") and "sglang_eagle_nccl" in line
    }
    # SGLang >= 0.5.11 imports every installed plugin's entry-point module in its processes; ours
    # is the gate, which imports only the import-free module of the plugin's variable names (and the
    # empty contract/ package init) while
    # the plugin is off. Older SGLang imports none.
    native = tuple(int(x) for x in SGLANG_VERSION.split(".")[:3] if x.isdigit()) >= (0, 5, 11)
    assert imported <= (
        {
            "sglang_eagle_nccl",
            "sglang_eagle_nccl._gate",
            "sglang_eagle_nccl.contract",
            "sglang_eagle_nccl.contract.names",
        }
        if native
        else set()
    ), imported
    assert "NCCL_PROTO" not in stderr_off and "sglang-eagle-nccl]" not in stderr_off
    out_on, stderr_on, _ = engine_by_environment
    # Positive control: the same probe lists the plugin's start-up modules when it is enabled.
    assert "sglang_eagle_nccl.inproc.boot.bootstrap" in stderr_on
    assert out_on == out_off  # greedy decoding: identical tokens with and without the plugin


@pytest.mark.newest_only
def test_unwritable_audit_dir_is_loud_not_fatal(models, e2e_env, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the audit directory should be")
    env = dict(e2e_env, SGLANG_EAGLE_NCCL="pcie-8gpu", SGLANG_EAGLE_NCCL_AUDIT_DIR=str(blocker / "audit"))
    # Plain decoding: where the audit goes does not depend on speculation (the other engines speculate),
    # and loading no draft model is this CPU-bound tier's cheapest engine.
    output, stderr = _engine(models, env, tmp_path, algorithm=None)
    assert len(output) == 6  # the engine served
    assert "cannot create the audit directory" in stderr and "continuing without audit" in stderr


@pytest.mark.newest_only
def test_unwritable_audit_dir_stops_the_launch_when_required(models, e2e_env, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    target, _ = models
    script = tmp_path / "engine_script.py"
    script.write_text(ENGINE_SCRIPT)
    env = dict(
        e2e_env,
        SGLANG_EAGLE_NCCL="pcie-8gpu",
        SGLANG_EAGLE_NCCL_AUDIT_DIR=str(blocker / "audit"),
        SGLANG_EAGLE_NCCL_AUDIT_REQUIRED="1",
    )
    proc = subprocess.run(
        [sys.executable, str(script), json.dumps(run.engine_kwargs(target, tp_size=2))],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert "audit_required is set" in proc.stderr
    assert "ENGINE_OUTPUT" not in proc.stdout


@pytest.mark.newest_only
def test_flag_on_top_of_environment_profile_reaches_workers_and_a_foreign_write_fails_audit(
    models, e2e_env, tmp_path
):
    """Profile by environment plus --nccl-env on SGLang's own CLI: the workers hold the flag's value
    (seen from inside them) and `audit` exits 0. The same launch with a real write inside the scheduler
    after the plugin restored its profile: `audit` exits 1 naming the process and the variable."""
    from support import worker_probe

    def launch(name: str, foreign: tuple[str, str] | None) -> tuple[Path, dict[int, dict[str, str]]]:
        probe_dir = worker_probe.install(tmp_path / name / "probe", foreign=foreign)
        audit_root = tmp_path / name / "audit"
        port = run.free_port()
        env = dict(
            e2e_env,
            SGLANG_EAGLE_NCCL="pcie-8gpu",
            SGLANG_EAGLE_NCCL_AUDIT_DIR=str(audit_root),
            PYTHONPATH=os.pathsep.join(filter(None, [str(probe_dir), e2e_env.get("PYTHONPATH")])),
        )
        cmd = [
            sys.executable,
            "-m",
            "sglang.launch_server",
            *_server_args(models),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--nccl-env",
            "NCCL_ALGO=Tree",
        ]
        _serve(cmd, env, port, tmp_path / name / "server.log")
        return audit_root, worker_probe.probes(probe_dir)

    audit_root, inside = launch("clean", None)
    assert len(inside) == 2 and all(
        env.get("NCCL_ALGO") == "Tree" and env.get("NCCL_PROTO") == "LL" for env in inside.values()
    ), inside
    ok = subprocess.run([EXE, "audit", str(audit_root)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout[-4000:]
    assert "picked the newest launch" in ok.stdout

    audit_root, inside = launch("foreign", ("NCCL_ALGO", "Ring"))
    bad = subprocess.run(
        [EXE, "audit", str(audit_root), "--json"], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 1, bad.stdout[-4000:]
    report = json.loads(bad.stdout)
    failing = [p for p in report["processes"] if p["verdict"] == "fail"]
    assert {p["pid"] for p in failing} == set(inside)  # exactly the two schedulers that got the write
    for p in failing:
        assert p["role"].startswith("scheduler")
        assert any("NCCL_ALGO=Ring (profile: Tree)" in n for n in p["notes"]), p["notes"]


CUSTOM_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import sglang as sgl
    from sglang.srt.server_args import prepare_server_args

    if __name__ == "__main__":
        server_args = prepare_server_args(sys.argv[1:])
        engine = sgl.Engine(server_args=server_args)
        out = engine.generate(input_ids=%r, sampling_params={"max_new_tokens": 6, "temperature": 0})
        engine.shutdown()
        print("ENGINE_OUTPUT " + json.dumps(out["output_ids"]))
    """
) % (PROMPT,)


@pytest.mark.newest_only
def test_custom_script_parsing_server_args_with_launch_flags(models, e2e_env, tmp_path):
    """A script of the user's that parses SGLang's server arguments itself (no load_plugins() there):
    with SGLANG_EAGLE_NCCL=1 the --nccl-* flags exist, and the Engine's workers hold the flag's value."""
    from support import worker_probe

    probe_dir = worker_probe.install(tmp_path / "probe")
    script = tmp_path / "my_engine_script.py"
    script.write_text(CUSTOM_SCRIPT)
    audit_root = tmp_path / "audit"
    env = dict(
        e2e_env,
        SGLANG_EAGLE_NCCL="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(probe_dir), e2e_env.get("PYTHONPATH")])),
    )
    args = [
        *_server_args(models),
        "--nccl-profile",
        "pcie-8gpu",
        "--nccl-env",
        "NCCL_ALGO=Tree",
        "--nccl-audit-dir",
        str(audit_root),
    ]
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    inside = worker_probe.probes(probe_dir)
    assert len(inside) == 2 and all(e.get("NCCL_ALGO") == "Tree" for e in inside.values()), inside
    report = load_report(audit_root)
    _check_profile_everywhere(report, {**SEED, "NCCL_ALGO": "Tree"})
    _check_eagle(report)
