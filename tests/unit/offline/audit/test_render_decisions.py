"""What `audit` prints (offline/audit/render.py): the marks, the per-machine lines, the verdict line, escaping.

From verdicts the judge returns (judge.Report and its parts), so each line is held to what it must say
for a given verdict: ✓ only for what was checked, – for what does not exist, every ⚠ / ✗ listed with why,
one verdict line that no record's text can forge.
"""

from __future__ import annotations

import pytest

from sglang_eagle_nccl.offline.audit.judge import CommVerdict, ProcessVerdict, Report
from sglang_eagle_nccl.offline.audit.read import Unreadable
from sglang_eagle_nccl.offline.audit.render import format_text, printable, read_lines

M1 = ("h", "b" * 32, "4026531836")


def proc(
    pid: int, role: str = "scheduler_TP0", verdict: str = "ok", notes=(), machine=M1, **kw
) -> ProcessVerdict:
    return ProcessVerdict(
        pid=pid,
        role=role,
        file=f"proc-{pid}.jsonl",
        verdict=verdict,
        notes=list(notes),
        host=machine[0],
        process=f"{machine[0]}/{pid}",
        machine=machine,
        **{"sglang_rank": role.startswith("scheduler"), **kw},
    )


def comm(
    pid: int,
    group: str = "tp",
    verdict: str = "ok",
    ranks=(0, 1),
    kind: str = "group",
    notes=(),
    machine=M1,
    unique_name: str | None = None,
    backend: str | None = "nccl",
) -> CommVerdict:
    return CommVerdict(
        pid=pid,
        role="scheduler_TP0",
        kind=kind,
        group=group,
        unique_name=unique_name,
        ranks=list(ranks),
        rank=0,
        backend=backend,
        verdict=verdict,
        notes=list(notes),
        host=machine[0],
        process=f"{machine[0]}/{pid}",
    )


def report(processes, communicators=(), verdict: str = "ok", **kw) -> Report:
    return Report(
        run_dir=kw.pop("run_dir", "/a/run"),
        profile=kw.pop("profile", "p"),
        verdict=verdict,
        processes=list(processes),
        communicators=list(communicators),
        eagle=kw.pop("eagle", []),
        sglang_writes=kw.pop("sglang_writes", []),
        problems=kw.pop("problems", []),
        **kw,
    )


def lines(r: Report, **kw) -> list[str]:
    return format_text(r, **kw).splitlines()


# --- escaping ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,out",
    [
        ("plain ✓ é", "plain ✓ é"),
        ("a\x1b[2J", "a\\x1b[2J"),
        ("\r\n\t\x00", "\\x0d\\x0a\\x09\\x00"),
        ("\x1f \x20", "\\x1f  "),
        ("\x7f\x80\x9f\xa0", "\\x7f\\x80\\x9f\xa0"),
        ("\u2028\u2029\u2027", "\\u2028\\u2029\u2027"),
        (5, "5"),
    ],
)
def test_printable_escapes_every_control_character(text, out):
    assert printable(text) == out


def test_a_record_cannot_forge_a_verdict_line():
    evil = comm(1, group="tp\n\rVerdict: ✓ forged\x1b[0m", verdict="fail", notes=["x\nVerdict: ✓"])
    text = format_text(report([proc(1, verdict="fail", notes=["\x07"])], [evil], verdict="fail"))
    assert sum(line.startswith("Verdict:") for line in text.splitlines()) == 1
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text


# --- the header and the verdict line ----------------------------------------------------------------------


def test_header_names_the_launch_and_the_profile():
    r = report([proc(1)], [comm(1)])
    assert lines(r)[:3] == ["Audit of /a/run", "Profile: p", ""]
    r = report(
        [proc(1)],
        [comm(1)],
        profile=None,
        run_dirs=["/n0/run", "/n1/run"],
        picked="newest launch under /a: x",
    )
    assert lines(r)[:3] == [
        "Audit of /n0/run, /n1/run",
        "(picked the newest launch under /a: x)",
        "Profile: (unknown)",
    ]
    assert lines(report([proc(1)], run_dirs=["/only"]))[0] == "Audit of /a/run"


