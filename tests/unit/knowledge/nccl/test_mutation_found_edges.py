"""Edges the mutation run (ci/mutation) found unguarded, one test per decision (issue 19): tuner rule
shadowing over rank ranges, refusals naming their values, the all-reduce describer's v1/v2 choice,
threshold ceilings and nesting limits, and the wrapper's misplaced-option and dotenv checks."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import NamedTuple

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.inproc.evidence import allreduce_readers as rd
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import SIZE_T_MAX, check_rules, parse_rules
from sglang_eagle_nccl.knowledge.sglang import allreduce_paths as ap
from sglang_eagle_nccl.offline.launch.env_formats import dotenv_safe
from support.allreduce_groups import CustomAllReduceV2, Stored, full_gpu_group, group

MiB = 1024 * 1024


def rules(*specs: dict):
    base = {"collective": "allreduce", "bytes": [0, 1024], "algorithm": "ring", "protocol": "LL"}
    parsed, findings = parse_rules([{**base, **s} for s in specs], "t.toml")
    assert findings == [] and len(parsed) == len(specs)
    return parsed


def shadow_errors(*specs: dict) -> list[str]:
    return [
        f"{f.variable}: {f.rule}" for f in check_rules(rules(*specs), None, None) if f.severity == "error"
    ]


# --- shadowing over rank and node ranges (first match wins) ------------------------------------------


def test_a_rule_without_a_rank_range_covers_every_rank_count_from_one():
    assert shadow_errors({}, {"nranks": [1, 1]}) == [
        "tuner.rules#2: can never match: first match wins and tuner.rules#1 already matches every call it matches"
    ]
    assert shadow_errors({}, {"nnodes": [1, 1]})


def test_disjoint_rank_ranges_do_not_shadow():
    assert shadow_errors({"nranks": [2, 4]}, {"nranks": [5, 8]}) == []
    assert shadow_errors({"nnodes": [1, 1]}, {"nnodes": [2, 2]}) == []


def test_a_gap_between_earlier_ranges_keeps_the_later_rule_alive():
    # 4 ranks are matched by neither earlier rule, so the third still fires for 4-rank communicators.
    assert shadow_errors({"nranks": [2, 3]}, {"nranks": [5, 8]}, {"nranks": [2, 8]}) == []
    assert shadow_errors({"nranks": [2, 4]}, {"nranks": [5, 8]}, {"nranks": [2, 8]}) == [
        "tuner.rules#3: can never match: first match wins and tuner.rules#1, tuner.rules#2 already match every "
        "call it matches"
    ]


def test_only_overlapping_earlier_rules_are_named_as_shadowing():
    assert shadow_errors({"bytes": [200, 300]}, {"bytes": [0, 100]}, {"bytes": [0, 100]}) == [
        "tuner.rules#3: can never match: first match wins and tuner.rules#2 already matches every call it matches"
    ]
    # adjacent ranges touch but do not overlap: [0, 100) and [100, 200), on either side
    assert shadow_errors({"bytes": [200, 300]}, {"bytes": [100, 200]}, {"bytes": [100, 200]}) == [
        "tuner.rules#3: can never match: first match wins and tuner.rules#2 already matches every call it matches"
    ]
    assert shadow_errors({"bytes": [100, 200]}, {"bytes": [0, 100]}, {"bytes": [100, 200]}) == [
        "tuner.rules#3: can never match: first match wins and tuner.rules#1 already matches every call it matches"
    ]


# --- refusals name their value --------------------------------------------------------------------------


@pytest.mark.parametrize("key,what", [("nranks", "ranks"), ("nnodes", "nodes")])
def test_count_range_refusals_name_the_value_and_the_count(key, what):
    for value, rule in (
        ([0, 2], f"min must be an integer from 1 to {SIZE_T_MAX} ({what})"),
        (5, f"must be a list [min, max] of {what} (both included)"),
        ([1, "x"], f'max must be an integer up to {SIZE_T_MAX} (NCCL\'s size_t) or "inf"'),
        ([3, 2], "the range is inverted (min > max)"),
    ):
        _, findings = parse_rules(
            [{"collective": "allreduce", "bytes": [0, 1], "algorithm": "ring", "protocol": "LL", key: value}],
            "t.toml",
        )
        (f,) = findings
        assert (f.variable, f.value, f.rule) == (f"tuner.rules#1.{key}", repr(value), rule)


def test_non_table_and_non_list_refusals_have_rule_and_fix():
    _, (f,) = parse_rules([5], "t.toml")
    assert (f.variable, f.value, f.rule, f.fix) == (
        "tuner.rules#1",
        "5",
        "each rule must be a table",
        "write each rule as a [[tuner.rules]] block",
    )
    _, (f,) = parse_rules({"a": 1}, "t.toml")
    assert (f.variable, f.value, f.rule, f.fix) == (
        "tuner.rules",
        "{'a': 1}",
        "must be a list of rules",
        "write each rule as a [[tuner.rules]] block",
    )


# --- the describer ------------------------------------------------------------------------------------------


def test_an_absent_communicator_has_no_class():
    e = rd.describe_group(group(ca_comm=None), sglang_version="0.5.23")["implementations"]["custom_allreduce"]
    assert e["class"] is None and e["present"] is False


def test_a_v2_object_without_a_config_is_judged_by_its_max_size_not_by_nvlink():
    v2 = CustomAllReduceV2(disabled=False, max_size=MiB, full_nvlink=False)
    e = rd.describe_group(group(ca_comm=v2, world_size=4), sglang_version="0.5.13")["implementations"][
        "custom_allreduce"
    ]
    assert e["carries"] == "sizes <= 1048576 bytes (1 MiB), multiples of 16 bytes, eager and CUDA graph"


def test_not_created_without_a_cpu_device_says_only_why():
    e = rd.describe_group(group(ca_comm=None, use_custom_allreduce=True), sglang_version="0.5.23")
    assert e["implementations"]["custom_allreduce"]["why_not"] == (
        "not created (SGLang skipped it or its setup raised; from 0.4.6 SGLang logs 'Setup Custom allreduce failed')"
    )
    e = rd.describe_group(group(pymscclpp_comm=None, use_pymscclpp=False), sglang_version="0.5.23")
    assert e["implementations"]["mscclpp"]["why_not"] == (
        "not requested for this group (use_pymscclpp=False): --enable-mscclpp not given"
    )


@pytest.mark.parametrize(
    "name",
    [
        "one_shot_push_threshold",
        "two_shot_push_threshold",
        "one_shot_pull_threshold",
        "two_shot_pull_threshold",
    ],
)
def test_each_tuned_threshold_can_be_the_ceiling(name):
    table = SimpleNamespace(
        **{
            n: 1024
            for n in (
                "one_shot_push_threshold",
                "two_shot_push_threshold",
                "one_shot_pull_threshold",
                "two_shot_pull_threshold",
            )
        }
    )
    setattr(table, name, 8 * MiB)
    assert rd._heuristic_ceiling(table, False) == 8 * MiB
    assert rd._heuristic_ceiling(SimpleNamespace(), False) is None


def test_multicast_raises_both_ceilings_and_a_config_may_lack_fields():
    graph = SimpleNamespace(two_shot_push_threshold=MiB, mc=SimpleNamespace(max_bytes=4 * MiB))
    eager = SimpleNamespace(two_shot_push_threshold=MiB, mc=SimpleNamespace(max_bytes=2 * MiB))
    comm = CustomAllReduceV2(
        disabled=False, max_size=MiB, config=SimpleNamespace(graph=graph, eager=eager, num_mc_blocks=2)
    )
    text = rd.describe_group(group(ca_comm=comm), sglang_version="0.5.23")["implementations"][
        "custom_allreduce"
    ]["carries"]
    assert text.startswith(
        "multiples of 16 bytes up to 4194304 bytes (4 MiB) in CUDA graphs and 2097152 bytes (2 MiB) eager"
    )
    bare = CustomAllReduceV2(disabled=False, max_size=MiB, config=SimpleNamespace(graph=graph, eager=eager))
    d = rd.describe_group(group(ca_comm=bare), sglang_version="0.5.23")
    assert d["error"] is None
    assert d["implementations"]["custom_allreduce"]["carries"].startswith(
        "multiples of 16 bytes up to 1048576 bytes"
    )
    no_tables = CustomAllReduceV2(disabled=False, max_size=MiB, config=SimpleNamespace())
    d = rd.describe_group(group(ca_comm=no_tables), sglang_version="0.5.23")
    assert d["error"] is None and d["implementations"]["custom_allreduce"]["carries"].startswith(
        "sizes <= 1048576"
    )


def test_trt_workspace_text_follows_the_size_text():
    from support.allreduce_groups import CustomAllreduce

    ca = CustomAllreduce(disabled=False, max_size=MiB, max_required_workspace_size=[2 * MiB, MiB])
    carries = rd.describe_group(group(ca_comm=ca), sglang_version="0.4.3")["implementations"][
        "custom_allreduce"
    ]["carries"]
    assert carries.startswith("sizes ") and carries.endswith(
        "(and < 2097152 bytes (2 MiB), TensorRT-LLM kernel path)"
    )


def test_odd_stored_values_are_not_taken():
    e = rd.describe_group(
        group(pcie_ipc_comm=Stored(disabled=False, max_numel="big")), sglang_version="0.5.23"
    )
    assert e["implementations"]["pcie_ipc"]["thresholds"]["max_numel"] is None
    qr = Stored(
        disabled=False,
        qr_max_size=MiB,
        qr_quant_level=SimpleNamespace(name="FP"),
        _QR_MIN_SIZE={("x", 2): [1]},
    )
    d = rd.describe_group(group(qr_comm=qr), sglang_version="0.5.23")
    assert d["error"] is None and "min_bytes" not in d["implementations"]["quick_allreduce"]["thresholds"]


class Pair(NamedTuple):
    a: object
    b: int = 0


@dataclass
class Box:
    inner: object


KINDS = {
    "namedtuple": (lambda v: Pair(v), lambda e, innermost=False: {"a": e, "b": "0" if innermost else 0}),
    "dataclass": (lambda v: Box(v), lambda e, innermost=False: {"inner": e}),
    "dict": (lambda v: {"k": v}, lambda e, innermost=False: {"k": e}),
    "list": (lambda v: [v], lambda e, innermost=False: [e]),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_plain_converts_five_levels_of_each_kind_and_shows_the_sixth_as_repr(kind):
    wrap, converted = KINDS[kind]
    marker = object()
    value = wrap(marker)  # the sixth level, at depth 5
    expected = repr(value)
    for level in range(5):
        value = wrap(value)
        expected = converted(expected, innermost=level == 0)  # depth 5 and below: every value a repr
    assert rd._plain(value) == expected
    assert rd._plain(wrap(None)) == converted(None)


def test_format_paths_details():
    d = rd.describe_group(
        full_gpu_group(pynccl_comm=Stored(available=False, world_size=2)), sglang_version="0.5.23"
    )
    symm_step = next(s for s in d["order"] if s["path"] == "pynccl_symm_mem")
    lines = ap.format_paths(d)
    text = next(ln for ln in lines if ln.strip().startswith(f"{d['order'].index(symm_step) + 1}. "))
    assert text.endswith(
        d["implementations"]["pynccl"]["why_not"]
    )  # PyNccl off: its own reason, not symmetric memory
    minimal = ap.format_paths({"world_size": 2, "group": "tp"})
    assert minimal[1] == "  order SGLang tries: unknown for SGLang (version unknown)" and len(minimal) == 2


def test_limits_of_an_unknown_path_are_none():
    assert ap.limits_for("no_such_path", "0.5.23") is None


# --- the wrapper's own checks -------------------------------------------------------------------------


@pytest.mark.parametrize("misplaced", [["--nccl-env=NCCL_ALGO=Ring"], ["--audit-dir=/a=b"]])
def test_an_option_with_a_value_containing_equals_is_still_recognised(misplaced, tmp_path):
    import sys

    res = CliRunner().invoke(
        main,
        ["launch", "--profile", "pcie-8gpu", "--python", sys.executable, "--model-path", "M", *misplaced],
    )
    assert (
        res.exit_code == 2 and f"{misplaced[0].split('=')[0]} comes after the server arguments" in res.output
    )


def test_after_a_second_double_dash_everything_is_the_users(tmp_path, monkeypatch):
    import sys

    res = CliRunner().invoke(
        main,
        [
            "launch",
            "--profile",
            "pcie-8gpu",
            "--python",
            sys.executable,
            "--dry-run",
            "--",
            "--model-path",
            "M",
            "--",
            "--profile",
            "x",
        ],
    )
    assert "comes after the server arguments" not in res.output


def test_dotenv_safe_values():
    for ok in ("/X/y.xml", "eth0", "LL,Simple", "a#b", "a$b"):
        assert dotenv_safe(ok), ok
    for bad in ("#x", " x", "x ", "a'b", 'a"b', "a\\b", "a${B}", "a\nb", "a\rb"):
        assert not dotenv_safe(bad), bad


def test_env_dotenv_refuses_a_value_the_two_parsers_read_differently():
    res = CliRunner().invoke(
        main, ["env", "--format", "dotenv", "--profile", "pcie-8gpu", "--nccl-env", "NCCL_TOPO_FILE=#x"]
    )
    assert res.exit_code == 2, res.output
    res = CliRunner().invoke(
        main,
        ["env", "--format", "dotenv", "--profile", "pcie-8gpu", "--nccl-env", "NCCL_TOPO_FILE=/X/topo.xml"],
    )
    assert res.exit_code == 0 and "NCCL_TOPO_FILE=/X/topo.xml" in res.output


def test_enable_row_reads_every_section_for_the_function():
    from sglang_eagle_nccl.knowledge.nccl.parsing import PROTOCOLS, enable_row

    assert enable_row("AllGather:LL;AllReduce:Simple", PROTOCOLS, "AllReduce") == {
        "LL": 0,
        "LL128": 0,
        "Simple": 1,
    }
    assert enable_row("AllGather:LL;AllReduce:Simple", PROTOCOLS, "AllGather") == {
        "LL": 1,
        "LL128": 0,
        "Simple": 0,
    }


class ClassHoldsPlainObject:
    holder = SimpleNamespace(x=1)


def test_peek_returns_a_plain_object_stored_on_the_class():
    assert rd._peek(ClassHoldsPlainObject(), "holder") is ClassHoldsPlainObject.holder


def test_a_v1_object_with_a_config_is_read_as_v2_even_without_full_nvlink():
    from support.allreduce_groups import CustomAllreduce

    ca = CustomAllreduce(
        disabled=False, max_size=MiB, full_nvlink=False, config=SimpleNamespace(graph=None, eager=None)
    )
    carries = rd.describe_group(group(ca_comm=ca, world_size=4), sglang_version="0.5.23")["implementations"][
        "custom_allreduce"
    ]["carries"]
    assert carries == "sizes <= 1048576 bytes (1 MiB), multiples of 16 bytes, eager and CUDA graph"


def test_readers_keep_only_well_typed_values_and_name_their_flags():
    d = rd.describe_group(
        group(
            _fi_workspace_hint=5,
            pynccl_comm=None,
            use_pynccl=True,
            device=None,
            torch_symm_mem_comm=None,
            use_torch_symm_mem_all_reduce=False,
            use_torch_symm_mem=True,
        ),
        sglang_version="0.5.23",
    )
    impls = d["implementations"]
    assert impls["flashinfer_allreduce"]["thresholds"]["workspace"] is None
    assert impls["pynccl"]["why_not"] == "not created (SGLang skipped it)"
    assert impls["torch_symm_mem"]["requested"] is False  # the newer flag's value, when a group has both
    assert d["device"] is None


def test_summary_names_the_backend_and_joins_bypasses():
    cpu = {"device": "cpu", "device_group_backend": "gloo", "implementations": {}}
    assert "torch.distributed on the device group (gloo)" in rd._summary(cpu)
    gpu = {
        "device": "cuda:0",
        "device_group_backend": "gloo",
        "implementations": {"pynccl": {"present": True}},
    }
    assert rd._summary(gpu) == (
        "no all-reduce bypasses NCCL; nothing reaches NCCL here (device group backend gloo, "
        "PyNccl unavailable)"
    )
    assert rd._summary({"world_size": 2}) == (
        "no all-reduce bypasses NCCL; nothing reaches NCCL here (device group backend unknown, PyNccl absent)"
    )
    two = {
        "implementations": {
            "custom_allreduce": {"enabled": True, "title": "A", "carries": "a"},
            "torch_symm_mem": {"enabled": True, "title": "B", "carries": "b"},
            "pynccl": {"enabled": True},
        }
    }
    assert rd._summary(two) == "outside NCCL: A (a); B (b); the rest reaches NCCL: PyNccl inside CUDA graphs"


def test_an_unknown_step_state_shows_a_question_mark_and_nothing_else(monkeypatch):
    def boom(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(rd, "_read_pcie_ipc", boom)
    d = rd.describe_group(full_gpu_group(), sglang_version="0.5.23")
    index = next(i for i, s in enumerate(d["order"], 1) if s["path"] == "pcie_ipc")
    line = next(ln for ln in ap.format_paths(d) if ln.strip().startswith(f"{index}. "))
    assert line.endswith("  ?    ") and "PCIe" in line


# --- variables.check: each kind reaches its check with the variable, the value and the NCCL version -----

from packaging.version import Version  # noqa: E402 - the section below needs it

from sglang_eagle_nccl.contract.names import MAX_ARG_STRLEN  # noqa: E402
from sglang_eagle_nccl.knowledge.nccl import variables as v  # noqa: E402

THROUGH_CHECK = [
    ("NCCL_IB_HCA", "=mlx 5", None, "error"),
    ("NCCL_NO_CACHE", "PATH", None, "error"),
    ("NCCL_TOPO_FILE", "", None, "error"),
    ("NCCL_SOCKET_FAMILY", "af_inet", None, "error"),  # case-sensitive choice
    ("NCCL_P2P_LEVEL", "C2C", Version("2.20"), "error"),
    ("NCCL_PROTO", "AllReduce:LL", Version("2.20"), "error"),
    ("NCCL_ALGO", "NVLS", Version("2.16"), "error"),
    ("NCCL_CTA_POLICY", "2", Version("2.27.1"), "error"),
    ("NCCL_MAX_CTAS", "8", Version("2.16"), "warning"),
    ("NCCL_COMM_BLOCKING", "1", None, "warning"),
]


@pytest.mark.parametrize("name,value,version,severity", THROUGH_CHECK, ids=[t[0] for t in THROUGH_CHECK])
def test_check_passes_variable_value_and_version_to_each_kind(name, value, version, severity):
    findings = v.check(name, value, nccl_version=version)
    assert [f.severity for f in findings] == [severity], findings
    (f,) = findings
    assert f.variable == name and f.value == value and f.rule and f.fix


def test_plugin_libraries_are_checked_as_their_kind_of_plugin(tmp_path):
    missing = str(tmp_path / "none.so")
    for name in ("NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_ENV_PLUGIN"):
        findings = v.check(name, missing)
        assert findings and all(f.variable == name and f.value == missing for f in findings), findings
    tuner = " ".join(f.message() for f in v.check("NCCL_TUNER_PLUGIN", missing))
    net = " ".join(f.message() for f in v.check("NCCL_NET_PLUGIN", missing))
    assert tuner != net  # each names its own kind of plugin


def test_a_debug_file_error_is_not_followed_by_the_directory_check(tmp_path):
    findings = v.check("NCCL_DEBUG_FILE", "~/nccl.%p")
    assert [f.severity for f in findings] == ["error"]
    assert p_sev(v.check("NCCL_DEBUG_FILE", str(tmp_path / "nccl.%h.%p.log"))) == []


def p_sev(findings):
    return [f.severity for f in findings]


def test_environment_value_limits_and_wording():
    name = "NCCL_X"
    fits = "v" * (MAX_ARG_STRLEN - len(name) - 2)
    assert v.check_environment_value(name, fits) == []
    (f,) = v.check_environment_value(name, fits + "v")
    assert f.variable == name and f.value == fits + "v"
    assert f.fix == f"shorten the value to under {MAX_ARG_STRLEN - len(name) - 2} bytes"
    (f,) = v.check_environment_value(name, "a\x00")
    assert f.fix == "remove them"
    assert (
        v.check_environment_value(name, "a\udcff") == []
    )  # an undecodable byte os.environ holds as a surrogate
    (f,) = v.check_environment_value(name, "a\ud800")  # a lone surrogate no byte stands for
    assert (f.variable, f.value, f.fix) == (name, "a\ud800", "write it as plain text")


def test_names_refused_for_case_or_for_not_being_nccl():
    (f,) = v.check_name("ld_preload", allow_unknown=True)
    assert f.variable == "ld_preload" and f.rule.startswith("a profile may only set NCCL_* and TORCH_NCCL_*")
    (f,) = v.check_name("PATH", allow_unknown=False)
    assert f.variable == "PATH" and f.value is None
    assert v.check("PATH", "a\nb") == v.check_name("PATH", allow_unknown=False)  # the value is not looked at


# --- policy: one bad value never stops the others -----------------------------------------------------------


def test_a_bad_or_empty_value_does_not_stop_the_keys_after_it():
    from sglang_eagle_nccl.profile.policy import policy_from_mapping

    for first in ({"sglang_wins": 5}, {"nccl_version": ""}, {"audit_dir": None}, {"unknown": 1}):
        policy, _ = policy_from_mapping({**first, "consistency": "warn", "allow_partial": "1"}, "p.toml")
        assert policy.consistency == "warn" and policy.allow_partial is True, first
    _, (f,) = policy_from_mapping({"sglang_wins": ["PATH"]}, "p.toml")
    assert f.fix == "remove it"


# --- cli helpers ------------------------------------------------------------------------------------------------


def test_emit_json_writes_any_value_as_text(capsys):
    from pathlib import Path

    from sglang_eagle_nccl.cli.common import emit_json

    emit_json({"b": Path("/x"), "a": 1})
    assert json_loads(capsys.readouterr().out) == {"a": 1, "b": "/x"}


def json_loads(text):
    import json

    return json.loads(text)


def test_commands_without_json_report_a_bad_profile_as_text():
    res = CliRunner().invoke(main, ["env", "--nccl-env", "NCCL_BUFFSIZE=4M"])
    assert res.exit_code == 2 and res.stdout == "" and "NCCL_BUFFSIZE='4M'" in res.stderr
    assert not res.stderr.lstrip().startswith("{")


# --- NCCL value parsing -------------------------------------------------------------------------------------

from sglang_eagle_nccl.knowledge.nccl import parsing as p  # noqa: E402

V24 = Version("2.24")


@pytest.mark.parametrize(
    "value,count",
    [
        ("Gather:LL;Bcast:LL", 2),
        ("LL,LL64,LL65", 2),
        ("AllReduce:;Broadcast:", 2),
        ("a:b:c;AllReduce:d:e:f", 2),
        ("LL;Simple;LL128", 2),
        ("AllReduce:^;Broadcast:^", 2),
        ("LL,^Simple,^LL128", 2),
    ],
)
def test_every_bad_section_and_token_is_reported(value, count):
    findings = p.check_proto("NCCL_PROTO", value, V24)
    assert [f.severity for f in findings] == ["error"] * count, findings


def test_empty_sections_are_skipped_like_strtok():
    assert p.check_proto("NCCL_PROTO", "LL;;AllReduce:Simple", V24) == []


def test_a_semicolon_alone_is_the_per_collective_syntax():
    (f,) = p.check_proto("NCCL_PROTO", "LL;Simple", Version("2.20"))
    assert f.rule.startswith("the per-collective 'func:list' syntax needs NCCL >= 2.24")
    assert f.fix == "use a flat list such as NCCL_PROTO=LL for this NCCL"


def test_an_error_in_the_list_suppresses_the_ll128_warning():
    assert [f.severity for f in p.check_proto("NCCL_PROTO", "LL128,bogus", V24)] == ["error"]


def test_interface_list_edges():
    for ok in ("XX", "=X", "lo", "ETH0", "eth0:29500"):
        assert p.check_ifname_list("I", ok) == [], ok
    (f,) = p.check_ifname_list("I", "eth0:1:2")
    assert f.rule == "port in 'eth0:1:2' must be a number"


def test_overflow_fix_names_what_was_asked_for():
    (f,) = p.check_bytes("B", "9" * 30)
    assert f.fix == "give a positive number of bytes that fits in 64 bits, or remove B to keep NCCL's default"


def test_malformed_legacy_level_names_the_level_nccl_reads_or_lists_the_level_names():
    (f,) = p.check_level("L", "1x", None)  # NCCL reads it as 1 (PIX): the fix names that level
    assert f.fix == "write the level name, e.g. L=PIX"
    (f,) = p.check_level("L", "9" * 20, None)  # a C int of -1: no level at all, so every name is listed
    assert f.fix == "use one of " + ", ".join(p.LEVELS)


def test_strtoll_signs_after_spaces_and_huge_negatives():
    assert p.strtoll0("  -5").value == -5 and p.strtoll0("\t+5").consumed == "+5"
    assert p.strtoll0("X5").consumed == "" and p.strtoll0("X5").value == 0
    got = p.strtoll0("-" + "9" * 20)
    assert (got.value, got.overflow) == (p.LLONG_MIN, True)
    got = p.strtoll0("-9223372036854775809")
    assert (got.value, got.overflow) == (p.LLONG_MIN, True)


def test_rule_findings_name_the_rule_and_say_why():
    (shadow,) = [f for f in check_rules(rules({}, {}), None, None) if f.severity == "error"]
    assert shadow.variable == "tuner.rules#2" and shadow.value == "AllReduce [0, 1024) bytes -> Ring/LL"
    assert shadow.fix == "move it before the rule(s) that shadow it, narrow those, or delete it"
    (w,) = check_rules(
        rules({"collective": "allgather", "algorithm": "tree", "protocol": "simple"}), None, None
    )
    assert (w.variable, w.value) == ("tuner.rules#1.algorithm", "Tree")
    assert w.rule == (
        "NCCL runs AllGather only with CollNetDirect, NVLS, PAT, Ring; this rule never changes anything"
    )
    assert w.fix == "choose one of those for AllGather"
    (w,) = check_rules(rules({"algorithm": "nvls", "protocol": "LL"}), None, None)
    assert w.rule == "NCCL runs NVLS only with the Simple protocol; this rule never changes anything"
    assert w.fix == 'write protocol = "Simple" for NVLS'
    (w,) = check_rules(rules({"protocol": "LL128"}), None, None)
    assert w.fix.startswith("check NCCL's 'Enabled NCCL Func/Proto/Algo Matrix'") and w.rule.startswith(
        "NCCL enables LL128"
    )


def test_each_name_refusal_names_the_variable():
    for name, allow in (
        ("nccl_proto", False),
        ("PATH", False),
        ("NCCL_PROTOO", True),
        ("NCCL_PROTOO", False),
    ):
        (f,) = v.check_name(name, allow_unknown=allow)
        assert f.variable == name and f.value is None, (name, f)


def test_debug_file_in_a_world_writable_directory(tmp_path):
    import os
    import stat

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    assert os.stat(shared).st_mode & stat.S_IWOTH
    findings = v.check("NCCL_DEBUG_FILE", f"{shared}/nccl.%h.log")
    assert [f.severity for f in findings] == ["warning", "warning"]
    assert all(f.variable == "NCCL_DEBUG_FILE" for f in findings)
    assert "writable by everyone" in findings[1].rule
    # an error in the value: the directory is not looked at
    assert [f.severity for f in v.check("NCCL_DEBUG_FILE", f"{shared}/nccl.%q.log")] == ["error", "warning"]


def test_an_empty_plugin_value_names_that_plugins_default_library():
    assert "libnccl-tuner.so" in v.check("NCCL_TUNER_PLUGIN", "")[0].rule
    assert "libnccl-net.so" in v.check("NCCL_NET_PLUGIN", "")[0].rule


def test_plain_reads_an_unset_dataclass_field_as_none():
    from dataclasses import field

    @dataclass
    class Lazy:
        a: int = 1
        later: int = field(init=False)

    assert rd._plain(Lazy()) == {"a": 1, "later": None}
