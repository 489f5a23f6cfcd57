"""An SGLang newer than every manifest: strict refusal listing targets; allow_partial runs and
the audit records what is uncovered. Uses a small SGLang-shaped package tree on disk."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main

MODULES = {
    "sglang/__init__.py": "__version__ = '0.9.0'\n",
    "sglang/srt/__init__.py": "",
    "sglang/srt/entrypoints/__init__.py": "",
    # _set_envs_and_config was renamed in this imaginary release
    "sglang/srt/entrypoints/engine.py": "def _configure_process_env(server_args):\n    pass\n",
    "sglang/srt/managers/__init__.py": "",
    "sglang/srt/managers/scheduler.py": "class Scheduler:\n    def __init__(self, server_args, port_args):\n        pass\n",
    "sglang/srt/distributed/__init__.py": "",
    "sglang/srt/distributed/parallel_state.py": textwrap.dedent(
        """
        class GroupCoordinator:
            def __init__(self, group_ranks, local_rank, torch_distributed_backend, use_pynccl, group_name=None):
                self.group_name = group_name
        """
    ),
    "sglang/srt/distributed/device_communicators/__init__.py": "",
    "sglang/srt/distributed/device_communicators/pynccl.py": "class PyNcclCommunicator:\n    def __init__(self, group, device, library_path=None):\n        pass\n",
    "sglang/srt/server_args.py": "class ServerArgs:\n    @staticmethod\n    def add_cli_args(parser):\n        pass\n    @classmethod\n    def from_cli_args(cls, args):\n        return cls()\n",
    "sglang/srt/plugins/__init__.py": "_plugins_loaded = False\n",
    "sglang/srt/plugins/hook_registry.py": "",
    "sglang-0.9.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: sglang\nVersion: 0.9.0\n",
    "sglang-0.9.0.dist-info/RECORD": "",
}


@pytest.fixture
def fake_site(tmp_path) -> Path:
    site = tmp_path / "site"
    for rel, text in MODULES.items():
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return site


def test_doctor_lists_the_missing_required_target(fake_site, monkeypatch, clean_environ):
    monkeypatch.syspath_prepend(str(fake_site))
    result = CliRunner().invoke(main, ["doctor", "--json"])
    assert result.exit_code == 1, result.output  # it lists a problem: the missing required target
    data = json.loads(result.output)
    assert data["packages"]["sglang"] == "0.9.0"
    assert data["selection"]["status"] == "untested_newer"
    missing = [t["target"] for t in data["targets"] if not t["ok"]]
    assert "sglang.srt.entrypoints.engine:_set_envs_and_config" in missing
    assert any("required hook target" in p for p in data["problems"])


def _activate(site: Path, tmp_path: Path, allow_partial: bool) -> subprocess.CompletedProcess:
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(site)!r})
        from sglang_eagle_nccl.runtime import bootstrap
        from sglang_eagle_nccl.profile.resolve import resolve
        profile = resolve(["pcie-8gpu"], use_environ=False, policy_flags={{"allow_partial": {allow_partial}, "audit_dir": {str(tmp_path / 'audit')!r}, "mechanism": "wrapt"}}).profile
        bootstrap.activate(profile, origin="test")
        import sglang.srt.distributed.parallel_state as ps   # triggers patch-set selection
        ps.GroupCoordinator([[0]], 0, "gloo", False, group_name="tp")
        print("SERVED")
        """
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("NCCL_", "SGLANG_EAGLE_NCCL"))}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_strict_refusal_names_the_missing_targets(fake_site, tmp_path):
    proc = _activate(fake_site, tmp_path, allow_partial=False)
    assert proc.returncode != 0
    assert "SERVED" not in proc.stdout
    assert "_set_envs_and_config" in proc.stderr and "--allow-partial" in proc.stderr


def test_allow_partial_runs_and_audit_marks_uncovered(fake_site, tmp_path):
    proc = _activate(fake_site, tmp_path, allow_partial=True)
    assert proc.returncode == 0, proc.stderr
    assert "SERVED" in proc.stdout
    (launch,) = list((tmp_path / "audit").iterdir())
    records = [json.loads(line) for f in launch.glob("proc-*.jsonl") for line in f.read_text().splitlines()]
    patch = next(r for r in records if r["event"] == "patch_set")
    assert patch["status"] == "untested_newer"
    assert any(u["target"].endswith("_set_envs_and_config") for u in patch["uncovered"])
    # the hooks that do exist were installed and ran
    assert any(r["event"] == "group_created" and r["group"] == "tp" for r in records)
    from sglang_eagle_nccl.audit.report import load_report

    report = load_report(launch)
    notes = [n for p in report.processes for n in p.notes]
    assert any("uncovered" in n and "_set_envs_and_config" in n for n in notes)
