"""The build hook, as users meet it: `pip wheel .` with a C compiler and with CC=false, each wheel
installed into a fresh venv and asked (`doctor`, `tuner`) whether the native plugins work.

Slow (a wheel build and a venv each, about 20 s per test); needs PyPI or pip's cache for hatchling
and the plugin's dependencies, like tests/wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from sglang_eagle_nccl.native import build, library
from support.wheel_env import fresh_venv

REPO = Path(__file__).resolve().parents[2]
NATIVE = "sglang_eagle_nccl/native"
RULES = """
[[tuner.rules]]
collective = "allreduce"
bytes = [0, 65536]
algorithm = "ring"
protocol = "LL"
"""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "SGLANG_EAGLE_NCCL", "CC"))}
    env.update(extra)
    return env


def pip_wheel(out: Path, **env: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            str(REPO),
            "-w",
            str(out),
        ],
        check=True,
        env=clean_env(**env),
        timeout=300,
    )
    (wheel,) = out.glob("sglang_eagle_nccl-*.whl")
    return wheel


def cli(venv_python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = venv_python.parent / "sglang-eagle-nccl"
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env=clean_env(), cwd=cwd, timeout=120
    )


def installed_library(venv_python: Path) -> Path:
    code = "from sglang_eagle_nccl.native import library; print(library.library_path())"
    out = subprocess.run(
        [str(venv_python), "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=clean_env(),
        cwd=venv_python.parent,
    )
    return Path(out.stdout.strip())


def test_sources_compile_without_warnings_in_both_variants(tmp_path):
    for defines in ([], ["SEN_NO_ENV_V2"]):
        info = build.compile_library(
            tmp_path / f"lib{len(defines)}.so", defines=defines, extra_flags=["-Werror"]
        )
        if not info.built and "not found" in info.reason:
            pytest.skip(info.reason)
        assert info.built, info.reason
        assert info.reason == "compiled"
        exported = library.load(tmp_path / f"lib{len(defines)}.so").exported_abis()
        assert exported == {"env": [1] if defines else [1, 2], "tuner": [2, 3, 4, 5, 6]}


def test_missing_compiler_is_recorded_not_raised(tmp_path):
    info = build.compile_library(tmp_path / "x.so", environ={**os.environ, "CC": "/nonexistent/cc"})
    assert not info.built and "not found" in info.reason and not (tmp_path / "x.so").exists()


def test_wheel_without_a_compiler_is_pure_and_says_why(tmp_path):
    wheel = pip_wheel(tmp_path / "dist", CC="false")
    assert wheel.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = json.loads(zf.read(f"{NATIVE}/build_info.json"))
        assert "Root-Is-Purelib: true" in zf.read("sglang_eagle_nccl-0.1.0.dist-info/WHEEL").decode()
    assert f"{NATIVE}/{build.LIBRARY_NAME}" not in names
    assert f"{NATIVE}/src/env_plugin.c" in names  # sources ship anyway
    assert info["built"] is False and "'false' failed" in info["reason"]

    python = fresh_venv(tmp_path / "venv", wheel)
    doctor = cli(python, "doctor", "--json", cwd=tmp_path)
    report = json.loads(doctor.stdout)
    # Missing native plugins are a fact doctor states, not a problem: the pure wheel works without
    # them. (This venv has neither SGLang nor torch, problems of their own: doctor exits 1 for those.)
    assert report["problems"] and not any("native" in p.lower() for p in report["problems"]), report[
        "problems"
    ]
    assert all(
        p.startswith(("sglang is not installed", "torch is not installed")) for p in report["problems"]
    ), report["problems"]
    assert doctor.returncode == 1, doctor.stderr
    native = report["native"]
    assert native["available"] is False
    assert "built without the native library" in native["reason"] and "'false' failed" in native["reason"]
    text = cli(python, "doctor", cwd=tmp_path).stdout
    assert "Native NCCL plugins (env + tuner): unavailable" in text

    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    query = cli(python, "tuner", "--rules", str(rules), "--bytes", "14336", "--nranks", "8", cwd=tmp_path)
    assert query.returncode == 2
    assert "native tuner plugin is not available" in query.stderr and "'false' failed" in query.stderr
    assert "Traceback" not in query.stderr

    # A profile with [[tuner.rules]] is refused here by activation; validate, env and doctor say so too.
    needs = "the profile has [[tuner.rules]] but the native tuner plugin is not available here"
    validate = cli(python, "validate", "pcie-8gpu-eagle", cwd=tmp_path)
    assert validate.returncode == 1 and needs in validate.stderr, validate.stderr
    env = cli(python, "env", "--profile", "pcie-8gpu-eagle", cwd=tmp_path)
    assert env.returncode == 2 and needs in env.stderr and env.stdout == "", env.stderr
    problems = json.loads(
        cli(python, "doctor", "--profile", "pcie-8gpu-eagle", "--json", cwd=tmp_path).stdout
    )["problems"]
    assert any(needs in p for p in problems), problems
    assert (
        cli(python, "validate", "pcie-8gpu", cwd=tmp_path).returncode == 0
    )  # without rules: nothing missing


def test_wheel_with_a_compiler_carries_the_library(tmp_path):
    given = os.environ.get("SGLANG_EAGLE_NCCL_TEST_WHEEL")
    if given and "-py3-none-linux_" in given:
        wheel = Path(shutil.copy2(given, tmp_path))  # CI built it with `pip wheel .` already
    else:
        wheel = pip_wheel(tmp_path / "dist")
    assert wheel.name.endswith(f"-py3-none-{build.platform_tag()}.whl")
    with zipfile.ZipFile(wheel) as zf:
        assert f"{NATIVE}/{build.LIBRARY_NAME}" in zf.namelist()
        info = json.loads(zf.read(f"{NATIVE}/build_info.json"))
        assert "Root-Is-Purelib: false" in zf.read("sglang_eagle_nccl-0.1.0.dist-info/WHEEL").decode()
        assert "sglang_eagle_nccl.pth" in zf.namelist()
    assert info["built"] is True and info["library_version"].startswith("0.1.0+src.")

    python = fresh_venv(tmp_path / "venv", wheel)
    doctor = json.loads(cli(python, "doctor", "--json", cwd=tmp_path).stdout)["native"]
    assert doctor["available"] is True and doctor["library_version"] == info["library_version"]
    assert doctor["exported"] == {"env": [1, 2], "tuner": [2, 3, 4, 5, 6]}

    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    args = ("tuner", "--rules", str(rules), "--bytes", "14KiB", "--nranks", "8", "--json")
    query = cli(python, *args, cwd=tmp_path)
    assert query.returncode == 0, query.stderr
    answer = json.loads(query.stdout)["query"]
    assert (answer["rule"], answer["algorithm"], answer["protocol"]) == ("tuner.rules#1", "Ring", "LL")

    # The library deleted after installation: tuner refuses with the reason, doctor says so too.
    installed_library(python).unlink()
    query = cli(python, *args[:-1], cwd=tmp_path)
    assert query.returncode == 2 and "is missing although the build recorded it" in query.stderr
    assert json.loads(cli(python, "doctor", "--json", cwd=tmp_path).stdout)["native"]["available"] is False


def test_sdist_carries_the_sources_and_the_build_hook(tmp_path):
    pytest.importorskip("build", reason="sdist test needs the 'build' package (pip install build)")
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
        env=clean_env(),
        timeout=300,
    )
    (sdist,) = tmp_path.glob("sglang_eagle_nccl-*.tar.gz")
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert "hatch_build.py" in names
    for src in build.source_files():
        assert f"{NATIVE}/src/{src.name}" in names
    assert not any(n.endswith(".so") or n.endswith("build_info.json") for n in names)


def test_editable_install_compiles_in_place(tmp_path):
    copy = tmp_path / "checkout"
    shutil.copytree(
        REPO,
        copy,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "dist", "build", "__pycache__", "*.so", "build_info.json", ".*cache"
        ),
    )
    venv.EnvBuilder(with_pip=True, clear=True).create(tmp_path / "venv")
    python = tmp_path / "venv" / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-e", str(copy)],
        check=True,
        env=clean_env(),
        timeout=300,
    )
    code = (
        "from sglang_eagle_nccl.native import library; print(library.status()); print(library.library_path())"
    )
    out = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True, env=clean_env(), cwd=tmp_path
    )
    status_line, path_line = out.stdout.strip().splitlines()
    assert status_line.startswith("(True,")
    assert Path(path_line) == copy / NATIVE / build.LIBRARY_NAME
    # An editable install has the interpreter-start bootstrap too (issue 27: the README said only the
    # wheel ships it): the .pth line is in site-packages, and a fresh interpreter that merely has the
    # gate set applies the profile at start, before any import of the plugin.
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert (Path(site) / "sglang_eagle_nccl.pth").is_file()
    started = subprocess.run(
        [str(python), "-c", "import os, sys; print(os.environ.get('NCCL_PROTO'), 'sglang_eagle_nccl' in sys.modules)"],
        capture_output=True, text=True, check=True, env=clean_env(SGLANG_EAGLE_NCCL="pcie-8gpu"), cwd=tmp_path,
    )
    assert started.stdout.split() == ["LL", "True"], started.stdout + started.stderr
