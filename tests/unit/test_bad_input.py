"""Bad input is refused with a message naming variable, value, rule and fix; nothing applied.

Each case runs the real CLI (click's runner, in this process, so os.environ can be compared
before and after) and asserts the exit code, the variable, the offending value and a fix.
"""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main

# (--nccl-env item, variable named, value shown, fragment of the fix)
ENV_CASES = [
    ("NCCL_BUFFSIZE=4M", "NCCL_BUFFSIZE", "4M", "NCCL_BUFFSIZE=4194304"),
    ("NCCL_BUFFSIZE=8MB", "NCCL_BUFFSIZE", "8MB", "NCCL_BUFFSIZE=8388608"),
    ("NCCL_BUFFSIZE=16k", "NCCL_BUFFSIZE", "16k", "NCCL_BUFFSIZE=16384"),
    ("NCCL_BUFFSIZE=1.5G", "NCCL_BUFFSIZE", "1.5G", "NCCL_BUFFSIZE=1610612736"),
    ("NCCL_BUFFSIZE=-1", "NCCL_BUFFSIZE", "-1", "positive byte count"),
    ("NCCL_BUFFSIZE=0", "NCCL_BUFFSIZE", "0", "positive byte count"),
    ("NCCL_BUFFSIZE=016777216", "NCCL_BUFFSIZE", "016777216", "NCCL_BUFFSIZE=16777216"),
    ("NCCL_BUFFSIZE=", "NCCL_BUFFSIZE", "", "remove NCCL_BUFFSIZE"),
    ("NCCL_LL128_BUFFSIZE=big", "NCCL_LL128_BUFFSIZE", "big", "NCCL_LL128_BUFFSIZE="),
    ("NCCL_P2P_NET_CHUNKSIZE=128K", "NCCL_P2P_NET_CHUNKSIZE", "128K", "NCCL_P2P_NET_CHUNKSIZE=131072"),
    ("NCCL_P2P_LEVEL=nvl", "NCCL_P2P_LEVEL", "nvl", "NCCL_P2P_LEVEL=NVL"),
    ("NCCL_P2P_LEVEL=Sys", "NCCL_P2P_LEVEL", "Sys", "NCCL_P2P_LEVEL=SYS"),
    ("NCCL_P2P_LEVEL=NVLINK", "NCCL_P2P_LEVEL", "NVLINK", "LOC, NVL"),
    ("NCCL_NET_GDR_LEVEL=phb", "NCCL_NET_GDR_LEVEL", "phb", "NCCL_NET_GDR_LEVEL=PHB"),
    ("NCCL_PROTO=LL,foo", "NCCL_PROTO", "LL,foo", "LL, LL128, Simple"),
    ("NCCL_PROTO=LL^", "NCCL_PROTO", "LL^", "leading '^'"),
    ("NCCL_PROTO=^", "NCCL_PROTO", "^", "list what to exclude"),
    ("NCCL_PROTO=LL;LL128", "NCCL_PROTO", "LL;LL128", "AllReduce:LL128"),
    ("NCCL_PROTO=Simple;allgathr:LL", "NCCL_PROTO", "Simple;allgathr:LL", "AllGather"),
    ("NCCL_PROTO=allreduce:", "NCCL_PROTO", "allreduce:", "after 'allreduce:'"),
    ("NCCL_ALGO=Rings", "NCCL_ALGO", "Rings", "Tree, Ring"),
    ("NCCL_ALGO=allreduce:tree:ring", "NCCL_ALGO", "allreduce:tree:ring", "one 'function:list'"),
    ("NCCL_ALGO=", "NCCL_ALGO", "", "remove NCCL_ALGO"),
    ("NCCL_NTHREADS=100", "NCCL_NTHREADS", "100", "96 or 128"),
    ("NCCL_NTHREADS=1024", "NCCL_NTHREADS", "1024", "[64, 512]"),
    ("NCCL_NTHREADS=32", "NCCL_NTHREADS", "32", "[64, 512]"),
    ("NCCL_LL128_NTHREADS=100", "NCCL_LL128_NTHREADS", "100", "[160, 640]"),
    ("NCCL_MAX_NCHANNELS=0", "NCCL_MAX_NCHANNELS", "0", "[1, 64]"),
    ("NCCL_MAX_NCHANNELS=65", "NCCL_MAX_NCHANNELS", "65", "[1, 64]"),
    ("NCCL_MIN_CTAS=128", "NCCL_MIN_CTAS", "128", "[1, 64]"),
    ("NCCL_MAX_CTAS=-4", "NCCL_MAX_CTAS", "-4", "[1, 64]"),
    ("NCCL_CUMEM_ENABLE=true", "NCCL_CUMEM_ENABLE", "true", "NCCL_CUMEM_ENABLE=1"),
    ("NCCL_IB_DISABLE=yes", "NCCL_IB_DISABLE", "yes", "NCCL_IB_DISABLE=1"),
    ("NCCL_SHM_DISABLE=2", "NCCL_SHM_DISABLE", "2", "NCCL_SHM_DISABLE=0"),
    ("NCCL_NVLS_ENABLE=3", "NCCL_NVLS_ENABLE", "3", "0, 1, 2"),
    ("NCCL_DEBUG_FILE=~/nccl.%p.log", "NCCL_DEBUG_FILE", "~/nccl.%p.log", "absolute path"),
    ("NCCL_DEBUG_FILE=/tmp/nccl.%t.%p", "NCCL_DEBUG_FILE", "/tmp/nccl.%t.%p", "%h, %p or %%"),
    ("NCCL_DEBUG=verbose", "NCCL_DEBUG", "verbose", "VERSION, WARN, INFO"),
    ("NCCL_DEBUG_SUBSYS=INIT,FOO", "NCCL_DEBUG_SUBSYS", "INIT,FOO", "INIT, COLL"),
    ("NCCL_SOCKET_IFNAME=e", "NCCL_SOCKET_IFNAME", "e", "interface name"),
    ("NCCL_IB_TIMEOUT=40", "NCCL_IB_TIMEOUT", "40", "[1, 31]"),
    ("NCCL_THREAD_THRESHOLDS=64,256", "NCCL_THREAD_THRESHOLDS", "64,256", "six numbers"),
    ("NCCL_COMM_ID=nohostport", "NCCL_COMM_ID", "nohostport", "host:port"),
    ("NCCL_CTA_POLICY=FAST", "NCCL_CTA_POLICY", "FAST", "EFFICIENCY"),
    ("NCCL_SOCKET_FAMILY=inet", "NCCL_SOCKET_FAMILY", "inet", "AF_INET"),
    ("NCCL_PORTO=LL", "NCCL_PORTO", None, "NCCL_PROTO"),
    ("NCCL_BUFFERSIZE=4194304", "NCCL_BUFFERSIZE", None, "NCCL_BUFFSIZE"),
    ("nccl_proto=LL", "nccl_proto", None, "NCCL_PROTO"),
    ("LD_PRELOAD=/tmp/evil.so", "LD_PRELOAD", None, "not in an NCCL profile"),
    ("PATH=/tmp", "PATH", None, "not in an NCCL profile"),
    ("CUDA_VISIBLE_DEVICES=0", "CUDA_VISIBLE_DEVICES", None, "not in an NCCL profile"),
    ("PYTHONPATH=/tmp", "PYTHONPATH", None, "not in an NCCL profile"),
    ("NCCL_PROTO", "NCCL_PROTO", None, "NCCL_PROTO=<value>"),
    ("=LL", "=LL", None, "KEY=VALUE"),
]


