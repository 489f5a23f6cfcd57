"""What each NCCL value check decides for the values on either side of its rule (issue 19): error,
warning or nothing, and which variable and value a finding names. Names and tokens as NCCL reads
them (strcmp / strcasecmp / strtoll); versions where a value appeared."""

from __future__ import annotations

import pytest
from packaging.version import Version

from sglang_eagle_nccl.knowledge.nccl import parsing as p
from sglang_eagle_nccl.knowledge.nccl import variables as v

V = Version


def sev(findings) -> list[str]:
    return [f.severity for f in findings]


def one(findings):
    (f,) = findings
    return f


# --- names ---------------------------------------------------------------------------------------------


def test_check_name():
    assert v.check_name("NCCL_PROTO", allow_unknown=False) == []
    f = one(v.check_name("nccl_proto", allow_unknown=True))
    assert f.severity == "error" and f.variable == "nccl_proto" and f.fix == "write NCCL_PROTO"
    f = one(v.check_name("LD_PRELOAD", allow_unknown=True))
    assert f.severity == "error" and f.rule.startswith("a profile may only set NCCL_* and TORCH_NCCL_*")
    f = one(v.check_name("NCCL_PROTOO", allow_unknown=False))
    assert f.severity == "error" and f.fix.startswith("did you mean NCCL_PROTO or ")
    f = one(v.check_name("NCCL_PROTOO", allow_unknown=True))
    assert f.severity == "warning" and f.fix.startswith("did you mean NCCL_PROTO or ")
    assert f.fix.endswith("? check the name against your NCCL release notes")
    f = one(v.check_name("NCCL_ZZZZZZZZZZZZ", allow_unknown=False))
    assert f.fix.startswith("if it is new in your NCCL release") and "did you mean" not in f.fix
    assert v.closest("nccl_proto")[0] == "NCCL_PROTO" and len(v.closest("NCCL_IB_")) <= 3


def test_check_for_unknown_and_known_names():
    assert sev(v.check("NCCL_FUTURE_X", "1", allow_unknown=True)) == ["warning"]
    assert sev(v.check("NCCL_FUTURE_X", "a\nb", allow_unknown=True)) == ["warning", "error"]
    assert sev(v.check("NCCL_FUTURE_X", "1")) == ["error"]
    assert sev(v.check("PATH", "/bin", allow_unknown=True)) == ["error"]
    assert v.check("NCCL_PROTO", "LL") == []
    assert sev(v.check("NCCL_PROTO", "LL,bogus")) == ["error"]


def test_scope_and_rank_rules():
    assert v.scope_of("NCCL_PROTO") == "communicator" and v.lookup("NCCL_PROTO").per_communicator
    assert v.scope_of("NCCL_BUFFSIZE") == "process" and not v.lookup("NCCL_BUFFSIZE").per_communicator
    assert v.scope_of("NCCL_NOT_A_THING") == "process"
    assert v.rank_rule("NCCL_SOCKET_IFNAME") == "node_local" and v.rank_rule("NCCL_PROTO") == "must_match"
    assert v.rank_rule("NCCL_NOT_A_THING") == "must_match" and v.rank_rule("NCCL_DEBUG") == "free"


def test_spec_to_dict():
    d = v.lookup("NCCL_MAX_CTAS").to_dict()
    assert d == {
        "name": "NCCL_MAX_CTAS",
        "kind": "int",
        "scope": "process",
        "ranks": "must_match",
        "summary": v.lookup("NCCL_MAX_CTAS").summary,
        "values": v.lookup("NCCL_MAX_CTAS").values,
        "changes": list(v.lookup("NCCL_MAX_CTAS").changes),
        "since": "2.17",
        "warning": None,
    }


# --- what may go into an environment at all -------------------------------------------------------------


def test_environment_value_rules():
    assert v.check_environment_value("NCCL_X", "ok") == []
    for bad in ("a\x00b", "a\nb"):
        f = one(v.check_environment_value("NCCL_X", bad))
        assert (
            f.variable == "NCCL_X"
            and f.value == bad
            and f.rule == "values cannot contain NUL or newline characters"
        )
    f = one(v.check_environment_value("NCCL_X", "a\ud800"))
    assert "lone surrogates" in f.rule
    assert one(v.check_environment_value("NCCL_X", "{audit_dir}/x")).variable == "NCCL_X"


