"""Bounded work on hostile input (issue 24): one budget for the whole audit, bad lines counted and the first
few listed, a budget exceeded is exit 2 with what, the limit and the flag; and the one-screen view of many
alike hosts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.offline.audit.judge import load_report
from sglang_eagle_nccl.offline.audit.read import read_launch_records
from sglang_eagle_nccl.offline.audit.records import LISTED_PER_FILE, Budget, BudgetExceeded, parse_file
from sglang_eagle_nccl.offline.audit.render import format_text
from support.audit_records import rec, write_lines

ENV = {"NCCL_PROTO": "LL"}


def scheduler(pid: int, machine: dict | None = None, env: dict = ENV) -> list[dict]:
    m = machine or {}
    return [rec("process_start", pid, machine=m, expected_env=ENV, env=env, profile="p"),
            rec("process_role", pid, machine=m, title="sglang::scheduler_TP0"),
            rec("group_created", pid, machine=m, group="tp", ranks=[0, 1], env=env, torch_comm="lazy-nccl",
                group_overrides={})]


def launch(tmp_path: Path, files: dict[str, list]) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "launch.json").write_text(json.dumps({"profile": {"name": "p", "env": ENV}}))
    for name, lines in files.items():
        write_lines(run / name, lines)
    return run


def test_junk_lines_are_counted_and_only_the_first_few_listed(tmp_path):
    junk = [f"junk {n}" for n in range(5000)] + ["{not json either"]
    run = launch(tmp_path, {"proc-h-1.jsonl": [*scheduler(1), *junk]})
    got = read_launch_records(run)
    listed = [u for u in got.unreadable if u.line is not None]
    assert [u.line for u in listed] == list(range(4, 4 + LISTED_PER_FILE))
    assert listed[0].reason.startswith("not valid JSON (")
    (more,) = [u for u in got.unreadable if u.line is None]
    assert more.reason.startswith(f"... and {len(junk) - LISTED_PER_FILE} more unreadable line(s)")
    (proc,) = got.processes
    assert proc.bad_lines == len(junk) and len(proc.records) == 3


def test_every_kind_of_limit_stops_the_audit_with_exit_2_naming_it_and_the_flag(tmp_path):
    run = launch(tmp_path, {"proc-h-1.jsonl": scheduler(1), "proc-h-2.jsonl": scheduler(2)})
    assert load_report(run).verdict == "ok"
    for kind, limit in (("files", 1), ("lines", 5), ("records", 5), ("bytes", 100)):
        with pytest.raises(BudgetExceeded) as caught:
            load_report(run, Budget({kind: limit}))
        assert caught.value.kind == kind and f"--budget {kind}=N" in str(caught.value)
        result = CliRunner().invoke(main, ["audit", str(run), "--budget", f"{kind}={limit}"])
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert f"more than {limit} " in result.output
    result = CliRunner().invoke(main, ["audit", str(run), "--budget", "files=2", "--budget", "lines=6"])
    assert result.exit_code == 0, result.output  # exactly at the limits: read


@pytest.mark.parametrize("flag", ["files", "files=", "files=0", "files=-1", "memory=5", "files=1e9", "files=٣"])
def test_a_bad_budget_flag_is_refused_before_anything_is_read(tmp_path, flag):
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "nothing"), "--budget", flag])
    assert result.exit_code == 2 and f"--budget {flag!r}" in result.output and "KIND=N" in result.output


def test_an_unknown_budget_kind_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown budget kind"):
        Budget({"memory": 1})


def test_a_file_of_one_line_longer_than_a_chunk_and_lines_split_across_chunks_read_whole():
    long = json.dumps(rec("process_role", 1, title="x" * (3 << 20)))
    small = [json.dumps(rec("process_role", 1, title=str(n))) for n in range(20000)]
    data = ("\n".join([long, *small, long.replace("x", "y")]) + "\n").encode()
    parsed = parse_file(data, "f")
    assert len(parsed.records) == 20002 and parsed.bad == [] and parsed.cut is None


def test_a_bad_utf8_line_in_a_chunk_spoils_only_itself():
    good = json.dumps(rec("process_role", 1, title="ü")).encode()
    parsed = parse_file(b"\n".join([good, b"\xff", good.replace(b"\\u00fc", b"v")]) + b"\n", "f")
    assert len(parsed.records) == 2 and [(u.line, u.reason) for u in parsed.bad] == [(2, "not UTF-8 text")]


def test_a_whole_record_without_its_newline_is_judged_and_still_listed_as_cut():
    line = json.dumps(rec("process_role", 1, title="t")).encode()
    parsed = parse_file(line + b"\n" + line.replace(b'"t"', b'"u"'), "f")
    assert [r["title"] for r in parsed.records] == ["t", "u"]
    assert parsed.cut is not None and parsed.cut.whole_record and parsed.cut.offset == len(line) + 1
    assert parse_file(line + b"\n  \n", "f").cut is None  # only blanks after the last newline: nothing cut


def test_three_thousand_alike_hosts_fit_one_screen_and_every_other_host_is_listed(tmp_path):
    files = {f"proc-n{n}-1.jsonl": scheduler(1, {"host": f"n{n}"}) for n in range(3000)}
    files["proc-bad-1.jsonl"] = scheduler(1, {"host": "bad"}, env={"NCCL_PROTO": "Simple"})
    files.update({f"proc-s{n}-1.jsonl": scheduler(1, {"host": f"s{n}"}) for n in range(2)})
    text = format_text(load_report(launch(tmp_path, files)))
    lines = text.splitlines()
    assert len(lines) < 40, text
    assert any(line.startswith("✓ 3002 hosts alike, each 1 process(es): n0, n1, n10, ...") for line in lines)
    assert "host bad: 1 process(es)" in lines and "✗ the profile is NOT" in lines[-1].replace("Verdict: ", "")


# --- how cut lines, copies and directories are named ---------------------------------------------------------


def test_a_cut_line_and_a_copy_note_say_where_whose_and_what():
    from sglang_eagle_nccl.offline.audit.read import CopyNote
    from sglang_eagle_nccl.offline.audit.records import CutLine

    cut = CutLine("f.jsonl", 120, 7, False, "h/b/1/2/3", "d")
    assert cut.text() == "d/f.jsonl: cut line at byte 120 (7 bytes; process h/b/1/2/3): not judged"
    assert CutLine("f", 0, 3, True).text() == (
        "f: cut line at byte 0 (3 bytes; no complete record names its process): a whole record without its newline "
        "(judged)")
    assert cut.to_dict() == {"file": "f.jsonl", "directory": "d", "offset": 120, "size": 7, "whole_record": False,
                             "process": "h/b/1/2/3"}
    same = CopyNote("reads", "h/b/1/2/3", (("a/x", "b/x"),), ("c/x",))
    assert not same.conflict and same.text() == "reads of process h/b/1/2/3: counted once from a/x, b/x; prefix copies c/x"
    assert CopyNote("records", "k", (("a/x",),), ()).text() == "records of process k: counted once from a/x"
    two = CopyNote("records", "k", (("a/x",), ("b/y", "c/y")), ())
    assert two.conflict and two.text() == "records of process k: copies disagree -- a/x / b/y, c/y (each judged; the worse counts)"
    assert two.to_dict() == {"kind": "records", "process": "k", "conflict": True, "versions": [["a/x"], ["b/y", "c/y"]],
                             "prefixes": []}


def test_a_directory_named_by_several_paths_is_read_once_under_its_shortest_name(tmp_path):
    from sglang_eagle_nccl.offline.audit.read import read_launches, unique_dirs

    run = launch(tmp_path, {"proc-h-1.jsonl": scheduler(1)})
    longer = tmp_path / "." / "run"
    other = tmp_path / "a"
    other.mkdir()
    assert unique_dirs([longer, run, other, str(run)]) == [other, run] if str(other) < str(run) else [run, other]
    assert unique_dirs([str(longer), str(run)]) == [run]
    got = read_launches([longer, run])
    assert got.run_dirs == [str(run)] and len(got.processes) == 1


def test_directories_that_hold_only_reads_logs_and_junk_are_refused_as_a_whole(tmp_path):
    from sglang_eagle_nccl.offline.audit.read import CannotJudge, read_launches

    run = launch(tmp_path, {"proc-h-1.jsonl": ["junk"]})
    with pytest.raises(CannotJudge, match=r"no valid audit record could be read in .*run \(proc-h-1.jsonl:1: not valid JSON"):
        read_launches([run])
