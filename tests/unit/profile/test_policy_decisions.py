"""Every policy value check, each accepted and refused value at its edge, and where an error says it
came from (issue 19: decisions guarded by tests that fail when the decision changes)."""

from __future__ import annotations

import os

import pytest

from sglang_eagle_nccl.profile.policy import (
    POLICY_ENV,
    Policy,
    Sourced,
    absolute_audit_dir,
    policy_from_environ,
    policy_from_mapping,
)


def ok(key: str, value) -> object:
    policy, findings = policy_from_mapping({key: value}, "p.toml")
    assert findings == [], findings
    return getattr(policy, key)


def bad(key: str, value, *, env: str | None = None):
    raw = {key: Sourced(value, env, "environment")} if env else {key: value}
    policy, findings = policy_from_mapping(raw, "p.toml")
    (finding,) = findings
    assert finding.severity == "error"
    assert finding.variable == (env or f"policy.{key}")
    assert finding.source == ("environment" if env else "p.toml")
    assert getattr(policy, key) == getattr(Policy(), key)  # a refused value is not taken
    return finding


# --- booleans ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1", "true", "yes", "on", "TRUE", " Yes ", "On", True])
def test_true_words(value):
    for key in ("allow_unknown", "allow_partial", "audit_required"):
        assert ok(key, value) is True


@pytest.mark.parametrize("value", ["0", "false", "no", "off", "", "OFF", " no ", False])
def test_false_words(value):
    for key in ("allow_unknown", "allow_partial", "audit_required"):
        assert ok(key, value) is False


@pytest.mark.parametrize("value", ["2", "y", "enable", "tru", 1, 0, None, "\u0661", ["1"]])
def test_anything_else_is_not_a_boolean(value):
    f = bad("allow_partial", value)
    assert f.rule == "must be a boolean" and f.fix == "write allow_partial = true or false"
    f = bad("allow_partial", value, env="SGLANG_EAGLE_NCCL_ALLOW_PARTIAL")
    assert f.fix == "set SGLANG_EAGLE_NCCL_ALLOW_PARTIAL=1 or SGLANG_EAGLE_NCCL_ALLOW_PARTIAL=0"


def test_a_refused_value_is_shown_as_written():
    assert bad("allow_partial", "maybe").value == "maybe"
    assert bad("consistency", False).value == "false"  # TOML's spelling of a boolean
    assert bad("consistency", True).value == "true"
    assert bad("consistency", 3).value == "3"
    assert bad("consistency", None).value == "None"


# --- sglang_wins ---------------------------------------------------------------------------------------


def test_sglang_wins_is_a_sorted_set_of_names_from_a_list_or_a_comma_string():
    assert ok("sglang_wins", ["NCCL_NVLS_ENABLE", "NCCL_ALGO", "NCCL_ALGO"]) == (
        "NCCL_ALGO",
        "NCCL_NVLS_ENABLE",
    )
    assert ok("sglang_wins", " NCCL_ALGO , ,NCCL_CUMEM_ENABLE") == ("NCCL_ALGO", "NCCL_CUMEM_ENABLE")
    assert ok("sglang_wins", ("TORCH_NCCL_X",)) == ("TORCH_NCCL_X",)
    assert ok("sglang_wins", "") == ()


@pytest.mark.parametrize("value", [5, {"NCCL_ALGO": 1}, ["NCCL_ALGO", 3], None])
def test_sglang_wins_must_be_a_list_of_strings(value):
    f = bad("sglang_wins", value)
    assert f.rule == "must be a list of variable names"
    assert f.fix == 'write sglang_wins = ["NCCL_NVLS_ENABLE"]'
    f = bad("sglang_wins", value, env="SGLANG_EAGLE_NCCL_SGLANG_WINS")
    assert f.fix == "set SGLANG_EAGLE_NCCL_SGLANG_WINS=NCCL_NVLS_ENABLE,NCCL_ALGO"


def test_each_non_nccl_name_in_sglang_wins_is_named():
    policy, findings = policy_from_mapping({"sglang_wins": ["NCCL_ALGO", "PATH", "nccl_proto"]}, "p.toml")
    assert [(f.variable, f.value) for f in findings] == [
        ("policy.sglang_wins", "PATH"),
        ("policy.sglang_wins", "nccl_proto"),
    ]
    assert all(f.rule == "only NCCL_* / TORCH_NCCL_* names make sense here" for f in findings)


# --- audit_dir -----------------------------------------------------------------------------------------


