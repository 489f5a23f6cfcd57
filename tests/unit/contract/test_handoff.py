"""The one hand-off: signed wire format, one decoder, stale inputs refused, activation all-or-nothing.

Activation runs in real child interpreters (it writes the real ``os.environ``), started with the
checkout on ``PYTHONPATH`` and a private hand-off key directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sglang_eagle_nccl.contract import handoff as wire
from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.profile.resolve import decode_handoff, resolve

REPO = Path(__file__).resolve().parents[3]


def _data(**env: str) -> dict:
    return {"name": "crafted", "env": env, "groups": {}, "nodes": {}, "policy": {}, "sources": []}


UNSET_WIRE = (
    "unset SGLANG_EAGLE_NCCL_PROFILE SGLANG_EAGLE_NCCL_ROOT_PID (sglang-eagle-nccl writes both for the processes "
    "it starts; `sglang-eagle-nccl env` prints fresh ones)"
)


@pytest.mark.parametrize(
    "env,variable,fix",
    [
        ({"NCCL_BUFFSIZE": "4M"}, "NCCL_BUFFSIZE", "write the byte count, e.g. NCCL_BUFFSIZE=4194304"),
        ({"NCCL_PROTO": "garbage"}, "NCCL_PROTO", "use protocols from: LL, LL128, Simple"),
        ({"NCCL_SOCKET_IFNAME": "eth0\nNCCL_ALGO=Tree"}, "SGLANG_EAGLE_NCCL_PROFILE", UNSET_WIRE),
    ],
)
def test_unsigned_wire_values_get_every_check(env, variable, fix):
    text = wire.encode(_data(**env), inputs={}, run_dir=None, key=b"")
    with pytest.raises(ProfileError) as info:
        decode_handoff(text, {})
    (finding,) = info.value.errors
    assert finding.variable == variable and finding.fix == fix, finding
    assert next(iter(env)) in str(info.value)  # the offending variable is named either way


@pytest.fixture
def handoff_key(tmp_path, monkeypatch) -> bytes:
    """This user's hand-off key, created for the test in a cache directory of its own: a test that
    needs a key makes it, instead of inheriting one an earlier test happened to create."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    key = wire.ensure_key()
    assert key is not None and wire.read_key() == key
    return key


def test_forged_digest_is_not_trusted(handoff_key):
    """A digest computed with someone else's key (or by hand) buys no shortcut."""
    forged = wire.encode(_data(NCCL_BUFFSIZE="4M"), inputs={}, run_dir=None, key=b"x" * 32)
    with pytest.raises(ProfileError) as info:
        decode_handoff(forged, {})
    assert "NCCL_BUFFSIZE" in str(info.value)
    # The same text with this user's own digest is trusted as written (values not re-checked): so the
    # refusal above comes from the digest check, not from a missing key.
    payload = forged.split(".")[1]
    genuine = f"{wire.WIRE_PREFIX}.{payload}.{wire.digest(handoff_key, payload)}"
    decoded = decode_handoff(genuine, {})
    assert decoded.trusted and decoded.data["env"] == {"NCCL_BUFFSIZE": "4M"}


def test_signed_wire_is_trusted_and_equal():
    p = resolve(["pcie-8gpu"], use_environ=False).profile
    decoded = decode_handoff(wire.encode(p.to_dict(), inputs={}, run_dir="/srv/audit/x"), {})
    assert decoded.trusted and decoded.data == p.to_dict() and decoded.run_dir == "/srv/audit/x"