def test_non_ascii_values_of_ascii_kinds():
    f = one(v.check("NCCL_NTHREADS", "\u0665\u0661\u0662"))
    assert (
        f.value == "\u0665\u0661\u0662"
        and "U+0665" in f.rule
        and f.fix == "write the digits in ASCII: NCCL_NTHREADS=512"
    )
    f = one(v.check("NCCL_PROTO", "LL\u00e9"))
    assert "U+00E9" in f.rule and f.fix == "write NCCL_PROTO with ASCII characters only"
    f = one(v.check("NCCL_NTHREADS", "5\u00b2"))  # superscript two: a digit to isdigit(), no decimal value
    assert f.fix == "write NCCL_NTHREADS with ASCII characters only"
    assert v.check("NCCL_TOPO_FILE", "/t/\u00e9.xml") == []  # a path (text) may be any text


def test_since_and_spec_warnings():
    assert v.check("NCCL_MAX_CTAS", "8", nccl_version=V("2.17")) == []
    f = one(v.check("NCCL_MAX_CTAS", "8", nccl_version=V("2.16.5")))
    assert f.severity == "warning" and f.value == "8" and "added in 2.17" in f.rule
    assert v.check("NCCL_MAX_CTAS", "8") == []  # version unknown: no claim
    f = one(v.check("NCCL_COMM_BLOCKING", "1"))
    assert f.severity == "warning" and f.fix == "see `sglang-eagle-nccl explain NCCL_COMM_BLOCKING`"
    assert sev(v.check("NCCL_COMM_BLOCKING", "2")) == ["error"]  # an error replaces the table's warning


# --- booleans, choices, text --------------------------------------------------------------------------


def test_check_bool():
    assert p.check_bool("NCCL_X", "0") == [] and p.check_bool("NCCL_X", "1") == []
    f = one(p.check_bool("NCCL_X", "true"))
    assert f.rule == "must be 0 or 1; NCCL reads it with strtoll, so 'true' means 0"
    assert f.fix == "use NCCL_X=1 to enable or NCCL_X=0 to disable"
    assert (
        one(p.check_bool("NCCL_P2P_DISABLE", "2")).fix
        == "use NCCL_P2P_DISABLE=1 to disable or NCCL_P2P_DISABLE=0 to leave enabled"
    )
    assert "means 10" in one(p.check_bool("NCCL_X", "10")).rule


def test_check_choice():
    assert p.check_choice("N", "2", ("0", "1", "2"), False) == []
    assert p.check_choice("N", "af_inet", ("AF_INET", "AF_INET6"), False) == []
    f = one(p.check_choice("N", "af_inet", ("AF_INET", "AF_INET6"), True))
    assert f.fix == "write N=AF_INET (exact case)" and f.rule == "must be one of AF_INET, AF_INET6"
    assert one(p.check_choice("N", "3", ("0", "1", "2"), True)).fix == "use one of: 0, 1, 2"


def test_check_text():
    assert (
        p.check_text("N", "x") == []
        and one(p.check_text("N", "")).rule == "an empty value means NCCL's default"
    )


# --- levels --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,level",
    [
        ("0", "LOC"),
        ("1", "PIX"),
        ("2", "PXB"),
        ("3", "PHB"),
        ("4", "SYS"),
        ("5", "SYS"),
        ("6", "SYS"),
        ("99", "SYS"),
    ],
)
def test_legacy_integer_levels_map_like_nccl(value, level):
    f = one(p.check_level("NCCL_P2P_LEVEL", value, None))
    assert f.severity == "warning" and f.rule == f"legacy integer level; NCCL maps {int(value)} to {level}"
    assert f.fix == f"write NCCL_P2P_LEVEL={level} to say what you mean"


@pytest.mark.parametrize(
    "value,rule",
    [
        (
            "1x",
            "a legacy level must be a plain integer 0-5: NCCL reads '1x' with strtol into a C int as 1, i.e. PIX",
        ),
        (
            "01",
            "a legacy level must be a plain integer 0-5: NCCL reads '01' with strtol into a C int as 1, i.e. PIX",
        ),
        (
            "9" * 20,
            "NCCL reads a legacy level with strtol into a C int, which makes '99999999999999999999' -1; a "
            "negative level passes NCCL's range check and indexes outside its level table (undefined behaviour)",
        ),
    ],
)
def test_malformed_legacy_levels(value, rule):
    f = one(p.check_level("NCCL_P2P_LEVEL", value, None))
    assert (f.severity, f.rule) == ("error", rule)


