"""Tests for sglang_eagle_nccl.knowledge.nccl.debug_log (parser of NCCL debug output) and
debug_log_check (its comparison).

Fixtures in tests/fixtures/nccl_logs are written from NCCL's format strings (each file cites
them) except nccl.vm.*.log, which are real captures from libnccl 2.32.3 on a CPU machine.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sglang_eagle_nccl.knowledge.nccl.debug_log import (
    NcclProcessLog,
    merge_logs,
    parse_dir,
    parse_file,
    parse_text,
    pid_host_from_filename,
)
from sglang_eagle_nccl.knowledge.nccl.debug_log_check import compare, format_text

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "nccl_logs"
P = "gpu-node-0:41231:41231 [0] NCCL INFO "  # a 2.27 INFO prefix for synthetic lines


def one(name: str) -> NcclProcessLog:
    logs = parse_file(FIXTURES / name)
    assert len(logs) == 1
    return logs[0]


def by_pid(logs: list[NcclProcessLog]) -> dict[int, NcclProcessLog]:
    return {lg.pid: lg for lg in logs}


@pytest.fixture(scope="module")
def r0() -> NcclProcessLog:
    return one("nccl.gpu-node-0.41231.log")


@pytest.fixture(scope="module")
def r1() -> NcclProcessLog:
    return one("nccl.gpu-node-0.41232.log")


@pytest.fixture(scope="module")
def v221() -> NcclProcessLog:
    return one("nccl.h100-a.5120.log")


@pytest.fixture(scope="module")
def v230() -> NcclProcessLog:
    return one("nccl.b200-x.9001.log")


@pytest.fixture(scope="module")
def mixed() -> dict[int, NcclProcessLog]:
    return by_pid(parse_file(FIXTURES / "mixed_stderr_tp2.txt"))


# ------------------------------------------------------------------ 2.27 debug file


def test_227_prefix_gives_host_pid_and_version(r0: NcclProcessLog) -> None:
    assert (r0.host, r0.pid, r0.version, r0.cuda_version) == ("gpu-node-0", 41231, "2.27.7", "12.9")


def test_param_value_drops_trailing_period_but_keeps_raw(r0: NcclProcessLog) -> None:
    report = next(r for r in r0.env_reports if r.name == "NCCL_BUFFSIZE")
    assert (report.value, report.raw, report.source) == ("8388608", "8388608.", "environment")


def test_227_three_comm_inits_in_order(r0: NcclProcessLog) -> None:
    assert [c.func for c in r0.comms] == ["ncclCommInitRankConfig", "ncclCommSplit", "ncclCommInitRank"]
    assert all(c.started and c.completed for c in r0.comms)


def test_init_line_fields(r0: NcclProcessLog) -> None:
    c = r0.comms[0]
    assert (c.comm, c.rank, c.nranks, c.cuda_dev, c.nvml_dev, c.bus_id, c.comm_id, c.tid) == (
        "0x55d0c8a1e2f0",
        0,
        2,
        0,
        0,
        "18000",
        "0x5c1f0e7d2a9b4e11",
        41290,
    )


def test_227_split_start_without_space_before_dash(r0: NcclProcessLog) -> None:
    split = r0.comms[1]
    assert (split.parent, split.split_count, split.color, split.key) == ("0x55d0c8a1e2f0", 1, 1357913, 0)
    assert split.is_split and split.comm_id is None


def test_comm_config_lines_go_to_the_next_init(r0: NcclProcessLog) -> None:
    assert [(s.field, s.value) for s in r0.comms[0].configs] == [("Blocking", "1")]
    assert [(s.field, s.value) for s in r0.comms[1].configs] == [("Blocking", "1")]
    assert r0.comms[2].configs == ()  # plain ncclCommInitRank (pynccl) prints no config line


def test_per_comm_variable_is_reported_for_each_comm(r0: NcclProcessLog) -> None:
    proto = [(r.comm, r.value) for r in r0.env_reports if r.name == "NCCL_PROTO"]
    assert proto == [(c.comm, "Simple") for c in r0.comms]


def test_process_wide_param_reported_once_on_first_comm(r0: NcclProcessLog) -> None:
    assert [r.comm for r in r0.env_reports if r.name == "NCCL_BUFFSIZE"] == ["0x55d0c8a1e2f0"]
    assert [e.name for e in r0.comms[1].env] == ["NCCL_PROTO"]


def test_matrix_parsed_on_rank0(r0: NcclProcessLog) -> None:
    m = r0.comms[0].matrix
    assert m is not None and m.complete
    assert m.protocols == ("LL", "LL128", "Simple")
    assert m.algorithms[-1] == "PAT" and len(m.rows) == 5
    assert (
        m.enabled("AllReduce", "LL"),
        m.enabled("allreduce", "simple"),
        m.enabled("AllReduce", "NVLS"),
    ) == (0, 1, 1)


def test_rank1_has_no_matrix(r1: NcclProcessLog) -> None:
    assert r1.comms[0].matrix is None


def test_channels_and_p2p_chunksize(r0: NcclProcessLog) -> None:
    c = r0.comms[0]
    assert dict(c.channels) == {"coll": 24, "collnet": 24, "nvls": 16, "p2p": 32, "p2p_per_peer": 32}
    assert c.channel_count("nvls") == 16 and c.p2p_chunksize == 524288
    assert r0.comms[2].channel_count() == 2


def test_network_and_topology_line_attached(r0: NcclProcessLog) -> None:
    assert [c.network for c in r0.comms] == ["Socket", "Socket", "Socket"]
    assert (r0.comms[0].n_nodes, r0.comms[0].local_ranks) == (1, 2)


def test_destroy_line_marks_comm(r0: NcclProcessLog) -> None:
    assert [c.destroyed for c in r0.comms] == [None, None, "Destroy"]


def test_227_warn_with_timestamp(r0: NcclProcessLog) -> None:
    (w,) = r0.warnings
    assert (w.timestamp, w.src_file, w.src_line, w.func, w.tid) == (
        "2025-06-02 10:15:42",
        "transport/net_socket.cc",
        539,
        None,
        41233,
    )
    assert "message truncated" in w.message


# ------------------------------------------------------------------ 2.21 and 2.30


def test_221_hardcoded_names_and_split_without_count(v221: NcclProcessLog) -> None:
    assert [c.func for c in v221.comms] == ["ncclCommInitRank", "ncclCommSplit"]
    split = v221.comms[1]
    assert (split.parent, split.split_count, split.color, split.key) == ("0x5591f2c04d60", None, 7, 0)


def test_221_warn_has_no_timestamp(v221: NcclProcessLog) -> None:
    (w,) = v221.warnings
    assert (w.timestamp, w.src_file, w.src_line) == (None, "enqueue.cc", 1556)


def test_221_level_name_reported(v221: NcclProcessLog) -> None:
    assert v221.env["NCCL_P2P_LEVEL"] == "PXB" and v221.version == "2.21.5"


def test_230_rank_prefixed_start_and_child_count(v230: NcclProcessLog) -> None:
    first, split = v230.comms
    assert (first.func, first.rank, first.nranks, first.completed) == ("ncclCommInitRankConfig", 0, 8, True)
    assert (split.split_count, split.color, split.parent) == (2, 3, first.comm)


def test_230_config_reset_line_reports_variable(v230: NcclProcessLog) -> None:
    reports = {r.name: (r.value, r.source) for r in v230.env_reports if r.source == "comm_config_override"}
    # cgaClusterSize is printed as NCCL_MAX_CGA_CLUSTER_SIZE; the variable NCCL reads is NCCL_CGA_CLUSTER_SIZE
    assert reports == {
        "NCCL_MIN_CTAS": ("8", "comm_config_override"),
        "NCCL_CGA_CLUSTER_SIZE": ("2", "comm_config_override"),
    }
    assert ("minCTAs", "8", "NCCL_MIN_CTAS") in [
        (s.field, s.value, s.env_name) for s in v230.comms[0].configs
    ]


def test_230_warn_has_function(v230: NcclProcessLog) -> None:
    (w,) = v230.warnings
    assert (w.func, w.src_file, w.src_line, w.message) == (
        "ncclNvlsSetup",
        "transport/nvls.cc",
        321,
        "Cuda failure 2 'out of memory'",
    )


def test_230_matrix_values(v230: NcclProcessLog) -> None:
    m = v230.comms[0].matrix
    assert m is not None
    assert (
        m.enabled("Broadcast", "LL128"),
        m.enabled("Broadcast", "Ring"),
        m.enabled("Broadcast", "Tree"),
    ) == (0, 1, 0)


# ------------------------------------------------------------------ real 2.32.3 captures


def test_real_232_capture_socket_ifname() -> None:
    log = one("nccl.vm.11936.log")
    assert (log.host, log.pid) == ("vm", 11936)
    assert [(r.value, r.source) for r in log.env_reports] == [("lo", "environment"), ("lo", "set")]
    assert log.comms == () and log.tids == (11936, 11937)


def test_real_232_warn_lines() -> None:
    log = one("nccl.vm.11939.log")
    assert [(w.src_file, w.src_line, w.func) for w in log.warnings] == [
        ("misc/socket.cc", 278, "ncclSocketGetAddrFromString"),
        ("bootstrap.cc", 117, "bootstrapNetInit"),
    ]
    assert log.warnings[1].message.startswith("Invalid NCCL_COMM_ID")


# ------------------------------------------------------------------ mixed streams


def test_mixed_stream_two_processes(mixed: dict[int, NcclProcessLog]) -> None:
    assert sorted((lg.host, lg.pid) for lg in mixed.values()) == [("gpu-node-1", 700), ("gpu-node-1", 701)]
    assert [c.rank for c in mixed[700].comms] == [0] and [c.rank for c in mixed[701].comms] == [1]


def test_mixed_garbled_lines_are_ignored(mixed: dict[int, NcclProcessLog]) -> None:
    assert mixed[700].env_values("NCCL_BUFFSIZE") == ("4194304",)  # not the garbled "1."
    assert all("NCCL_ALGO" not in lg.env for lg in mixed.values())  # prefix-less quote


def test_mixed_prefix_glued_after_text_keeps_host(mixed: dict[int, NcclProcessLog]) -> None:
    assert mixed[701].host == "gpu-node-1" and mixed[701].comms[0].completed


def test_mixed_launcher_tag_before_prefix(mixed: dict[int, NcclProcessLog]) -> None:
    assert mixed[700].env["NCCL_NTHREADS"] == "512"


def test_mixed_matrix_row_cut_by_other_process_is_rebuilt(mixed: dict[int, NcclProcessLog]) -> None:
    m = mixed[700].comms[0].matrix
    assert (
        m is not None
        and m.complete
        and [r.function for r in m.rows] == ["Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"]
    )
    assert (m.enabled("AllGather", "Ring"), m.enabled("AllGather", "PAT")) == (1, 0)
    assert dict(mixed[701].comms[0].channels)["coll"] == 24  # the line glued into the row


def test_matrix_row_cut_without_continuation_is_incomplete() -> None:
    text = "\n".join(
        [
            P
            + "ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x2 - Init START",
            P + "Enabled NCCL Func/Proto/Algo Matrix:",
            "     Function |       LL     LL128    Simple   |          Tree           Ring",
            "    Broadcast |        0         0         1   |             1",
            "",
        ]
    )
    m = parse_text(text)[0].comms[0].matrix
    assert m is not None and not m.complete and m.rows == ()


def test_bare_version_line_goes_to_previous_process() -> None:
    text = "h:5:5 [0] NCCL INFO cudaDriverVersion 12040\nNCCL version 2.21.5+cuda12.4\n"
    assert parse_text(text)[0].version == "2.21.5"


def test_config_batches_are_consumed_in_order() -> None:
    text = "\n".join(
        [
            P + "Comm config Blocking set to 0",
            P + "Comm config Max CTAs set to 8",
            P + "Comm config Blocking set to 1",
            "gpu-node-0:41231:50 [0] NCCL INFO ncclCommInitRankConfig comm 0xa rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1 commId 0x1 - Init START",
            "gpu-node-0:41231:51 [0] NCCL INFO ncclCommInitRankConfig comm 0xb rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1 commId 0x2 - Init START",
        ]
    )
    a, b = parse_text(text)[0].comms
    assert [(s.field, s.value) for s in a.configs] == [("Blocking", "0"), ("Max CTAs", "8")]
    assert [(s.field, s.value) for s in b.configs] == [("Blocking", "1")]


def test_reused_pointer_after_destroy_is_a_new_comm() -> None:
    start = (
        P + "ncclCommInitRank comm 0xabc rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1 commId 0x{} - Init START"
    )
    done = (
        P
        + "ncclCommInitRank comm 0xabc rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1 commId 0x{} - Init COMPLETE"
    )
    text = "\n".join(
        [
            start.format(1),
            done.format(1),
            P + "comm 0xabc rank 0 nranks 2 cudaDev 0 busId 1 - Abort COMPLETE",
            start.format(2),
        ]
    )
    first, second = parse_text(text)[0].comms
    assert (first.comm_id, first.destroyed, second.comm_id, second.completed) == (
        "0x1",
        "Abort",
        "0x2",
        False,
    )


def test_init_start_without_complete_stays_incomplete() -> None:
    text = (
        P + "ncclCommInitRank comm 0x9 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2 commId 0x3 - Init START\n"
    )
    (c,) = parse_text(text)[0].comms
    assert c.started and not c.completed


def test_invalid_bytes_and_nul_are_tolerated(tmp_path: Path) -> None:
    f = tmp_path / "stderr.txt"
    f.write_bytes(b"\xff\xfe\x00garbage\n" + P.encode() + b"NCCL_NTHREADS set by environment to 128.\n\x80\n")
    (log,) = parse_file(f)
    assert log.env == {"NCCL_NTHREADS": "128"}


def test_text_without_nccl_lines_gives_nothing() -> None:
    assert parse_text("hello\n[2025-01-01 00:00:00 TP0] Load weight end.\n") == []


# ------------------------------------------------------------------ file names and directories


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nccl.gpu-node-0.41231.log", ("gpu-node-0", 41231)),
        ("/d/nccl.vm.7790.log", ("vm", 7790)),
        ("nccl.h100.5120", ("h100", 5120)),
        ("mixed_stderr_tp2.txt", None),
    ],
)
def test_pid_host_from_filename(name: str, expected: tuple[str, int] | None) -> None:
    assert pid_host_from_filename(name) == expected


def test_parse_dir_h_p_names_including_empty_file(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "nccl.gpu-node-0.41232.log", tmp_path)
    (tmp_path / "nccl.gpu-node-0.41299.log").write_text("")  # NCCL opened the file, logged nothing
    logs = parse_dir(tmp_path)
    assert [(lg.host, lg.pid, len(lg.comms)) for lg in logs] == [
        ("gpu-node-0", 41232, 1),
        ("gpu-node-0", 41299, 0),
    ]


def test_unrelated_name_does_not_invent_a_process(tmp_path: Path) -> None:
    f = tmp_path / "capture.2024.log"
    shutil.copy(FIXTURES / "mixed_stderr_tp2.txt", f)
    assert sorted(lg.pid for lg in parse_file(f)) == [700, 701]


def test_merge_logs_joins_sources_of_one_process() -> None:
    a = parse_text(P + "NCCL_NTHREADS set by environment to 128.\n", source="a")
    b = parse_text(P + "NCCL version 2.27.7+cuda12.9\n", source="b")
    (m,) = merge_logs(a + b)
    assert (m.sources, m.env, m.version) == (("a", "b"), {"NCCL_NTHREADS": "128"}, "2.27.7")


# ------------------------------------------------------------------ comparison

EXPECTED = {
    "NCCL_PROTO": "Simple",
    "NCCL_BUFFSIZE": "8388608",
    "NCCL_P2P_LEVEL": "NVL",
    "NCCL_SOCKET_IFNAME": "lo",
}


def kinds(ds: list) -> list[tuple[str, int, str | None]]:
    return sorted((d.kind, d.pid, d.name) for d in ds)


def test_compare_matching_process_has_no_disagreement(r0: NcclProcessLog) -> None:
    assert compare([r0], EXPECTED) == []


def test_compare_different_and_not_reported(r1: NcclProcessLog) -> None:
    assert kinds(compare([r1], EXPECTED)) == [
        ("different", 41232, "NCCL_BUFFSIZE"),
        ("different", 41232, "NCCL_PROTO"),
        ("not_reported", 41232, "NCCL_P2P_LEVEL"),
    ]


def test_not_reported_is_softer_than_different(r1: NcclProcessLog) -> None:
    sev = {d.kind: d.severity for d in compare([r1], EXPECTED)}
    assert sev == {"different": "error", "not_reported": "notice"}


def test_different_reports_comm_and_values(r1: NcclProcessLog) -> None:
    d = next(d for d in compare([r1], EXPECTED) if d.name == "NCCL_PROTO")
    assert (d.expected, d.reported, d.comm) == ("Simple", "LL128", "0x5611aa0c3b80")


def test_size_suffix_explained_by_strtoll(r1: NcclProcessLog) -> None:
    (d,) = [d for d in compare([r1], {"NCCL_BUFFSIZE": "4M"})]
    assert d.kind == "different" and "strtoll" in d.detail and d.reported == "4"


def test_hex_expected_matches_decimal_report(r0: NcclProcessLog) -> None:
    assert compare([r0], {"NCCL_BUFFSIZE": "0x800000"}) == []


def test_legacy_level_digit_matches_level_name(v221: NcclProcessLog) -> None:
    assert compare([v221], {"NCCL_P2P_LEVEL": "2"}) == []


def test_lowercase_level_is_flagged(v221: NcclProcessLog) -> None:
    (d,) = compare([v221], {"NCCL_P2P_LEVEL": "pxb"})
    assert d.kind == "different" and "ignores" in d.detail


def test_debug_variables_are_unverifiable(r0: NcclProcessLog) -> None:
    (d,) = compare([r0], {"NCCL_DEBUG": "INFO"})
    assert (d.kind, d.severity) == ("unverifiable", "info")


def test_not_reported_mentions_missing_comm_init() -> None:
    log = one("nccl.vm.11936.log")
    (d,) = compare([log], {"NCCL_BUFFSIZE": "4194304"})
    assert d.kind == "not_reported" and "no communicator init" in d.detail


def test_audit_missing_variable_is_not_in_audit(r0: NcclProcessLog) -> None:
    audit = {41231: {k: v for k, v in EXPECTED.items()}}
    assert kinds(compare([r0], EXPECTED, audit)) == [("not_in_audit", 41231, "NCCL_NTHREADS")]


def test_audit_value_mismatch(r1: NcclProcessLog) -> None:
    audit = {"41232": {"NCCL_SOCKET_IFNAME": "lo", "NCCL_BUFFSIZE": "8388608", "NCCL_PROTO": "LL128"}}
    ds = [d for d in compare([r1], {}, audit)]
    assert [(d.kind, d.name, d.audit, d.reported) for d in ds] == [
        ("audit_mismatch", "NCCL_BUFFSIZE", "8388608", "4")
    ]


def test_process_missing_from_audit(r0: NcclProcessLog, r1: NcclProcessLog) -> None:
    audit = {
        41231: {
            "NCCL_SOCKET_IFNAME": "lo",
            "NCCL_P2P_LEVEL": "NVL",
            "NCCL_BUFFSIZE": "8388608",
            "NCCL_NTHREADS": "256",
            "NCCL_PROTO": "Simple",
        }
    }
    assert kinds(compare([r0, r1], {}, audit)) == [("process_not_audited", 41232, None)]


def test_compare_over_mixed_stream_per_pid(mixed: dict[int, NcclProcessLog]) -> None:
    ds = compare(mixed.values(), {"NCCL_BUFFSIZE": "4194304", "NCCL_NTHREADS": "256"})
    assert kinds(ds) == [("different", 700, "NCCL_NTHREADS"), ("different", 701, "NCCL_NTHREADS")]


# ------------------------------------------------------------------ output


def test_to_dict_is_json_serialisable(r0: NcclProcessLog, r1: NcclProcessLog) -> None:
    data = json.loads(
        json.dumps(
            {
                "logs": [r0.to_dict()],
                "disagreements": [d.to_dict() for d in compare([r1], EXPECTED)],
            }
        )
    )
    assert data["logs"][0]["comms"][0]["matrix"]["rows"][4]["protocols"] == {"LL": 0, "LL128": 0, "Simple": 1}
    assert {d["severity"] for d in data["disagreements"]} == {"error", "notice"}


def test_format_text_lists_processes_and_disagreements(r1: NcclProcessLog) -> None:
    out = format_text(compare([r1], EXPECTED), [r1])
    assert "gpu-node-0:41232 NCCL 2.27.7: 1 comm init(s) (1 complete)" in out
    assert "[error] different gpu-node-0:41232 comm 0x5611aa0c3b80 NCCL_PROTO" in out


def test_format_text_without_disagreement() -> None:
    assert format_text([]) == "no disagreement\n"
