"""Each door's refusal, in this process (inproc/refusal.py): recorded, the environment withdrawn, said once,
and the door's own action. tests/unit/inproc/test_doors.py proves the same in fresh interpreters that activated
for real; here every decision of ``refuse`` is reached in-process, so the plain tier (and mutation
testing, which cannot follow a child process) holds each one.
"""

from __future__ import annotations

import json
import os
import sys
import types

import pytest

from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.launch_dir import open_launch
from sglang_eagle_nccl.inproc import refusal
from sglang_eagle_nccl.inproc.boot import environ, import_trigger
from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter
from sglang_eagle_nccl.inproc.refusal import DOORS, RefusedError, message_of, refuse, stop, summary_line
from support.inproc import fresh_process
from support.jsonl import read_jsonl

SERVER_CLI = ["python", "-m", "sglang.launch_server", "--model-path", "m"]


class Stop(PluginStop, RuntimeError):
    pass


@pytest.fixture
def proc(monkeypatch):
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "pytest"])
    with fresh_process() as state:
        # An activation: the plugin wrote NCCL_ALGO (the user had none) and changed NCCL_PROTO.
        os.environ["NCCL_PROTO"] = "user"
        state.saved_before = {"NCCL_ALGO": None, "NCCL_PROTO": "user"}
        environ.write({"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"})
        state.active = True
        state.expected_env = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}
        yield state


def withdrawn(state) -> bool:
    return (
        "NCCL_ALGO" not in os.environ
        and os.environ["NCCL_PROTO"] == "user"
        and state.active is False
        and state.expected_env == {}
    )


@pytest.mark.parametrize("door", ["interpreter_start", "native_late"])
def test_doors_before_sglang_arm_the_refusal_of_its_import_and_return(proc, door, capsys):
    assert refuse(door, Stop("NCCL_PROTO=x is not a protocol")) is None
    assert withdrawn(proc) and proc.refused == "NCCL_PROTO=x is not a protocol"
    assert import_trigger._FINDER.callbacks["sglang"], "the refusal of `import sglang` is armed"
    with pytest.raises(RefusedError) as info:
        for callback in import_trigger._FINDER.callbacks["sglang"]:
            callback(types.ModuleType("sglang"))
    assert str(info.value) == (
        "sglang-eagle-nccl: the requested NCCL profile cannot be applied, so SGLang is not "
        "started without it:\nNCCL_PROTO=x is not a protocol"
    )
    err = capsys.readouterr().err
    assert err == (
        "[sglang-eagle-nccl] NCCL profile not applied: NCCL_PROTO=x is not a protocol (the variables it "
        "had written were put back). SGLang will refuse to start in this process; fix it or unset "
        "SGLANG_EAGLE_NCCL (`sglang-eagle-nccl validate` lists every problem)\n"
    )


def test_an_import_of_sglang_already_done_is_refused_at_once(proc):
    sys.modules["sglang"] = types.ModuleType("sglang")
    try:
        with pytest.raises(RefusedError):
            refuse("interpreter_start", Stop("bad"))
    finally:
        del sys.modules["sglang"]


def test_the_sglang_import_door_raises_the_plugins_error(proc, capsys):
    cause = Stop("hooks cannot be installed")
    with pytest.raises(RefusedError) as info:
        refuse("sglang_import", cause)
    assert str(info.value) == "hooks cannot be installed" and info.value.__cause__ is cause
    assert withdrawn(proc)
    assert capsys.readouterr().err.count("\n") == 1  # the summary only: the exception carries the message


def test_sglangs_server_cli_exits_2_with_the_message_instead_of_a_traceback(proc, monkeypatch, capsys):
    monkeypatch.setattr(sys, "orig_argv", SERVER_CLI)
    with pytest.raises(SystemExit) as info:
        refuse("sglang_import", Stop("first line\nsecond line"))
    assert info.value.code == 2 and info.value.__cause__ is None and withdrawn(proc)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("[sglang-eagle-nccl] NCCL profile not applied: first line ...")
    assert err[1:] == ["[sglang-eagle-nccl] first line", "second line"]


def test_an_internal_error_at_the_sglang_import_door_stays_a_traceback_even_in_the_server_cli(
    proc, monkeypatch
):
    monkeypatch.setattr(sys, "orig_argv", SERVER_CLI)
    with pytest.raises(RefusedError) as info:
        refuse("sglang_import", KeyError("x"))
    assert (
        str(info.value)
        == "internal error while applying the NCCL profile (KeyError('x')); nothing was applied"
    )


@pytest.mark.parametrize("door", ["entry_point", "cli_flags"])
def test_doors_sglang_would_swallow_exit_2(proc, door, capsys):
    with pytest.raises(SystemExit) as info:
        refuse(door, ValueError("v"))
    assert info.value.code == 2 and info.value.__cause__ is None and withdrawn(proc)
    assert capsys.readouterr().err.splitlines()[-1] == (
        "[sglang-eagle-nccl] internal error while applying the NCCL profile (ValueError('v')); nothing was applied"
    )


def test_a_preflight_rank_raises(proc):
    cause = Stop("rank 1 disagrees")
    with pytest.raises(RefusedError) as info:
        refuse("preflight_rank", cause)
    assert str(info.value) == "rank 1 disagrees" and info.value.__cause__ is cause and withdrawn(proc)


