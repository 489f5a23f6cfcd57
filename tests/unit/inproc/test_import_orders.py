"""Every import order a plain interpreter can produce (issue 25, item 2), the light part: ``ctypes`` and the
plugin's own CLI in every order, neither, under spawn, fork and forkserver children, with the native library
present and absent. The profile is applied and NCCL's library configured exactly once, never an internal error.

The full matrix (numpy, torch, ``sglang``, ``sglang.srt.*`` in every order) runs in the SGLang tier:
tests/sglang/test_import_orders_sglang.py. The rule is tests/support/import_orders.py.
"""

from __future__ import annotations

import json

import pytest

from support import import_orders

# The module behind `sglang-eagle-nccl`: a program may import the plugin's CLI (or run it in-process).
MODULES = ("ctypes", "sglang_eagle_nccl.cli.main")
PROFILE_ENV = {
    "NCCL_ALGO": "Ring", "NCCL_BUFFSIZE": "16777216", "NCCL_MAX_NCHANNELS": "16", "NCCL_NTHREADS": "512",
    "NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL",
}


@pytest.fixture(scope="module")
def without_library(tmp_path_factory):
    return import_orders.installation_without_library(tmp_path_factory.mktemp("no-native"))


@pytest.mark.parametrize(
    "order,present,method", import_orders.cases(MODULES, longest=2),
    ids=[import_orders.case_id(c) for c in import_orders.cases(MODULES, longest=2)],
)
def test_every_order_applies_the_profile_and_configures_the_library_once(
    order, present, method, without_library, tmp_path
):
    env = import_orders.clean_environ(SGLANG_EAGLE_NCCL="pcie-8gpu")
    if not present:
        env["PYTHONPATH"] = str(without_library)
    import_orders.check(order, present, method, env, tmp_path, PROFILE_ENV)


def test_the_cases_cover_every_order_method_and_library():
    cases = import_orders.cases(MODULES, longest=2)
    assert {c[0] for c in cases} == {(), ("ctypes",), ("sglang_eagle_nccl.cli.main",),
                                     ("ctypes", "sglang_eagle_nccl.cli.main"), ("sglang_eagle_nccl.cli.main", "ctypes")}
    assert {(c[1], c[2]) for c in cases} == {(p, m) for p in (True, False) for m in import_orders.METHODS}


SYNC_FIRST = """
import json, os, sys
assert "ctypes" not in sys.modules  # nothing imported it: the library still waits for its first import
from sglang_eagle_nccl.inproc.boot import native
from sglang_eagle_nccl.inproc.boot.state import STATE
native.sync()  # what `import sglang` does once SGLang is imported (inproc/boot/bootstrap.py)
print(json.dumps({"bound": STATE.env_control is not None, "refused": STATE.refused,
                  "info": STATE.native_info is not None, "ctypes": "ctypes" in sys.modules}))
"""


def test_sglang_imported_before_anything_imported_ctypes_configures_once(tmp_path):
    """The order a lighter ``sglang/__init__`` gives (SGLang 0.5.23's imports torch first, so the real package
    cannot reach it): the `import sglang` door's native step runs while ``ctypes`` was never imported. Loading
    the binding imports ctypes, whose trigger must not configure the half-imported binding a second time."""
    import subprocess
    import sys

    profile = "sglang_eagle_nccl.inproc.boot.native"
    code = (
        "import sys\ncalls = []\n"
        "sys.setprofile(lambda f, e, a: calls.append(1) if e == 'call' and f.f_code.co_name == '_configure' "
        f"and f.f_globals.get('__name__') == {profile!r} else None)\n"
        + SYNC_FIRST + "sys.setprofile(None)\nprint(len(calls))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env=import_orders.clean_environ(SGLANG_EAGLE_NCCL="pcie-8gpu"),
    )
    assert done.returncode == 0, done.stderr
    report, calls = done.stdout.splitlines()
    assert json.loads(report) == {"bound": True, "refused": None, "info": True, "ctypes": True}
    assert calls == "1" and done.stderr == ""
