"""CLI edges of `launch` and `env`: a dry run writes nothing, a missing interpreter is a clear exit 2,
plugin options after the server arguments are refused, --node-rank is read the way SGLang's argparse
reads it, and `env --format dotenv` reads the same in systemd and docker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.offline.launch.server import node_rank_from_args
from sglang_eagle_nccl.profile.resolve import decode_handoff


@pytest.fixture
def runner():
    return CliRunner()


def test_dry_run_writes_nothing(runner, clean_environ, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))  # no hand-off key yet: a dry run must not create one
    audit = tmp_path / "audit"
    res = runner.invoke(
        main,
        [
            "launch",
            "--profile",
            "pcie-8gpu",
            "--audit-dir",
            str(audit),
            "--python",
            sys.executable,
            "--dry-run",
            "--",
            "--model-path",
            "M",
            "--tp",
            "2",
        ],
    )
    assert res.exit_code == 0, res.output
    plan = json.loads(res.output)
    assert plan["run_dir"] is None and plan["argv"][-4:] == ["--model-path", "M", "--tp", "2"]
    assert not audit.exists() and not cache.exists()
    assert (
        decode_handoff(
            plan["env"]["SGLANG_EAGLE_NCCL_PROFILE"], {k: v for k, v in plan["env"].items() if v}
        ).data["name"]
        == "pcie-8gpu"
    )


def test_missing_python_is_exit_2_and_leaves_nothing(runner, clean_environ, tmp_path):
    audit = tmp_path / "audit"
    res = runner.invoke(
        main,
        [
            "launch",
            "--profile",
            "pcie-8gpu",
            "--audit-dir",
            str(audit),
            "--python",
            str(tmp_path / "no-such-python"),
            "--",
            "--model-path",
            "M",
        ],
    )
    assert res.exit_code == 2
    assert "no such executable interpreter" in res.output and "Fix: pass the path" in res.output
    assert "Traceback" not in res.output and not audit.exists()


@pytest.mark.parametrize(
    "misplaced",
    [["--profile", "debug"], ["--nccl-env", "NCCL_ALGO=Tree"], ["--dry-run"], ["--audit-dir=/srv/a"]],
)
def test_plugin_options_after_server_arguments_are_refused(runner, clean_environ, tmp_path, misplaced):
    res = runner.invoke(
        main,
        [
            "launch",
            "--profile",
            "pcie-8gpu",
            "--audit-dir",
            str(tmp_path / "a"),
            "--python",
            sys.executable,
            "--model-path",
            "M",
            *misplaced,
        ],
    )
    assert res.exit_code == 2
    name = misplaced[0].split("=")[0]
    assert (
        f"{name} comes after the server arguments" in res.output
        and "put the plugin's options before `--`" in res.output
    )
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(
    "args,rank",
    [
        (["--node-rank", "1", "--node-rank", "0"], 0),
        (["--node-rank=3", "--tp", "8"], 3),
        (["--tp", "8"], None),
        (["--node-rank", "\u0663"], None),  # not an ASCII digit: SGLang's own argparse refuses it
        (["--node-ranks", "1"], None),  # a different option: exact names only
    ],
)
def test_node_rank_is_read_like_sglangs_argparse(args, rank):
    assert node_rank_from_args(args) == rank


def _dotenv(runner, tmp_path) -> str:
    profile = tmp_path / "p.toml"
    profile.write_text('extends = "pcie-8gpu"\n[env]\nNCCL_THREAD_THRESHOLDS = "64 256 256 64 256 256"\n')
    res = runner.invoke(main, ["env", "--profile", str(profile), "--format", "dotenv"])
    assert res.exit_code == 0, res.output
    return res.output


GENERATOR = "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator"


@pytest.mark.skipif(
    not os.access(GENERATOR, os.X_OK),
    reason="needs systemd's environment.d generator (Debian package systemd)",
)
def test_dotenv_reads_the_same_with_systemds_own_parser(runner, clean_environ, tmp_path):
    """systemd's EnvironmentFile= and environment.d share one parser (load_env_file): run systemd's
    own generator on the file and compare what it reads with what the plugin meant."""
    text = _dotenv(runner, tmp_path)
    meant = dict(line.split("=", 1) for line in text.splitlines() if line)
    conf = tmp_path / "xdg" / "environment.d"
    conf.mkdir(parents=True)
    (conf / "50-sglang-eagle-nccl.conf").write_text(text)
    out = subprocess.run(
        [GENERATOR],
        capture_output=True,
        text=True,
        timeout=30,
        env={"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PATH": "/usr/bin:/bin"},
    )
    read = {}
    for line in out.stdout.splitlines():
        key, value = line.split("=", 1)
        # The generator prints in shell syntax: a value with a space comes back double-quoted.
        read[key] = value[1:-1] if value.startswith('"') and value.endswith('"') else value
    for key, value in meant.items():
        assert read.get(key) == value, key


@pytest.mark.skipif(
    shutil.which("docker") is None, reason="needs the docker client (it parses --env-file itself)"
)
def test_dotenv_is_accepted_by_dockers_env_file_parser(runner, clean_environ, tmp_path):
    """docker takes everything after the first '=' verbatim; its client refuses a malformed file before
    it contacts any daemon, so an accepted file fails only for the missing daemon here."""
    good = tmp_path / "good.env"
    good.write_text(_dotenv(runner, tmp_path))
    bad = tmp_path / "bad.env"
    bad.write_text("NCCL X=1\n")

    def run(path: Path) -> str:
        return subprocess.run(
            ["docker", "run", "--rm", "--env-file", str(path), "sglang-eagle-nccl-no-such-image"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stderr

    assert "invalid env file" in run(bad)  # the client does check the file
    assert "invalid env file" not in run(good)


def test_dotenv_refuses_values_the_two_would_read_differently(runner, clean_environ, tmp_path):
    profile = tmp_path / "q.toml"
    profile.write_text('[env]\nNCCL_TOPO_FILE = "/opt/topo files/\\"a\\".xml"\n')
    res = runner.invoke(main, ["env", "--profile", str(profile), "--format", "dotenv"])
    assert res.exit_code == 2
    assert "NCCL_TOPO_FILE" in res.output and "use --format shell" in res.output


def test_json_output_is_strict_json_whatever_a_value_holds():
    from sglang_eagle_nccl.cli.common import strict

    data = {"a": float("nan"), "b": [float("inf"), 1.5, {"c": float("-inf")}], "d": "x"}
    assert json.loads(json.dumps(strict(data), allow_nan=False)) == {
        "a": None,
        "b": [None, 1.5, {"c": None}],
        "d": "x",
    }


def test_preflight_knows_a_cpu_machine_without_importing_torch():
    """The launcher's backend choice costs no torch import on a machine that cannot use CUDA."""
    import subprocess
    import sys

    code = (
        "import sys; from sglang_eagle_nccl.offline.launch.preflight import cuda_possible; "
        "print(cuda_possible(), 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[1] == "False"  # torch was not imported to decide
    from sglang_eagle_nccl.contract.versions import installed_version

    if (installed_version("torch") or "+cpu").endswith("+cpu"):
        assert out[0] == "False"
