"""The CLI's exit codes, one decision each (issue 19): `audit` 0 pass / 1 fail / 2 cannot judge,
including the NCCL debug cross-check; `validate` 0 / 1; `doctor` 1 when it lists a problem, 2 for a
bad profile. In-process (click's runner), so a changed exit code in the command fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main
from support import audit_records

ENV = {"NCCL_PROTO": "LL"}
META = {"profile": {"name": "p", "env": ENV, "policy": {"sglang_wins": []}}}


def rec(event: str, **fields) -> dict:
    return audit_records.rec(event, 100, **fields)


def scheduler(env: dict) -> list[dict]:
    return [
        rec("process_start", expected_env=ENV, env=env, profile="p"),
        rec("process_role", title="sglang::scheduler_TP0"),
        rec("scheduler_start", ranks={}, overwrites=[], env=env),
        rec(
            "group_created",
            group="tp",
            unique_name="tp:0",
            ranks=[0],
            env=env,
            process_env=env,
            torch_comm="lazy-nccl",
            group_overrides={},
        ),
    ]


def launch(tmp_path: Path, env: dict) -> Path:
    run = tmp_path / "run"
    run.mkdir(parents=True)
    (run / "launch.json").write_text(json.dumps(META))
    (run / "proc-h-100.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scheduler(env)))
    return run


def cli(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def test_audit_passes_a_launch_where_the_profile_held(tmp_path):
    result = cli("audit", str(launch(tmp_path, ENV)))
    assert result.exit_code == 0, result.output


def test_audit_fails_a_launch_where_the_profile_did_not_hold(tmp_path):
    result = cli("audit", str(launch(tmp_path, {"NCCL_PROTO": "Simple"})))
    assert result.exit_code == 1, result.output
    result = cli("audit", "--json", str(launch(tmp_path / "j", {})))
    assert result.exit_code == 1 and json.loads(result.output)["verdict"] == "fail"


@pytest.mark.parametrize(
    "make",
    [
        lambda p: p / "missing",
        lambda p: (p / "f").write_text("x") and p / "f",
        lambda p: (p / "empty").mkdir() or p / "empty",
    ],
    ids=["missing", "file", "empty-dir"],
)
def test_audit_cannot_judge_exits_2(tmp_path, make):
    result = cli("audit", str(make(tmp_path)))
    assert result.exit_code == 2, result.output
    assert "cannot judge" in result.output


def _debug_dir(tmp_path: Path, proto: str | None) -> Path:
    debug = tmp_path / "nccl-debug"
    debug.mkdir(parents=True)
    if proto is not None:
        (debug / "nccl.h.100.log").write_text(
            f"h:100:100 [0] NCCL INFO NCCL_PROTO set by environment to {proto}.\n"
        )
    return debug


def test_audit_fails_when_the_nccl_debug_cross_check_finds_nothing(tmp_path):
    run = launch(tmp_path, ENV)
    result = cli("audit", str(run), "--nccl-debug-dir", str(_debug_dir(tmp_path, None)))
    assert result.exit_code == 1, result.output
    assert "no NCCL debug files found" in result.output


def test_audit_cross_check_passes_when_nccl_read_the_profile_and_fails_when_not(tmp_path):
    run = launch(tmp_path, ENV)
    agree = cli("audit", str(run), "--nccl-debug-dir", str(_debug_dir(tmp_path / "a", "LL")))
    assert agree.exit_code == 0, agree.output
    disagree = cli("audit", str(run), "--nccl-debug-dir", str(_debug_dir(tmp_path / "b", "Simple")))
    assert disagree.exit_code == 1, disagree.output
    as_json = cli("audit", "--json", str(run), "--nccl-debug-dir", str(_debug_dir(tmp_path / "c", "Simple")))
    assert as_json.exit_code == 1 and json.loads(as_json.output)["nccl_debug"]["ok"] is False


def test_validate_exit_codes(tmp_path):
    assert cli("validate", "pcie-8gpu").exit_code == 0
    assert cli("validate", "--nccl-env", "NCCL_BUFFSIZE=4M").exit_code == 1
    bad = tmp_path / "bad.toml"
    bad.write_text('[env]\nNCCL_PROTO = "garbage"\n')
    assert cli("validate", str(bad)).exit_code == 1
    assert cli("validate", "--json", str(bad)).exit_code == 1


def test_doctor_exits_1_when_it_lists_a_problem_and_2_for_a_bad_profile(monkeypatch):
    for key in ("SGLANG_EAGLE_NCCL", "SGLANG_EAGLE_NCCL_PROFILE", "SGLANG_EAGLE_NCCL_ENV"):
        monkeypatch.delenv(key, raising=False)
    result = cli("doctor", "--json")
    report = json.loads(result.output)
    assert report["problems"], report  # no SGLang in the plain tier's venv: doctor says so
    assert result.exit_code == 1
    assert cli("doctor", "--nccl-env", "NCCL_BUFFSIZE=4M").exit_code == 2
    monkeypatch.setenv("SGLANG_EAGLE_NCCL_PROFILE", "sen3.zz.-")
    result = cli("doctor", "--json")
    assert result.exit_code == 1 and any(
        "cannot be applied" in p for p in json.loads(result.output)["problems"]
    )


# --- input errors: exit 2, the message on stderr, or one JSON object ----------------------------------


def test_an_input_error_goes_to_stderr_and_exits_2(tmp_path):
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "missing")])
    assert result.exit_code == 2 and result.stdout == "" and "cannot judge" in result.stderr


def test_an_input_error_with_json_is_one_object_on_stdout(tmp_path):
    result = CliRunner().invoke(main, ["audit", "--json", str(tmp_path / "missing")])
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["error"].startswith("cannot judge") and data["findings"] == []
    result = CliRunner().invoke(main, ["profiles", "show", "--json", "--nccl-env", "NCCL_BUFFSIZE=4M"])
    data = json.loads(result.stdout)
    assert result.exit_code == 2 and data["ok"] is False
    assert [(f["variable"], f["value"]) for f in data["findings"]] == [("NCCL_BUFFSIZE", "4M")]


def test_resolve_warnings_go_to_stderr_unless_json():
    result = CliRunner().invoke(main, ["profiles", "show", "--nccl-env", "NCCL_P2P_LEVEL=2"])
    assert (
        result.exit_code == 0
        and "warning: [--nccl-env] NCCL_P2P_LEVEL='2': legacy integer level" in result.stderr
    )
    result = CliRunner().invoke(main, ["profiles", "show", "--json", "--nccl-env", "NCCL_P2P_LEVEL=2"])
    assert result.exit_code == 0 and result.stderr == ""
    assert [w["variable"] for w in json.loads(result.stdout)["warnings"]] == ["NCCL_P2P_LEVEL"]


# --- the profile a shell would apply ------------------------------------------------------------------


@pytest.fixture
def shell(monkeypatch, tmp_path):
    for key in ("SGLANG_EAGLE_NCCL", "SGLANG_EAGLE_NCCL_PROFILE", "SGLANG_EAGLE_NCCL_ENV"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return monkeypatch


def test_show_without_arguments_reads_the_environment(shell):
    shell.setenv("SGLANG_EAGLE_NCCL", "pcie-8gpu")
    data = json.loads(cli("profiles", "show", "--json").output)
    assert data["name"] == "pcie-8gpu" and data["from"] == "the SGLANG_EAGLE_NCCL* variables"
    shell.delenv("SGLANG_EAGLE_NCCL")
    shell.setenv("SGLANG_EAGLE_NCCL_ENV", "NCCL_ALGO=Tree")
    data = json.loads(cli("profiles", "show", "--json").output)
    assert data["env"] == {"NCCL_ALGO": "Tree"}


def test_show_without_arguments_prefers_the_serialised_profile(shell):
    from sglang_eagle_nccl.contract import handoff
    from sglang_eagle_nccl.profile.resolve import resolve

    profile = resolve(["debug"], use_environ=False).profile
    shell.setenv("SGLANG_EAGLE_NCCL", "1")
    shell.setenv(
        "SGLANG_EAGLE_NCCL_PROFILE",
        handoff.encode(profile.to_dict(), inputs={"SGLANG_EAGLE_NCCL": "1"}, run_dir=None),
    )
    data = json.loads(cli("profiles", "show", "--json").output)
    assert data["name"] == "debug" and data["from"] == "SGLANG_EAGLE_NCCL_PROFILE (serialised by a launcher)"
    unsigned = handoff.encode(profile.to_dict(), inputs={"SGLANG_EAGLE_NCCL": "1"}, run_dir=None, key=b"")
    shell.setenv("SGLANG_EAGLE_NCCL_PROFILE", unsigned)
    assert (
        json.loads(cli("profiles", "show", "--json").output)["name"] == "debug"
    )  # re-validated, same profile
    shell.setenv("SGLANG_EAGLE_NCCL", "pcie-8gpu")  # the serialised profile is now stale
    result = cli("profiles", "show", "--json")
    assert (
        result.exit_code == 2 and json.loads(result.output)["findings"][0]["variable"] == "SGLANG_EAGLE_NCCL"
    )


# --- tuner --rules ------------------------------------------------------------------------------------


def test_tuner_rules_file_input_errors_exit_2(tmp_path):
    base = ["tuner", "--bytes", "1024", "--nranks", "2", "--json"]
    missing = cli(*base, "--rules", str(tmp_path / "none.toml"))
    assert missing.exit_code == 2 and "cannot read it" in json.loads(missing.output)["error"]
    bad = tmp_path / "bad.toml"
    bad.write_text("[[tuner.rules]\n")
    result = cli(*base, "--rules", str(bad))
    assert result.exit_code == 2 and "malformed TOML" in json.loads(result.output)["error"]
    for text in ("[other]\nx = 1\n", "tuner = 5\n", "[tuner]\nx = 1\n"):
        empty = tmp_path / "empty.toml"
        empty.write_text(text)
        result = cli(*base, "--rules", str(empty))
        assert result.exit_code == 2 and "no [[tuner.rules]] in it" in json.loads(result.output)["error"], (
            text
        )
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(
        '[[tuner.rules]]\ncollective = "allreduce"\nbytes = [0, 0]\nalgorithm = "ring"\nprotocol = "LL"\n'
    )
    result = cli(*base, "--rules", str(wrong))
    data = json.loads(result.output)
    assert result.exit_code == 2 and data["findings"][0]["variable"] == "tuner.rules#1.bytes"
    assert data["findings"][0]["source"] == f"rules:{wrong}"


def test_tuner_query_input_errors_exit_2():
    assert cli("tuner", "--nranks", "2").exit_code == 2  # neither --bytes nor --model-config
    assert cli("tuner", "--bytes", "1024").exit_code == 2  # no --nranks
    assert cli("tuner", "--bytes", "lots", "--nranks", "2").exit_code == 2
    assert cli("tuner", "--bytes", "1", "--nranks", "2", "--collective", "gather").exit_code == 2


def test_launch_without_sglang_is_an_input_error(monkeypatch):
    for key in ("SGLANG_EAGLE_NCCL", "SGLANG_EAGLE_NCCL_PROFILE", "SGLANG_EAGLE_NCCL_ENV"):
        monkeypatch.delenv(key, raising=False)
    result = CliRunner().invoke(main, ["launch", "--profile", "pcie-8gpu", "--", "--model-path", "m"])
    assert result.exit_code == 2 and "sglang is not installed in this Python environment" in result.stderr


def test_profile_options_repeat_and_layer(shell):
    """--nccl-env and --profile repeat on every command that takes the profile options (env here)."""
    result = cli(
        "env",
        "--format",
        "json",
        "--profile",
        "pcie-8gpu",
        "--profile",
        "debug",
        "--nccl-env",
        "NCCL_ALGO=Tree",
        "--nccl-env",
        "NCCL_PROTO=Simple",
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["NCCL_ALGO"] == "Tree" and out["NCCL_PROTO"] == "Simple" and out["NCCL_DEBUG"] == "INFO"
    assert (
        cli(
            "env", "--format", "json", "-p", "pcie-8gpu", "--allow-unknown", "--nccl-env", "NCCL_NEW_X=1"
        ).exit_code
        == 0
    )
    assert cli("env", "--format", "json", "-p", "pcie-8gpu", "--nccl-env", "NCCL_NEW_X=1").exit_code == 2
