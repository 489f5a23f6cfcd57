"""Bad input is refused with a message naming variable, value, rule and fix; nothing applied.

Each case runs the real CLI (click's runner, in this process, so os.environ can be compared
before and after) and asserts the exit code, the variable, the offending value and the exact fix
the plugin writes for it. An expected fix is never text that could be echoed from the input
(:func:`test_no_expected_fix_is_echoed_from_its_input` keeps every table honest).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.cli.main import main

BUILTINS = "audit-only, debug, pcie-8gpu, pcie-8gpu-eagle"
NOT_NCCL = "set other variables in your shell or service definition, not in an NCCL profile"

# (--nccl-env item, variable named, value shown, the fix the plugin writes)
ENV_CASES = [
    ("NCCL_BUFFSIZE=4M", "NCCL_BUFFSIZE", "4M", "write the byte count, e.g. NCCL_BUFFSIZE=4194304"),
    ("NCCL_BUFFSIZE=8MB", "NCCL_BUFFSIZE", "8MB", "write the byte count, e.g. NCCL_BUFFSIZE=8388608"),
    ("NCCL_BUFFSIZE=16k", "NCCL_BUFFSIZE", "16k", "write the byte count, e.g. NCCL_BUFFSIZE=16384"),
    ("NCCL_BUFFSIZE=1.5G", "NCCL_BUFFSIZE", "1.5G", "write the byte count, e.g. NCCL_BUFFSIZE=1610612736"),
    (
        "NCCL_BUFFSIZE=-1",
        "NCCL_BUFFSIZE",
        "-1",
        "remove NCCL_BUFFSIZE to keep NCCL's default, or give a positive byte count",
    ),
    (
        "NCCL_BUFFSIZE=0",
        "NCCL_BUFFSIZE",
        "0",
        "remove NCCL_BUFFSIZE to keep NCCL's default, or give a positive byte count",
    ),
    (
        "NCCL_BUFFSIZE=016777216",
        "NCCL_BUFFSIZE",
        "016777216",
        "remove the leading zero: NCCL_BUFFSIZE=16777216",
    ),
    ("NCCL_BUFFSIZE=", "NCCL_BUFFSIZE", "", "remove NCCL_BUFFSIZE or give a positive number of bytes"),
    (
        "NCCL_LL128_BUFFSIZE=big",
        "NCCL_LL128_BUFFSIZE",
        "big",
        "give a positive number of bytes, e.g. NCCL_LL128_BUFFSIZE=1",
    ),
    (
        "NCCL_P2P_NET_CHUNKSIZE=128K",
        "NCCL_P2P_NET_CHUNKSIZE",
        "128K",
        "write the byte count, e.g. NCCL_P2P_NET_CHUNKSIZE=131072",
    ),
    ("NCCL_P2P_LEVEL=nvl", "NCCL_P2P_LEVEL", "nvl", "write NCCL_P2P_LEVEL=NVL"),
    ("NCCL_P2P_LEVEL=Sys", "NCCL_P2P_LEVEL", "Sys", "write NCCL_P2P_LEVEL=SYS"),
    (
        "NCCL_P2P_LEVEL=NVLINK",
        "NCCL_P2P_LEVEL",
        "NVLINK",
        "use one of LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS or a legacy integer 0-5",
    ),
    ("NCCL_NET_GDR_LEVEL=phb", "NCCL_NET_GDR_LEVEL", "phb", "write NCCL_NET_GDR_LEVEL=PHB"),
    ("NCCL_PROTO=LL,foo", "NCCL_PROTO", "LL,foo", "use protocols from: LL, LL128, Simple"),
    (
        "NCCL_PROTO=LL^",
        "NCCL_PROTO",
        "LL^",
        "exclude with a leading '^' before the whole list, e.g. NCCL_PROTO=^LL",
    ),
    ("NCCL_PROTO=^", "NCCL_PROTO", "^", "list what to exclude, e.g. NCCL_PROTO=^LL"),
    ("NCCL_PROTO=LL;LL128", "NCCL_PROTO", "LL;LL128", "prefix it, e.g. AllReduce:LL128"),
    (
        "NCCL_PROTO=Simple;allgathr:LL",
        "NCCL_PROTO",
        "Simple;allgathr:LL",
        "use one of Broadcast, Reduce, AllGather, ReduceScatter, AllReduce (case-insensitive)",
    ),
    ("NCCL_PROTO=allreduce:", "NCCL_PROTO", "allreduce:", "give protocols after 'allreduce:'"),
    (
        "NCCL_ALGO=Rings",
        "NCCL_ALGO",
        "Rings",
        "use algorithms from: Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT",
    ),
    (
        "NCCL_ALGO=allreduce:tree:ring",
        "NCCL_ALGO",
        "allreduce:tree:ring",
        "write one 'function:list' per section, sections separated by ';'",
    ),
    ("NCCL_ALGO=", "NCCL_ALGO", "", "remove NCCL_ALGO"),
    ("NCCL_NTHREADS=100", "NCCL_NTHREADS", "100", "use 96 or 128"),
    ("NCCL_NTHREADS=1024", "NCCL_NTHREADS", "1024", "choose an integer in [64, 512]"),
    ("NCCL_NTHREADS=32", "NCCL_NTHREADS", "32", "choose an integer in [64, 512]"),
    ("NCCL_LL128_NTHREADS=100", "NCCL_LL128_NTHREADS", "100", "choose an integer in [160, 640]"),
    ("NCCL_MAX_NCHANNELS=0", "NCCL_MAX_NCHANNELS", "0", "choose an integer in [1, 64]"),
    ("NCCL_MAX_NCHANNELS=65", "NCCL_MAX_NCHANNELS", "65", "choose an integer in [1, 64]"),
    ("NCCL_MIN_CTAS=128", "NCCL_MIN_CTAS", "128", "choose an integer in [1, 64]"),
    ("NCCL_MAX_CTAS=-4", "NCCL_MAX_CTAS", "-4", "choose an integer in [1, 64]"),
    (
        "NCCL_CUMEM_ENABLE=true",
        "NCCL_CUMEM_ENABLE",
        "true",
        "use NCCL_CUMEM_ENABLE=1 to enable or NCCL_CUMEM_ENABLE=0 to disable",
    ),
    # A *_DISABLE switch: 1 turns the feature off, and the fix says so.
    (
        "NCCL_IB_DISABLE=yes",
        "NCCL_IB_DISABLE",
        "yes",
        "use NCCL_IB_DISABLE=1 to disable or NCCL_IB_DISABLE=0 to leave enabled",
    ),
    (
        "NCCL_SHM_DISABLE=2",
        "NCCL_SHM_DISABLE",
        "2",
        "use NCCL_SHM_DISABLE=1 to disable or NCCL_SHM_DISABLE=0 to leave enabled",
    ),
    ("NCCL_NVLS_ENABLE=3", "NCCL_NVLS_ENABLE", "3", "use one of: 0, 1, 2"),
    (
        "NCCL_DEBUG_FILE=~/nccl.%p.log",
        "NCCL_DEBUG_FILE",
        "~/nccl.%p.log",
        "write an absolute path such as <log dir>/nccl.%h.%p.log",
    ),
    ("NCCL_DEBUG_FILE=nccl.%t.%p", "NCCL_DEBUG_FILE", "nccl.%t.%p", "use only %h, %p or %%"),
    ("NCCL_DEBUG=verbose", "NCCL_DEBUG", "verbose", "use one of VERSION, WARN, INFO, ABORT, TRACE"),
    (
        "NCCL_DEBUG_SUBSYS=INIT,FOO",
        "NCCL_DEBUG_SUBSYS",
        "INIT,FOO",
        "use a comma list of INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, CALL, PROXY, NVLS, BOOTSTRAP, REG, "
        "PROFILE, RAS, ALL, ALLOC_HOST, DESTROY (a leading ^ inverts the list)",
    ),
    (
        "NCCL_SOCKET_IFNAME=e",
        "NCCL_SOCKET_IFNAME",
        "e",
        "give interface name prefixes such as eth0 or ^docker,lo",
    ),
    ("NCCL_IB_TIMEOUT=40", "NCCL_IB_TIMEOUT", "40", "choose an integer in [1, 31]"),
    (
        "NCCL_THREAD_THRESHOLDS=64,256",
        "NCCL_THREAD_THRESHOLDS",
        "64,256",
        "write six numbers, e.g. NCCL_THREAD_THRESHOLDS='64 256 256 64 256 256' (-2 keeps a default)",
    ),
    ("NCCL_COMM_ID=nohostport", "NCCL_COMM_ID", "nohostport", "write e.g. NCCL_COMM_ID=10.0.0.1:29500"),
    (
        "NCCL_CTA_POLICY=FAST",
        "NCCL_CTA_POLICY",
        "FAST",
        "use 0 (DEFAULT), 1 (EFFICIENCY), 2 (ZERO) or from NCCL 2.29 names joined by '|'",
    ),
    ("NCCL_SOCKET_FAMILY=inet", "NCCL_SOCKET_FAMILY", "inet", "use one of: AF_INET, AF_INET6"),
    (
        "NCCL_PORTO=LL",
        "NCCL_PORTO",
        None,
        "did you mean NCCL_PROTO or NCCL_NET or NCCL_ALGO? if it is new in your NCCL release, allow it with "
        "allow_unknown = true (profile [policy]) or --allow-unknown",
    ),
    (
        "NCCL_BUFFERSIZE=4194304",
        "NCCL_BUFFERSIZE",
        None,
        "did you mean NCCL_BUFFSIZE or NCCL_LL_BUFFSIZE or NCCL_LL128_BUFFSIZE? if it is new in your NCCL release, allow "
        "it with allow_unknown = true (profile [policy]) or --allow-unknown",
    ),
    ("nccl_proto=LL", "nccl_proto", None, "write NCCL_PROTO"),
    ("LD_PRELOAD=libevil.so", "LD_PRELOAD", None, NOT_NCCL),
    ("PATH=/tmp", "PATH", None, NOT_NCCL),
    ("CUDA_VISIBLE_DEVICES=0", "CUDA_VISIBLE_DEVICES", None, NOT_NCCL),
    ("PYTHONPATH=/tmp", "PYTHONPATH", None, NOT_NCCL),
    ("NCCL_PROTO", "NCCL_PROTO", None, "write NCCL_PROTO=<value>, e.g. --nccl-env NCCL_PROTO=LL"),
    ("=LL", "=LL", None, "write KEY=VALUE"),
]


@pytest.fixture
def runner():
    return CliRunner()


def _finding(output: str, variable: str) -> dict:
    """The first error `validate --json` reports for ``variable``."""
    data = json.loads(output)
    assert data["ok"] is False
    found = [f for f in data["findings"] if f["severity"] == "error" and f["variable"] == variable]
    assert found, data["findings"]
    return found[0]


@pytest.mark.parametrize("item,variable,value,fix", ENV_CASES, ids=[c[0] or "empty" for c in ENV_CASES])
def test_validate_refuses_bad_setting(runner, clean_environ, item, variable, value, fix):
    before = dict(os.environ)
    result = runner.invoke(main, ["validate", "--nccl-env", item])
    assert result.exit_code == 1, result.output
    out = result.output
    assert "Traceback" not in out
    shown = f"{variable}={value!r}" if value is not None else variable
    # One line per problem: where, the variable and value, the rule, then the fix.
    lines = [ln for ln in out.splitlines() if ln.startswith(f"  - [--nccl-env] {shown}: ")]
    assert lines and lines[0].endswith(f". Fix: {fix}"), out
    assert dict(os.environ) == before
    # The same finding, field by field.
    result = runner.invoke(main, ["validate", "--json", "--nccl-env", item])
    assert result.exit_code == 1
    finding = _finding(result.output, variable)
    assert finding["value"] == value and finding["fix"] == fix and finding["rule"], finding
    assert dict(os.environ) == before


def test_all_errors_reported_together(runner, clean_environ):
    result = runner.invoke(
        main,
        [
            "validate",
            "--nccl-env",
            "NCCL_BUFFSIZE=4M",
            "--nccl-env",
            "NCCL_P2P_LEVEL=nvl",
            "--nccl-env",
            "LD_PRELOAD=x",
        ],
    )
    assert result.exit_code == 1
    assert "3 problem(s)" in result.output
    for name in ("NCCL_BUFFSIZE", "NCCL_P2P_LEVEL", "LD_PRELOAD"):
        assert name in result.output


def test_allow_unknown_turns_unknown_name_into_warning(runner, clean_environ):
    result = runner.invoke(main, ["validate", "--allow-unknown", "--nccl-env", "NCCL_FUTURE_KNOB=1"])
    assert result.exit_code == 0, result.output
    assert "passed through unchecked" in result.output


def test_allow_unknown_never_allows_non_nccl(runner, clean_environ):
    result = runner.invoke(main, ["validate", "--allow-unknown", "--nccl-env", "LD_PRELOAD=x"])
    assert result.exit_code == 1


FILE = "<the file>"  # a finding about the file itself names the file

# (profile file text, variable named, part of the rule, the fix the plugin writes)
FILE_CASES = [
    ("[env\nNCCL_PROTO='LL'", FILE, "malformed TOML", "fix the TOML syntax (see the line/column above)"),
    ("[env]\nNCCL_PROTO = true", "NCCL_PROTO", "TOML booleans", 'write NCCL_PROTO = "<value>"'),
    ("[env]\nNCCL_IB_DISABLE = true", "NCCL_IB_DISABLE", "TOML booleans", 'write NCCL_IB_DISABLE = "1"'),
    (
        "[env]\nNCCL_CUMEM_ENABLE = false",
        "NCCL_CUMEM_ENABLE",
        "TOML booleans",
        'write NCCL_CUMEM_ENABLE = "0"',
    ),
    ("[env]\nNCCL_BUFFSIZE = 4.5", "NCCL_BUFFSIZE", "not float", 'write NCCL_BUFFSIZE = "<value>"'),
    ("[env]\nNCCL_PROTO = ['LL']", "NCCL_PROTO", "not list", 'write NCCL_PROTO = "<value>"'),
    (
        "[envs]\nNCCL_PROTO = 'LL'",
        "envs",
        "unknown key/section",
        "use only: description, env, extends, groups, name, nodes, policy, tuner (NCCL variables go under [env])",
    ),
    ("[env.nested]\nX = 1", "nested", "nested table", "flatten it"),
    (
        "[groups.tp.env]\nNCCL_BUFFSIZE = '4194304'",
        "NCCL_BUFFSIZE",
        "once per process",
        "move NCCL_BUFFSIZE to [env] (same value in every group); only per-communicator variables (NCCL_ALGO, "
        "NCCL_COLLNET_ENABLE, NCCL_COMM_ID, NCCL_GRAPH_DUMP_FILE, NCCL_GRAPH_FILE, NCCL_NET, NCCL_NET_MERGE_LEVEL, "
        "NCCL_PROTO, NCCL_THREAD_THRESHOLDS, NCCL_TOPO_DUMP_FILE, NCCL_TOPO_FILE) may differ per group",
    ),
    ("[groups.tp]\nNCCL_ALGO = 'Tree'", "groups.tp", "only contain an env table", "write [groups.tp.env]"),
    (
        "[nodes.1.env]\nNCCL_PROTO = 'LL'",
        "NCCL_PROTO",
        "every rank of a communicator must hold the same",
        "move NCCL_PROTO to [env]; per-node sections are for node-local variables such as NCCL_SOCKET_IFNAME, "
        "NCCL_IB_HCA, NCCL_TOPO_FILE",
    ),
    (
        "[nodes.x.env]\nNCCL_SOCKET_IFNAME = 'eth0'",
        "nodes.x",
        "keyed by node rank",
        "write [nodes.0.env], [nodes.1.env], ...",
    ),
    (
        "[policy]\nconsistency = 'maybe'",
        "policy.consistency",
        "error, warn or off",
        'write consistency = "error"',
    ),
    (
        "[policy]\nmystery = 1",
        "policy.mystery",
        "unknown policy option",
        "use one of: allow_partial, allow_unknown, audit_dir, audit_required, consistency, consistency_timeout_s, ledger, "
        "mechanism, nccl_version, sglang_wins",
    ),
    (
        "[policy]\nconsistency_timeout_s = -1",
        "policy.consistency_timeout_s",
        "number of seconds",
        "write consistency_timeout_s = 60",
    ),
    (
        "extends = '/etc/passwd'",
        "extends",
        "built-in profile",
        f"use one of: {BUILTINS}, or pass several --profile options",
    ),
    ("[env]\nLD_PRELOAD = 'libx.so'", "LD_PRELOAD", "NCCL_* and TORCH_NCCL_*", NOT_NCCL),
    ("[groups.tp.env]\nLD_PRELOAD = 'libx.so'", "LD_PRELOAD", "NCCL_* and TORCH_NCCL_*", NOT_NCCL),
]


@pytest.mark.parametrize(
    "toml,variable,rule,fix", FILE_CASES, ids=[c[0].splitlines()[-1] for c in FILE_CASES]
)
def test_bad_profile_files(runner, clean_environ, tmp_path, toml, variable, rule, fix):
    f = tmp_path / "bad.toml"
    f.write_text(toml)
    variable = str(f) if variable is FILE else variable
    before = dict(os.environ)
    result = runner.invoke(main, ["validate", str(f)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert f". Fix: {fix}" in result.output, result.output
    result = runner.invoke(main, ["validate", "--json", str(f)])
    assert result.exit_code == 1
    finding = _finding(result.output, variable)
    assert rule in finding["rule"] and finding["fix"] == fix, finding
    assert dict(os.environ) == before


def test_missing_file(runner, clean_environ, tmp_path):
    result = runner.invoke(main, ["validate", str(tmp_path / "nope.toml")])
    assert result.exit_code == 1 and "not found" in result.output
    assert f"Fix: check the path, or use a built-in name ({BUILTINS})" in result.output


def test_unreadable_file(runner, clean_environ, tmp_path):
    if os.getuid() == 0:
        pytest.skip("root can read files regardless of permissions")
    f = tmp_path / "secret.toml"
    f.write_text("[env]\n")
    f.chmod(0)
    result = runner.invoke(main, ["validate", str(f)])
    assert result.exit_code == 1 and "permission denied" in result.output


def test_directory_is_not_a_profile(runner, clean_environ, tmp_path):
    result = runner.invoke(main, ["validate", str(tmp_path)])
    assert result.exit_code == 1 and "not a regular file" in result.output
    assert "Fix: give a .toml file" in result.output


def test_unknown_builtin_name(runner, clean_environ):
    result = runner.invoke(main, ["validate", "pcie-16gpu"])
    assert result.exit_code == 1
    assert "profile='pcie-16gpu': no built-in profile has this name" in result.output
    # Issue 27: the Fix listed 2 of the 4 built-ins (those sharing the name's first letters).
    assert (
        "Fix: use a built-in profile (audit-only, debug, pcie-8gpu, pcie-8gpu-eagle; closest: pcie-8gpu) "
        "or a path to a .toml file" in result.output
    )


BUILTIN_FOLDER = Path(__file__).resolve().parents[3] / "sglang_eagle_nccl" / "profile" / "builtin"


@settings(max_examples=60, deadline=None)
@given(name=st.text(alphabet=st.sampled_from("abcdeg-ip0123456789u8"), min_size=1, max_size=20))
def test_unknown_profile_fix_lists_every_builtin(name, tmp_path_factory):
    """Whatever name matches nothing, the Fix names every built-in profile there is (the files of the
    built-in folder, read here independently) and, at most, one of them as the closest."""
    from sglang_eagle_nccl.profile.sources import load_spec

    available = sorted(p.stem for p in BUILTIN_FOLDER.glob("*.toml"))
    assume(name.strip() and name.strip() not in available)
    cwd = tmp_path_factory.mktemp("empty")  # no file of that name can exist here
    before = os.getcwd()
    os.chdir(cwd)
    try:
        _, findings = load_spec(name)
    finally:
        os.chdir(before)
    (finding,) = findings
    listed = finding.fix.split("(", 1)[1].split(")", 1)[0]
    names_part, _, closest = listed.partition("; closest: ")
    assert names_part.split(", ") == available
    assert closest == "" or closest in available


# (command, the fix the plugin writes); every one refuses with exit 2 and changes nothing.
COMMAND_CASES = [
    (
        ["profiles", "show", "pcie-8gpu", "--nccl-env", "NCCL_BUFFSIZE=4M"],
        "write the byte count, e.g. NCCL_BUFFSIZE=4194304",
    ),
    (["doctor", "--nccl-env", "NCCL_P2P_LEVEL=nvl"], "write NCCL_P2P_LEVEL=NVL"),
    (
        ["launch", "--dry-run", "--nccl-env", "NCCL_PROTO=bogus", "--", "--model-path", "m"],
        "use protocols from: LL, LL128, Simple",
    ),
    (["preflight", "--tp", "2", "--nccl-env", "LD_PRELOAD=x"], NOT_NCCL),
    (["env", "--nccl-env", "NCCL_BUFFSIZE=4M"], "write the byte count, e.g. NCCL_BUFFSIZE=4194304"),
]


@pytest.mark.parametrize("command,fix", COMMAND_CASES, ids=[c[0][0] for c in COMMAND_CASES])
def test_other_commands_refuse_bad_profiles_with_exit_2(runner, clean_environ, command, fix):
    before = dict(os.environ)
    result = runner.invoke(main, command)
    assert result.exit_code == 2, result.output
    assert f". Fix: {fix}" in result.output and "Traceback" not in result.output
    assert dict(os.environ) == before


def test_no_expected_fix_is_echoed_from_its_input():
    """A fix found in the output proves nothing when the output just repeats the input: every
    expected fix above must be text the plugin wrote, not a substring of what was given to it."""
    rows = [(item, fix) for item, _, _, fix in ENV_CASES] + [(toml, fix) for toml, _, _, fix in FILE_CASES]
    rows += [(" ".join(command), fix) for command, fix in COMMAND_CASES]
    echoed = [(given, fix) for given, fix in rows if fix in given]
    assert echoed == []
    assert len(ENV_CASES) >= 40


def test_json_errors_are_machine_readable(runner, clean_environ):
    import json

    result = runner.invoke(main, ["validate", "--json", "--nccl-env", "NCCL_BUFFSIZE=4M"])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["ok"] is False
    assert data["findings"][0]["variable"] == "NCCL_BUFFSIZE"
    assert data["findings"][0]["value"] == "4M"
    assert data["findings"][0]["fix"] == "write the byte count, e.g. NCCL_BUFFSIZE=4194304"


def test_env_command_prints_gate_profile_and_nccl_values(runner, clean_environ, tmp_path):
    import json

    from sglang_eagle_nccl.profile.resolve import decode_handoff

    result = runner.invoke(
        main, ["env", "--profile", "pcie-8gpu", "--format", "json", "--audit-dir", str(tmp_path / "a")]
    )
    assert result.exit_code == 0, result.output
    env = json.loads(result.output)
    assert env["SGLANG_EAGLE_NCCL"] == "1" and env["NCCL_PROTO"] == "LL"
    decoded = decode_handoff(env["SGLANG_EAGLE_NCCL_PROFILE"], env)
    assert decoded.data["env"]["NCCL_BUFFSIZE"] == "16777216"
    assert (tmp_path / "a").is_dir() and decoded.run_dir.startswith(str(tmp_path / "a"))
    assert all(k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL")) for k in env)


def test_doctor_reads_nccl_conf_files_with_nccl_precedence(runner, clean_environ, tmp_path, monkeypatch):
    import json

    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_PROTO=Simple\nNCCL_SOCKET_IFNAME=eth9\n#NCCL_ALGO=Tree\nNCCL_DEBUG = INFO\n")
    monkeypatch.setenv("NCCL_CONF_FILE", str(conf))
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "lo")
    result = runner.invoke(main, ["doctor", "--json", "--profile", "pcie-8gpu"])
    data = json.loads(result.output)
    # The conf file's comment and spaces are problems doctor lists, so it exits 1.
    assert data["problems"] and result.exit_code == 1, result.output
    (cf,) = [c for c in data["conf_files"] if c["role"] == "NCCL_CONF_FILE"]
    assert cf["values"]["NCCL_PROTO"] == "Simple"
    eff = {r["name"]: r for r in data["effective"]}
    assert eff["NCCL_PROTO"]["value"] == "LL" and eff["NCCL_PROTO"]["source"] == "profile"
    assert "NCCL_CONF_FILE" in eff["NCCL_PROTO"]["overrides"] or str(conf) in eff["NCCL_PROTO"]["overrides"]
    assert eff["NCCL_SOCKET_IFNAME"] == {
        "name": "NCCL_SOCKET_IFNAME",
        "value": "lo",
        "source": "environment",
    }  # env beats conf file
    problems = " ".join(data["problems"])
    assert "comments are skipped only by NCCL >= 2.26" in problems
    assert "spaces around '='" in problems
