"""The native plugins' configuration in this process (inproc/boot/native.py), the one environment writer
(inproc/boot/environ.py) and the refusal (inproc/refusal.py): what the library is handed and serves, the
reads log's file and its failures, what sync records, and the edges of the writer's checks.

In-process on the real os.environ and the real library (support/inproc.py puts everything back).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sglang_eagle_nccl.contract import native_location
from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.contract.launch_dir import AuditError, open_launch, reads_file_name
from sglang_eagle_nccl.inproc import refusal
from sglang_eagle_nccl.inproc.boot import environ, import_trigger, native
from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter
from sglang_eagle_nccl.inproc.boot.state import STATE
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import rule_from_dict, rules_digest
from sglang_eagle_nccl.native import library
from support.inproc import native_library, process_with_library
from support.jsonl import read_jsonl

OURS = native_location.LIBRARY_FILE
RULES = [{"collective": "AllReduce", "bytes": [0, 524288], "algorithm": "Ring", "protocol": "LL"}]


@pytest.fixture(scope="module")
def library_here(tmp_path_factory) -> str:
    return native_library(tmp_path_factory)


@pytest.fixture
def proc(monkeypatch, library_here):
    with process_with_library(monkeypatch, library_here, ["python", "-c", "pass"]) as state:
        yield state


@pytest.fixture
def lib(library_here):
    return library.load(library_here)


def data_with(*, rules=(), groups=None, wins=None, **policy):
    data = {"env": {"NCCL_ALGO": "Ring"}}
    if rules:
        data["tuner_rules"] = list(rules)
    if groups is not None:
        data["groups"] = groups
    if wins is not None:
        policy["sglang_wins"] = wins
    if policy:
        data["policy"] = policy
    return data


def desired(path, **extra):
    return {"NCCL_ENV_PLUGIN": path, "NCCL_ALGO": "Ring", **extra}


def records(path) -> list[dict]:
    return read_jsonl(path)


def reads_files(run_dir) -> list[Path]:
    return sorted(Path(run_dir).glob("nccl-reads-*.jsonl"))


# --- what the library is handed -------------------------------------------------------------------------------


def test_start_hands_the_values_groups_and_sglang_wins_to_the_library(proc, library_here, lib, monkeypatch):
    monkeypatch.setenv("NCCL_PROTO", "Simple")
    monkeypatch.setenv("NCCL_MIN_NCHANNELS", "3")
    data = data_with(groups={"tp": {"NCCL_PROTO": "LL"}}, wins=["NCCL_MIN_NCHANNELS"])
    native.start(desired(library_here, NCCL_MIN_NCHANNELS="8"), data, None)
    assert STATE.env_control is lib.binding and STATE.reads_log is None
    assert lib.plugin_get_env("NCCL_ALGO")[0] == "Ring"
    assert lib.plugin_get_env("NCCL_MIN_NCHANNELS")[0] == "3"  # sglang_wins: the environment's value
    assert lib.plugin_get_env("NCCL_ENV_PLUGIN")[0] is None  # the plugin variables are not profile values
    assert lib.plugin_get_env("NCCL_PROTO")[0] == "Simple"
    lib.select_group("tp")
    assert lib.plugin_get_env("NCCL_PROTO")[0] == "LL"
    assert lib.tuner_rule_count() == 0  # no NCCL_TUNER_PLUGIN wanted: the tuner is not configured


def test_a_profile_with_nothing_but_values_configures(proc, library_here, lib):
    """No tuner_rules, groups or policy keys at all: the defaults, not a failure."""
    native.start(desired(library_here, NCCL_TUNER_PLUGIN=library_here), {"env": {}}, None)
    assert lib.plugin_get_env("NCCL_ALGO")[0] == "Ring" and lib.tuner_rule_count() == 0


def test_a_policy_without_sglang_wins_configures(proc, library_here, lib):
    native.start(desired(library_here), data_with(audit_required=False), None)
    assert lib.plugin_get_env("NCCL_ALGO")[0] == "Ring"


def test_start_with_a_launch_directory_opens_the_reads_log(proc, library_here, lib, tmp_path):
    run = open_launch(str(tmp_path), {}, required=True)
    native.start(desired(library_here), data_with(), run)
    (reads,) = reads_files(run)
    assert STATE.reads_log == str(reads) and reads.name == reads_file_name()
    assert lib.reads_log_error() is None  # the library writes to it
    first = records(reads)[0]
    assert first["event"] == "reads_log" and first["pid"] == os.getpid() and isinstance(first["time"], float)
    lib.plugin_get_env("NCCL_ALGO")
    assert [r["name"] for r in records(reads) if r["event"] == "read"] == ["NCCL_ALGO"]


def test_without_ctypes_the_library_waits_for_its_import(proc, library_here, monkeypatch):
    monkeypatch.delitem(sys.modules, "ctypes")
    native.start(desired(library_here), data_with(), None)
    assert STATE.env_control is None
    assert import_trigger._FINDER.callbacks["ctypes"] == [native._configure_late]


def test_start_without_the_env_plugin_does_nothing(proc):
    native.start({"NCCL_ALGO": "Ring"}, data_with(), None)
    assert STATE.env_control is None


# --- _configure_late: ctypes imported after activation --------------------------------------------------------


def late_state(path, run_dir=None, *, active=True, data=None):
    STATE.active = active
    STATE.expected_env = desired(path) if path else {"NCCL_ALGO": "Ring"}
    STATE.data = data if data is not None else data_with(groups={"tp": {"NCCL_PROTO": "LL"}})
    STATE.run_dir = run_dir


def test_ctypes_imported_late_configures_what_is_expected_then(proc, library_here, lib, tmp_path):
    run = open_launch(str(tmp_path), {}, required=True)
    late_state(library_here, run)
    native._configure_late(sys.modules["ctypes"])
    assert STATE.env_control is lib.binding and STATE.refused is None
    assert lib.plugin_get_env("NCCL_ALGO")[0] == "Ring"
    lib.select_group("tp")
    assert lib.plugin_get_env("NCCL_PROTO")[0] == "LL"
    (reads,) = reads_files(run)
    assert STATE.reads_log == str(reads)


@pytest.mark.parametrize("active, has_path", [(False, True), (True, False)])
def test_ctypes_imported_late_does_nothing_inactive_or_without_the_plugin(
    proc, library_here, active, has_path
):
    late_state(library_here if has_path else None, active=active)
    native._configure_late(None)
    assert STATE.env_control is None and STATE.refused is None


def test_ctypes_imported_late_after_configuration_does_not_reconfigure(proc, library_here, lib):
    lib.configure_env({"NCCL_ALGO": "Tree"})
    STATE.env_control = lib.binding
    late_state(library_here)
    native._configure_late(None)
    assert lib.plugin_get_env("NCCL_ALGO")[0] == "Tree"


def test_ctypes_imported_late_with_a_broken_library_refuses_and_puts_back(proc, tmp_path, capsys):
    broken = tmp_path / OURS
    broken.write_text("not a library")
    late_state(str(broken))
    STATE.saved_before = {"NCCL_ALGO": None}
    os.environ["NCCL_ALGO"] = "Ring"  # written by activation
    native._configure_late(None)  # returns: only `import sglang` is refused later
    assert STATE.refused is not None and f"cannot load {broken}" in STATE.refused
    assert "NCCL_ALGO" not in os.environ and not STATE.active
    assert import_trigger._FINDER.callbacks["sglang"]  # the refusal of `import sglang` is armed
    assert "(the variables it had written were put back)" in capsys.readouterr().err


# --- the reads log -----------------------------------------------------------------------------------------------


def test_a_launch_directory_missing_on_this_node_is_made_for_the_reads_log(proc, library_here, tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    run = str(root / "launch-1")
    native.start(desired(library_here), data_with(), run)
    (reads,) = reads_files(run)
    assert STATE.reads_log == str(reads) and records(reads)[0]["event"] == "reads_log"


def plant_reads_file(run) -> Path:
    planted = Path(run) / reads_file_name()
    planted.write_text("")
    return planted


def test_a_reads_log_that_cannot_be_made_is_a_warning_once(proc, library_here, lib, tmp_path, capsys):
    run = open_launch(str(tmp_path), {}, required=True)
    planted = plant_reads_file(run)
    native.start(desired(library_here), data_with(), run)
    assert STATE.reads_log is None and STATE.env_control is lib.binding
    err = capsys.readouterr().err
    assert f"WARNING: cannot write NCCL's reads log {planted}: {planted} already exists" in err
    assert "NCCL's own reads are not recorded" in err
    assert os.fstat(1) is not None  # nothing but the failed log's descriptor is closed
    native._open_reads_log(lib.binding, run)
    assert capsys.readouterr().err == ""


def test_a_reads_log_that_cannot_be_made_stops_activation_under_audit_required(proc, library_here, tmp_path):
    run = open_launch(str(tmp_path), {}, required=True)
    planted = plant_reads_file(run)
    STATE.data = data_with(audit_required=True)
    with pytest.raises(AuditError) as info:
        native.start(desired(library_here), STATE.data, run)
    assert str(info.value).startswith(f"cannot write NCCL's reads log {planted}: ")
    assert str(info.value).endswith(" (audit_required is set)")


def test_a_reads_log_whose_first_line_fails_is_closed(proc, lib, tmp_path, capsys):
    """The file is created but its first line cannot be written (the file may not grow): its descriptor
    is closed, and no log is recorded as open."""
    run = open_launch(str(tmp_path), {}, required=True)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, old_limit[1]))
    try:
        before = set(os.listdir("/proc/self/fd"))
        native._open_reads_log(lib.binding, run)
        after = set(os.listdir("/proc/self/fd"))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert after <= before
    assert STATE.reads_log is None and "File too large" in capsys.readouterr().err


# --- sync: once SGLang is imported ---------------------------------------------------------------------------


def sync_state(path, run_dir=None, rules=()):
    STATE.active = True
    STATE.expected_env = desired(path, **({"NCCL_TUNER_PLUGIN": path} if rules else {}))
    STATE.data = data_with(rules=rules, groups={"tp": {"NCCL_PROTO": "LL"}})
    STATE.run_dir = run_dir


@pytest.mark.parametrize("rules", [(), tuple(RULES)])
def test_sync_configures_a_library_not_configured_yet_and_records_it(
    proc, library_here, lib, tmp_path, rules
):
    run = open_launch(str(tmp_path), {}, required=True)
    sync_state(library_here, run, rules)
    STATE.audit = AuditWriter(run)
    native.sync()
    assert STATE.env_control is lib.binding
    assert lib.plugin_get_env("NCCL_ALGO")[0] == "Ring"
    lib.select_group("tp")
    assert lib.plugin_get_env("NCCL_PROTO")[0] == "LL"
    (reads,) = reads_files(run)
    digest = rules_digest([rule_from_dict(r) for r in rules])
    assert STATE.native_info == {"library_version": lib.library_version(), "rules_digest": digest}
    assert lib.tuner_rule_count() == len(rules)
    (rec,) = [r for r in records(STATE.audit.path) if r["event"] == "native_plugins"]
    assert {k: rec[k] for k in ("library", "library_version", "rules_digest", "tuner", "reads_log")} == {
        "library": library_here,
        "library_version": lib.library_version(),
        "rules_digest": digest,
        "tuner": bool(rules),
        "reads_log": str(reads),
    }
    assert native.consistency_extras() == {
        "(native plugin library)": lib.library_version(),
        "(tuner rules digest)": digest,
    }


def test_sync_after_configuration_opens_a_missing_reads_log(proc, library_here, lib, tmp_path):
    run = open_launch(str(tmp_path), {}, required=True)
    sync_state(library_here, None)
    native.sync()
    assert STATE.reads_log is None and reads_files(run) == []
    STATE.run_dir = run
    native.sync()
    (reads,) = reads_files(run)
    assert STATE.reads_log == str(reads)
    native.sync()  # already open: not a second file
    assert reads_files(run) == [reads]


@pytest.mark.parametrize("path, data", [(None, {"env": {}}), ("lib", None)])
def test_sync_without_the_plugin_or_a_profile_does_nothing(proc, library_here, path, data):
    STATE.expected_env = {"NCCL_ENV_PLUGIN": library_here} if path else {}
    STATE.data = data
    native.sync()
    assert STATE.env_control is None and STATE.native_info is None


def test_sync_with_a_library_that_cannot_be_loaded_names_the_variable(proc, tmp_path):
    broken = tmp_path / OURS
    broken.write_text("not a library")
    sync_state(str(broken))
    with pytest.raises(ProfileError) as info:
        native.sync()
    (finding,) = info.value.findings
    assert (finding.variable, finding.value) == ("NCCL_ENV_PLUGIN", str(broken))
    assert f"the native plugin library cannot be loaded: cannot load {broken}" in finding.rule
    assert finding.fix == "reinstall sglang-eagle-nccl"


def test_consistency_extras_before_the_library_is_configured(proc):
    assert native.consistency_extras() == {
        "(native plugin library)": "(none)",
        "(tuner rules digest)": "(none)",
    }


def test_the_reads_counts_reach_the_log_at_exit(library_here, tmp_path):
    """sync registers the flush of repeated reads' counts at exit (NCCL's finalize may never run)."""
    run = open_launch(str(tmp_path), {}, required=True)
    script = textwrap.dedent(f"""
        from sglang_eagle_nccl.inproc.boot import native
        from sglang_eagle_nccl.inproc.boot.state import STATE
        from sglang_eagle_nccl.native import library
        STATE.active = True
        STATE.expected_env = {{"NCCL_ENV_PLUGIN": {library_here!r}, "NCCL_ALGO": "Ring"}}
        STATE.data = {{"env": {{"NCCL_ALGO": "Ring"}}}}
        STATE.run_dir = {run!r}
        for _ in range(3):
            native.sync()
        lib = library.load({library_here!r})
        for _ in range(3):
            lib.plugin_get_env("NCCL_ALGO")
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "SGLANG_EAGLE_NCCL"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    (reads,) = reads_files(run)
    counts = [r for r in records(reads) if r["event"] == "counts"]
    assert len(counts) == 1  # registered once, however often sync runs
    assert [(c["name"], c["count"]) for c in counts[0]["reads"]] == [("NCCL_ALGO", 3)]


