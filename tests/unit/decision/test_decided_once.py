"""The launch's decision is made once (issue 27, item 4): a launcher that opens a launch directory gets
it chosen by the decision and hands down the child environment decided with it, only signed; it does
not build the child environment a second time "for real"."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.contract import handoff, names
from sglang_eagle_nccl.decision import child_env


def test_env_with_a_launch_directory_builds_the_child_environment_once(clean_environ, monkeypatch, tmp_path):
    built: list[str | None] = []
    real = child_env.decide_child_environment

    def counting(*args, **kwargs):
        built.append(kwargs.get("run_dir"))
        return real(*args, **kwargs)

    monkeypatch.setattr(child_env, "decide_child_environment", counting)
    result = CliRunner().invoke(main, ["env", "--profile", "pcie-8gpu", "--audit-dir", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    (launch,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    # Decided once, with the very directory that was then made, and that is what the children get.
    assert built == [str(launch)]
    assert handoff.decode(printed[names.ENV_PROFILE], printed, validate=lambda d: None).run_dir == str(launch)


def test_a_launch_with_another_interpreter_still_refuses_a_hand_off_no_process_can_start_with(clean_environ, tmp_path):
    profile = tmp_path / "nodes.toml"
    sections = [f'[nodes.{n}.env]\nNCCL_SOCKET_IFNAME = "enp{n}s0f0np0"' for n in range(2000)]
    profile.write_text("\n".join(sections) + "\n")
    result = CliRunner().invoke(main, ["launch", "--python", sys.executable, "--profile", str(profile), "--dry-run",
                                       "--", "--model-path", "m"])
    assert result.exit_code == 2 and "SGLANG_EAGLE_NCCL_PROFILE=" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not list(Path(tmp_path).glob("*/launch.json"))
