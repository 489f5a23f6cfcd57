"""Generated lines of our JSON-lines files for reader tests: valid records of every event of a table
(contract/events.py) in any key order and spacing, and the same spoilt (a field dropped, retyped,
duplicated, extended, an inner value of the wrong type, an unknown event, junk). Text values include a
lone surrogate, so a line encoded with ``surrogatepass`` may be bytes that are not UTF-8."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from sglang_eagle_nccl.contract import events

JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                    | st.text(max_size=6), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)
TEXT = st.text(max_size=8) | st.sampled_from(["\ud800", "é", "\x00", '"event": "read"', "\U0001f600"])


def values(field_type):
    if field_type == "any":
        return JSON
    if isinstance(field_type, str):
        return {"str": TEXT, "int": st.integers(-2**66, 2**66), "bool": st.booleans(),
                "num": st.integers(-2**66, 2**66) | st.floats(allow_nan=False)}[field_type]
    kind = field_type[0]
    if kind == "opt":
        return st.none() | values(field_type[1])
    if kind == "list":
        return st.lists(values(field_type[1]), max_size=3)
    if kind == "map":
        return st.dictionaries(TEXT, values(field_type[1]), max_size=3)
    extra = st.dictionaries(st.text(max_size=3), JSON, max_size=2)  # keys an object field does not declare
    return st.builds(lambda req, opt, more: {**more, **req, **opt},
                     st.fixed_dictionaries({k: values(t) for k, t in field_type[1].items()}),
                     st.fixed_dictionaries({}, optional={k: values(t) for k, t in field_type[2].items()}), extra)


@st.composite
def lines(draw, common, table):
    name = draw(st.sampled_from(sorted(table)))
    row = table[name]
    fields = {**common, **row.required}
    record = draw(st.fixed_dictionaries({k: values(t) for k, t in fields.items()},
                                        optional={k: values(t) for k, t in row.optional.items()}))
    record["event"] = name
    spoil = draw(st.sampled_from(["none", "none", "drop", "retype", "inner", "extra", "junk", "duplicate", "event"]))
    keys = sorted(record)
    if spoil == "inner":  # a value of the right shape with anything inside: a list's item, a map's value, an opt's
        key = draw(st.sampled_from(keys))
        kind = {**common, **row.required, **row.optional}[key]
        kind = kind[0] if isinstance(kind, tuple) else kind
        record[key] = ([draw(JSON)] if kind == "list" else {draw(st.text(max_size=3)): draw(JSON)} if kind == "map"
                       else draw(JSON) if kind == "opt" else record[key])
    elif spoil == "drop":
        record.pop(draw(st.sampled_from(keys)))
    elif spoil == "retype":
        record[draw(st.sampled_from(keys))] = draw(JSON)
    elif spoil == "extra":
        record[draw(st.text(min_size=1, max_size=5))] = draw(JSON)
    elif spoil == "event":
        record["event"] = draw(st.sampled_from([*sorted(events.EVENTS), *sorted(events.READS_EVENTS), "x"]))
    text = json.dumps(record, sort_keys=draw(st.booleans()), separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])),
                      ensure_ascii=draw(st.booleans()))
    if spoil == "duplicate":  # a key given twice: the last one counts, in both readers
        key = draw(st.sampled_from(keys))
        text = text[:-1] + f', "{key}": {json.dumps(draw(JSON))}}}'
    if spoil == "junk":
        text = draw(st.sampled_from(["{", "{}", "[1]", '{"event": "read", NaN}', "\xff", " " + text, text + " x"]))
    return text