def test_level_names_and_versions():
    for name in p.LEVELS:
        if name not in p.LEVEL_SINCE:
            assert p.check_level("L", name, None) == [] and p.check_level("L", name, V("2.18")) == []
    assert p.check_level("L", "C2C", V("2.26")) == []
    assert one(p.check_level("L", "C2C", V("2.25.1"))).severity == "error"
    assert one(p.check_level("L", "C2C", None)).severity == "warning"
    assert (
        p.check_level("L", "P2C", V("2.27")) == []
        and one(p.check_level("L", "P2C", V("2.26"))).severity == "error"
    )
    assert one(p.check_level("L", "", None)).rule == "an empty level is ignored by NCCL"
    f = one(p.check_level("L", "sys", None))
    assert f.severity == "error" and f.fix == "write L=SYS"
    assert one(p.check_level("L", "NVLINK", None)).rule == "unknown level name; NCCL silently ignores it"


# --- protocol and algorithm lists ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["LL", "ll,simple", "Simple", "^LL128", "LL;AllReduce:Simple", "AllReduce:LL;Broadcast:^LL"]
)
def test_proto_values_accepted_on_new_nccl(value):
    assert "error" not in sev(p.check_proto("NCCL_PROTO", value, V("2.24")))


@pytest.mark.parametrize(
    "value,rule_start",
    [
        ("", "an empty NCCL_PROTO means NCCL's default"),
        ("LL,LL64", "unknown protocol 'LL64'"),
        ("^", "'^' must be followed by the tokens to exclude"),
        ("LL,^Simple", "'^' is only allowed at the start of a list"),
        ("AllReduce:", "'AllReduce': has an empty list"),
        ("Gather:LL", "unknown collective 'Gather'"),
        ("LL;Simple", "only the first section may omit the 'function:' prefix"),
        ("AllReduce:LL:Simple", "section 'AllReduce:LL:Simple' has more than one ':'"),
    ],
)
def test_proto_values_refused(value, rule_start):
    findings = p.check_proto("NCCL_PROTO", value, V("2.24"))
    assert findings and findings[0].severity == "error" and findings[0].rule.startswith(rule_start), findings
    assert findings[0].variable == "NCCL_PROTO" and findings[0].value == value


def test_per_collective_syntax_and_nccl_versions():
    assert one(p.check_proto("NCCL_PROTO", "AllReduce:LL", V("2.23.4"))).rule.startswith(
        "the per-collective 'func:list' syntax needs NCCL >= 2.24"
    )
    f = one(p.check_proto("NCCL_PROTO", "AllReduce:LL", None))
    assert f.severity == "warning" and "needs NCCL >= 2.24" in f.rule
    assert p.check_proto("NCCL_PROTO", "LL,Simple", V("2.18")) == []
    assert sev(p.check_proto("NCCL_PROTO", "AllReduce:bogus", None)) == ["error"]  # no extra warning then


def test_ll128_forcing_warnings():
    assert sev(p.check_proto("NCCL_PROTO", "^LL", None)) == [
        "warning"
    ]  # an exclusion list keeps LL128 forced on
    assert p.check_proto("NCCL_PROTO", "^LL128", None) == []
    assert sev(p.check_proto("NCCL_PROTO", "LL128", None)) == ["warning"]
    assert p.check_proto("NCCL_PROTO", "LL,Simple", None) == []
    assert one(p.check_proto("NCCL_PROTO", "^Simple", None)).rule.startswith(
        "an exclusion list ('^...') forces LL128 on"
    )
    assert one(p.check_proto("NCCL_PROTO", "LL128", None)).rule.startswith(
        "naming LL128 explicitly forces LL128 on"
    )


