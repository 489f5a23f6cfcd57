"""The ledger's join asks the compiled tuner library (offline/audit/ledger_join.native_decider): for the
built-in pcie-8gpu-eagle rules (all-reduces below 512 KiB: Ring/LL), the answer per size is the rule's,
read here from the profile's own TOML, and "NCCL decides" outside every rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglang_eagle_nccl.knowledge._toml import loads as toml_loads
from sglang_eagle_nccl.offline.audit.ledger_join import native_decider
from sglang_eagle_nccl.profile.resolve import resolve

TOML = Path(__file__).resolve().parents[2] / "sglang_eagle_nccl" / "profile" / "builtin" / "pcie-8gpu-eagle.toml"


@pytest.mark.parametrize("nbytes", [0, 256, 43008, 524287, 524288, 16 << 20])
@pytest.mark.parametrize("collective", ["AllReduce", "AllGather"])
def test_each_size_gets_the_rule_the_profile_states(lib, nbytes: int, collective: str) -> None:
    (rule,) = toml_loads(TOML.read_text())["tuner"]["rules"]
    lo, hi = rule["bytes"]
    profile = resolve(["pcie-8gpu-eagle"], use_environ=False).profile
    decide, note = native_decider([dict(r) for r in profile.tuner_rules], lib)
    assert note is None
    got = decide(collective, nbytes, 8, 1, "tp")
    if collective.lower() == rule["collective"] and lo <= nbytes < hi:
        assert got["rule_index"] == 0 and got["applied"] is True
        assert (got["algorithm"].lower(), got["protocol"]) == (rule["algorithm"], rule["protocol"])
    else:
        assert got["rule"] is None and got["answer"] == "no rule: NCCL decides"


def test_rules_that_do_not_check_out_give_a_note_not_an_answer(lib) -> None:
    decide, note = native_decider([{"collective": "allreduce", "bytes": [10, 5]}], lib)
    assert decide is None and "cannot be read" in note


def test_a_group_rule_answers_only_for_its_group(lib) -> None:
    rules = [{"collective": "allreduce", "bytes": [0, 1024], "group": "tp", "algorithm": "tree", "protocol": "Simple"}]
    decide, _ = native_decider(rules, lib)
    assert decide("AllReduce", 256, 2, 1, "tp")["answer"].endswith("Tree/Simple")
    assert decide("AllReduce", 256, 2, 1, "attn_tp")["answer"] == "no rule: NCCL decides"


def test_the_given_library_is_the_one_asked(lib) -> None:
    asked: list[str] = []

    class Recording:
        """The session's real library, noting each call (which library the decider uses is the point)."""

        def configure_tuner(self, rules):
            asked.append("configure")
            return lib.configure_tuner(rules)

        def query_tuner(self, *args):
            asked.append("query")
            return lib.query_tuner(*args)

    decide, _ = native_decider([], Recording())
    assert decide("AllReduce", 256, 2, 1, "tp")["answer"] == "no rule: NCCL decides"
    assert asked == ["configure", "query"]


def test_bad_rules_name_where_they_come_from(lib) -> None:
    _, note = native_decider([{"collective": "allreduce", "bytes": [10, 5]}], lib)
    assert "the launch profile" in note


def test_without_a_library_given_the_installed_one_answers(lib) -> None:
    decide, note = native_decider([])
    assert note is None and decide("AllReduce", 256, 2, 1, "tp")["answer"] == "no rule: NCCL decides"
