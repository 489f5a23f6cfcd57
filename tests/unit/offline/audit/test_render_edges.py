"""Edges of what `audit` prints (offline/audit/render.py) that the render tests left open (issue 19 mutants).

From verdicts built by hand (judge.Report and its parts): which machine an orphan record is shown under,
which of SGLang's writes are one write, how group names and notes are joined, the exact lines of the
verbose view and of a report without machines.
"""

from __future__ import annotations

from sglang_eagle_nccl.offline.audit.judge import CommVerdict, ProcessVerdict, Report
from sglang_eagle_nccl.offline.audit.render import format_text, printable

M1 = ("h", "b" * 32, "4026531836")
NOWHERE = ("", "", "")  # the machine of a ProcessVerdict that names none
FOOTER = "(--verbose: every process, communicator, NCCL read and all-reduce table; --json: every record)"


def proc(pid, role="scheduler_TP0", verdict="ok", notes=(), machine=M1, **kw):
    fields = {"sglang_rank": role.startswith("scheduler"), "process": f"{machine[0]}/{pid}", **kw}
    return ProcessVerdict(
        pid=pid,
        role=role,
        file=f"proc-{pid}.jsonl",
        verdict=verdict,
        notes=list(notes),
        host=machine[0],
        machine=machine,
        **fields,
    )


def comm(pid, group="tp", verdict="ok", notes=(), process=None, backend="nccl", unique_name=None):
    return CommVerdict(
        pid=pid,
        role="scheduler_TP0",
        kind="group",
        group=group,
        unique_name=unique_name,
        ranks=[0, 1],
        rank=0,
        backend=backend,
        verdict=verdict,
        notes=list(notes),
        host="h",
        process=process or f"h/{pid}",
    )


def read(pid, process=None, **kw):
    out = {
        "pid": pid,
        "nccl_version": "2.28.7",
        "env_plugin_abi": "v1",
        "reads": [],
        "verdict": "ok",
        "notes": [],
    }
    if process is not None:
        out["process"] = process
    return {**out, **kw}


def report(processes, communicators=(), verdict="ok", **kw):
    return Report(
        run_dir="/a/run",
        profile="p",
        verdict=verdict,
        processes=list(processes),
        communicators=list(communicators),
        eagle=kw.pop("eagle", []),
        sglang_writes=kw.pop("sglang_writes", []),
        problems=kw.pop("problems", []),
        **kw,
    )


def lines(r, **kw):
    return format_text(r, **kw).splitlines()


def line(r, start, **kw):
    (found,) = [x for x in lines(r, **kw) if x.startswith(start)]
    return found


def test_only_control_characters_are_escaped_never_letters():
    assert printable("XX ok") == "XX ok"
    assert printable("\u2028X") == "\\u2028X"


# --- the default view: one section per machine -----------------------------------------------------------------


def test_eagle_groups_are_named_by_unique_name_else_by_group_and_joined():
    eagle = {
        "pid": 1,
        "process": "h/1",
        "worker": "EAGLEWorker",
        "draft": {"a": {"group": "tp"}, "b": {"group": "dp"}},
        "verify": {"a": {"group": "tp", "unique_name": "tp:1"}, "b": {"group": "dp", "unique_name": "dp:1"}},
    }
    r = report([proc(1)], [comm(1)], eagle=[eagle])
    assert line(r, "  EAGLE groups") == "  EAGLE groups   1 worker(s): draft on dp, tp; verify on dp:1, tp:1"


def test_draft_notes_stand_for_the_draft_groups_when_no_worker_holds_one():
    eagle = [
        {"pid": 1, "process": "h/1", "worker": "w", "draft_note": "n1"},
        {"pid": 2, "process": "h/2", "worker": "w", "draft_note": "n2", "draft": {}},
    ]
    r = report([proc(1), proc(2, role="scheduler_TP1")], [comm(1), comm(2)], eagle=eagle)
    assert line(r, "  EAGLE groups") == "  EAGLE groups   2 worker(s): draft on n1; n2; verify on unknown"


def test_every_note_of_a_failed_process_and_communicator_is_listed_on_its_line():
    r = report(
        [proc(1, verdict="fail", notes=["a", "b"])],
        [comm(1, verdict="warn", notes=["c", "d"], unique_name="tp:0")],
        verdict="fail",
    )
    assert "    ✗ scheduler_TP0 pid 1: a; b" in lines(r)
    assert "    ⚠ scheduler_TP0 pid 1 group tp:0: c; d" in lines(r)


def test_roles_are_counted_without_their_dp_and_tp_ranks_and_a_launcher_is_not_a_helper():
    procs = [
        proc(1, role="scheduler_DP1"),
        proc(2, role="scheduler_DP0_TP1"),
        proc(3, role="launcher"),
        proc(4, role="pip"),
    ]
    r = report(procs, [comm(1), comm(2)])
    assert line(r, "  processes") == "  processes      ✓ 4  (1 helper, 1 launcher, 2 scheduler)"


def test_writes_that_differ_in_any_field_are_each_listed_once():
    base = {"name": "NCCL_A", "before": None, "after": "1", "where": "w"}
    writes = [
        base,
        dict(base),
        {**base, "name": "NCCL_B"},
        {**base, "before": "0"},
        {**base, "after": "2"},
        {**base, "where": "v"},
    ]
    text = lines(report([proc(1)], [comm(1)], sglang_writes=writes))
    at = text.index("SGLang's own NCCL writes")
    assert text[at + 1 : at + 7] == [
        "  NCCL_A: (unset) -> 1 in w",
        "  NCCL_B: (unset) -> 1 in w",
        "  NCCL_A: 0 -> 1 in w",
        "  NCCL_A: (unset) -> 2 in w",
        "  NCCL_A: (unset) -> 1 in v",
        "",
    ]