def test_algorithms_and_their_first_release():
    assert p.check_algo("NCCL_ALGO", "ring,TREE", None) == []
    assert p.check_algo("NCCL_ALGO", "NVLS", V("2.17")) == []
    f = one(p.check_algo("NCCL_ALGO", "NVLS", V("2.16")))
    assert f.severity == "error" and f.rule == "algorithm NVLS needs NCCL >= 2.17; NCCL 2.16 does not know it"
    assert sev(p.check_algo("NCCL_ALGO", "NVLSTree", V("2.17.1"))) == ["error"]
    assert p.check_algo("NCCL_ALGO", "NVLSTree", V("2.18")) == []
    assert p.check_algo("NCCL_ALGO", "PAT", None) == []  # unknown NCCL: no claim
    assert sev(p.check_algo("NCCL_ALGO", "Ring,Bogus", None)) == ["error"]


def test_enable_row_follows_ncclS_parse_list():
    tokens = p.PROTOCOLS
    defaults = {"LL128": 2}
    assert p.enable_row(None, tokens, "AllReduce", defaults) == {"LL": 1, "LL128": 2, "Simple": 1}
    assert p.enable_row("LL", tokens, "AllReduce", defaults) == {"LL": 1, "LL128": 0, "Simple": 0}
    assert p.enable_row("^LL", tokens, "AllReduce", defaults) == {"LL": 0, "LL128": 1, "Simple": 1}
    assert p.enable_row("Simple;AllReduce:LL", tokens, "AllReduce") == {"LL": 1, "LL128": 0, "Simple": 0}
    assert p.enable_row("Simple;AllReduce:LL", tokens, "Broadcast") == {"LL": 0, "LL128": 0, "Simple": 1}
    assert p.enable_row("allreduce:^LL", tokens, "AllReduce") == {"LL": 0, "LL128": 1, "Simple": 1}
    assert p.enable_row("AllGather:LL", tokens, "AllReduce", defaults) == {"LL": 1, "LL128": 2, "Simple": 1}
    assert p.enable_row("bogus", tokens, "AllReduce") is None


# --- other kinds ---------------------------------------------------------------------------------------


def test_thread_thresholds():
    assert p.check_thread_thresholds("T", "64 256 256 64 256 256") == []
    assert p.check_thread_thresholds("T", "-2 -2 -2 -2 -2 -2") == []
    assert (
        one(p.check_thread_thresholds("T", "-3 0 0 0 0 0")).rule
        == "thresholds must be >= 0 (or -2 for default)"
    )
    for bad in (
        "64 256 256 64 256",
        "64  256 256 64 256 256",
        "64 256 256 64 256 256 1",
        "a b c d e f",
        "1" * 19 + " 1 1 1 1 1",
    ):
        assert one(p.check_thread_thresholds("T", bad)).rule.startswith("NCCL reads six integers")


def test_debug_level_and_subsystems():
    assert p.check_debug_level("D", "info") == [] and p.check_debug_level("D", "TRACE") == []
    assert one(p.check_debug_level("D", "DEBUG")).rule == "unknown debug level"
    assert p.check_debug_subsys("S", "INIT,env") == [] and p.check_debug_subsys("S", "^COLL") == []
    assert [f.rule for f in p.check_debug_subsys("S", "INIT,BOGUS,,")] == [
        "unknown subsystem 'BOGUS'",
        "unknown subsystem ''",
        "unknown subsystem ''",
    ]


def test_debug_file():
    assert p.check_debug_file("F", "/l/nccl.%h.%p.log") == []
    assert p.check_debug_file("NCCL_DEBUG_FILE", "{audit_dir}/nccl.%h.%p.log") == []
    assert sev(p.check_debug_file("F", "{audit_dir}/nccl.%h.%p.log")) == [
        "error"
    ]  # only NCCL_DEBUG_FILE expands it
    assert one(p.check_debug_file("F", " ")).rule == "an empty file name sends output to stdout"
    assert one(p.check_debug_file("F", "~/n.%p")).rule.startswith("NCCL does not expand '~'")
    assert [f.rule[:30] for f in p.check_debug_file("F", "/l/n.%x.%p%")] == [
        "NCCL only expands %h (hostname",
        "NCCL only expands %h (hostname",
    ]
    assert p.check_debug_file("F", "/l/100%%.%p") == []
    f = one(p.check_debug_file("F", "/l/nccl.log"))
    assert f.severity == "warning" and "without %p" in f.rule
    f = one(p.check_debug_file("F", "rel/n.%p"))
    assert (
        f.severity == "warning"
        and f.rule == "a relative path is resolved in each process's working directory"
    )
    assert sev(p.check_debug_file("NCCL_DEBUG_FILE", "{audit_dir}/../x.%p")) == ["error"]


