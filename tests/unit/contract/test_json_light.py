"""The start-up JSON reader/writer agrees with the standard json module."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.contract.jsonlight import JSONLightError, dumps, loads

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**18), 10**18)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_loads_reads_what_json_writes(value):
    for text in (
        json.dumps(value),
        json.dumps(value, ensure_ascii=False),
        json.dumps(value, indent=2, sort_keys=True),
    ):
        assert loads(text) == value


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_json_reads_what_dumps_writes(value):
    assert json.loads(dumps(value)) == value


def test_dumps_sorts_keys_and_is_compact():
    assert dumps({"b": 1, "a": [True, None, 1.5, 'x\n"y\\']}) == '{"a":[true,null,1.5,"x\\n\\"y\\\\"],"b":1}'


def test_surrogate_pairs():
    assert loads('"\\ud83d\\ude00"') == "\U0001f600"


@pytest.mark.parametrize("bad", ["", "{", '{"a" 1}', "[1,]", '"\\x"', "tru", "1 2", '{"a":1,}', '"a\nb"'])
def test_malformed_is_refused(bad):
    with pytest.raises(JSONLightError):
        loads(bad)