# --- resync and the group hook ---------------------------------------------------------------------------------


def test_resync_hands_over_the_new_expectation_with_its_groups(proc, library_here, lib):
    sync_state(library_here)
    native.sync()
    STATE.expected_env = desired(library_here, NCCL_ALGO="Tree")
    STATE.data = data_with(groups={"tp": {"NCCL_PROTO": "Simple"}})
    native.resync()
    assert lib.plugin_get_env("NCCL_ALGO")[0] == "Tree"
    lib.select_group("tp")
    assert lib.plugin_get_env("NCCL_PROTO")[0] == "Simple"


def test_select_group_labels_the_library_once_configured(proc, library_here, lib):
    native.select_group("tp")  # not configured yet: nothing to label
    assert lib.selected_group() is None
    sync_state(library_here)
    native.sync()
    native.select_group("tp")
    assert lib.selected_group() == "tp"
    native.select_group(None)
    assert lib.selected_group() is None


# --- environ: the one writer's checks ---------------------------------------------------------------------------


def test_harness_variables_are_writable_only_when_asked(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    with pytest.raises(environ.EnvironmentWriteError, match="OMP_NUM_THREADS"):
        environ.check({"OMP_NUM_THREADS": "4"})
    environ.check({"OMP_NUM_THREADS": "4"}, harness=True)
    with pytest.raises(environ.EnvironmentWriteError, match="OMP_NUM_THREADS"):
        environ.put_back({"OMP_NUM_THREADS": "4"})
    assert os.environ["OMP_NUM_THREADS"] == "1"
    environ.put_back({"OMP_NUM_THREADS": "4"}, harness=True)
    assert os.environ["OMP_NUM_THREADS"] == "4"


def test_check_reports_every_problem_after_an_unset_or_an_unencodable_value():
    with pytest.raises(environ.EnvironmentWriteError, match="NCCL_B: the value contains a NUL"):
        environ.check({"NCCL_A": None, "NCCL_B": "x\0"})
    with pytest.raises(environ.EnvironmentWriteError) as info:
        environ.check({"NCCL_A": "\ud800", "NCCL_B": "x\0"})
    assert "NCCL_A: the value cannot be encoded" in str(info.value)
    assert "NCCL_B: the value contains a NUL" in str(info.value)


# --- refusal ------------------------------------------------------------------------------------------------------


def test_a_refusal_with_nothing_to_put_back_says_so_plainly(proc, capsys):
    with pytest.raises(refusal.RefusedError):
        refusal.refuse("preflight_rank", ValueError("boom"))
    err = capsys.readouterr().err
    assert (
        "NCCL profile not applied: internal error while applying the NCCL profile (ValueError('boom')); "
        in err
    )
    assert "nothing was applied. SGLang will refuse to start in this process" in err


def test_summary_line_keeps_letters_at_the_edges_and_a_lone_header():
    assert refusal.summary_line("X too large for NCCL_BUFFSIZE_MAX") == "X too large for NCCL_BUFFSIZE_MAX"
    assert refusal.summary_line(" - NCCL_MAX\n - more") == "NCCL_MAX ..."
    assert refusal.summary_line("1 problem(s); nothing was applied:") == "1 problem(s); nothing was applied:"


def test_sync_withdraws_the_waiting_late_configuration_and_configures_once(proc, library_here, lib, monkeypatch):
    """SGLang imported before anything imported ctypes: sync configures, and the ctypes trigger that was waiting
    (activation armed it) is withdrawn first, so the binding's own `import ctypes` cannot configure it again."""
    loaded = sys.modules["ctypes"]
    monkeypatch.delitem(sys.modules, "ctypes")
    STATE.active = True
    native.start(desired(library_here), data_with(), None)
    assert import_trigger._FINDER.callbacks["ctypes"] == [native._configure_late]
    # The module back as it was (not imported again: that would fire the waiting configuration itself).
    monkeypatch.setitem(sys.modules, "ctypes", loaded)
    sync_state(library_here)
    calls = []
    real = type(lib.binding).configure_env
    monkeypatch.setattr(type(lib.binding), "configure_env", lambda self, *a, **k: (calls.append(1), real(self, *a, **k)))
    native.sync()
    assert "ctypes" not in import_trigger._FINDER.callbacks and import_trigger._FINDER not in sys.meta_path
    assert calls == [1] and STATE.env_control is lib.binding and STATE.refused is None


def test_sync_registers_the_flush_at_exit_once_with_the_binding(proc, library_here, lib, monkeypatch):
    import atexit

    registered = []
    monkeypatch.setattr(atexit, "register", lambda fn, *args: registered.append((fn, args)))
    sync_state(library_here)
    native.sync()
    native.sync()
    assert registered == [(native._flush, (lib.binding,))]


def test_the_late_configurations_fault_point_refuses_at_its_door(proc, library_here, monkeypatch):
    """The documented test-only fault step `native.late` (docs/fail-closed.md) fails after the configuration."""
    from sglang_eagle_nccl.contract.names import ENV_TEST_FAULT

    late_state(library_here)
    monkeypatch.setenv(ENV_TEST_FAULT, "native.late")
    native._configure_late(None)
    assert STATE.refused is not None and "test fault injected at native.late" in STATE.refused
