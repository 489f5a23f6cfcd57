"""The env plugin as users get it: the installed wheel, a launch opened by `sglang-eagle-nccl env
--audit-dir`, a process activated only through SGLANG_EAGLE_NCCL, and the real libnccl of the pinned
nvidia-nccl-cu13 wheel reading through the plugin (ncclGetUniqueId works on CPU).

Asserted: NCCL says it loaded the *installed* library as its env plugin; `sglang-eagle-nccl audit
--json` of that launch holds NCCL's own read of the profile's NCCL_SOCKET_IFNAME; a foreign write
after activation (through os.environ, and through libc setenv behind Python's back) changes nothing
NCCL reads, and the audit records that the environment disagreed.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
from pathlib import Path

import pytest

from support.wheel_env import build_wheel, fresh_venv

pytestmark = pytest.mark.nccl_lib

NCCL_WHEEL = "nvidia-nccl-cu13"
NCCL_VERSION = "2.32.3"
PROBE = Path(__file__).resolve().parent.parent / "probes" / "activated_nccl_probe.py"


@pytest.fixture(scope="module")
def libnccl() -> Path:
    # The tier's conftest fails the session when the wheel is missing (never a skip).
    dist = importlib.metadata.distribution(NCCL_WHEEL)
    lib = Path(str(dist.locate_file("nvidia/nccl/lib/libnccl.so.2")))
    assert lib.is_file() and dist.version == NCCL_VERSION
    return lib


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("native-wheel")
    wheel = build_wheel(base / "dist")
    assert "linux" in wheel.name, f"{wheel.name}: the wheel was built without its native library"
    return fresh_venv(base / "venv", wheel)


def _clean_env() -> dict[str, str]:
    return {
        k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))
    }


@pytest.mark.parametrize("mode", ["os.environ", "setenv"])
def test_nccl_reads_the_profile_through_the_installed_env_plugin(venv_python, libnccl, tmp_path, mode):
    cli = venv_python.parent / "sglang-eagle-nccl"
    profile = tmp_path / "iface.toml"
    profile.write_text('[env]\nNCCL_SOCKET_IFNAME = "lo"\nNCCL_BUFFSIZE = 8388608\n')
    printed = subprocess.run(
        [
            str(cli),
            "env",
            "--profile",
            str(profile),
            "--audit-dir",
            str(tmp_path / "audit"),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=60,
    )
    assert printed.returncode == 0, printed.stderr
    env_vars = json.loads(printed.stdout)
    assert "NCCL_ENV_PLUGIN" not in env_vars  # each process sets its own, never carried to other machines
    env = dict(_clean_env(), **env_vars, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,ENV")
    proc = subprocess.run(
        [str(venv_python), str(PROBE), str(libnccl), mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads((tmp_path / "probe-result.json").read_text())
    installed = venv_python.parent.parent / "lib"
    assert out["activated"] and out["env_plugin"] and Path(out["env_plugin"]).is_relative_to(installed)
    nccl_said = proc.stdout + proc.stderr
    assert f"Successfully loaded external env plugin {out['env_plugin']}" in nccl_said, nccl_said[-3000:]
    assert "NCCL_SOCKET_IFNAME set by environment to lo" in nccl_said  # NCCL's own word: the profile's value

    (launch,) = [d for d in (tmp_path / "audit").iterdir() if d.is_dir()]
    audit = subprocess.run(
        [str(cli), "audit", str(launch), "--json"],
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=60,
    )
    report = json.loads(audit.stdout)
    assert audit.returncode == 0, audit.stdout[-3000:]  # NCCL's own reads are something real to audit
    (reads,) = [r for r in report["nccl_reads"].values() if r["pid"] == out["pid"]]
    (ifname,) = [r for r in reads["reads"] if r["name"] == "NCCL_SOCKET_IFNAME"]
    assert ifname["value"] == "lo" and ifname["source"] == "profile"
    assert ifname["environment"] == "bogus0" and ifname["disagrees"] is True
    assert reads["verdict"] == "warn" and any("written after activation" in n for n in reads["notes"])


@pytest.mark.parametrize("kind", ["fifo", "hardlink", "symlink", "lines"])
def test_a_reads_log_name_someone_planted_is_never_written_through(venv_python, libnccl, tmp_path, kind):
    """The C reads log obeys the launch directory's rules: it only ever writes to a descriptor the plugin
    created new. A FIFO does not block the process, a hard or symbolic link does not lead elsewhere, a
    file with lines is not appended to -- and audit never counts the planted lines as NCCL's reads."""
    cli = venv_python.parent / "sglang-eagle-nccl"
    profile = tmp_path / "iface.toml"
    profile.write_text('[env]\nNCCL_SOCKET_IFNAME = "lo"\n')
    printed = subprocess.run(
        [
            str(cli),
            "env",
            "--profile",
            str(profile),
            "--audit-dir",
            str(tmp_path / "audit"),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=60,
    )
    assert printed.returncode == 0, printed.stderr
    env = dict(_clean_env(), **json.loads(printed.stdout))
    proc = subprocess.run(
        [str(venv_python), str(PROBE), str(libnccl), "os.environ", kind],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # finished: the FIFO blocked nothing
    out = json.loads((tmp_path / "probe-result.json").read_text())
    assert out["rc"] == 0 and out["activated"]
    assert "cannot write NCCL's reads log" in proc.stderr and "already exists" in proc.stderr
    assert out["after"]["outside"] == "precious\n"  # nothing reached the file a link pointed at
    if kind == "lines":
        assert out["after"]["body"] == '{"event": "read", "name": "NCCL_SOCKET_IFNAME", "value": "forged"}\n'
    (launch,) = [d for d in (tmp_path / "audit").iterdir() if d.is_dir()]
    audit = subprocess.run(
        [str(cli), "audit", str(launch), "--json"],
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=60,
    )
    report = json.loads(audit.stdout)
    assert not any(
        r["pid"] == out["pid"] for r in report["nccl_reads"].values()
    )  # planted lines are not reads
    assert any(Path(out["planted"]["path"]).name == u["file"] for u in report["unreadable"]), report[
        "unreadable"
    ]
