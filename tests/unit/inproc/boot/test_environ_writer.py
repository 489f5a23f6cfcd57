"""The one writer of os.environ (inproc/boot/environ.py): the guard, all or nothing, put back, withdraw.

On the real ``os.environ`` of this process (support/inproc.py puts it back to the byte). A write that
fails half-way is forced with an update mapping that raises while the writer reads its second value,
after the first variable was written: nothing stands in for the environment itself.
"""

from __future__ import annotations

import os

import pytest

from sglang_eagle_nccl.inproc.boot import environ
from sglang_eagle_nccl.inproc.boot.environ import EnvironmentWriteError
from sglang_eagle_nccl.inproc.boot.state import STATE
from support.inproc import fresh_process


@pytest.fixture
def proc():
    with fresh_process() as state:
        yield state


# --- the guard: names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["NCCL_X", "TORCH_NCCL_X", "SGLANG_EAGLE_NCCL", "SGLANG_EAGLE_NCCL_ENV", "NCCL_9_A"]
)
def test_the_plugins_own_names_may_be_written(proc, name):
    assert environ.write({name: "1"}) == [(name, None, "1")] and os.environ[name] == "1"


@pytest.mark.parametrize(
    "name",
    [
        "NCCL_",
        "NCCLX",
        "PATH",
        "LD_PRELOAD",
        "nccl_proto",
        "NCCL_a",
        "NCCL-X",
        "NCCL_X=Y",
        "NCCL_X Y",
        "OMP_NUM_THREADS",
        "",
        5,
    ],
)
def test_every_other_name_is_refused_and_nothing_is_written(proc, name):
    with pytest.raises(EnvironmentWriteError) as info:
        environ.write({"NCCL_ALGO": "Ring", name: "1"})
    assert str(info.value) == (
        f"refusing to write variables outside NCCL_*/TORCH_NCCL_*/SGLANG_EAGLE_NCCL*: {[str(name)]}"
    )
    assert "NCCL_ALGO" not in os.environ


def test_refused_names_are_all_named_in_order(proc):
    with pytest.raises(EnvironmentWriteError) as info:
        environ.check({"PATH": "x", "HOME": "y", "NCCL_A": "1"})
    assert str(info.value).endswith("['HOME', 'PATH']")


@pytest.mark.parametrize("name", environ.HARNESS)
def test_harness_names_only_with_harness(proc, name):
    with pytest.raises(EnvironmentWriteError):
        environ.write({name: "2"})
    assert name not in os.environ or os.environ[name] != "2"
    saved = os.environ.get(name)
    try:
        assert environ.write({name: "2"}, harness=True) == [(name, saved, "2")]
        assert os.environ[name] == "2"
    finally:
        environ.write({name: saved}, harness=True)
    assert os.environ.get(name) == saved


def test_harness_does_not_open_other_names(proc):
    with pytest.raises(EnvironmentWriteError):
        environ.write({"PATH": "/x"}, harness=True)


# --- the guard: values ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,problem",
    [
        (5, "NCCL_B: not a string (int)"),
        (b"LL", "NCCL_B: not a string (bytes)"),
        ("a\0b", "NCCL_B: the value contains a NUL byte (the C environment cannot hold it)"),
        ("\ud800", "NCCL_B: the value cannot be encoded for the C environment"),
    ],
)
def test_a_value_the_c_environment_cannot_hold_is_refused_before_anything_is_written(proc, value, problem):
    with pytest.raises(EnvironmentWriteError) as info:
        environ.write({"NCCL_A": "1", "NCCL_B": value})
    assert str(info.value) == f"cannot write to the process environment: {problem}"
    assert "NCCL_A" not in os.environ and "NCCL_B" not in os.environ


def test_every_bad_value_is_named(proc):
    with pytest.raises(EnvironmentWriteError) as info:
        environ.check({"NCCL_A": 1, "NCCL_B": "ok", "NCCL_C": "x\0"})
    assert str(info.value) == (
        "cannot write to the process environment: NCCL_A: not a string (int); "
        "NCCL_C: the value contains a NUL byte (the C environment cannot hold it)"
    )


def test_a_surrogate_escaped_byte_is_a_value_the_environment_can_hold(proc):
    value = os.fsdecode(b"\xff")  # what os.environ itself holds for a non-UTF-8 byte
    environ.write({"NCCL_A": value})
    assert os.environb[b"NCCL_A"] == b"\xff"


