"""Every import order (issue 25, item 2), the full matrix: ``ctypes``, numpy, torch, ``sglang``, one of SGLang's
modules (``sglang.srt.server_args``) and the plugin's own CLI, in every order of up to two of them (nothing
imported included: "sglang never imported", "ctypes never imported") plus whole orders of all six, under spawn,
fork and forkserver children, each with the native library present and absent. Every process ends with the
profile applied and NCCL's library configured exactly once where ``ctypes`` is loaded (SGLang's import loads
torch, which loads it), never an internal error. The rule: tests/support/import_orders.py.

Each process imports the real SGLang of this venv (~10 s on a quiet CI machine; 82 cases are ~14 minutes of one
core), so ``ci/test`` runs a sample: ``SGLANG_EAGLE_NCCL_TEST_IMPORT_SAMPLE=K:SEED`` keeps the cases where SGLang or one of its
modules is imported first, alone or then ``ctypes``, with the library present (the order that crashed) and K others drawn with
SEED, the run's printed random seed, so successive CI runs cover different cases. Unset, the whole matrix runs:
``pytest tests/sglang/test_import_orders_sglang.py`` in the 0.5.23 venv (docs/development.md).
"""

from __future__ import annotations

import os
import random

import pytest

from support import import_orders

# The plugin's own start-up, whatever SGLang release: proven on the newest (and it is the slow part of that tier).
pytestmark = pytest.mark.newest_only

MODULES = ("ctypes", "numpy", "torch", "sglang", "sglang.srt.server_args", "sglang_eagle_nccl.cli.main")
PROFILE_ENV = {
    "NCCL_ALGO": "Ring", "NCCL_BUFFSIZE": "16777216", "NCCL_MAX_NCHANNELS": "16", "NCCL_NTHREADS": "512",
    "NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL",
}
# Whole orders of all six: a fixed sample of the 720 (the pairs above already decide which import comes first).
WHOLE = random.Random(25).sample(list(__import__("itertools").permutations(MODULES)), 4)
CASES = import_orders.cases(MODULES, longest=2) + [
    (order, present, import_orders.METHODS[i % 3]) for i, order in enumerate(WHOLE) for present in (True, False)
]


def _sglang_before_ctypes(case) -> bool:
    """SGLang (or one of its modules) imported first, alone or then ``ctypes``, with the library present."""
    order, present, _ = case
    first_is_sglang = bool(order) and order[0].startswith("sglang") and not order[0].startswith("sglang_eagle_nccl")
    return present and len(order) <= 2 and first_is_sglang and order[1:] in ((), ("ctypes",))


def sample(cases: list, spec: str) -> list:
    """The cases a sampled run keeps (see the module docstring); ``spec`` is ``K:SEED``."""
    k, _, seed = spec.partition(":")
    kept = [c for c in cases if _sglang_before_ctypes(c)]
    rest = [c for c in cases if not _sglang_before_ctypes(c)]
    return kept + random.Random(int(seed or 0)).sample(rest, min(int(k), len(rest)))


if os.environ.get("SGLANG_EAGLE_NCCL_TEST_IMPORT_SAMPLE"):
    CASES = sample(CASES, os.environ["SGLANG_EAGLE_NCCL_TEST_IMPORT_SAMPLE"])


@pytest.fixture(scope="module")
def without_library(tmp_path_factory):
    return import_orders.installation_without_library(tmp_path_factory.mktemp("no-native"))


@pytest.mark.parametrize("order,present,method", CASES, ids=[import_orders.case_id(c) for c in CASES])
def test_every_order_applies_the_profile_and_configures_the_library_once(
    order, present, method, without_library, tmp_path, plugin_env
):
    env = {k: v for k, v in plugin_env.items() if k != "SGLANG_EAGLE_NCCL_AUDIT_DIR"}
    env["SGLANG_EAGLE_NCCL"] = "pcie-8gpu"
    env.pop("PYTHONPATH", None)
    if not present:
        env["PYTHONPATH"] = str(without_library)
    import_orders.check(order, present, method, env, tmp_path, PROFILE_ENV)
