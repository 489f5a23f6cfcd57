"""Profiles: sources, precedence, scope rules, and the lossless single-variable serialisation."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.contract import handoff as wire
from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.decision.plan import process_env
from sglang_eagle_nccl.knowledge.nccl import variables as nccl_vars
from sglang_eagle_nccl.profile.model import Profile
from sglang_eagle_nccl.profile.policy import Policy
from sglang_eagle_nccl.profile.resolve import decode_handoff, resolve
from sglang_eagle_nccl.profile.sources import builtin_names, split_env_string

SEED = {
    "NCCL_PROTO": "LL",
    "NCCL_ALGO": "Ring",
    "NCCL_P2P_LEVEL": "SYS",
    "NCCL_MAX_NCHANNELS": "16",
    "NCCL_BUFFSIZE": "16777216",
    "NCCL_NTHREADS": "512",
}


def test_seed_profile_is_builtin():
    assert resolve(["pcie-8gpu"], use_environ=False).profile.env_dict() == SEED


def test_debug_profile_writes_per_host_per_pid_files():
    env = resolve(["debug"], use_environ=False).profile.env_dict()
    assert env["NCCL_DEBUG"] == "INFO"
    assert env["NCCL_DEBUG_SUBSYS"] == "INIT,ENV,TUNING"
    assert "%h" in env["NCCL_DEBUG_FILE"] and "%p" in env["NCCL_DEBUG_FILE"]


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_profile_is_valid_and_round_trips(name):
    p = resolve([name], use_environ=False).profile
    assert Profile.from_validated_data(p.to_dict()) == p
    assert decode_handoff(wire.encode(p.to_dict(), inputs={}, run_dir=None), {}).data == p.to_dict()


def test_layering_later_profile_wins(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[env]\nNCCL_ALGO = "Tree"\n')
    p = resolve(["pcie-8gpu", str(f)], use_environ=False).profile
    assert p.env_dict()["NCCL_ALGO"] == "Tree"
    assert p.env_dict()["NCCL_PROTO"] == "LL"


def test_precedence_file_then_plugin_env_then_flags(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('[env]\nNCCL_ALGO = "Tree"\nNCCL_PROTO = "Simple"\nNCCL_NTHREADS = 256\n')
    environ = {"SGLANG_EAGLE_NCCL_ENV": "NCCL_ALGO=Ring NCCL_NTHREADS=128"}
    p = resolve([str(f)], env_flags=["NCCL_NTHREADS=64"], environ=environ).profile
    env = p.env_dict()
    assert env == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_NTHREADS": "64"}
    assert p.sources == (f"profile:{f}", "SGLANG_EAGLE_NCCL_ENV", "--nccl-env")


def test_gate_variable_names_the_profile():
    p = resolve(environ={"SGLANG_EAGLE_NCCL": "pcie-8gpu"}).profile
    assert p.env_dict() == SEED


def test_gate_variable_on_means_no_base_profile():
    p = resolve(environ={"SGLANG_EAGLE_NCCL": "1", "SGLANG_EAGLE_NCCL_ENV": "NCCL_PROTO=LL"}).profile
    assert p.env_dict() == {"NCCL_PROTO": "LL"}


def test_policy_from_plugin_environment_variables():
    environ = {
        "SGLANG_EAGLE_NCCL_ALLOW_PARTIAL": "1",
        "SGLANG_EAGLE_NCCL_SGLANG_WINS": "NCCL_NVLS_ENABLE",
        "SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT": "7",
    }
    p = resolve(env_flags=["NCCL_NVLS_ENABLE=0"], environ=environ).profile
    assert p.policy.allow_partial is True
    assert p.policy.sglang_wins == ("NCCL_NVLS_ENABLE",)
    assert p.policy.consistency_timeout_s == 7.0


def test_env_string_split_keeps_values_with_spaces():
    items = split_env_string(
        "NCCL_PROTO=LL,Simple  NCCL_THREAD_THRESHOLDS=64 256 256 64 256 256\nNCCL_ALGO=Ring"
    )
    assert items == ["NCCL_PROTO=LL,Simple", "NCCL_THREAD_THRESHOLDS=64 256 256 64 256 256", "NCCL_ALGO=Ring"]


def test_group_section_accepts_per_communicator_variables(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('[env]\nNCCL_PROTO = "LL"\n[groups.tp.env]\nNCCL_ALGO = "Tree"\nNCCL_PROTO = "Simple"\n')
    p = resolve([str(f)], use_environ=False).profile
    assert p.group_env("tp") == {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}
    assert {**process_env(p.to_dict(), None), **p.group_env("tp")}["NCCL_PROTO"] == "Simple"
    assert {**process_env(p.to_dict(), None), **p.group_env("world")}["NCCL_PROTO"] == "LL"


def test_group_section_refuses_process_cached_variable_with_reason(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('[groups.tp.env]\nNCCL_NTHREADS = "256"\n')
    with pytest.raises(ProfileError) as info:
        resolve([str(f)], use_environ=False)
    (err,) = info.value.errors
    assert err.variable == "NCCL_NTHREADS"
    assert "once per process" in err.rule and "[env]" in err.fix


def test_unknown_group_name_is_a_warning(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('[groups.verify.env]\nNCCL_ALGO = "Tree"\n')
    res = resolve([str(f)], use_environ=False)
    assert any("groups.verify" in w.variable for w in res.warnings)


def test_node_section_accepts_node_local_and_refuses_must_match(tmp_path):
    ok = tmp_path / "n.toml"
    ok.write_text('[nodes.1.env]\nNCCL_SOCKET_IFNAME = "eth1"\n')
    p = resolve([str(ok)], use_environ=False).profile
    assert process_env(p.to_dict(), 1) == {"NCCL_SOCKET_IFNAME": "eth1"}
    assert process_env(p.to_dict(), 0) == {}
    bad = tmp_path / "b.toml"
    bad.write_text('[nodes.1.env]\nNCCL_ALGO = "Tree"\n')
    with pytest.raises(ProfileError):
        resolve([str(bad)], use_environ=False)


def test_extends_builtin(tmp_path):
    f = tmp_path / "e.toml"
    f.write_text('extends = "pcie-8gpu"\n[env]\nNCCL_ALGO = "Tree"\n')
    env = resolve([str(f)], use_environ=False).profile.env_dict()
    assert env["NCCL_PROTO"] == "LL" and env["NCCL_ALGO"] == "Tree"


def test_serialised_profile_refuses_non_nccl_names():
    text = wire.encode({"name": "x", "env": {"LD_PRELOAD": "/opt/x.so"}}, inputs={}, run_dir=None)
    with pytest.raises(ProfileError) as info:
        decode_handoff(text, {})
    assert "LD_PRELOAD" in str(info.value)


def test_serialised_profile_refuses_non_nccl_names_in_groups():
    text = wire.encode({"name": "x", "groups": {"tp": {"PATH": "/opt"}}}, inputs={}, run_dir=None)
    with pytest.raises(ProfileError):
        decode_handoff(text, {})


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[]",
        '{"v": 2}',
        "sen3..",
        "sen3.7b7d.-",
        "sen2.e30.-",
        "sen3.!!!!.-",
        "sen3.7B7D.-",
        "sen3.7b 7d.-",
        "sen3.7b7.-",
    ],
)
def test_serialised_profile_malformed(text):
    with pytest.raises(ProfileError):
        decode_handoff(text, {})


# --- random valid profiles round-trip through the single environment variable -------------

_VALUES = {
    "NCCL_PROTO": st.sampled_from(["LL", "LL,Simple", "Simple", "^LL128"]),
    "NCCL_ALGO": st.sampled_from(["Ring", "Tree", "Ring,Tree", "allreduce:tree"]),
    "NCCL_BUFFSIZE": st.integers(1, 1 << 30).map(str),
    "NCCL_NTHREADS": st.sampled_from(["64", "128", "256", "512"]),
    "NCCL_MAX_NCHANNELS": st.integers(1, 64).map(str),
    "NCCL_P2P_LEVEL": st.sampled_from(["LOC", "NVL", "PIX", "PXB", "PHB", "SYS"]),
    "NCCL_CUMEM_ENABLE": st.sampled_from(["0", "1"]),
    "NCCL_DEBUG": st.sampled_from(["WARN", "INFO"]),
    "NCCL_SOCKET_IFNAME": st.sampled_from(["eth0", "^docker,lo", "=ib0"]),
    "TORCH_NCCL_BLOCKING_WAIT": st.sampled_from(["0", "1"]),
}
_GROUP_VALUES = {k: v for k, v in _VALUES.items() if nccl_vars.lookup(k).per_communicator}


@st.composite
def profiles(draw):
    env = draw(st.dictionaries(st.sampled_from(sorted(_VALUES)), st.just(None), max_size=len(_VALUES)))
    env = {k: draw(_VALUES[k]) for k in env}
    groups = {}
    for g in draw(st.lists(st.sampled_from(["tp", "attention_tp", "world", "pp"]), unique=True, max_size=3)):
        names = draw(st.lists(st.sampled_from(sorted(_GROUP_VALUES)), unique=True, min_size=1))
        groups[g] = {k: draw(_GROUP_VALUES[k]) for k in names}
    nodes = {}
    for n in draw(st.lists(st.integers(0, 3), unique=True, max_size=2)):
        nodes[n] = {"NCCL_SOCKET_IFNAME": draw(_VALUES["NCCL_SOCKET_IFNAME"])}
    policy = Policy(
        sglang_wins=tuple(sorted(draw(st.sets(st.sampled_from(sorted(env)), max_size=2)))) if env else (),
        allow_partial=draw(st.booleans()),
        consistency=draw(st.sampled_from(["error", "warn", "off"])),
        consistency_timeout_s=float(draw(st.integers(1, 600))),
        audit_dir=draw(st.sampled_from([None, "/var/tmp/audit"])),
    )
    return env, groups, nodes, policy


@settings(max_examples=150, deadline=None)
@given(profiles())
def test_random_valid_profiles_round_trip(parts):
    import tempfile
    from pathlib import Path

    env, groups, nodes, policy = parts
    lines = ["[env]"] + [f"{k} = {json.dumps(v)}" for k, v in env.items()]
    for g, genv in groups.items():
        lines += [f"[groups.{g}.env]"] + [f"{k} = {json.dumps(v)}" for k, v in genv.items()]
    for n, nenv in nodes.items():
        lines += [f"[nodes.{n}.env]"] + [f"{k} = {json.dumps(v)}" for k, v in nenv.items()]
    lines += ["[policy]"]
    for k, v in policy.to_dict().items():
        if v is None:
            continue
        lines.append(f"{k} = {json.dumps(list(v) if isinstance(v, tuple) else v)}")
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "p.toml"
        f.write_text("\n".join(lines) + "\n")
        p = resolve([str(f)], use_environ=False).profile
    signed = decode_handoff(wire.encode(p.to_dict(), inputs={}, run_dir=None), {})
    unsigned = decode_handoff(wire.encode(p.to_dict(), inputs={}, run_dir=None, key=b""), {})
    assert signed.trusted and not unsigned.trusted
    assert Profile.from_validated_data(signed.data) == p
    assert unsigned.profile == p
    assert unsigned.profile.env_dict() == env
    assert {g: unsigned.profile.group_env(g) for g in groups} == groups
