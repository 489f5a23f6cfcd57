"""Two rules of the profile reader that used to differ by command (issue 25, item 3).

- A group label (``[groups.<label>]``) is 1 to 64 ASCII letters, digits, ``_ . : -`` (SGLang's group
  names; the native library takes it as a C string): any other label is a profile error, named with
  its control characters escaped, never an internal error at activation.
- A TOML integer of any base whose decimal text is beyond Python's digit limit is one finding per
  value (its dotted key, the value abbreviated, the rule, a Fix), never a traceback.

Checked with generated inputs against small references written here.
"""

from __future__ import annotations

import math
import string
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.profile.resolve import resolve
from sglang_eagle_nccl.profile.sources import parse_toml_document

LIMIT = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
LABEL_CHARS = set(string.ascii_letters + string.digits + "_.:-")


def is_label(text: str) -> bool:
    return 1 <= len(text) <= 64 and all(c in LABEL_CHARS for c in text)


def toml_key(text: str) -> str:
    return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x20 or c in '"\\\x7f' else c for c in text) + '"'


@settings(max_examples=80, deadline=None)
@given(st.one_of(st.text(max_size=70), st.text(alphabet=sorted(LABEL_CHARS), min_size=1, max_size=66)))
def test_a_group_label_is_a_label_or_a_named_error(tmp_path_factory, label):
    path = tmp_path_factory.mktemp("g") / "p.toml"
    path.write_text(f'[groups.{toml_key(label)}.env]\nNCCL_ALGO = "Ring"\n', encoding="utf-8")
    try:
        resolve([str(path)], use_environ=False)
        refused = []
    except ProfileError as exc:
        refused = [f for f in exc.errors if "a group label is" in f.rule]
    assert bool(refused) == (not is_label(label))
    for f in refused:
        assert f.variable.isprintable() and f.variable.startswith("groups.")
        assert "[groups.tp.env]" in f.fix


def decimal_digits(value: int) -> int:
    return math.floor(math.log10(value)) + 1


@settings(max_examples=40, deadline=None)
@given(bits=st.one_of(st.integers(1, 80), st.integers(LIMIT * 3, LIMIT * 4 + 200)),
       base=st.sampled_from(["x", "o", "b"]), where=st.sampled_from(["env", "policy", "rule"]))
def test_an_integer_python_cannot_write_is_a_finding_in_every_base(bits, base, where):
    value = (1 << bits) - 1
    text = f"0{base}{format(value, base)}"
    doc = {
        "env": f"[env]\nNCCL_BUFFSIZE = {text}\n",
        "policy": f"[policy]\nconsistency_timeout_s = {text}\n",
        "rule": f'[[tuner.rules]]\ncollective = "AllReduce"\nbytes = [0, {text}]\n',
    }[where]
    data, findings = parse_toml_document(doc, "p.toml")
    too_long = decimal_digits(value) > LIMIT
    assert (data is None) == too_long
    if too_long:
        (f,) = findings
        key = {"env": "env.NCCL_BUFFSIZE", "policy": "policy.consistency_timeout_s", "rule": "tuner.rules[0].bytes[1]"}
        assert f.variable == key[where] and f.source == "p.toml"
        assert f.value == f"{value:#x}" and f"{bits} bits" in f.rule and "64 bits" in f.fix
        assert len(f.message()) < 600  # the value is shown abbreviated
    else:
        assert findings == []


@pytest.mark.parametrize("command", [["validate"], ["profiles", "show"], ["env", "--profile"],
                                     ["doctor", "--profile"], ["tuner", "--bytes", "1", "--nranks", "2", "--profile"]])
def test_every_command_names_it_instead_of_tracing_back(tmp_path, command):
    from click.testing import CliRunner

    from sglang_eagle_nccl.cli.main import main

    path = tmp_path / "p.toml"
    path.write_text(f"[env]\nNCCL_BUFFSIZE = 0x{'f' * 5000}\n")
    result = CliRunner().invoke(main, [*command, str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (1, 2) and "env.NCCL_BUFFSIZE='0xfff" in result.output and "20000 bits" in result.output
