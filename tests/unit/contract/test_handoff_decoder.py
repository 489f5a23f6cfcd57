"""The hand-off decoder's every refusal, at its edge (issue 19: the decoder must not accept any hex,
a relative launch directory, unknown keys, or a hand-off larger than its limit).

Each case builds the wire text by hand (``sen3.<hex of JSON>.<digest>``), so the decoder alone is
tested; ``validate`` is a stand-in that records being called, because every case here must be
refused before any value check (or, for the accepted ones, shows which path it took).
"""

from __future__ import annotations

import pytest

from sglang_eagle_nccl.contract import handoff as wire
from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.contract.jsonlight import dumps


class Validated:
    def __init__(self, data: dict) -> None:
        self.data = data

    def to_dict(self) -> dict:
        return {"validated": True, **self.data}


class Validate:
    """Counts the calls; returns a profile-like object."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, data: dict) -> Validated:
        self.calls.append(data)
        return Validated(data)


def body(**over) -> dict:
    out = {"v": 2, "profile": {"name": "p", "env": {"NCCL_PROTO": "LL"}}, "inputs": {}, "run_dir": None}
    out.update(over)
    return out


def text_of(obj, mac: str = "-") -> str:
    return f"{wire.WIRE_PREFIX}.{dumps(obj).encode('utf-8').hex()}.{mac}"


def refused(text, *, environ=None, check_inputs=True) -> str:
    validate = Validate()
    with pytest.raises(ProfileError) as info:
        wire.decode(text, {} if environ is None else environ, validate=validate, check_inputs=check_inputs)
    assert validate.calls == []  # refused before any value was looked at
    (finding,) = info.value.findings
    assert finding.severity == "error"
    return str(info.value)


def accepted(text, *, environ=None, check_inputs=True) -> tuple[wire.Decoded, Validate]:
    validate = Validate()
    decoded = wire.decode(
        text, {} if environ is None else environ, validate=validate, check_inputs=check_inputs
    )
    return decoded, validate


@pytest.fixture(autouse=True)
def no_key(tmp_path, monkeypatch):
    """No hand-off key unless a test makes one: every accepted text goes through validate."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


# --- the outer form --------------------------------------------------------------------------------


def test_a_well_formed_unsigned_text_is_validated_and_returned():
    decoded, validate = accepted(
        text_of(body(inputs={"SGLANG_EAGLE_NCCL": "1"}, run_dir="/srv/x")), environ={"SGLANG_EAGLE_NCCL": "1"}
    )
    assert len(validate.calls) == 1 and validate.calls[0] == {"name": "p", "env": {"NCCL_PROTO": "LL"}}
    assert decoded.trusted is False and decoded.profile is not None
    assert decoded.data == {"validated": True, "name": "p", "env": {"NCCL_PROTO": "LL"}}
    assert decoded.inputs == {"SGLANG_EAGLE_NCCL": "1"} and decoded.run_dir == "/srv/x"


def test_the_length_limit_is_exact():
    """MAX_WIRE_CHARS characters still decode (surrounding blanks are stripped); one more is refused."""
    base = text_of(body())
    at_limit = base + " " * (wire.MAX_WIRE_CHARS - len(base))
    assert len(at_limit) == wire.MAX_WIRE_CHARS
    decoded, _ = accepted(at_limit)
    assert decoded.data["name"] == "p"
    message = refused(at_limit + " ")
    assert f"longer than {wire.MAX_WIRE_CHARS} characters" in message
    # Linux's limit on one NAME=value environment entry, its NUL included: a longer hand-off could
    # start no process (a hand-off 16x larger than this is refused, above and below).
    assert wire.MAX_WIRE_CHARS == names.MAX_ARG_STRLEN - len("SGLANG_EAGLE_NCCL_PROFILE=") - 1 == 131045


