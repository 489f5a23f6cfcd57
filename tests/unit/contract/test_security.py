"""Security properties: only NCCL variables, data-only profiles, private audit files."""

from __future__ import annotations

import json
import os
import stat

import pytest

from sglang_eagle_nccl.contract import handoff as wire
from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.contract.launch_dir import new_launch_dir
from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter
from sglang_eagle_nccl.profile.resolve import decode_handoff, resolve

FORBIDDEN = [
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "PATH",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "CUDA_VISIBLE_DEVICES",
    "SGLANG_NCCL_SO_PATH",
    "NCCL",
    "NCCL_",
    "TORCH_NCCL",
    "nccl_debug",
    "NCCL_DEBUG\nLD_PRELOAD",
]
NOT_NCCL = "set other variables in your shell or service definition, not in an NCCL profile"
UNSET_WIRE = (
    "unset SGLANG_EAGLE_NCCL_PROFILE SGLANG_EAGLE_NCCL_ROOT_PID (sglang-eagle-nccl writes both for the processes "
    "it starts; `sglang-eagle-nccl env` prints fresh ones)"
)


def _fix_for(name: str) -> str:
    """The fix the plugin writes for a forbidden name (a lower-case NCCL name gets its spelling)."""
    return "write NCCL_DEBUG" if name == "nccl_debug" else NOT_NCCL


def _fixes(info: pytest.ExceptionInfo) -> list[str]:
    return [f.fix for f in info.value.errors]


@pytest.mark.parametrize("name", FORBIDDEN)
@pytest.mark.parametrize("where", ["env", "group", "node"])
def test_toml_sections_never_set_non_nccl(tmp_path, name, where):
    section = {"env": "[env]", "group": "[groups.tp.env]", "node": "[nodes.0.env]"}[where]
    f = tmp_path / "p.toml"
    f.write_text(f'{section}\n{json.dumps(name)} = "x"\n')
    with pytest.raises(ProfileError) as info:
        resolve([str(f)], use_environ=False)
    assert _fix_for(name) in _fixes(info)


@pytest.mark.parametrize("name", FORBIDDEN)
def test_flags_and_plugin_env_never_set_non_nccl(name):
    with pytest.raises(ProfileError) as info:
        resolve(env_flags=[f"{name}=x"], use_environ=False)
    assert _fix_for(name) in _fixes(info)
    with pytest.raises(ProfileError) as info:
        resolve(environ={"SGLANG_EAGLE_NCCL": "1", "SGLANG_EAGLE_NCCL_ENV": f"{name}=x"})
    # SGLANG_EAGLE_NCCL_ENV splits on newlines too: the smuggled LD_PRELOAD line is refused itself.
    refused = "LD_PRELOAD" if "\n" in name else name
    assert any(f.variable == refused and f.fix == _fix_for(refused) for f in info.value.errors), (
        info.value.errors
    )


@pytest.mark.parametrize("name", FORBIDDEN)
@pytest.mark.parametrize("section", ["env", "groups", "nodes"])
def test_serialised_profile_never_sets_non_nccl(name, section):
    data = {"name": "x", "env": {}, "groups": {}, "nodes": {}, "policy": {}, "sources": []}
    if section == "env":
        data["env"] = {name: "x"}
    elif section == "groups":
        data["groups"] = {"tp": {name: "x"}}
    else:
        data["nodes"] = {"0": {name: "x"}}
    # Signed with this user's own key or not signed at all: a non-NCCL name never gets through.
    for key in (None, b""):
        text = wire.encode(data, inputs={}, run_dir=None, key=key)
        with pytest.raises(ProfileError) as info:
            decode_handoff(text, {})
        assert _fixes(info) == [UNSET_WIRE]


def test_profile_values_are_never_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/someone")
    f = tmp_path / "p.toml"
    f.write_text('[env]\nNCCL_TOPO_FILE = "$HOME/topo.xml"\nNCCL_NET = "`id`"\n')
    env = resolve([str(f)], use_environ=False).profile.env_dict()
    assert env["NCCL_TOPO_FILE"] == "$HOME/topo.xml"
    assert env["NCCL_NET"] == "`id`"


def test_profile_cannot_include_other_files(tmp_path):
    other = tmp_path / "other.toml"
    other.write_text('[env]\nNCCL_PROTO = "LL"\n')
    f = tmp_path / "p.toml"
    f.write_text(f'extends = "{other}"\n')
    with pytest.raises(ProfileError) as info:
        resolve([str(f)], use_environ=False)
    assert "files are never read from inside a profile" in str(info.value)


def test_audit_files_private_and_only_nccl(tmp_path, monkeypatch):
    monkeypatch.setenv("API_TOKEN", "s3cret")
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    from sglang_eagle_nccl.contract.names import nccl_snapshot

    run = new_launch_dir(tmp_path / "root")
    w = AuditWriter(run)
    w.write("process_start", env=nccl_snapshot())
    assert stat.S_IMODE(os.stat(run).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(run.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(w.path).st_mode) == 0o600
    text = w.path.read_text()
    assert "s3cret" not in text and "API_TOKEN" not in text
    rec = json.loads(text)
    assert set(rec["env"]) <= {k for k in os.environ if k.startswith(("NCCL_", "TORCH_NCCL_"))}
