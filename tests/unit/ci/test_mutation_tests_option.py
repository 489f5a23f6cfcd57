"""ci/mutation --tests: a mutation run over a part of the plain tier (issue 24 item 7: the reader's heart
is reached by hundreds of tests, so a run over the whole tier goes at a mutant a minute).

The rule: a part is only ever plain-tier tests (a kill there is a plain-tier kill), written relative to
the repository; anything else is bad usage (exit 2, the path and the rule named) before anything is
copied or run; what the plain tier leaves out stays out. Checked against a reference written here over
generated paths, and through the script's own command line in a real process.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[3]
_loader = importlib.machinery.SourceFileLoader("ci_mutation_script", str(REPO / "ci" / "mutation"))
_spec = importlib.util.spec_from_loader(_loader.name, _loader)
mutation = importlib.util.module_from_spec(_spec)
_loader.exec_module(mutation)

PLAIN_ROOTS = ("tests/unit", "tests/native")
LEFT_OUT = "tests/native/test_native_build.py"


def reference(raw: str) -> list[str] | None:
    """The selection one --tests path gives, or None where it is bad usage."""
    if raw.startswith("/"):
        return None
    parts: list[str] = []
    for part in raw.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    rel = "/".join(parts)
    if not rel or not (REPO / rel).exists() or rel == LEFT_OUT:
        return None
    if not any(rel == r or rel.startswith(r + "/") for r in PLAIN_ROOTS):
        return None
    return [rel] + ([f"--ignore={LEFT_OUT}"] if LEFT_OUT.startswith(rel + "/") else [])


_pieces = st.sampled_from(["tests", "unit", "native", "offline", "audit", "sglang", "e2e", "ci", "..", ".", "",
                           "test_native_build.py", "test_fast_reader.py", "nowhere", "sglang_eagle_nccl"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_pieces, min_size=1, max_size=6), st.booleans())
def test_a_path_is_a_part_of_the_plain_tier_or_refused(pieces: list[str], absolute: bool) -> None:
    raw = ("/" if absolute else "") + "/".join(pieces)
    want = reference(raw)
    if want is None:
        with pytest.raises(ValueError, match="--tests"):
            mutation.test_selection([raw])
    else:
        assert mutation.test_selection([raw]) == want


def test_no_path_is_the_whole_plain_tier() -> None:
    assert mutation.test_selection(None) == mutation.PLAIN_SELECTION
    assert mutation.test_selection([]) == mutation.PLAIN_SELECTION


@pytest.mark.parametrize("raw, rule", [
    ("tests/sglang", "not a part of the plain tier"),
    (LEFT_OUT, "not a part of the plain tier"),
    ("tests/unit/nowhere", "no such file or folder"),
    ("../tests/unit", "not a path inside the repository"),
])
def test_bad_usage_is_exit_2_before_anything_is_copied(tmp_path: Path, raw: str, rule: str) -> None:
    keep = tmp_path / "keep"
    proc = subprocess.run(
        [sys.executable, str(REPO / "ci" / "mutation"), "--part", "python", "--module", "read",
         "--tests", "tests/unit/offline/audit", "--tests", raw, "--keep", str(keep), "--no-report"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 2, proc.stderr
    assert f"--tests {raw}: {rule}" in proc.stderr
    assert not keep.exists(), "nothing is made or copied on bad usage"
