"""The test of a user-given integer, shared by every module that refuses bad ones."""

from __future__ import annotations

import numbers

import numpy as np


def is_integer(value: object, low: int | None = None, high: int | None = None) -> bool:
    """Whether ``value`` is an integer, Python's or numpy's but not a bool, in ``[low, high]``.

    A bound of ``None`` leaves that side open. Bools are refused because
    ``True`` would pass for 1 where a count or an index was meant.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        return False
    number = int(value)
    return (low is None or number >= low) and (high is None or number <= high)
