"""The C-type bounds every integer crossing the ctypes boundary is checked against (native/abi.py): the last
value accepted, the first refused, and a value that is not an int at all (ctypes would wrap or refuse it)."""

from __future__ import annotations

import pytest

from sglang_eagle_nccl.native.abi import INT_MAX, UINT64_MAX, check_int, check_u64


def test_check_int_takes_int_max_and_refuses_one_more():
    assert check_int(INT_MAX, "x") == INT_MAX
    assert check_int(3, "x", low=3) == 3
    for value in (INT_MAX + 1, 2, -1):
        with pytest.raises(ValueError, match=r"^x must be an integer from 3 to 2147483647 \(C's int\)"):
            check_int(value, "x", low=3)


def test_check_u64_takes_its_whole_range_only():
    assert check_u64(0, "x") == 0 and check_u64(UINT64_MAX, "x") == UINT64_MAX
    for value in (-1, UINT64_MAX + 1):
        with pytest.raises(ValueError, match=r"^x must be an integer from 0 to 18446744073709551615"):
            check_u64(value, "x")


@pytest.mark.parametrize("check", [check_int, check_u64])
@pytest.mark.parametrize("value", [1.0, 1.5, "5", True, False, None])
def test_a_value_that_is_not_an_int_is_refused_as_a_value_error(check, value):
    with pytest.raises(ValueError, match=r"^x must be an integer from 0 to "):
        check(value, "x")