def test_wire_value_needs_no_quoting_anywhere():
    p = resolve(["pcie-8gpu"], use_environ=False).profile
    text = wire.encode(p.to_dict(), inputs={"SGLANG_EAGLE_NCCL": "pcie-8gpu"}, run_dir=None)
    assert set(text) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def test_stale_wire_refused_naming_the_variable():
    p = resolve(["pcie-8gpu"], use_environ=False).profile
    text = wire.encode(p.to_dict(), inputs={"SGLANG_EAGLE_NCCL": "1"}, run_dir=None)
    with pytest.raises(ProfileError) as info:
        decode_handoff(text, {"SGLANG_EAGLE_NCCL": "debug", "SGLANG_EAGLE_NCCL_PROFILE": text})
    message = str(info.value)
    assert "SGLANG_EAGLE_NCCL='debug'" in message and "stale" in message
    # The root marker goes with it: left behind, the next launcher from that shell thinks it is a
    # child and opens no launch directory (no audit, silently).
    assert "unset SGLANG_EAGLE_NCCL_PROFILE SGLANG_EAGLE_NCCL_ROOT_PID so the plugin resolves" in message
    # An input that appeared after the hand-off is named too.
    with pytest.raises(ProfileError) as info:
        decode_handoff(text, {"SGLANG_EAGLE_NCCL": "1", "SGLANG_EAGLE_NCCL_ENV": "NCCL_ALGO=Tree"})
    assert "SGLANG_EAGLE_NCCL_ENV" in str(info.value)


def test_following_the_stale_fix_leaves_no_marker_that_silences_the_next_launch(tmp_path):
    """`env --audit-dir` writes a root marker beside the profile. After a stale refusal, doing what the fix
    says must leave a shell whose next launch is a root (it opens its own launch directory: audited)."""
    import re

    from sglang_eagle_nccl.decision.child_env import EXTERNAL_ROOT, child_environment
    from sglang_eagle_nccl.decision.plan import plan

    profile = resolve(["pcie-8gpu"], use_environ=False).profile
    printed = child_environment(
        profile, run_dir=str(tmp_path), node_rank=None, environ={}, root_pid=EXTERNAL_ROOT, standalone=True
    )
    shell = {k: v for k, v in printed.items() if v is not None}
    assert shell["SGLANG_EAGLE_NCCL_ROOT_PID"] == EXTERNAL_ROOT
    shell["SGLANG_EAGLE_NCCL"] = "debug"  # the user asks for another profile in the same shell
    with pytest.raises(ProfileError) as info:
        plan(environ=shell)
    fix = info.value.errors[0].fix
    (named,) = re.findall(r"^unset ((?:SGLANG_EAGLE_NCCL\w*)(?: SGLANG_EAGLE_NCCL\w*)*)", fix)
    assert "SGLANG_EAGLE_NCCL_ROOT_PID" in named.split()
    for var in named.split():
        del shell[var]
    after = plan(environ=shell)
    assert after.is_root and after.data["name"] == "debug"
    # The older fix text named the profile alone: a marker left that way no longer silences anything.
    lone = {"SGLANG_EAGLE_NCCL": "debug", "SGLANG_EAGLE_NCCL_ROOT_PID": EXTERNAL_ROOT}
    assert plan(environ=lone).is_root


