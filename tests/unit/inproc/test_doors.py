"""Every door into a process refuses the same way (inproc/refusal.py): the environment is put back exactly as
it was, the refusal is said once, and the door's action follows -- whatever raised, and whenever.

Each case runs in a fresh interpreter (activation is once per process) that activates for real and then
meets a real failure: an audit file that cannot grow (RLIMIT_FSIZE) under audit_required, a refusal at
each door. Nothing here replaces os.environ or the plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from sglang_eagle_nccl.inproc.refusal import DOORS

CLEAN = {
    k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))
}


def _run(code: str, env: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    """Run ``code`` with the plugin's inputs in ``env`` set only once the interpreter has started: the
    installed gate (.pth) must not activate before the test does."""
    script = tmp_path / "door.py"
    inputs = {k: v for k, v in env.items() if k.startswith(("SGLANG_EAGLE_NCCL", "NCCL_"))}
    script.write_text(f"import os\nos.environ.update({inputs!r})\n" + textwrap.dedent(code))
    start_env = {k: v for k, v in env.items() if k not in inputs}
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=start_env,
        timeout=120,
        cwd=tmp_path,
    )


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_a_failure_after_the_write_puts_the_environment_back(tmp_path):
    """audit_required and a record that cannot be written (the file may not grow): refused, and os.environ is
    exactly as before -- the write had happened, the rollback undid it."""
    env = dict(
        CLEAN,
        SGLANG_EAGLE_NCCL="pcie-8gpu",
        SGLANG_EAGLE_NCCL_AUDIT_REQUIRED="1",
        SGLANG_EAGLE_NCCL_AUDIT_DIR=str(tmp_path / "audit"),
        NCCL_PROTO="Simple",
    )
    code = """
        import json, os, resource, signal
        from sglang_eagle_nccl.contract.launch_dir import AuditError, open_launch
        from sglang_eagle_nccl.inproc.boot import activation
        from sglang_eagle_nccl.inproc.boot.state import STATE
        plan = activation.plan()
        plan.run_dir = open_launch(os.environ["SGLANG_EAGLE_NCCL_AUDIT_DIR"], {}, required=True)
        before = dict(os.environ)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))  # process_start is far longer: EFBIG
        try:
            activation.apply(plan, origin="test")
            outcome = "applied"
        except AuditError as exc:
            outcome = str(exc)
        print(json.dumps({"outcome": outcome, "same": dict(os.environ) == before, "active": STATE.active,
                          "proto": os.environ.get("NCCL_PROTO")}))
    """
    done = _run(code, env, tmp_path)
    assert done.returncode == 0, done.stderr
    out = _last_json(done.stdout)
    assert "audit_required is set" in out["outcome"] and (
        "File too large" in out["outcome"] or "short write" in out["outcome"]
    ), out
    assert out["same"] and out["active"] is False and out["proto"] == "Simple"


def test_an_unwritable_launch_directory_under_audit_required_refuses_before_writing(tmp_path):
    env = dict(CLEAN, SGLANG_EAGLE_NCCL="pcie-8gpu", SGLANG_EAGLE_NCCL_AUDIT_REQUIRED="1")
    code = """
        import json, os
        from sglang_eagle_nccl.contract.launch_dir import AuditError, open_launch
        from sglang_eagle_nccl.inproc.boot import activation
        plan = activation.plan()
        plan.run_dir = open_launch("audit", {}, required=True)
        os.chmod(plan.run_dir, 0o777)  # turned insecure between the launcher and this child
        before = dict(os.environ)
        try:
            activation.apply(plan, origin="test")
            outcome = "applied"
        except AuditError as exc:
            outcome = str(exc)
        print(json.dumps({"outcome": outcome, "same": dict(os.environ) == before}))
    """
    out = _last_json(_run(code, env, tmp_path).stdout)
    assert "writable by group/others" in out["outcome"] and out["same"], out


DOOR_CODE = """
    import json, os, sys
    from sglang_eagle_nccl.inproc.boot import bootstrap
    from sglang_eagle_nccl.inproc.boot.state import STATE
    from sglang_eagle_nccl.inproc.refusal import RefusedError, refuse
    before = dict(os.environ)
    bootstrap.activate(origin="test")
    assert STATE.active and dict(os.environ) != before  # the profile was applied
    result = {"door": DOOR}
    try:
        refuse(DOOR, RuntimeError("boom"))
        result["action"] = "returned"
    except SystemExit as exc:
        result["action"] = f"exit {exc.code}"
    except RefusedError as exc:
        result["action"] = "raised"
    result["same"] = dict(os.environ) == before
    result["active"] = STATE.active
    try:
        sys.modules.pop("sglang", None)
        import importlib
        importlib.import_module("sglang")
        result["import_sglang"] = "imported"
    except RefusedError:
        result["import_sglang"] = "refused"
    except ImportError:
        result["import_sglang"] = "not installed"
    print(json.dumps(result))
"""


@pytest.mark.parametrize(
    "door,action",
    [
        ("interpreter_start", "returned"),
        ("native_late", "returned"),
        ("sglang_import", "raised"),
        ("entry_point", "exit 2"),
        ("cli_flags", "exit 2"),
        ("preflight_rank", "raised"),
    ],
)
def test_every_door_puts_the_environment_back_and_acts(tmp_path, door, action):
    assert door in DOORS
    env = dict(CLEAN, SGLANG_EAGLE_NCCL="pcie-8gpu", NCCL_ALGO="Tree")
    # A stand-in `sglang` package on the path only to see whether importing it is refused.
    pkg = tmp_path / "sglang"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    done = _run(
        f"DOOR = {door!r}\n" + textwrap.dedent(DOOR_CODE), dict(env, PYTHONPATH=str(tmp_path)), tmp_path
    )
    assert done.returncode == 0, done.stderr
    out = _last_json(done.stdout)
    assert out["action"] == action and out["same"] and out["active"] is False, out
    if action == "returned":  # armed: SGLang is refused when it is imported later
        assert out["import_sglang"] == "refused", out
    assert done.stderr.count("NCCL profile not applied") == 1
    assert (
        "put back" in done.stderr and "profile 'pcie-8gpu' applied" not in done.stderr.split("not applied")[1]
    )


def test_an_unknown_door_is_a_programming_error_not_a_pass():
    from sglang_eagle_nccl.inproc.refusal import refuse

    with pytest.raises(ValueError, match="unknown door"):
        refuse("back_door", RuntimeError("x"))