@pytest.fixture
def runner():
    return CliRunner()


@pytest.mark.parametrize("item,variable,value,fix", ENV_CASES, ids=[c[0] or "empty" for c in ENV_CASES])
def test_validate_refuses_bad_setting(runner, clean_environ, item, variable, value, fix):
    before = dict(os.environ)
    result = runner.invoke(main, ["validate", "--nccl-env", item])
    assert result.exit_code == 1, result.output
    out = result.output
    assert variable in out
    if value is not None:
        assert repr(value) in out
    assert "Fix:" in out and fix in out, out
    assert dict(os.environ) == before


def test_at_least_forty_cases():
    assert len(ENV_CASES) >= 40


def test_all_errors_reported_together(runner, clean_environ):
    result = runner.invoke(main, ["validate", "--nccl-env", "NCCL_BUFFSIZE=4M", "--nccl-env", "NCCL_P2P_LEVEL=nvl", "--nccl-env", "LD_PRELOAD=x"])
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


@pytest.mark.parametrize(
    "toml,fragment",
    [
        ("[env\nNCCL_PROTO='LL'", "malformed TOML"),
        ("[env]\nNCCL_PROTO = true", "TOML booleans"),
        ("[env]\nNCCL_BUFFSIZE = 4.5", "not float"),
        ("[env]\nNCCL_PROTO = ['LL']", "not list"),
        ("[envs]\nNCCL_PROTO = 'LL'", "unknown key/section"),
        ("[env.nested]\nX = 1", "nested table"),
        ("[groups.tp.env]\nNCCL_BUFFSIZE = '4194304'", "once per process"),
        ("[groups.tp]\nNCCL_ALGO = 'Tree'", "only contain an env table"),
        ("[nodes.1.env]\nNCCL_PROTO = 'LL'", "every rank of a communicator must hold the same"),
        ("[nodes.x.env]\nNCCL_SOCKET_IFNAME = 'eth0'", "keyed by node rank"),
        ("[policy]\nconsistency = 'maybe'", "error, warn or off"),
        ("[policy]\nmystery = 1", "unknown policy option"),
        ("[policy]\nconsistency_timeout_s = -1", "number of seconds"),
        ("extends = '/etc/passwd'", "built-in profile"),
        ("[env]\nLD_PRELOAD = '/tmp/x.so'", "NCCL_* and TORCH_NCCL_*"),
        ("[groups.tp.env]\nLD_PRELOAD = '/tmp/x.so'", "NCCL_* and TORCH_NCCL_*"),
    ],
)
def test_bad_profile_files(runner, clean_environ, tmp_path, toml, fragment):
    f = tmp_path / "bad.toml"
    f.write_text(toml)
    before = dict(os.environ)
    result = runner.invoke(main, ["validate", str(f)])
    assert result.exit_code == 1, result.output
    assert fragment in result.output
    assert "Fix:" in result.output
    assert dict(os.environ) == before