def _child(code: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))
    }
    base.update({"PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path / "cache")})
    base.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=base,
        cwd=tmp_path,
        timeout=120,
    )


ACTIVATE = """
    import json, os
    before = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))}
    from sglang_eagle_nccl.inproc.boot import bootstrap
    from sglang_eagle_nccl.inproc.boot.state import STATE
    bootstrap.interpreter_start(enabled=True, cli_flags=False)
    bootstrap.interpreter_start(enabled=True, cli_flags=False)  # a venv runs the .pth line twice
    after = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))}
    print(json.dumps({"before": before, "after": after, "active": STATE.active, "refused": STATE.refused}))
"""


@pytest.mark.parametrize(
    "env,named,fix",
    [
        (
            {"SGLANG_EAGLE_NCCL": "pcie-8gpu", "SGLANG_EAGLE_NCCL_CONSISTENCY": "maybe"},
            "SGLANG_EAGLE_NCCL_CONSISTENCY",
            "set SGLANG_EAGLE_NCCL_CONSISTENCY=error",
        ),
        (
            {"SGLANG_EAGLE_NCCL": "pcie-8gpu", "SGLANG_EAGLE_NCCL_ENV": "NCCL_BUFFSIZE=" + "9" * 5000},
            "NCCL_BUFFSIZE",
            "give a positive number of bytes that fits in 64 bits, or remove NCCL_BUFFSIZE to keep NCCL's default",
        ),
        (
            {"SGLANG_EAGLE_NCCL": "pcie-8gpu", "SGLANG_EAGLE_NCCL_NODE_RANK": "\u0663"},
            "SGLANG_EAGLE_NCCL_NODE_RANK",
            "set SGLANG_EAGLE_NCCL_NODE_RANK to this node's --node-rank (0, 1, ...) or unset it",
        ),
        (
            {"SGLANG_EAGLE_NCCL": "no-such-profile"},
            "no-such-profile",
            "use a built-in profile (audit-only, debug, pcie-8gpu, pcie-8gpu-eagle) or a path to a .toml file",
        ),
        (
            {"SGLANG_EAGLE_NCCL": "1", "SGLANG_EAGLE_NCCL_PROFILE": "sen3.7b7d.-"},
            "SGLANG_EAGLE_NCCL_PROFILE",
            UNSET_WIRE,
        ),
    ],
)
def test_refusal_changes_nothing_and_says_so_once(env, named, fix, tmp_path):
    assert all(fix not in value for value in env.values())  # the fix is the plugin's text, not an echo
    proc = _child(ACTIVATE, env, tmp_path)
    assert proc.returncode == 0, proc.stderr  # an unrelated program keeps running
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["after"] == out["before"]  # nothing written, not even part of the profile
    assert not out["active"] and out["refused"] and named in out["refused"]
    assert f"Fix: {fix}" in out["refused"], out["refused"]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr  # one clear line, printed once
    assert (
        lines[0].startswith("[sglang-eagle-nccl] NCCL profile not applied") and "Traceback" not in proc.stderr
    )


def test_refused_process_cannot_import_sglang(tmp_path):
    # The refusal acts on whatever is imported under the name `sglang`; a one-line module on the
    # path proves the import is refused without needing SGLang in this tier (the SGLang tiers
    # show the same with the real package).
    (tmp_path / "sglang.py").write_text("VERSION = 'any'\n")
    code = (
        textwrap.dedent(ACTIVATE)
        + "\ntry:\n    import sglang\n    print('IMPORTED')\nexcept Exception as exc:\n    print('REFUSED', type(exc).__name__, str(exc).splitlines()[0])\n"
    )
    proc = _child(
        code, {"SGLANG_EAGLE_NCCL": "no-such-profile", "PYTHONPATH": f"{REPO}:{tmp_path}"}, tmp_path
    )
    assert (
        "REFUSED RefusedError sglang-eagle-nccl: the requested NCCL profile cannot be applied" in proc.stdout
    )


def test_activation_writes_then_children_inherit_one_signed_profile(tmp_path):
    proc = _child(ACTIVATE, {"SGLANG_EAGLE_NCCL": "pcie-8gpu", "NCCL_ALGO": "Tree"}, tmp_path)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["active"] and out["after"]["NCCL_PROTO"] == "LL" and out["after"]["NCCL_ALGO"] == "Ring"
    decoded = decode_handoff(out["after"]["SGLANG_EAGLE_NCCL_PROFILE"], out["after"])
    assert decoded.inputs == {"SGLANG_EAGLE_NCCL": "pcie-8gpu"}


RECONFIGURE = """
    import json, os
    from sglang_eagle_nccl.inproc.boot import bootstrap
    from sglang_eagle_nccl.inproc.boot import activation
    from sglang_eagle_nccl.profile.resolve import resolve
    from sglang_eagle_nccl.inproc.boot.state import STATE
    bootstrap.interpreter_start(enabled=True, cli_flags=False)
    activation.reconfigure(resolve(["audit-only"], env_flags=["NCCL_PROTO=Simple"]).profile, reason="test flags")
    print(json.dumps({k: os.environ.get(k) for k in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_BUFFSIZE")}))
"""


def test_flags_replacing_a_profile_give_back_the_users_exports(tmp_path):
    proc = _child(RECONFIGURE, {"SGLANG_EAGLE_NCCL": "pcie-8gpu", "NCCL_ALGO": "Tree"}, tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # NCCL_ALGO: the user's own export (the old profile had replaced it); NCCL_BUFFSIZE: unset again.
    assert out == {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple", "NCCL_BUFFSIZE": None}