# --- which machine a record is shown under ----------------------------------------------------------------------


def test_reads_are_placed_by_the_process_they_name_else_by_their_key():
    named = read(1, process="h/1")
    keyed = read(2)
    r = report(
        [proc(1), proc(2, role="scheduler_TP1")], [comm(1), comm(2)], nccl_reads={"x": named, "h/2": keyed}
    )
    assert line(r, "  NCCL's reads") == "  NCCL's reads   ✓ 2  (0 read(s) in 2 process(es))"


def test_records_of_an_unknown_process_are_shown_under_the_unnamed_machine():
    r = report(
        [proc(1, role="worker", machine=NOWHERE, process="gone-not")],
        [comm(1, process="gone")],
        nccl_reads={"gone": read(1, process="gone")},
        eagle=[{"pid": 1, "process": "gone", "worker": "w", "draft_note": "n"}],
    )
    text = lines(r)
    assert text[3] == "host : 1 process(es)"
    assert line(r, "  communicators") == "  communicators  ✓ 1  (tp/group)"
    assert line(r, "  NCCL's reads") == "  NCCL's reads   ✓ 1  (0 read(s) in 1 process(es))"
    assert line(r, "  EAGLE groups") == "  EAGLE groups   1 worker(s): draft on n; verify on unknown"


def test_a_record_that_names_no_process_goes_with_the_process_that_names_none():
    r = report(
        [proc(1, process="")],
        [comm(1, process="")],
        eagle=[{"pid": 1, "worker": "w", "draft_note": "n"}],
    )
    assert line(r, "  EAGLE groups") == "  EAGLE groups   1 worker(s): draft on n; verify on unknown"
    r = report([proc(1, process="")], [comm(1, process="")], nccl_reads={"": read(1)})
    assert line(r, "  NCCL's reads") == "  NCCL's reads   ✓ 1  (0 read(s) in 1 process(es))"


# --- the verbose view ----------------------------------------------------------------------------------------


def test_the_verbose_view_of_one_machine_line_by_line():
    procs = [
        proc(2, role="detokenizer", loaded_sglang=True),
        proc(1, role="launcher", notes=["kept"]),
        proc(3, role="pip"),
        proc(4, role="cli"),
    ]
    eagle = {
        "pid": 2,
        "process": "h/2",
        "worker": "EAGLEWorker",
        "draft": {"a": {"group": "tp", "unique_name": "tp:0"}, "b": {"group": "dp", "unique_name": "dp:0"}},
        "verify": {"a": {"group": "tp"}, "b": {"group": "dp"}},
    }
    reads = {"h/2": read(2, process="h/2", env_plugin_abi=None)}
    r = report(procs, [comm(2, backend=None)], eagle=[eagle], nccl_reads=reads)
    assert lines(r, verbose=True)[3:] == [
        "host h",
        "",
        "Processes",
        "    role                           pid  patch set              notes",
        "  ✓ launcher                         1  -                      kept",
        "  ✓ detokenizer                      2  -                      ",
        "  ✓ 2 helper process(es) that never imported SGLang (profile in force in each): cli, pip",
        "",
        "Communicators",
        "  ✓ scheduler_TP0        2  group  tp                   ranks [0, 1] ",
        "",
        "NCCL's own reads (native env plugin)",
        "  ✓ pid 2 (NCCL 2.28.7, env plugin ?): 0 read(s)",
        "",
        "EAGLE speculative decoding (no new groups: draft and verify reuse existing ones)",
        "  pid 2 EAGLEWorker: draft on dp:0, tp:0; verify on dp, tp",
        "",
        "Verdict: ✓ the profile is in force in every audited process and communicator",
    ]


def test_a_read_without_a_version_says_nccl_did_not_load_the_env_plugin():
    reads = {"h/1": read(1, process="h/1", nccl_version=None, env_plugin_abi=None)}
    r = report([proc(1)], [comm(1)], nccl_reads=reads)
    assert "  ✓ pid 1 (NCCL did not load the env plugin): 0 read(s)" in lines(r, verbose=True)


def test_verbose_all_reduce_tables_follow_the_machines():
    paths = {"tp": {"group": "tp", "unique_name": "tp:0", "world_size": 1, "device_group_backend": "nccl"}}
    text = lines(report([proc(1)], [comm(1)], allreduce_paths=paths), verbose=True)
    at = text.index("Which all-reduce runs, per group (first rank that recorded it)")
    assert text[at - 1] == ""
    assert text[at + 1].startswith("  all-reduce paths of group 'tp' (tp:0): 1 rank(s)")
    assert text[at + 2 :] == [
        "",
        "Verdict: ✓ the profile is in force in every audited process and communicator",
    ]


# --- the whole text ---------------------------------------------------------------------------------------------


def test_a_report_without_machines_says_so_between_blank_lines():
    assert lines(report([], verdict="fail")) == [
        "Audit of /a/run",
        "Profile: p",
        "",
        "(no process left valid records)",
        "",
        FOOTER,
        "Verdict: ✗ the profile is NOT shown to be in force everywhere (see above)",
    ]


def test_each_machine_section_ends_with_a_blank_line():
    text = lines(report([proc(1)], [comm(1)]))
    assert text[-3:] == [
        "",
        FOOTER,
        "Verdict: ✓ the profile is in force in every audited process and communicator",
    ]