def test_a_sixteen_times_larger_hand_off_is_refused():
    big = body(profile={"name": "p", "description": "x" * (16 * wire.MAX_WIRE_CHARS // 2)})
    assert "longer than" in refused(text_of(big))


@pytest.mark.parametrize("value", [None, 42, b"sen3.7b7d.-"], ids=["none", "int", "bytes"])
def test_a_value_that_is_not_text_is_refused(value):
    assert "longer than" in refused(value)  # the one message for "not a usable string"


@pytest.mark.parametrize(
    "text",
    ["sen2.7b7d.-", "sen3.7b7d", "sen3.7b7d.-.x", "SEN3.7b7d.-", "", "sen3"],
    ids=["old-prefix", "two-parts", "four-parts", "upper-prefix", "empty", "prefix-only"],
)
def test_a_text_not_of_the_form_prefix_data_digest_is_refused(text):
    assert "expected 'sen3.<data>.<digest>'" in refused(text)


def test_non_ascii_data_or_digest_is_refused():
    hexed = dumps(body()).encode().hex()
    assert "non-ASCII" in refused(f"sen3.{hexed}\u0663.-")
    assert "non-ASCII" in refused(f"sen3.{hexed}.\u0663")


@pytest.mark.parametrize(
    "mangle",
    [str.upper, lambda h: h[:-1], lambda h: h[:10] + " " + h[10:], lambda h: h + "0g"],
    ids=["upper-case", "odd-length", "space", "non-hex"],
)
def test_only_the_encoders_own_lower_case_hex_is_accepted(mangle):
    """bytes.fromhex would take upper case and spaces: the decoder takes only what encode writes."""
    hexed = dumps(body()).encode().hex()
    assert "not hex of a JSON object" in refused(f"sen3.{mangle(hexed)}.-")


def test_hex_of_something_that_is_not_json_is_refused():
    assert "not hex of a JSON object" in refused(f"sen3.{b'not json'.hex()}.-")
    assert "not hex of a JSON object" in refused(f"sen3.{bytes([0xFF, 0xFE]).hex()}.-")


# --- the structure -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [
        [1, 2],
        "text",
        body(v=1),
        body(v="2"),
        {**body(), "extra": 1},
        {k: v for k, v in body().items() if k != "v"},
    ],
    ids=["list", "string", "version-1", "version-string", "unknown-top-level-key", "no-version"],
)
def test_only_a_version_2_object_of_known_keys_is_read(obj):
    assert "not a version-2 hand-off object" in refused(text_of(obj))


@pytest.mark.parametrize(
    "profile",
    [[], "p", {"name": "p", "unknown": 1}, {"name": "p", "env": {}, "scripts": ["rm"]}],
    ids=["list", "string", "unknown-key", "unknown-key-beside-known"],
)
def test_the_profile_part_must_be_an_object_of_known_keys(profile):
    assert "not an object of known keys" in refused(text_of(body(profile=profile)))


def test_the_known_profile_keys_are_exactly_those_of_a_validated_profile():
    """What encode() writes is Profile.to_dict(); any other key in the profile part is refused."""
    from sglang_eagle_nccl.profile.resolve import resolve

    written = set(resolve(["pcie-8gpu-eagle"], use_environ=False).profile.to_dict())
    assert written == set(wire._PROFILE_KEYS)
    for extra in ("extra", "version", "env_file", "hooks", "Name"):
        assert "not an object of known keys" in refused(text_of(body(profile={"name": "p", extra: {}})))


def test_every_known_profile_key_is_accepted():
    profile = {
        "name": "p",
        "description": "d",
        "env": {},
        "groups": {},
        "nodes": {},
        "policy": {},
        "sources": [],
        "tuner_rules": [],
    }
    decoded, validate = accepted(text_of(body(profile=profile)))
    assert validate.calls == [profile]


@pytest.mark.parametrize(
    "inputs",
    [[], {"PATH": "/bin"}, {"SGLANG_EAGLE_NCCL": 1}, {"SGLANG_EAGLE_NCCL_PROFILE": "x"}],
    ids=["list", "foreign-variable", "not-a-string", "the-hand-off-itself"],
)
def test_recorded_inputs_must_be_the_plugins_own_strings(inputs):
    assert "not SGLANG_EAGLE_NCCL* strings" in refused(text_of(body(inputs=inputs)), check_inputs=False)


@pytest.mark.parametrize(
    "run_dir",
    ["relative/dir", "./x", "", "/srv/a\nb", 7, ["/srv"]],
    ids=["relative", "dot-relative", "empty", "newline", "int", "list"],
)
def test_the_launch_directory_must_be_an_absolute_one_line_path(run_dir):
    assert "not an absolute path" in refused(text_of(body(run_dir=run_dir)))


def test_an_absolute_launch_directory_and_none_are_accepted():
    assert accepted(text_of(body(run_dir="/")))[0].run_dir == "/"
    assert accepted(text_of(body(run_dir=None)))[0].run_dir is None


@pytest.mark.parametrize(
    "profile,message",
    [
        ({"env": []}, "env, groups and nodes must map names to values"),
        ({"groups": {"tp": []}}, "env, groups and nodes must map names to values"),
        ({"nodes": {"0": "x"}}, "env, groups and nodes must map names to values"),
        ({"groups": []}, "groups and nodes must be objects"),
        ({"nodes": "x"}, "groups and nodes must be objects"),
        ({"env": {"LD_PRELOAD": "x"}}, "'LD_PRELOAD' is not an NCCL_* / TORCH_NCCL_* name"),
        ({"groups": {"tp": {"PATH": "/x"}}}, "'PATH' is not an NCCL_* / TORCH_NCCL_* name"),
        ({"nodes": {"1": {"nccl_proto": "LL"}}}, "'nccl_proto' is not an NCCL_* / TORCH_NCCL_* name"),
        ({"env": {"NCCL_PROTO": 1}}, "NCCL_PROTO is not a one-line string"),
        ({"env": {"NCCL_PROTO": "LL\nNCCL_ALGO=Tree"}}, "NCCL_PROTO is not a one-line string"),
        ({"groups": {"tp": {"NCCL_ALGO": "Ring\x00"}}}, "NCCL_ALGO is not a one-line string"),
        ({"policy": []}, "policy must be an object and name a string"),
        ({"name": 5}, "policy must be an object and name a string"),
    ],
)
def test_sections_hold_only_nccl_names_with_one_line_string_values(profile, message):
    assert message in refused(text_of(body(profile={"name": "p", **profile})))


def test_group_and_node_sections_with_good_values_are_accepted():
    profile = {
        "name": "p",
        "env": {"NCCL_PROTO": "LL"},
        "groups": {"tp": {"TORCH_NCCL_X": "1"}},
        "nodes": {"0": {"NCCL_SOCKET_IFNAME": "eth0"}},
        "policy": {"consistency": "warn"},
    }
    decoded, validate = accepted(text_of(body(profile=profile)))
    assert validate.calls == [profile]


def test_a_malformed_text_names_the_variable_and_the_fix():
    validate = Validate()
    with pytest.raises(ProfileError) as info:
        wire.decode("garbage", {}, validate=validate)
    (finding,) = info.value.findings
    assert finding.variable == "SGLANG_EAGLE_NCCL_PROFILE" and finding.value is None
    assert finding.fix.startswith("unset SGLANG_EAGLE_NCCL_PROFILE")


# --- stale inputs --------------------------------------------------------------------------------------


def test_inputs_that_changed_since_the_hand_off_are_refused_naming_each():
    text = text_of(body(inputs={"SGLANG_EAGLE_NCCL": "pcie-8gpu", "SGLANG_EAGLE_NCCL_ENV": "NCCL_ALGO=Ring"}))
    validate = Validate()
    with pytest.raises(ProfileError) as info:
        wire.decode(
            text, {"SGLANG_EAGLE_NCCL": "debug", "SGLANG_EAGLE_NCCL_CONSISTENCY": "warn"}, validate=validate
        )
    assert validate.calls == []
    by_var = {f.variable: f for f in info.value.findings}
    assert set(by_var) == {"SGLANG_EAGLE_NCCL", "SGLANG_EAGLE_NCCL_ENV", "SGLANG_EAGLE_NCCL_CONSISTENCY"}
    assert by_var["SGLANG_EAGLE_NCCL"].value == "debug"
    assert "is 'debug' here but was 'pcie-8gpu'" in by_var["SGLANG_EAGLE_NCCL"].rule
    assert "is unset here but was 'NCCL_ALGO=Ring'" in by_var["SGLANG_EAGLE_NCCL_ENV"].rule
    assert by_var["SGLANG_EAGLE_NCCL_ENV"].value is None
    assert "is 'warn' here but was unset" in by_var["SGLANG_EAGLE_NCCL_CONSISTENCY"].rule
    # The root marker goes with the serialised profile: left alone, it makes the next launch a child.
    assert by_var["SGLANG_EAGLE_NCCL"].fix.startswith(
        "unset SGLANG_EAGLE_NCCL_PROFILE SGLANG_EAGLE_NCCL_ROOT_PID so the plugin resolves SGLANG_EAGLE_NCCL afresh"
    )


def test_unchanged_inputs_and_variables_outside_the_inputs_do_not_count():
    text = text_of(body(inputs={"SGLANG_EAGLE_NCCL": "1"}))
    decoded, _ = accepted(
        text,
        environ={
            "SGLANG_EAGLE_NCCL": "1",
            "SGLANG_EAGLE_NCCL_PROFILE": text,
            "NCCL_PROTO": "Simple",
            "PATH": "/bin",
        },
    )
    assert decoded.inputs == {"SGLANG_EAGLE_NCCL": "1"}


def test_check_inputs_false_reads_a_hand_off_whatever_the_environment_says():
    text = text_of(body(inputs={"SGLANG_EAGLE_NCCL": "1"}))
    decoded, validate = accepted(text, environ={"SGLANG_EAGLE_NCCL": "debug"}, check_inputs=False)
    assert len(validate.calls) == 1 and decoded.inputs == {"SGLANG_EAGLE_NCCL": "1"}


def test_input_disagreements_lists_now_and_then_in_input_order():
    got = wire.input_disagreements(
        {"SGLANG_EAGLE_NCCL": "a", "SGLANG_EAGLE_NCCL_CONSISTENCY": "warn"},
        {"SGLANG_EAGLE_NCCL": "b", "SGLANG_EAGLE_NCCL_ENV": "x", "OTHER": "y"},
    )
    assert got == [
        ("SGLANG_EAGLE_NCCL", "b", "a"),
        ("SGLANG_EAGLE_NCCL_ENV", "x", None),
        ("SGLANG_EAGLE_NCCL_CONSISTENCY", None, "warn"),
    ]
    # The node rank selects a node section of the one hand-off every node shares; it is no input.
    assert wire.input_disagreements({}, {"SGLANG_EAGLE_NCCL_NODE_RANK": "1"}) == []
    assert wire.current_inputs(
        {"SGLANG_EAGLE_NCCL": "1", "NCCL_PROTO": "LL", "SGLANG_EAGLE_NCCL_PROFILE": "t"}
    ) == {"SGLANG_EAGLE_NCCL": "1"}


# --- the digest ----------------------------------------------------------------------------------------


def test_only_this_users_digest_skips_validation(tmp_path):
    key = wire.ensure_key()
    assert key is not None
    payload = dumps(body()).encode().hex()
    decoded, validate = accepted(f"sen3.{payload}.{wire.digest(key, payload)}")
    assert decoded.trusted is True and validate.calls == [] and decoded.profile is None
    assert decoded.data == {"name": "p", "env": {"NCCL_PROTO": "LL"}}
    real = wire.digest(key, payload)
    one_off = real[:-1] + ("1" if real[-1] == "0" else "0")  # differs in the last digit, whatever the key
    for mac in ("-", wire.digest(b"y" * 32, payload), one_off, "0" * 64, real.upper()):
        decoded, validate = accepted(f"sen3.{payload}.{mac}")
        assert decoded.trusted is False and len(validate.calls) == 1, mac


def test_a_signed_text_is_still_refused_when_its_structure_is_bad():
    """The digest buys skipping the value checks, never the shape checks."""
    key = wire.ensure_key()
    payload = dumps(body(run_dir="relative")).encode().hex()
    assert "not an absolute path" in refused(f"sen3.{payload}.{wire.digest(key, payload)}")


def test_digest_is_hmac_sha256():
    import hashlib
    import hmac

    assert wire.digest(b"k" * 32, "abc") == hmac.new(b"k" * 32, b"abc", hashlib.sha256).hexdigest()
    assert wire.digest(b"k" * 64, "") == hmac.new(b"k" * 64, b"", hashlib.sha256).hexdigest()


def test_without_an_environ_the_process_environment_is_compared(monkeypatch):
    text = text_of(body(inputs={"SGLANG_EAGLE_NCCL": "1"}))
    monkeypatch.setenv("SGLANG_EAGLE_NCCL", "debug")
    validate = Validate()
    with pytest.raises(ProfileError):
        wire.decode(text, validate=validate)
    monkeypatch.setenv("SGLANG_EAGLE_NCCL", "1")
    for key in wire.current_inputs(dict(__import__("os").environ)):
        if key != "SGLANG_EAGLE_NCCL":
            monkeypatch.delenv(key)
    assert wire.decode(text, validate=validate).inputs == {"SGLANG_EAGLE_NCCL": "1"}


def test_a_trusted_decode_returns_the_recorded_inputs_and_launch_directory():
    key = wire.ensure_key()
    payload = dumps(body(inputs={"SGLANG_EAGLE_NCCL": "1"}, run_dir="/srv/run")).encode().hex()
    decoded, _ = accepted(f"sen3.{payload}.{wire.digest(key, payload)}", environ={"SGLANG_EAGLE_NCCL": "1"})
    assert decoded.trusted and decoded.inputs == {"SGLANG_EAGLE_NCCL": "1"} and decoded.run_dir == "/srv/run"


def test_encode_without_a_key_writes_no_digest_and_with_one_this_users():
    data = {"name": "p", "env": {"NCCL_PROTO": "LL"}, "extra_key_dropped": 1}
    unsigned = wire.encode(data, inputs={}, run_dir=None, key=b"")
    assert unsigned.startswith("sen3.") and unsigned.endswith(".-")
    payload = unsigned.split(".")[1]
    assert bytes.fromhex(payload).decode("utf-8") == dumps(
        {"v": 2, "profile": {"name": "p", "env": {"NCCL_PROTO": "LL"}}, "inputs": {}, "run_dir": None}
    )
    signed = wire.encode(data, inputs={}, run_dir=None, key=b"k" * 32)
    assert signed == f"sen3.{payload}.{wire.digest(b'k' * 32, payload)}"