def test_every_door_is_one_of_the_table(proc):
    assert set(DOORS) == {
        "interpreter_start",
        "ray_actor",
        "native_late",
        "sglang_import",
        "entry_point",
        "cli_flags",
        "cli_hooks",
        "preflight_rank",
    }
    with pytest.raises(ValueError, match="unknown door 'back_door'"):
        refuse("back_door", Stop("x"))
    assert not withdrawn(proc)  # a programming error changes nothing


def test_a_second_refusal_takes_only_the_doors_action_and_withdraws_what_came_since(proc, capsys, tmp_path):
    run = open_launch(str(tmp_path), {}, required=True)
    proc.audit = AuditWriter(run, role="child")
    refuse("interpreter_start", Stop("first"))
    environ.write({"NCCL_ALGO": "Tree"})  # written again after the refusal (it must not stay)
    proc.saved_before = {"NCCL_ALGO": None}
    with pytest.raises(SystemExit) as info:
        refuse("entry_point", Stop("second"))
    assert info.value.code == 2 and "NCCL_ALGO" not in os.environ and proc.refused == "first"
    err = capsys.readouterr().err
    assert err.count("not applied") == 1 and err.splitlines()[-1] == "[sglang-eagle-nccl] first"
    records = read_jsonl(proc.audit.file_path)
    assert [(r["event"], r["door"]) for r in records] == [("refused", "interpreter_start")]


@pytest.mark.parametrize("argv, door", [
    (["python", "/venv/lib/python3.11/site-packages/ray/_private/workers/default_worker.py", "--node-ip-address=x"],
     "ray_actor"),
    (["/venv/bin/python", "-m", "sglang.launch_server"], "interpreter_start"),
    (["python"], "interpreter_start"),
    ([], "interpreter_start"),
    (["a", "b", "c", "default_worker.py"], "interpreter_start"),
])
def test_the_door_of_interpreter_start(argv, door):
    assert refusal.start_door(argv) == door


def test_the_refusal_is_recorded_in_the_processs_audit(proc, tmp_path):
    run = open_launch(str(tmp_path), {}, required=True)
    proc.audit = AuditWriter(run, role="child")
    with pytest.raises(RefusedError):
        refuse("preflight_rank", Stop("why\nmore"))
    (line,) = open(proc.audit.file_path).read().splitlines()
    record = json.loads(line)
    assert (record["event"], record["door"], record["message"]) == ("refused", "preflight_rank", "why\nmore")


def test_an_audit_that_cannot_write_does_not_stop_the_refusal(proc):
    class Broken:
        def write(self, *a, **k):
            raise OSError("disk gone")

        def close(self):
            pass

    proc.audit = Broken()
    with pytest.raises(RefusedError):
        refuse("preflight_rank", Stop("x"))
    assert withdrawn(proc)


def test_nothing_to_put_back_is_not_claimed(proc, capsys):
    environ.write({"NCCL_ALGO": None, "NCCL_PROTO": "user"})
    refuse("native_late", Stop("x"))
    assert "put back" not in capsys.readouterr().err


def test_the_refusal_is_said_once_per_process(proc, capsys):
    refuse("interpreter_start", Stop("a"))
    refuse("native_late", Stop("b"))
    assert capsys.readouterr().err.count("NCCL profile not applied") == 1


def test_message_and_summary_lines():
    assert message_of(Stop("plain")) == "plain"
    assert message_of(OSError(5, "x")).startswith("internal error while applying the NCCL profile (")
    assert summary_line("") == summary_line(" \n\t\n") == "the NCCL profile cannot be applied"
    assert summary_line("one") == "one" and summary_line("one\ntwo") == "one ..."
    assert summary_line("- one -\n") == "one"
    head = "the NCCL profile has problems; nothing was applied:"
    assert summary_line(f"{head}\n  - a\n  - b\n  - c") == "a (and 2 more problem(s))"
    assert summary_line(f"{head}\n  - a") == "a"
    assert summary_line(f"{head}\n  - a\n  - b") == "a (and 1 more problem(s))"


def test_stop_exits_2_from_the_server_cli_and_raises_elsewhere(monkeypatch, capsys):
    conflict = Stop("deterministic inference sets NCCL_ALGO")
    monkeypatch.setattr(sys, "orig_argv", ["python", "x.py"])
    with pytest.raises(Stop):
        stop(conflict)
    monkeypatch.setattr(
        sys, "orig_argv", ["/venv/bin/python3", "/venv/bin/sglang", "serve", "--model-path", "m"]
    )
    with pytest.raises(SystemExit) as info:
        stop(conflict)
    assert info.value.code == 2
    assert capsys.readouterr().err == "[sglang-eagle-nccl] deterministic inference sets NCCL_ALGO\n"


def test_without_orig_argv_the_arguments_decide(monkeypatch, proc):
    monkeypatch.delattr(sys, "orig_argv")
    monkeypatch.setattr(sys, "argv", SERVER_CLI)
    with pytest.raises(SystemExit):
        refusal.stop(Stop("x"))
    with pytest.raises(SystemExit):
        refuse("sglang_import", Stop("x"))


def test_a_refusal_after_the_state_was_reset_is_still_said_once(proc, capsys):
    """A failed activation resets the process state (activation.apply's rollback), refused included: a second
    refusal after it is recorded again, but stderr says "not applied" once per process."""
    refuse("interpreter_start", Stop("first"))
    proc.refused = None
    refuse("interpreter_start", Stop("second"))
    assert proc.refused == "second"
    assert capsys.readouterr().err.count("NCCL profile not applied") == 1