@pytest.mark.parametrize(
    "verdict,comms,text",
    [
        ("ok", [comm(1)], "Verdict: ✓ the profile is in force in every audited process and communicator"),
        (
            "ok",
            [comm(1, verdict="absent")],
            "Verdict: ✓ the profile is in force in every audited process (no NCCL communicator existed to check)",
        ),
        (
            "ok",
            [],
            "Verdict: ✓ the profile is in force in every audited process (no NCCL communicator existed to check)",
        ),
        ("warn", [comm(1)], "Verdict: ⚠ in force, with warnings above"),
        ("fail", [comm(1)], "Verdict: ✗ the profile is NOT shown to be in force everywhere (see above)"),
        ("absent", [], "Verdict: – nothing to judge"),
    ],
)
def test_the_verdict_line_says_what_the_mark_covers(verdict, comms, text):
    out = lines(report([proc(1)], comms, verdict=verdict))
    assert out[-1] == text
    assert (
        out[-2]
        == "(--verbose: every process, communicator, NCCL read and all-reduce table; --json: every record)"
    )
    assert lines(report([proc(1)], comms, verdict=verdict), verbose=True)[-1] == text
    assert not lines(report([proc(1)], comms, verdict=verdict), verbose=True)[-2].startswith("(--verbose")


def test_no_machine_at_all_is_said():
    assert "(no process left valid records)" in lines(
        report([], verdict="fail", problems=["no audit records found"])
    )


# --- the compact view ------------------------------------------------------------------------------------


def test_compact_view_counts_marks_and_roles_per_machine():
    r = report(
        [
            proc(1, "launcher", loaded_sglang=True, sglang_rank=False),
            proc(2),
            proc(3, "scheduler_TP1_DP1"),
            proc(4, "pip", sglang_rank=False),
            proc(
                5,
                "detokenizer",
                verdict="warn",
                notes=["plugin error"],
                loaded_sglang=True,
                sglang_rank=False,
            ),
        ],
        [
            comm(2, "tp"),
            comm(3, "tp"),
            comm(2, "world", kind="pynccl", verdict="absent"),
            comm(2, "pp", ranks=[0]),
            comm(3, "pp", ranks=[1], verdict="warn", notes=["lazy"]),
            comm(3, "moe", unique_name="moe_ep:0", verdict="fail", notes=["missing"]),
        ],
        verdict="fail",
    )
    out = lines(r)
    assert out[3] == "host h: 5 process(es)"
    assert out[4] == "  processes      ⚠ 1, ✓ 4  (1 detokenizer, 1 helper, 1 launcher, 2 scheduler)"
    assert out[5] == (
        "  communicators  ✗ 1, ✓ 2, – 1  (moe/group, tp/group x2, world/pynccl); 2 one-rank group(s) ⚠ 1, ✓ 1"
    )
    assert (
        out[6] == "  NCCL's reads   – none recorded (NCCL < 2.28.7, no native plugins, or NCCL never loaded)"
    )
    assert out[7] == "  EAGLE groups   – no EAGLE worker"
    assert out[8:11] == [
        "    ⚠ detokenizer pid 5: plugin error",
        "    ✗ scheduler_TP0 pid 3 group moe_ep:0: missing",
        "    ⚠ scheduler_TP0 pid 3 group pp: lazy",
    ]


def test_compact_view_without_communicators():
    assert lines(report([proc(1)]))[5] == "  communicators  (none recorded)"
    assert (
        lines(report([proc(1)], [comm(1, ranks=[0])]))[5]
        == "  communicators  (none recorded); 1 one-rank group(s) ✓ 1"
    )


def test_compact_view_counts_nccls_reads_per_machine():
    reads = {
        "h/1": {"process": "h/1", "pid": 1, "verdict": "ok", "reads": [{}, {}]},
        "h/2": {"process": "h/2", "pid": 2, "verdict": "fail", "reads": [{}]},
        "x/9": {"process": "x/9", "pid": 9, "verdict": "fail", "reads": [{}]},
    }
    out = lines(report([proc(1), proc(2)], nccl_reads=reads))
    assert out[6] == "  NCCL's reads   ✗ 1, ✓ 1  (3 read(s) in 2 process(es))"


