"""Hostile input, one row per input class (issue 11, items 5-8).

Every row runs the real CLI in this process (click's runner, so ``os.environ`` can be compared
before and after) with its own environment and files, and asserts: the exit code, that the
message names the variable, shows the value, states the rule and gives the fix the plugin
writes (never text copied from the input), that no traceback was printed or raised, and that
``os.environ`` is exactly as before (``environ_guard`` checks it once more after the test).

``{tmp}`` in an argument, a variable or a file body is the row's temporary directory.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main

HUGE = "9" * 5000  # beyond Python's 4300-digit int() limit and far beyond NCCL's long long
BIG = "/" + "a" * 131072  # one NAME=value over Linux's MAX_ARG_STRLEN (131072 bytes)


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    exit: int
    variable: str  # named in the message: the variable, the file, or the audit path
    shown: str | None  # how the value appears in the message (repr, or its cut form); None: no value

    rule: str
    fix: str
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str | bytes] = field(default_factory=dict)
    setup: str = ""  # name of a SETUP function preparing special files (FIFOs, modes)


def _cut(value: str) -> str:
    """A long value is shown cut to its start plus its length."""
    return repr(value[:48])[:-1]


CASES = [
    # --- item 5: NCCL-accurate bounds -----------------------------------------------------
    Case(
        "strtoll overflow, decimal",
        ("validate", "--nccl-env", "NCCL_BUFFSIZE=99999999999999999999"),
        1,
        "NCCL_BUFFSIZE",
        "'99999999999999999999'",
        "outside C's long long range",
        "fits in 64 bits",
    ),
    Case(
        "strtoll overflow, negative",
        ("validate", "--nccl-env", "NCCL_NTHREADS=-9223372036854775809"),
        1,
        "NCCL_NTHREADS",
        "'-9223372036854775809'",
        "NCCL's strtoll overflows",
        "give an integer in [64, 512]",
    ),
    Case(
        "strtoll overflow, hex",
        ("validate", "--nccl-env", "NCCL_MAX_CTAS=0x10000000000000000"),
        1,
        "NCCL_MAX_CTAS",
        "'0x10000000000000000'",
        "using default",
        "in [1, 64]",
    ),
    Case(
        "strtoll overflow, octal",
        ("validate", "--nccl-env", "NCCL_LL_BUFFSIZE=02000000000000000000000"),
        1,
        "NCCL_LL_BUFFSIZE",
        "'02000000000000000000000'",
        "outside C's long long range",
        "fits in 64 bits",
    ),
    Case(
        "C int wrap of a buffer size",
        ("validate", "--nccl-env", "NCCL_BUFFSIZE=4294967296"),
        1,
        "NCCL_BUFFSIZE",
        "'4294967296'",
        "keeps it in a C int",
        "up to 2147483647",
    ),
    Case(
        "5000-digit NCCL value",
        ("validate", "--nccl-env", f"NCCL_BUFFSIZE={HUGE}"),
        1,
        "NCCL_BUFFSIZE",
        _cut(HUGE),
        "outside C's long long range",
        "fits in 64 bits",
    ),
    Case(
        "5000-digit thresholds",
        ("validate", "--nccl-env", f"NCCL_THREAD_THRESHOLDS=1 2 3 4 5 {HUGE}"),
        1,
        "NCCL_THREAD_THRESHOLDS",
        "(5010 characters)",
        "six integers",
        "64 256 256 64 256 256",
    ),
    Case(
        "5000-digit plugin variable",
        ("profiles", "show", "pcie-8gpu"),
        2,
        "SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT",
        _cut(HUGE),
        "number of seconds",
        "SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT=60",
        env={"SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT": HUGE},
    ),
    Case(
        "5000-digit nccl_version",
        ("validate", "pcie-8gpu"),
        1,
        "SGLANG_EAGLE_NCCL_NCCL_VERSION",
        _cut(HUGE),
        "not a version number",
        "SGLANG_EAGLE_NCCL_NCCL_VERSION=2.27",
        env={"SGLANG_EAGLE_NCCL_NCCL_VERSION": HUGE},
    ),
    Case(
        "5000-digit node rank key",
        ("validate", "{tmp}/p.toml"),
        1,
        f"nodes.{HUGE[:20]}",
        None,
        "plain digits 0-9, at most 9",
        "[nodes.0.env]",
        files={"p.toml": f"[nodes.{HUGE}.env]\nNCCL_SOCKET_IFNAME = 'eth0'\n"},
    ),
    Case(
        "non-ASCII digits in an integer",
        ("validate", "--nccl-env", "NCCL_NTHREADS=٢٥٦"),
        1,
        "NCCL_NTHREADS",
        "'٢٥٦'",
        "non-ASCII character",
        "NCCL_NTHREADS=256",
    ),
    Case(
        "non-ASCII digit in a list",
        ("validate", "--nccl-env", "NCCL_IB_HCA==mlx5_0:١"),
        1,
        "NCCL_IB_HCA",
        "'=mlx5_0:١'",
        "byte by byte",
        "NCCL_IB_HCA==mlx5_0:1",
    ),
    Case(
        "non-ASCII digit in thresholds",
        ("validate", "--nccl-env", "NCCL_THREAD_THRESHOLDS=64 256 256 64 256 ٢٥٦"),
        1,
        "NCCL_THREAD_THRESHOLDS",
        "'64 256 256 64 256 ٢٥٦'",
        "non-ASCII",
        "NCCL_THREAD_THRESHOLDS=64 256 256 64 256 256",
    ),
    Case(
        "non-ASCII letter in a name list",
        ("validate", "--nccl-env", "NCCL_DEBUG_SUBSYS=ınıt"),
        1,
        "NCCL_DEBUG_SUBSYS",
        "'ınıt'",
        "U+0131",
        "with ASCII characters only",
    ),
    Case(
        "non-ASCII node rank",
        ("validate", "{tmp}/p.toml"),
        1,
        "nodes.٣",
        None,
        "plain digits 0-9",
        "[nodes.0.env]",
        files={"p.toml": "[nodes.\"٣\".env]\nNCCL_SOCKET_IFNAME = 'eth0'\n"},
    ),  # quoted: TOML bare keys are ASCII
    Case(
        "non-ASCII seconds in a plugin variable",
        ("validate", "pcie-8gpu"),
        1,
        "SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT",
        "'٣٠'",
        "ASCII digits",
        "SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT=60",
        env={"SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT": "٣٠"},
    ),
    Case(
        "NAME=value over MAX_ARG_STRLEN",
        ("validate", "{tmp}/p.toml"),
        1,
        "NCCL_TOPO_FILE",
        "(131073 characters)",
        "MAX_ARG_STRLEN (131072 bytes)",
        "shorten the value to under",
        files={"p.toml": f'[env]\nNCCL_TOPO_FILE = "{BIG}"\n'},
    ),
    Case(
        "TOML nested arrays",
        ("profiles", "show", "{tmp}/p.toml"),
        2,
        "{tmp}/p.toml",
        None,
        "nests too deeply: brackets nested more than 16",
        "write flat [env]",
        files={"p.toml": "[env]\nNCCL_PROTO = " + "[" * 5000 + "]" * 5000 + "\n"},
    ),
    Case(
        "TOML nested inline tables",
        ("validate", "{tmp}/p.toml"),
        1,
        "{tmp}/p.toml",
        None,
        "nests too deeply",
        "write flat [env]",
        files={"p.toml": "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n"},
    ),
    Case(
        "TOML long dotted key",
        ("validate", "{tmp}/p.toml"),
        1,
        "{tmp}/p.toml",
        None,
        "more than 16 dotted key parts on line 1",
        "write flat [env]",
        files={"p.toml": "a" + ".a" * 100000 + " = 1\n"},
    ),
    Case(
        "TOML too large",
        ("validate", "{tmp}/p.toml"),
        1,
        "{tmp}/p.toml",
        None,
        "larger than 256 KiB",
        "a profile is a short TOML file",
        files={"p.toml": "# " + "x" * (300 * 1024) + "\n"},
    ),
    Case(
        "TOML with a BOM is read",
        ("validate", "{tmp}/p.toml"),
        1,
        "NCCL_PROTO",
        "'LL,bogus'",
        "unknown protocol 'bogus'",
        "LL, LL128, Simple",
        files={"p.toml": "\ufeff[env]\nNCCL_PROTO = 'LL,bogus'\n".encode()},
    ),
    Case(
        "node keys that collide",
        ("validate", "{tmp}/p.toml"),
        1,
        "nodes.007 and nodes.7",
        None,
        "all mean node rank 7",
        "written [nodes.7.env]",
        files={
            "p.toml": "[nodes.007.env]\nNCCL_SOCKET_IFNAME = 'eth0'\n[nodes.7.env]\nNCCL_SOCKET_IFNAME = 'eth1'\n"
        },
    ),
    Case(
        "profile path is a FIFO",
        ("validate", "{tmp}/fifo.toml"),
        1,
        "{tmp}/fifo.toml",
        None,
        "not a regular file",
        "give a .toml file",
        setup="fifo_profile",
    ),
    # --- issue 18: an integer beyond Python's 4300-digit limit, in every door a TOML file enters by --
    *[
        Case(
            f"5000-digit TOML integer: {' '.join(argv[:2])}",
            argv,
            code,
            "{tmp}/big.toml",
            None,
            "an integer on line 3 has more than 4300 digits",
            "write a number that fits in 64 bits",
            files={"big.toml": f"[env]\nNCCL_PROTO = 'LL'\nNCCL_BUFFSIZE = {HUGE}\n"},
        )
        for argv, code in [
            (("validate", "{tmp}/big.toml"), 1),
            (("profiles", "show", "{tmp}/big.toml"), 2),
            (("env", "--profile", "{tmp}/big.toml"), 2),
            (("launch", "--profile", "{tmp}/big.toml", "--dry-run", "--", "--model-path", "m"), 2),
            (("doctor", "--profile", "{tmp}/big.toml"), 2),
            (("tuner", "--profile", "{tmp}/big.toml", "--bytes", "1", "--nranks", "2"), 2),
            (("preflight", "--tp", "1", "--profile", "{tmp}/big.toml"), 2),
        ]
    ],
    Case(
        "5000-digit TOML integer in [policy], named by the gate",
        ("profiles", "show"),
        2,
        "{tmp}/big.toml",
        None,
        "an integer on line 2 has more than 4300 digits",
        "write a number that fits in 64 bits",
        env={"SGLANG_EAGLE_NCCL": "{tmp}/big.toml"},
        files={"big.toml": f"[policy]\nconsistency_timeout_s = {HUGE}\n"},
    ),
    Case(
        "5000-digit integer in a rule's bytes",
        ("tuner", "--rules", "{tmp}/r.toml", "--bytes", "1", "--nranks", "2"),
        2,
        "--rules {tmp}/r.toml",
        None,
        "an integer on line 4 has more than 4300 digits",
        "write a number that fits in 64 bits",
        files={
            "r.toml": f"[[tuner.rules]]\ncollective = 'allreduce'\nbytes = [0,\n  {HUGE}]\nalgorithm = 'ring'\n"
        },
    ),
    Case(
        "5000-digit hidden_size in a model config",
        ("sizes", "--model-config", "{tmp}/config.json"),
        2,
        "--model-config",
        "'{tmp}/config.json'",
        "has an integer of more than 4300 digits on line 3",
        "pass the model's Hugging Face config.json unchanged",
        files={"config.json": f'{{"model_type": "llama",\n "note": "{HUGE}",\n "hidden_size": {HUGE}}}\n'},
    ),
    Case(
        "malformed rules file names its line",
        ("tuner", "--rules", "{tmp}/r.toml", "--bytes", "1", "--nranks", "2"),
        2,
        "--rules {tmp}/r.toml",
        None,
        "malformed TOML",
        "fix the TOML syntax",
        files={"r.toml": "[[tuner.rules]]\ncollective = 'allreduce'\nbytes = [0, \n"},
    ),
    Case(
        "5000-digit --bytes",
        ("tuner", "--bytes", HUGE, "--nranks", "2"),
        2,
        "--bytes",
        _cut(HUGE),
        "not a size",
        "give a byte count such as 14336 or 64KiB",
    ),
    Case(
        "non-ASCII digit in --bytes",
        ("tuner", "--bytes", "٣KiB", "--nranks", "2"),
        2,
        "--bytes",
        "'٣KiB'",
        "not a size",
        "give a byte count such as 14336 or 64KiB",
    ),
    # --- item 6: audit on hostile directories ------------------------------------------------
    Case(
        "audit: no such directory",
        ("audit", "{tmp}/nowhere"),
        2,
        "{tmp}/nowhere",
        None,
        "cannot judge: audit directory {tmp}/nowhere cannot be used",
        "give the launch directory",
    ),
    Case(
        "audit: root is a file",
        ("audit", "{tmp}/file"),
        2,
        "{tmp}/file",
        None,
        "is not a directory",
        "give the launch directory",
        files={"file": "x"},
    ),
    Case(
        "audit: empty root",
        ("audit", "{tmp}"),
        2,
        "{tmp}",
        None,
        "no audit records under",
        "the --audit-dir root",
    ),
    Case(
        "audit: only a FIFO",
        ("audit", "{tmp}/run"),
        2,
        "{tmp}/run",
        None,
        "proc-h-1.jsonl: a FIFO (named pipe), not a regular file",
        "files may have been replaced",
        setup="fifo_record",
    ),
    Case(
        "audit: list-valued launch.json, garbage record",
        ("audit", "{tmp}/run"),
        2,
        "{tmp}/run",
        None,
        "launch.json:1: not a JSON object but a list",
        "files may have been replaced",
        files={"run/launch.json": "[1, 2]", "run/proc-h-1.jsonl": '[]\n{"event": "process_start"}\n'},
    ),
    # --- item 7: risky values named ------------------------------------------------------------
    Case(
        "plugin: relative path",
        ("validate", "--nccl-env", "NCCL_TUNER_PLUGIN=./libtuner.so"),
        1,
        "NCCL_TUNER_PLUGIN",
        "'./libtuner.so'",
        "relative path",
        "/opt/nccl-plugins/libtuner.so",
    ),
    Case(
        "plugin: missing library",
        ("validate", "--nccl-env", "NCCL_ENV_PLUGIN={tmp}/none/libnccl-env.so"),
        1,
        "NCCL_ENV_PLUGIN",
        "'{tmp}/none/libnccl-env.so'",
        "cannot be found (No such file or directory)",
        "install the library there",
    ),
    Case(
        "plugin: library writable by others",
        ("validate", "--nccl-env", "NCCL_NET_PLUGIN={tmp}/lib/libnccl-net-x.so"),
        1,
        "NCCL_NET_PLUGIN",
        "'{tmp}/lib/libnccl-net-x.so'",
        "writable by group or others (mode 0o666)",
        "chmod go-w",
        setup="writable_library",
    ),
    Case(
        "plugin: world-writable directory",
        ("validate", "--nccl-env", "NCCL_PROFILER_PLUGIN={tmp}/open/libp.so"),
        1,
        "NCCL_PROFILER_PLUGIN",
        "'{tmp}/open/libp.so'",
        "writable by everyone without the sticky bit",
        "chmod o-w",
        setup="world_writable_dir",
    ),
    Case(
        "plugin: bare name is named",
        ("validate", "--nccl-env", "NCCL_NET_PLUGIN=aws-ofi"),
        0,
        "NCCL_NET_PLUGIN",
        "'aws-ofi'",
        "libnccl-net-aws-ofi.so from the dynamic linker's search path",
        "give its absolute path",
    ),
    Case(
        "plugin: own library warned",
        ("validate", "--nccl-env", "NCCL_TUNER_PLUGIN={tmp}/lib/libnccl-tuner-x.so"),
        0,
        "NCCL_TUNER_PLUGIN",
        "'{tmp}/lib/libnccl-tuner-x.so'",
        "will load library",
        "the library you intend",
        setup="private_library",
    ),
    Case(
        "debug file in a world-writable directory",
        ("validate", "--nccl-env", "NCCL_DEBUG_FILE={tmp}/open/nccl.log"),
        0,
        "NCCL_DEBUG_FILE",
        "'{tmp}/open/nccl.log'",
        "writable by everyone and the file name has no %p",
        "{audit_dir}/nccl.%h.%p.log",
        setup="world_writable_dir",
    ),
    Case(
        "placeholder outside NCCL_DEBUG_FILE",
        ("validate", "--nccl-env", "NCCL_TOPO_FILE={audit_dir}/topo.xml"),
        1,
        "NCCL_TOPO_FILE",
        "'{audit_dir}/topo.xml'",
        "only as the leading path component",
        "use a literal path in NCCL_TOPO_FILE",
    ),
    Case(
        "placeholder not leading",
        ("validate", "--nccl-env", "NCCL_DEBUG_FILE=/var/log/{audit_dir}/n.%p"),
        1,
        "NCCL_DEBUG_FILE",
        "'/var/log/{audit_dir}/n.%p'",
        "expanded only as the leading path",
        "{audit_dir}/nccl.%h.%p.log",
    ),
    Case(
        "placeholder escaping the directory",
        ("validate", "--nccl-env", "NCCL_DEBUG_FILE={audit_dir}/../n.%p"),
        1,
        "NCCL_DEBUG_FILE",
        "'{audit_dir}/../n.%p'",
        "no '..'",
        "{audit_dir}/nccl.%h.%p.log",
    ),
    # --- item 8: errors name the plugin variable or the file ---------------------------------
    Case(
        "plugin variable named, not the policy key",
        ("validate", "pcie-8gpu"),
        1,
        "SGLANG_EAGLE_NCCL_CONSISTENCY",
        "'maybe'",
        "must be error, warn or off",
        "SGLANG_EAGLE_NCCL_CONSISTENCY=error",
        env={"SGLANG_EAGLE_NCCL_CONSISTENCY": "maybe"},
    ),
    Case(
        "plugin boolean variable",
        ("profiles", "show", "pcie-8gpu"),
        2,
        "SGLANG_EAGLE_NCCL_AUDIT_REQUIRED",
        "'sometimes'",
        "must be a boolean",
        "SGLANG_EAGLE_NCCL_AUDIT_REQUIRED=1",
        env={"SGLANG_EAGLE_NCCL_AUDIT_REQUIRED": "sometimes"},
    ),
    Case(
        "audit dir with a newline",
        ("validate", "pcie-8gpu"),
        1,
        "SGLANG_EAGLE_NCCL_AUDIT_DIR",
        "'/var/log/a\\nb'",
        "NUL or newline",
        "choose a plain directory path",
        env={"SGLANG_EAGLE_NCCL_AUDIT_DIR": "/var/log/a\nb"},
    ),
    Case(
        "policy of the wrong type names the file",
        ("validate", "{tmp}/p.toml"),
        1,
        "policy.consistency_timeout_s",
        "'true'",
        "[{tmp}/p.toml]",
        "write consistency_timeout_s = 60",
        files={"p.toml": "[policy]\nconsistency_timeout_s = true\n"},
    ),
    Case(
        "policy table of the wrong type",
        ("validate", "{tmp}/p.toml"),
        1,
        "policy",
        None,
        "[policy] must be a table",
        "write [policy] then key = value",
        files={"p.toml": "policy = 5\n"},
    ),
    Case(
        "profile named by the gate is a FIFO",
        ("profiles", "show"),
        2,
        "{tmp}/fifo.toml",
        None,
        "not a regular file",
        "give a .toml file",
        env={"SGLANG_EAGLE_NCCL": "{tmp}/fifo.toml"},
        setup="fifo_profile",
    ),
]


# --- special files ---------------------------------------------------------------------------


def _fifo_profile(tmp):
    os.mkfifo(tmp / "fifo.toml")


def _fifo_record(tmp):
    (tmp / "run").mkdir()
    os.mkfifo(tmp / "run" / "proc-h-1.jsonl")


def _writable_library(tmp):
    (tmp / "lib").mkdir(mode=0o755)
    lib = tmp / "lib" / "libnccl-net-x.so"
    lib.write_bytes(b"\x7fELF")
    lib.chmod(0o666)


def _private_library(tmp):
    (tmp / "lib").mkdir(mode=0o755)
    lib = tmp / "lib" / "libnccl-tuner-x.so"
    lib.write_bytes(b"\x7fELF")
    lib.chmod(0o644)


def _world_writable_dir(tmp):
    (tmp / "open").mkdir()
    (tmp / "open").chmod(0o777)  # no sticky bit
    lib = tmp / "open" / "libp.so"
    lib.write_bytes(b"\x7fELF")
    lib.chmod(0o644)


SETUP = {
    "fifo_profile": _fifo_profile,
    "fifo_record": _fifo_record,
    "writable_library": _writable_library,
    "private_library": _private_library,
    "world_writable_dir": _world_writable_dir,
}


def _fill(text: str, tmp) -> str:
    return text.replace("{tmp}", str(tmp))


@pytest.fixture
def private_tmp(tmp_path):
    # pytest's tmp_path sits under directories only this user can write: the plugin-library rows
    # depend on that (a directory writable by others on the way is itself an error).
    for d in (tmp_path, *tmp_path.parents):
        mode = os.stat(d).st_mode
        if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
            pytest.skip(f"{d} is writable by everyone: plugin-library checks would flag it")
    tmp_path.chmod(0o700)
    return tmp_path


def test_the_table_covers_every_item():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)) and len(CASES) >= 40
    assert {c.exit for c in CASES} == {0, 1, 2}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input(case, environ_guard, private_tmp, clean_environ, monkeypatch):
    tmp = private_tmp
    for rel, body in case.files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(_fill(body, tmp), encoding="utf-8")
    if case.setup:
        SETUP[case.setup](tmp)
    for key, value in case.env.items():
        monkeypatch.setenv(key, _fill(value, tmp))
    before = dict(os.environ)
    result = CliRunner().invoke(main, [_fill(a, tmp) for a in case.argv])
    out = result.output
    assert dict(os.environ) == before, "the command changed os.environ"
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in out
    assert result.exit_code == case.exit, out[-3000:]
    assert _fill(case.variable, tmp) in out, out[-3000:]
    if case.shown is not None:
        assert _fill(case.shown, tmp) in out, out[-3000:]
    assert _fill(case.rule, tmp) in out, out[-3000:]
    assert _fill(case.fix, tmp) in out, out[-3000:]
    if case.exit != 0 and not case.argv[0] == "audit":
        assert "Fix:" in out


def test_bom_profile_is_accepted(environ_guard, private_tmp, clean_environ):
    f = private_tmp / "bom.toml"
    f.write_bytes("\ufeff[env]\nNCCL_PROTO = 'LL'\n".encode())
    result = CliRunner().invoke(main, ["validate", str(f)])
    assert result.exit_code == 0, result.output
    assert "is valid (1 variable(s)" in result.output


def test_relative_audit_dir_is_made_absolute_at_resolve_time(
    environ_guard, private_tmp, clean_environ, monkeypatch
):
    import json

    monkeypatch.chdir(private_tmp)
    monkeypatch.setenv("SGLANG_EAGLE_NCCL_AUDIT_DIR", "audits/run")
    result = CliRunner().invoke(main, ["profiles", "show", "pcie-8gpu", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["policy"]["audit_dir"] == str(private_tmp / "audits" / "run")


def test_env_command_writes_an_absolute_run_dir_for_a_relative_root(
    environ_guard, private_tmp, clean_environ, monkeypatch
):
    import json

    monkeypatch.chdir(private_tmp)
    result = CliRunner().invoke(
        main, ["env", "--profile", "pcie-8gpu", "--audit-dir", "rel", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    from sglang_eagle_nccl.profile.resolve import decode_handoff

    printed = json.loads(result.output)
    run_dir = decode_handoff(printed["SGLANG_EAGLE_NCCL_PROFILE"], printed).run_dir
    assert os.path.isabs(run_dir) and run_dir.startswith(str(private_tmp / "rel"))


def test_doctor_says_when_torch_is_missing(environ_guard, clean_environ):
    import importlib.util
    import json

    result = CliRunner().invoke(main, ["doctor", "--json"])
    data = json.loads(result.output)
    torch_missing = importlib.util.find_spec("torch") is None
    listed = [p for p in data["problems"] if p.startswith("torch is not installed")]
    assert bool(listed) == torch_missing
    assert result.exit_code == (1 if data["problems"] else 0)
    if torch_missing:
        text = CliRunner().invoke(main, ["doctor"]).output
        assert "✗ torch is not installed in this Python environment" in text


def test_doctor_lists_a_bad_environment_profile_and_exits_1(environ_guard, clean_environ, monkeypatch):
    monkeypatch.setenv("SGLANG_EAGLE_NCCL", "pcie-8gpu")
    monkeypatch.setenv("SGLANG_EAGLE_NCCL_ENV", "NCCL_BUFFSIZE=4M")
    before = dict(os.environ)
    result = CliRunner().invoke(main, ["doctor"])
    assert dict(os.environ) == before
    assert result.exit_code == 1
    assert "cannot be applied" in result.output and "NCCL_BUFFSIZE=4194304" in result.output


@pytest.mark.parametrize("hidden,ok", [(2**31 - 1, True), (2**31, False), (10**4298, False)])
def test_sizes_bounds_the_hidden_size_at_a_c_int(hidden, ok, environ_guard, private_tmp, clean_environ):
    # Larger is no model's, and its byte counts would have more decimal digits than Python prints.
    config = private_tmp / "config.json"
    config.write_text(f'{{"hidden_size": {hidden}, "torch_dtype": "bfloat16"}}')
    result = CliRunner().invoke(
        main, ["sizes", "--model-config", str(config), "--chunked-prefill-size", "8192"]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == (0 if ok else 2), result.output
    assert ("must be a positive integer up to 2147483647" in result.output) != ok


@pytest.mark.parametrize("size,ok", [(2**31 - 1, True), (2**31, False)])
def test_sizes_bounds_the_batch_size_at_a_c_int(size, ok, environ_guard, private_tmp, clean_environ):
    config = private_tmp / "config.json"
    config.write_text('{"hidden_size": 4096, "torch_dtype": "bfloat16"}')
    result = CliRunner().invoke(main, ["sizes", "--model-config", str(config), "--batch-size", str(size)])
    assert result.exit_code == (0 if ok else 2), result.output
    assert ("--batch-size='2147483648': must be a positive integer up to 2147483647" in result.output) != ok


def test_analyze_json_stays_strict_with_absurd_numbers(environ_guard, private_tmp, clean_environ):
    # float() reads 400 digits as inf, which json.dumps writes as Infinity (not JSON); such a
    # field is not a number SGLang writes, so it is not read as one.
    line = (
        "[2026-11-29 09:56:05 TP0] Decode batch, #running-req: 1, #token: 10, token usage: 0.00, accept len: {a}, "
        "accept rate: 0.00, cpu graph: False, gen throughput (token/s): {g}, #queue-req: 0\n"
    )
    log = private_tmp / "server.log"
    log.write_text(line.format(a="1.00", g="5.22") + line.format(a="9" * 400, g="9" * 400 + ".5"))
    result = CliRunner().invoke(main, ["analyze", str(log), "--json"])
    assert result.exit_code == 0, result.output

    def refuse(constant):
        raise AssertionError(f"not strict JSON: {constant}")

    reports = json.loads(result.output, parse_constant=refuse)
    assert reports and "Infinity" not in result.output
