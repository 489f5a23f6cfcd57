"""Reaching a Ray cluster's address has the user's deadline, and its failure is said in words
(offline/ray_collect.py: probe; tests/unit/offline/test_ray_collect_decisions.py tests the other steps)."""

from __future__ import annotations

import pytest

from sglang_eagle_nccl.offline import ray_collect
from sglang_eagle_nccl.offline.ray_collect import CollectError


def test_the_connection_attempt_carries_the_deadline_and_a_wordless_timeout_says_timed_out(monkeypatch):
    # The socket's answer is faked here (no real network times out on demand); tests/ray tries a real
    # address that accepts and never answers.
    asked = []

    def create_connection(where, timeout=None):
        asked.append((where, timeout))
        raise TimeoutError()  # what a timed-out connect may raise: no errno, no words

    monkeypatch.setattr(ray_collect.socket, "create_connection", create_connection)
    with pytest.raises(CollectError) as err:
        ray_collect.probe("head:6379", 2.5)
    assert asked == [(("head", 6379), 2.5)]
    assert str(err.value) == "cannot reach the Ray cluster at head:6379 within 2.5s (--ray-timeout): timed out"
