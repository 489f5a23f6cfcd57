"""NCCL's own reads judged (offline/audit/nccl_reads.py): per variable, per group, under sglang_wins.

The reads log is written as a GPU process leaves it: the identity line Python writes when it creates
the file under the launch directory's rules, then the C library's lines, and the process declares the
file in its audit (nccl_reads_log). A read is judged against the profile in force in that process:
per-group values when NCCL read with a group label, nothing for a variable SGLang was allowed to win.
"""

from __future__ import annotations

import pytest

from sglang_eagle_nccl.offline.audit.judge import load_report
from sglang_eagle_nccl.offline.audit.nccl_reads import judge_reads
from sglang_eagle_nccl.offline.audit.read import ProcessReads
from support.audit_records import ident
from support.written_launch import new_launch, write_process, write_reads_log

ENV = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
GROUPS = {"tp": {"NCCL_PROTO": "Simple"}}


def read(
    name: str,
    value: str | None,
    source: str = "profile",
    environment: str | None = None,
    disagrees: bool = False,
) -> dict:
    return {
        "event": "read",
        "name": name,
        "value": value,
        "source": source,
        "environment": value if environment is None and not disagrees else environment,
        "disagrees": disagrees,
    }


def reads_of(*lines: dict, env_init: bool = True) -> ProcessReads:
    got = ProcessReads(
        ident(100),
        "nccl-reads-h-100.jsonl",
        env_init={"abi": "v2", "nccl_version": "2.28.9"} if env_init else None,
    )
    got.reads = [
        {k: line.get(k) for k in ("name", "value", "source", "environment", "disagrees")} for line in lines
    ]
    return got


def verdict(*lines: dict, keep: tuple[str, ...] = (), env_init: bool = True):
    return judge_reads(reads_of(*lines, env_init=env_init), ENV, GROUPS, keep)


def test_nccl_reading_the_profiles_values_is_a_check_that_held():
    got = verdict(read("NCCL_PROTO", "LL"), read("NCCL_ALGO", "Ring"))
    assert (got.verdict, got.notes) == ("ok", [])


def test_a_value_the_profile_contradicts_fails_naming_what_nccl_read():
    got = verdict(read("NCCL_PROTO", "LL"), read("NCCL_ALGO", "Tree", source="environment"))
    assert got.verdict == "fail"
    assert got.notes == ["NCCL read NCCL_ALGO=Tree (environment); the profile says Ring"]
    unset = verdict(read("NCCL_ALGO", None, source="default"))
    assert unset.notes == ["NCCL read NCCL_ALGO=(unset) (default); the profile says Ring"]


def test_a_read_with_a_group_label_is_judged_against_that_groups_value():
    assert verdict(read("NCCL_PROTO", "Simple", source="group:tp")).verdict == "ok"
    wrong = verdict(read("NCCL_PROTO", "LL", source="group:tp"))
    assert wrong.notes == ["NCCL read NCCL_PROTO=LL (group:tp); the profile says Simple"]
    # A group that sets other variables: the process-wide value is the one to hold.
    assert verdict(read("NCCL_ALGO", "Ring", source="group:tp")).verdict == "ok"
    assert verdict(read("NCCL_PROTO", "LL", source="group:pp")).verdict == "ok"
    assert verdict(read("NCCL_PROTO", "Simple", source="group:pp")).verdict == "fail"
    # Only a "group:" source selects a group: a source merely naming one is process-wide.
    assert verdict(read("NCCL_PROTO", "Simple", source="profile-group:tp")).verdict == "fail"


def test_a_variable_left_to_sglang_is_not_judged_at_all():
    got = verdict(read("NCCL_ALGO", "Tree", source="environment"), keep=("NCCL_ALGO",))
    assert got.verdict == "absent"  # nothing else was read: no check happened
    mixed = verdict(
        read("NCCL_ALGO", "Tree", source="environment"), read("NCCL_PROTO", "LL"), keep=("NCCL_ALGO",)
    )
    assert (mixed.verdict, mixed.notes) == ("ok", [])


def test_the_profile_served_while_the_environment_said_otherwise_is_a_warning():
    got = verdict(read("NCCL_PROTO", "LL", environment="Simple", disagrees=True))
    assert got.verdict == "warn"
    assert got.notes == [
        "the environment held NCCL_PROTO=Simple when NCCL read it (written after activation); "
        "NCCL got the profile's LL"
    ]
    gone = verdict(read("NCCL_PROTO", "LL", environment=None, disagrees=True))
    assert "the environment held NCCL_PROTO=(unset) when NCCL read it" in gone.notes[0]