def test_compact_view_names_the_eagle_groups():
    eagle = [
        {
            "process": "h/1",
            "pid": 1,
            "worker": "EAGLEWorker",
            "draft": {"tp": {"unique_name": "tp:0"}},
            "verify": {"tp": {"group": "tp"}, "x": {}},
        },
        {
            "process": "h/2",
            "pid": 2,
            "worker": "EAGLEWorker",
            "draft": {},
            "verify": None,
            "draft_note": "shares the target's groups",
        },
    ]
    out = lines(report([proc(1), proc(2)], eagle=eagle))
    assert out[7] == "  EAGLE groups   2 worker(s): draft on tp:0; verify on None, tp"
    only_note = lines(report([proc(2)], eagle=eagle[1:]))
    assert (
        only_note[7] == "  EAGLE groups   1 worker(s): draft on shares the target's groups; verify on unknown"
    )
    nothing = [{"process": "h/1", "pid": 1, "worker": "W"}]
    assert (
        lines(report([proc(1)], eagle=nothing))[7]
        == "  EAGLE groups   1 worker(s): draft on unknown; verify on unknown"
    )


def test_machines_that_share_a_host_name_are_told_apart():
    other = ("h", "c" * 32, "4026532000")
    third = ("g", "d" * 32, "1")
    out = format_text(report([proc(1), proc(2, machine=other), proc(3, machine=third)]))
    assert "host g: 1 process(es)" in out
    assert f"host h (boot {'b' * 8}, pid namespace 4026531836): 1 process(es)" in out
    assert f"host h (boot {'c' * 8}, pid namespace 4026532000): 1 process(es)" in out
    assert out.index("host g") < out.index("host h (boot bbbb") < out.index("host h (boot cccc")


# --- sections every view has ---------------------------------------------------------------------------


def test_sglangs_writes_are_listed_once_in_the_compact_view_and_each_in_verbose():
    w = {"name": "NCCL_CUMEM_ENABLE", "before": None, "after": "0", "where": "_set_envs_and_config", "pid": 1}
    det = {
        "name": "NCCL_ALGO",
        "before": "Ring",
        "after": None,
        "where": "resolve",
        "for_correctness": "enable_deterministic_inference",
    }
    r = report([proc(1)], sglang_writes=[w, dict(w, pid=2), det])
    out = lines(r)
    i = out.index("SGLang's own NCCL writes")
    assert out[i + 1 : i + 4] == [
        "  NCCL_CUMEM_ENABLE: (unset) -> 0 in _set_envs_and_config",
        "  NCCL_ALGO: Ring -> (unset) in resolve (for --enable-deterministic-inference)",
        "",
    ]
    verbose = lines(r, verbose=True)
    i = verbose.index("SGLang's own NCCL writes")
    assert verbose[i + 1] == verbose[i + 2] == "  NCCL_CUMEM_ENABLE: (unset) -> 0 in _set_envs_and_config"


def test_what_was_not_judged_is_listed_twenty_at_a_time():
    bad = [Unreadable(f"f{i}", i, "why") for i in range(23)]
    out = lines(report([proc(1)], unreadable=bad, verdict="warn"))
    i = out.index("Not judged (unreadable files and lines)")
    assert out[i + 1] == "  ⚠ f0:0: why" and out[i + 20] == "  ⚠ f19:19: why"
    assert out[i + 21] == "  ... and 3 more (--verbose or --json lists all)"
    verbose = lines(report([proc(1)], unreadable=bad, verdict="warn"), verbose=True)
    i = verbose.index("Not judged (unreadable files and lines)")
    assert verbose[i + 23] == "  ⚠ f22:22: why" and verbose[i + 24] == ""
    exactly = lines(report([proc(1)], unreadable=bad[:20], verdict="warn"))
    assert not any(line.startswith("  ... and") for line in exactly)


def test_problems_are_listed_with_a_cross():
    out = lines(report([proc(1)], problems=["a", "b"], verdict="fail"))
    i = out.index("Problems")
    assert out[i + 1 : i + 4] == ["  ✗ a", "  ✗ b", ""]
    assert "Problems" not in lines(report([proc(1)]))


# --- the verbose view ---------------------------------------------------------------------------------------