def test_placeholder_use():
    assert p.check_placeholder_use("NCCL_DEBUG_FILE", "{audit_dir}/a/b.%p") == []
    assert p.check_placeholder_use("NCCL_PROTO", "LL") == []
    for name, value in (
        ("NCCL_PROTO", "{audit_dir}/x"),
        ("NCCL_DEBUG_FILE", "/x/{audit_dir}"),
        ("NCCL_DEBUG_FILE", "{audit_dir}/{audit_dir}/x"),
        ("NCCL_DEBUG_FILE", "{audit_dir}/"),
        ("NCCL_DEBUG_FILE", "{audit_dir}//x"),
        ("NCCL_DEBUG_FILE", "{audit_dir}/a/../x"),
        ("NCCL_DEBUG_FILE", "{audit_dir}/a//b"),
    ):
        f = one(p.check_placeholder_use(name, value))
        assert f.variable == name and f.value == value, (name, value)
    assert (
        p.placeholder_prefix_rest("{audit_dir}/x") == "x"
        and p.placeholder_prefix_rest("{audit_dir}x") is None
    )


def test_interface_lists():
    for ok in ("eth0", "^docker,lo", "=eth0", "^=eth0", "eth0:29500", "ib0,eth1"):
        assert p.check_ifname_list("I", ok) == [], ok
    assert one(p.check_ifname_list("I", "e")).rule.startswith("NCCL ignores a value of one character")
    assert one(p.check_ifname_list("I", "")).rule.startswith("NCCL ignores a value of one character")
    assert one(p.check_ifname_list("I", "eth 0")).rule == "'eth 0' is not an interface name"
    assert one(p.check_ifname_list("I", "eth0,")).rule == "'' is not an interface name"
    assert one(p.check_ifname_list("I", "eth0:x")).rule == "port in 'eth0:x' must be a number"


def test_hca_lists():
    assert p.check_hca_list("H", "=mlx5_0:1,mlx5_1:1") == [] and p.check_hca_list("H", "^=mlx5_0") == []
    f = one(p.check_hca_list("H", "mlx5_1"))
    assert f.severity == "warning" and f.fix == "write H==mlx5_1 for exact names"
    assert one(p.check_hca_list("H", "^mlx5_1")).fix == "write H=^=mlx5_1 for exact names"
    assert one(p.check_hca_list("H", "=")).rule == "no HCA names given"
    assert one(p.check_hca_list("H", "^")).rule == "no HCA names given"
    assert sev(p.check_hca_list("H", "=mlx 5")) == ["error"]
    assert sev(p.check_hca_list("H", "=mlx5_0:x")) == ["error"]
    assert p.check_hca_list("H", "=mlx5_0:1:2:3") == []
    assert sev(p.check_hca_list("H", "=mlx5_0:1:2:3:4")) == ["error"]


def test_cta_policy():
    assert p.check_cta_policy("C", "0", None) == [] and p.check_cta_policy("C", "1", V("2.27")) == []
    assert p.check_cta_policy("C", "2", V("2.28")) == [] and p.check_cta_policy("C", "2", None) == []
    assert one(p.check_cta_policy("C", "2", V("2.27.9"))).rule == "policy 2 (ZERO) needs NCCL >= 2.28"
    assert p.check_cta_policy("C", "EFFICIENCY|ZERO", V("2.29")) == []
    assert one(p.check_cta_policy("C", "EFFICIENCY", V("2.28.9"))).rule == "policy names need NCCL >= 2.29"
    assert one(p.check_cta_policy("C", "efficiency", None)).rule == "unknown CTA policy"
    assert one(p.check_cta_policy("C", "3", None)).rule == "unknown CTA policy"


@pytest.mark.parametrize(
    "value,ok",
    [
        ("10.0.0.1:29500", True),
        ("[::1]:1", True),
        ("host-a.b_c:65535", True),
        ("h:0", False),
        ("h:65536", False),
        ("h", False),
        ("h:123456", False),
        ("[::1]", False),
        (":80", False),
        ("h:8 0", False),
    ],
)
def test_host_port(value, ok):
    assert (p.check_host_port("NCCL_COMM_ID", value) == []) is ok