# --- writing: all or nothing ----------------------------------------------------------------------------


def test_write_sets_and_unsets_in_name_order_and_says_what_was_there(proc):
    os.environ["NCCL_B"] = "old"
    os.environ["NCCL_C"] = "gone"
    os.environ["NCCL_D"] = "same"
    got = environ.write({"NCCL_C": None, "NCCL_A": "1", "NCCL_B": "new", "NCCL_D": "same", "NCCL_E": None})
    assert got == [
        ("NCCL_A", None, "1"),
        ("NCCL_B", "old", "new"),
        ("NCCL_C", "gone", None),
        ("NCCL_D", "same", "same"),
        ("NCCL_E", None, None),
    ]
    assert (os.environ["NCCL_A"], os.environ["NCCL_B"], os.environ["NCCL_D"]) == ("1", "new", "same")
    assert "NCCL_C" not in os.environ and "NCCL_E" not in os.environ


class FailsAt(dict):
    """An update whose value for ``at`` cannot be read: the writer fails after writing what sorts before it."""

    def __init__(self, data: dict, at: str) -> None:
        super().__init__(data)
        self.at = at

    def __getitem__(self, key):
        if key == self.at:
            raise RuntimeError(f"cannot read {key}")
        return super().__getitem__(key)


def test_a_write_that_fails_half_way_puts_back_everything_it_wrote(proc):
    os.environ["NCCL_B"] = "user"
    os.environ["NCCL_C"] = "user-c"
    before = dict(os.environ)
    with pytest.raises(RuntimeError, match="cannot read NCCL_D"):
        environ.write(FailsAt({"NCCL_A": "1", "NCCL_B": "2", "NCCL_C": None, "NCCL_D": "4"}, "NCCL_D"))
    assert dict(os.environ) == before  # NCCL_A removed again, NCCL_B and NCCL_C as the user had them


def test_even_an_interrupt_half_way_puts_everything_back(proc):
    class Interrupted(FailsAt):
        def __getitem__(self, key):
            if key == self.at:
                raise KeyboardInterrupt
            return dict.__getitem__(self, key)

    before = dict(os.environ)
    with pytest.raises(KeyboardInterrupt):
        environ.write(Interrupted({"NCCL_A": "1", "NCCL_Z": "2"}, "NCCL_Z"))
    assert dict(os.environ) == before


def test_put_back_returns_variables_to_what_was_saved(proc):
    os.environ["NCCL_A"] = "now"
    os.environ["NCCL_B"] = "now"
    environ.put_back({"NCCL_A": None, "NCCL_B": "then"})
    assert "NCCL_A" not in os.environ and os.environ["NCCL_B"] == "then"
    with pytest.raises(EnvironmentWriteError):
        environ.put_back({"PATH": None})


def test_restore_keeps_going_past_a_variable_it_cannot_put_back(proc):
    os.environ["NCCL_A"] = "x"
    environ._restore({"NCCL_B\0": "cannot", "NCCL_A": None, "NCCL_C": "back"})
    assert "NCCL_A" not in os.environ and os.environ["NCCL_C"] == "back"


# --- withdraw: every variable the plugin wrote in this process --------------------------------------------


def test_withdraw_puts_back_what_the_activation_wrote_and_forgets_it(proc):
    os.environ["NCCL_PROTO"] = "user"
    STATE.saved_before = {"NCCL_PROTO": "user", "NCCL_ALGO": None, "NCCL_DEBUG": "WARN"}
    STATE.active = True
    STATE.expected_env = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
    environ.write({"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"})
    os.environ["NCCL_DEBUG"] = "WARN"  # as it was: nothing to put back for it
    assert environ.withdraw() is True
    assert (
        os.environ["NCCL_PROTO"] == "user"
        and "NCCL_ALGO" not in os.environ
        and os.environ["NCCL_DEBUG"] == "WARN"
    )
    assert (STATE.active, STATE.expected_env, STATE.saved_before) == (False, {}, {})


def test_withdraw_with_nothing_changed_says_so(proc):
    STATE.saved_before = {"NCCL_PROTO": None}
    STATE.active = True
    assert environ.withdraw() is False and STATE.active is False