def test_missing_file(runner, clean_environ, tmp_path):
    result = runner.invoke(main, ["validate", str(tmp_path / "nope.toml")])
    assert result.exit_code == 1 and "not found" in result.output


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


def test_unknown_builtin_name(runner, clean_environ):
    result = runner.invoke(main, ["validate", "pcie-16gpu"])
    assert result.exit_code == 1
    assert "no built-in profile" in result.output and "pcie-8gpu" in result.output


@pytest.mark.parametrize(
    "command",
    [
        ["profiles", "show", "pcie-8gpu", "--nccl-env", "NCCL_BUFFSIZE=4M"],
        ["doctor", "--nccl-env", "NCCL_P2P_LEVEL=nvl"],
        ["launch", "--dry-run", "--nccl-env", "NCCL_PROTO=bogus", "--", "--model-path", "m"],
        ["preflight", "--tp", "2", "--nccl-env", "LD_PRELOAD=x"],
    ],
)
def test_other_commands_refuse_bad_profiles_with_exit_2(runner, clean_environ, command):
    before = dict(os.environ)
    result = runner.invoke(main, command)
    assert result.exit_code == 2, result.output
    assert "Fix:" in result.output
    assert dict(os.environ) == before


def test_json_errors_are_machine_readable(runner, clean_environ):
    import json

    result = runner.invoke(main, ["validate", "--json", "--nccl-env", "NCCL_BUFFSIZE=4M"])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["ok"] is False
    assert data["findings"][0]["variable"] == "NCCL_BUFFSIZE"
    assert data["findings"][0]["value"] == "4M"
    assert "4194304" in data["findings"][0]["fix"]


def test_env_command_prints_gate_profile_and_nccl_values(runner, clean_environ, tmp_path):
    import json

    from sglang_eagle_nccl.profile import wire

    result = runner.invoke(main, ["env", "--profile", "pcie-8gpu", "--format", "json", "--audit-dir", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    env = json.loads(result.output)
    assert env["SGLANG_EAGLE_NCCL"] == "1" and env["NCCL_PROTO"] == "LL"
    decoded = wire.decode(env["SGLANG_EAGLE_NCCL_PROFILE"], env)
    assert decoded.data["env"]["NCCL_BUFFSIZE"] == "16777216"
    assert (tmp_path / "a").is_dir() and decoded.run_dir.startswith(str(tmp_path / "a"))
    assert all(k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL")) for k in env)


def test_env_command_refuses_bad_profile(runner, clean_environ):
    result = runner.invoke(main, ["env", "--nccl-env", "NCCL_BUFFSIZE=4M"])
    assert result.exit_code == 2 and "4194304" in result.output


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
    assert eff["NCCL_SOCKET_IFNAME"] == {"name": "NCCL_SOCKET_IFNAME", "value": "lo", "source": "environment"}  # env beats conf file
    problems = " ".join(data["problems"])
    assert "comments are skipped only by NCCL >= 2.26" in problems
    assert "spaces around '='" in problems