def test_name_lists():
    assert p.check_name_list("N", "ALL") == [] and p.check_name_list("N", "NCCL_PROTO,NCCL_ALGO") == []
    f = one(p.check_name_list("N", "NCCL_PROTO,PATH,nccl_x"))
    assert f.rule == "not NCCL variable names: PATH, nccl_x"
    assert sev(p.check_name_list("N", "all")) == ["error"]


def test_bytes_checks():
    f = one(p.check_bytes("NCCL_BUFFSIZE", "4M"))
    assert f.rule == "NCCL parses NCCL_BUFFSIZE with strtoll and no suffix: '4M' is read as 4 byte(s)"
    assert f.fix == "write the byte count, e.g. NCCL_BUFFSIZE=4194304"
    assert one(p.check_bytes("B", "1.5 KiB")).fix == "write the byte count, e.g. B=1536"
    assert one(p.check_bytes("B", "2g")).fix == "write the byte count, e.g. B=2147483648"
    assert one(p.check_bytes("B", "1tb")).fix == "write the byte count, e.g. B=1099511627776"
    assert p.check_bytes("B", "0x10") == [] and p.check_bytes("B", "1") == []
    assert one(p.check_bytes("B", "0")).rule.startswith("must be a positive number of bytes")
    assert one(p.check_bytes("B", "x")).rule.startswith("NCCL parses B with strtoll, which reads no number")
    assert p.check_bytes("B", "5", maximum=5) == [] and sev(p.check_bytes("B", "6", maximum=5)) == ["error"]
    assert (
        one(p.check_bytes("B", str(2**40), maximum=2**31 - 1)).fix
        == "give a byte count up to 2147483647, e.g. B=1073741824"
    )
    assert one(p.check_bytes("B", "10", maximum=4)).fix == "give a byte count up to 4, e.g. B=4"


# --- every finding names the variable and the value, with a rule and a fix --------------------------

V24 = V("2.24")
NAMED = [
    (p.check_integer, ("N", ""), {}),
    (p.check_integer, ("N", "x"), {}),
    (p.check_integer, ("N", "4M"), {}),
    (p.check_integer, ("N", "010"), {}),
    (p.check_integer, ("N", "9" * 30), {}),
    (p.check_integer, ("N", "5"), {"minimum": 6}),
    (p.check_integer, ("N", "5"), {"multiple_of": 2}),
    (p.check_bytes, ("B", "4M"), {}),
    (p.check_bytes, ("B", "0"), {}),
    (p.check_bytes, ("B", "9"), {"maximum": 8}),
    (p.check_bool, ("N", "2"), {}),
    (p.check_choice, ("N", "x", ("a",), True), {}),
    (p.check_level, ("L", "", None), {}),
    (p.check_level, ("L", "1x", None), {}),
    (p.check_level, ("L", "3", None), {}),
    (p.check_level, ("L", "C2C", V("2.20")), {}),
    (p.check_level, ("L", "C2C", None), {}),
    (p.check_level, ("L", "sys", None), {}),
    (p.check_level, ("L", "X", None), {}),
    (p.check_proto, ("P", "", V24), {}),
    (p.check_proto, ("P", "AllReduce:LL", V("2.20")), {}),
    (p.check_proto, ("P", "a:b:c", V24), {}),
    (p.check_proto, ("P", "AllReduce:", V24), {}),
    (p.check_proto, ("P", "Gather:LL", V24), {}),
    (p.check_proto, ("P", "LL;Simple", V24), {}),
    (p.check_proto, ("P", "^", V24), {}),
    (p.check_proto, ("P", "LL,^Simple", V24), {}),
    (p.check_proto, ("P", "LL64", V24), {}),
    (p.check_proto, ("P", "AllReduce:LL", None), {}),
    (p.check_proto, ("P", "^LL", None), {}),
    (p.check_algo, ("A", "NVLS", V("2.16")), {}),
    (p.check_thread_thresholds, ("T", "1"), {}),
    (p.check_thread_thresholds, ("T", "-3 0 0 0 0 0"), {}),
    (p.check_debug_level, ("D", "X"), {}),
    (p.check_debug_subsys, ("S", "X"), {}),
    (p.check_debug_file, ("NCCL_DEBUG_FILE", ""), {}),
    (p.check_debug_file, ("NCCL_DEBUG_FILE", "~/x%p"), {}),
    (p.check_debug_file, ("NCCL_DEBUG_FILE", "/x%q%p"), {}),
    (p.check_debug_file, ("NCCL_DEBUG_FILE", "/x"), {}),
    (p.check_debug_file, ("NCCL_DEBUG_FILE", "x%p"), {}),
    (p.check_debug_file, ("NCCL_DEBUG_FILE", "{audit_dir}/../x"), {}),
    (p.check_placeholder_use, ("NCCL_PROTO", "{audit_dir}/x"), {}),
    (p.check_ifname_list, ("I", "e"), {}),
    (p.check_ifname_list, ("I", "a b"), {}),
    (p.check_ifname_list, ("I", "e:x"), {}),
    (p.check_hca_list, ("H", "="), {}),
    (p.check_hca_list, ("H", "=a b"), {}),
    (p.check_hca_list, ("H", "=a:x"), {}),
    (p.check_hca_list, ("H", "a"), {}),
    (p.check_cta_policy, ("C", "2", V("2.27")), {}),
    (p.check_cta_policy, ("C", "ZERO", V("2.28")), {}),
    (p.check_cta_policy, ("C", "9", None), {}),
    (p.check_host_port, ("H", "x"), {}),
    (p.check_name_list, ("N", "x"), {}),
    (p.check_text, ("T", ""), {}),
]