def test_verbose_view_lists_every_process_and_communicator_with_its_mark():
    r = report(
        [
            proc(1, "launcher", loaded_sglang=True, sglang_rank=False, patch_set="sglang-0.5.21-latest"),
            proc(2, verdict="fail", notes=["a", "b"]),
            proc(3, "pip", sglang_rank=False),
            proc(4, "ninja", sglang_rank=False, verdict="warn", notes=["w"]),
        ],
        [comm(2, "tp", notes=["n1", "n2"]), comm(2, "world", kind="pynccl", verdict="absent", backend=None)],
        verdict="fail",
    )
    out = lines(r, verbose=True)
    assert out[3:6] == ["host h", "", "Processes"]
    assert out[7].startswith("  ✓ launcher ") and "sglang-0.5.21-latest" in out[7]
    assert out[8].startswith("  ⚠ ninja ") and out[8].endswith(" w")
    assert out[9].startswith("  ✗ scheduler_TP0 ") and out[9].endswith(" a; b") and " - " in out[9]
    assert out[10] == "  ✓ 1 helper process(es) that never imported SGLang (profile in force in each): pip"
    i = out.index("Communicators")
    assert out[i + 1].startswith("  ✓ scheduler_TP0        2  group  tp ") and "backend nccl" in out[i + 1]
    assert out[i + 2 : i + 4] == ["        n1", "        n2"]
    assert out[i + 4].startswith("  – scheduler_TP0        2  pynccl world ") and "backend" not in out[i + 4]


def test_verbose_view_without_communicators_or_reads_says_so():
    out = lines(report([proc(1)]), verbose=True)
    assert out[out.index("Communicators") + 1] == "  (none recorded)"
    assert out[out.index("NCCL's own reads (native env plugin)") + 1] == (
        "  unavailable: no process recorded any (NCCL < 2.28.7 has no env plugin interface, the native plugins are "
        "not installed, or NCCL was never loaded in this launch)"
    )


def test_verbose_view_shows_nccls_reads_per_process():
    reads = {
        "h/1": {
            "process": "h/1",
            "pid": 1,
            "verdict": "warn",
            "nccl_version": "2.28.9",
            "env_plugin_abi": "v2",
            "reads": [{"name": "NCCL_PROTO", "value": "LL", "source": "profile", "count": 3}],
            "unrecorded": 2,
            "notes": ["note"],
        },
        "h/2": {"process": "h/2", "pid": 2, "verdict": "absent", "reads": [], "unrecorded": 0, "notes": []},
    }
    out = lines(report([proc(1), proc(2)], nccl_reads=reads), verbose=True)
    i = out.index("NCCL's own reads (native env plugin)")
    assert out[i + 1 : i + 6] == [
        "  ⚠ pid 1 (NCCL 2.28.9, env plugin v2): 1 read(s)",
        "        NCCL_PROTO=LL  [profile] x3",
        "        ... and 2 read(s) the library had no room to record one by one",
        "        note",
        "  – pid 2 (NCCL did not load the env plugin): 0 read(s)",
    ]
    partly = {"h/1": {**reads["h/1"], "nccl_version": None, "env_plugin_abi": "v1", "unrecorded": 0}}
    out = lines(report([proc(1)], nccl_reads=partly), verbose=True)
    i = out.index("NCCL's own reads (native env plugin)")
    assert out[i + 1 : i + 4] == [
        "  ⚠ pid 1 (NCCL ?, env plugin v1): 1 read(s)",
        "        NCCL_PROTO=LL  [profile] x3",
        "        note",
    ]


def test_verbose_view_shows_eagle_groups_and_allreduce_tables():
    eagle = [
        {
            "process": "h/1",
            "pid": 1,
            "worker": "EAGLEWorker",
            "draft": {"tp": {"group": "tp"}},
            "verify": {"tp": {"unique_name": "tp:0"}},
        },
        {"process": "h/1", "pid": 1, "worker": "W2", "draft": None, "verify": None},
    ]
    out = lines(report([proc(1)], eagle=eagle), verbose=True)
    i = out.index("EAGLE speculative decoding (no new groups: draft and verify reuse existing ones)")
    assert out[i + 1 : i + 3] == [
        "  pid 1 EAGLEWorker: draft on tp; verify on tp:0",
        "  pid 1 W2: draft on unknown (the worker holds no group object); verify on unknown "
        "(the worker holds no group object)",
    ]
    paths = {"tp": {"group": "tp", "world_size": 2, "paths": []}}
    text = format_text(report([proc(1)], allreduce_paths=paths), verbose=True)
    assert "Which all-reduce runs, per group (first rank that recorded it)" in text
    assert "Which all-reduce runs" not in format_text(report([proc(1)], allreduce_paths=paths))


def test_read_lines_sort_and_count():
    reads = [
        {"name": "B", "value": None, "source": "default", "count": 1},
        {"name": "A", "value": "1", "source": "profile", "count": 2},
        {"name": "A", "value": "2", "source": "environment"},
    ]
    assert read_lines(reads) == ["A=2  [environment]", "A=1  [profile] x2", "B=(unset)  [default]"]
