"""ci/mutation runs the plain tier's hypothesis examples without shrinking a failure (tests/conftest.py).

A mutant is killed by its first failing example; shrinking it afterwards changed no verdict and cost up to
a minute per mutant. The rule: the "mutation" profile draws exactly the "ci" profile's examples (the same
count, derandomised, no deadline) and skips only shrinking and its explanation; both parts of ci/mutation
that run the plain tier ask for it.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import Phase, settings

REPO = Path(__file__).resolve().parents[3]


def test_the_mutation_profile_is_ci_without_shrinking():
    ci, mutation = settings.get_profile("ci"), settings.get_profile("mutation")
    for name in ("max_examples", "derandomize", "deadline", "database", "suppress_health_check"):
        assert getattr(mutation, name) == getattr(ci, name), name
    assert set(ci.phases) - set(mutation.phases) == {Phase.shrink, Phase.explain}
    assert set(mutation.phases) <= set(ci.phases)


def test_ci_mutation_runs_the_plain_tier_under_it():
    source = (REPO / "ci" / "mutation").read_text("utf-8")
    asked = re.findall(r'"SGLANG_EAGLE_NCCL_HYPOTHESIS"\]? ?[=:] ?"(\w+)"', source)
    # the python part (mutmut) and the hand part run the plain tier; the hypothesis part runs "long"
    assert sorted(asked) == ["long", "mutation", "mutation"], asked