@pytest.mark.parametrize("check,args,kwargs", NAMED, ids=[f"{c.__name__}-{a[1]!r}" for c, a, _ in NAMED])
def test_every_finding_names_variable_and_value_with_rule_and_fix(check, args, kwargs):
    findings = check(*args, **kwargs)
    assert findings, (check.__name__, args)
    for f in findings:
        assert f.variable == args[0] and f.value == args[1], f
        assert isinstance(f.rule, str) and f.rule and isinstance(f.fix, str) and f.fix, f
        assert f.severity in ("error", "warning")


def test_the_kept_literally_code_is_shown_with_its_percent():
    (f,) = p.check_debug_file("NCCL_DEBUG_FILE", "/x/%q.%p")
    assert "'%q' is kept literally" in f.rule


def test_debug_subsystems_with_an_exclusion():
    assert p.check_debug_subsys("S", "^INIT,COLL") == []
    assert [f.rule for f in p.check_debug_subsys("S", "^^INIT")] == ["unknown subsystem '^INIT'"]


def test_choice_fix_matches_case_either_way():
    assert (
        one(p.check_choice("N", "Af_Inet", ("AF_INET", "AF_INET6"), True)).fix
        == "write N=AF_INET (exact case)"
    )
    assert one(p.check_choice("N", "x", ("a", "b"), False)).rule == "must be one of a, b"
    assert p.check_choice("N", "A", ("a",), False) == [] and sev(p.check_choice("N", "A", ("a",), True)) == [
        "error"
    ]


def test_edges_found_by_mutation():
    assert one(p.check_cta_policy("C", "2", V("2.27"))).fix == "use 0 or 1"
    assert one(p.check_cta_policy("C", "DEFAULT", V("2.28"))).fix == "use the digits 0, 1 or 2"
    assert p.check_hca_list("H", "=MLX5_0:1") == [] and p.check_hca_list("H", "=a") == []
    assert p.check_hca_list("H", "^=a") == []
    assert [f.rule for f in p.check_hca_list("H", "=a b,c d")] == [
        "'a b' is not an HCA name",
        "'c d' is not an HCA name",
    ]
    assert p.check_host_port("H", "HOST-A:1") == [] and p.check_host_port("H", "[FE80::1]:1") == []
    f = one(v.check("NCCL_NTHREADS", "\u0665"))
    assert f.variable == "NCCL_NTHREADS" and f.value == "\u0665"
    assert v.closest("NCCL_PROTOO", n=1) == ["NCCL_PROTO"] and len(v.closest("NCCL_PROTOO")) == 3