def test_audit_dir_is_made_absolute_where_it_is_resolved(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert ok("audit_dir", "rel/dir") == str(tmp_path / "rel" / "dir")
    assert ok("audit_dir", "/abs") == "/abs"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ok("audit_dir", "~/audit") == str(tmp_path / "home" / "audit")
    assert absolute_audit_dir("x") == os.path.join(str(tmp_path), "x")
    assert ok("audit_dir", "") is None and ok("audit_dir", None) is None


def test_audit_dir_must_be_a_one_line_path():
    f = bad("audit_dir", 5)
    assert f.rule == "must be a path string" and f.fix == 'write audit_dir = "/path"'
    assert (
        bad("audit_dir", 5, env="SGLANG_EAGLE_NCCL_AUDIT_DIR").fix == "set SGLANG_EAGLE_NCCL_AUDIT_DIR=/path"
    )
    for value in ("/a\nb", "/a\x00b"):
        assert "NUL or newline" in bad("audit_dir", value).rule


def test_a_relative_audit_dir_without_a_working_directory_is_refused(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    f = bad("audit_dir", "rel")
    assert "working directory" in f.rule and f.fix == "give an absolute path"
    assert ok("audit_dir", "/abs/still") == "/abs/still"


# --- nccl_version --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,expected",
    [("2.27", "2.27"), ("2.28.7", "2.28.7"), (2, "2"), (2.27, "2.27"), ("", None), (None, None)],
)
def test_nccl_version_accepted(value, expected):
    assert ok("nccl_version", value) == expected


def test_nccl_version_length_limit_is_exact():
    at = "2." + "1" * 62
    assert len(at) == 64 and ok("nccl_version", at) == at
    f = bad("nccl_version", at + "1")
    assert f.rule == "not a version number" and f.fix == 'write nccl_version = "2.27"'


@pytest.mark.parametrize("value", ["two", "2.x", True, ["2.27"], "\u0662.27", "2.27 beta"])
def test_nccl_version_refused(value):
    f = bad("nccl_version", value)
    assert f.rule == "not a version number"
    assert (
        bad("nccl_version", value, env="SGLANG_EAGLE_NCCL_NCCL_VERSION").fix
        == "set SGLANG_EAGLE_NCCL_NCCL_VERSION=2.27"
    )


# --- choices -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["auto", "wrapt", "hook_registry"])
def test_mechanism_choices(value):
    assert ok("mechanism", value) == value


@pytest.mark.parametrize("value", ["Auto", "registry", "", None, 1])
def test_mechanism_refused(value):
    f = bad("mechanism", value)
    assert f.rule == "must be auto, wrapt or hook_registry" and f.fix == 'write mechanism = "auto"'
    assert (
        bad("mechanism", value, env="SGLANG_EAGLE_NCCL_MECHANISM").fix
        == "set SGLANG_EAGLE_NCCL_MECHANISM=auto"
    )


@pytest.mark.parametrize("value", ["error", "warn", "off"])
def test_consistency_choices(value):
    assert ok("consistency", value) == value


@pytest.mark.parametrize("value", ["Error", "warning", "", None])
def test_consistency_refused(value):
    f = bad("consistency", value)
    assert f.rule == "must be error, warn or off" and f.fix == 'write consistency = "error"'
    assert (
        bad("consistency", value, env="SGLANG_EAGLE_NCCL_CONSISTENCY").fix
        == "set SGLANG_EAGLE_NCCL_CONSISTENCY=error"
    )


# --- consistency_timeout_s: (0, 3600] ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,expected",
    [
        (3600, 3600.0),
        ("3600", 3600.0),
        (" 60 ", 60.0),
        ("0.5", 0.5),
        (0.001, 0.001),
        ("3599.999999999", 3599.999999999),
        (1, 1.0),
        ("000000001", 1.0),
        (999999999, None),
    ],
)
def test_timeout_accepted_up_to_one_hour(value, expected):
    if expected is None:
        bad("consistency_timeout_s", value)
    else:
        assert ok("consistency_timeout_s", value) == expected


@pytest.mark.parametrize(
    "value",
    [
        0,
        "0",
        3600.001,
        "3601",
        -1,
        "-1",
        10**9,
        -(10**9),
        True,
        float("nan"),
        float("inf"),
        "1e3",
        "1_0",
        "\u0663",
        "nan",
        "",
        "1234567890",
        "1.1234567890",
        None,
        [60],
    ],
)
def test_timeout_refused(value):
    f = bad("consistency_timeout_s", value)
    assert f.rule == "must be a number of seconds in (0, 3600], written with ASCII digits"
    assert f.fix == "write consistency_timeout_s = 60"
    assert bad("consistency_timeout_s", value, env="SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT").fix == (
        "set SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT=60"
    )


# --- unknown keys, several errors, the environment -----------------------------------------------------


def test_unknown_option_is_named_with_the_known_ones():
    policy, findings = policy_from_mapping({"consistancy": "warn"}, "p.toml")
    (f,) = findings
    assert f.variable == "policy.consistancy" and f.value is None and f.source == "p.toml"
    assert f.rule == "unknown policy option" and f.fix.startswith(
        "use one of: allow_partial, allow_unknown, audit_dir"
    )
    assert policy == Policy()


def test_every_bad_value_is_reported_at_once_and_the_good_ones_are_kept():
    policy, findings = policy_from_mapping(
        {"consistency": "maybe", "mechanism": "x", "allow_partial": "1", "nope": 1}, "builtin:p"
    )
    assert sorted(f.variable for f in findings) == ["policy.consistency", "policy.mechanism", "policy.nope"]
    assert policy.allow_partial is True and policy.consistency == "error"


def test_policy_from_environ_tags_each_value_with_its_variable_and_skips_empty_ones():
    env = {
        "SGLANG_EAGLE_NCCL_CONSISTENCY": "warn",
        "SGLANG_EAGLE_NCCL_ALLOW_PARTIAL": "",
        "NCCL_PROTO": "LL",
        "SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT": "5",
    }
    raw = policy_from_environ(env)
    assert raw == {
        "consistency": Sourced("warn", "SGLANG_EAGLE_NCCL_CONSISTENCY", "environment"),
        "consistency_timeout_s": Sourced("5", "SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT", "environment"),
    }
    policy, findings = policy_from_mapping(raw, "unused")
    assert findings == [] and policy.consistency == "warn" and policy.consistency_timeout_s == 5.0
    assert set(POLICY_ENV.values()) == {f for f in Policy().to_dict()}


def test_to_dict_and_back():
    p = Policy(sglang_wins=("NCCL_ALGO",), allow_partial=True, consistency="off", consistency_timeout_s=5.0)
    d = p.to_dict()
    assert d["sglang_wins"] == ["NCCL_ALGO"] and d["consistency"] == "off" and d["allow_partial"] is True
    assert Policy.from_validated_data({**d, "unknown": 1}) == p
    assert Policy.from_validated_data({}) == Policy()