def test_the_worst_read_decides():
    got = verdict(
        read("NCCL_PROTO", "LL", environment="x", disagrees=True),
        read("NCCL_ALGO", "Tree"),
        read("NCCL_PROTO", "LL"),
    )
    assert got.verdict == "fail" and len(got.notes) == 2
    assert (
        verdict(read("NCCL_PROTO", "LL"), read("NCCL_ALGO", "Ring", environment="x", disagrees=True)).verdict
        == "warn"
    )


@pytest.mark.parametrize(
    "lines,env_init,why",
    [
        (
            (),
            False,
            "NCCL never initialised the env plugin in this process (NCCL not loaded here, or loaded without it)",
        ),
        ((), True, "NCCL initialised the env plugin but read no variable through it"),
        (
            (read("NCCL_DEBUG", "WARN"), read("NCCL_IB_HCA", None)),
            True,
            "NCCL read 2 variable(s), none that the profile sets for NCCL to take (or only variables left to SGLang)",
        ),
    ],
)
def test_nothing_judged_is_a_dash_saying_why(lines, env_init, why):
    got = verdict(*lines, env_init=env_init)
    assert (got.verdict, got.notes) == ("absent", [f"{why}: nothing to check"])


# --- through audit: the reads log of a GPU process, under the profile in force there -------------------


def start(**extra) -> tuple[str, dict]:
    return "process_start", {
        "expected_env": ENV,
        "env": ENV,
        "group_envs": GROUPS,
        "sglang_wins": [],
        **extra,
    }


def gpu_launch(tmp_path, lines: list[dict], *, process: list | None = None):
    run = new_launch(tmp_path, {"name": "p", "env": ENV, "groups": GROUPS})
    name = write_reads_log(run, 100, [{"event": "env_init", "abi": "v2", "nccl_version": "2.28.9"}, *lines])
    events = [start()] if process is None else process
    write_process(
        run,
        100,
        [
            *events,
            ("process_role", {"title": "sglang::scheduler_TP0"}),
            (
                "group_created",
                {"group": "world", "env": ENV, "torch_comm": "none", "device_group_backend": "gloo"},
            ),
            ("nccl_reads_log", {"file": name}),
        ],
    )
    return load_report(run)


def test_audit_judges_each_processs_reads_with_its_groups(tmp_path):
    report = gpu_launch(
        tmp_path, [read("NCCL_PROTO", "Simple", source="group:tp"), read("NCCL_ALGO", "Ring")]
    )
    assert report.verdict == "ok", report.problems
    (reads,) = report.nccl_reads.values()
    assert reads["verdict"] == "ok" and reads["nccl_version"] == "2.28.9" and reads["env_plugin_abi"] == "v2"


def test_audit_fails_a_process_whose_nccl_read_another_value(tmp_path):
    report = gpu_launch(tmp_path, [read("NCCL_PROTO", "LL", source="group:tp")])
    assert report.verdict == "fail" and report.exit_code == 1
    (p,) = report.processes
    assert p.notes == ["NCCL's own reads: NCCL read NCCL_PROTO=LL (group:tp); the profile says Simple"]


def test_audit_leaves_a_sglang_wins_variable_to_sglang_in_nccls_reads_too(tmp_path):
    kept = {**ENV, "NCCL_ALGO": "Tree"}
    process = [
        (
            "process_start",
            {"expected_env": ENV, "env": kept, "group_envs": GROUPS, "sglang_wins": ["NCCL_ALGO"]},
        )
    ]
    report = gpu_launch(
        tmp_path, [read("NCCL_ALGO", "Tree", source="environment"), read("NCCL_PROTO", "LL")], process=process
    )
    assert report.verdict == "ok", report.problems
    assert next(iter(report.nccl_reads.values()))["verdict"] == "ok"


def test_the_last_expectation_of_the_process_judges_its_reads(tmp_path):
    new = {"NCCL_PROTO": "LL128"}
    changed = ("profile_changed", {"expected_env": new, "env": new, "group_envs": {}, "sglang_wins": []})
    report = gpu_launch(
        tmp_path, [read("NCCL_PROTO", "LL128", source="group:tp")], process=[start(), changed]
    )
    assert next(iter(report.nccl_reads.values()))["verdict"] == "ok"
    report = gpu_launch(
        tmp_path / "b", [read("NCCL_PROTO", "Simple", source="group:tp")], process=[start(), changed]
    )
    assert next(iter(report.nccl_reads.values()))["verdict"] == "fail"


def test_reads_of_a_process_without_an_expectation_are_not_checked(tmp_path):
    report = gpu_launch(tmp_path, [read("NCCL_PROTO", "LL")], process=[])
    (reads,) = report.nccl_reads.values()
    assert reads["verdict"] == "absent"
    assert "NCCL's own reads" not in " ".join(report.processes[0].notes)  # said once, in the reads section
