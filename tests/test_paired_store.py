"""gpu_vecenv.paired_store: two adjacent float32 entries by one 8-byte store, where the address allows it."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from gpu_vecenv.paired_store import _pair_aligned_python, _store_pair_python, pair_aligned, store_pair


@numba.njit
def write_every_aligned_pair(obs, g):
    """Each 8-byte aligned pair (i, i + 1) of game g gets (a + i / 100, a + (i + 1) / 100); how many pairs."""
    pairs = 0
    for a in range(obs.shape[1]):
        for i in range(obs.shape[2] - 1):
            if pair_aligned(obs, g, a, i):
                store_pair(obs, g, a, i, np.float32(a + i / 100), np.float32(a + (i + 1) / 100))
                pairs += 1
    return pairs


@pytest.mark.parametrize("offset", [0, 1])
def test_aligned_pairs_are_written_in_order_and_nothing_else_moves(offset):
    # Rows of 5 entries, the buffer's start shifted by `offset` floats: rows start on and off 8-byte boundaries.
    buffer = np.full(2 * 3 * 5 + 1, -1.0, np.float32)
    obs = buffer[offset : offset + 30].reshape(2, 3, 5)
    pairs = write_every_aligned_pair(obs, 1)
    expected = np.full((3, 5), -1.0, np.float32)
    count = 0
    for a in range(3):
        i = 0 if obs[1, a, 0:].ctypes.data % 8 == 0 else 1  # the row's first entry that starts a pair
        while i + 1 < 5:
            expected[a, i : i + 2] = [a + i / 100, a + (i + 1) / 100]
            count += 1
            i += 2
    assert pairs == count
    np.testing.assert_array_equal(obs[1], expected)
    assert np.all(obs[0] == -1.0)


def test_the_simulators_store_pair_refuses_a_misaligned_pair():
    obs = np.zeros((1, 1, 4), np.float32)
    aligned = 0 if obs.ctypes.data % 8 == 0 else 1
    assert _pair_aligned_python(obs, 0, 0, aligned) and not _pair_aligned_python(obs, 0, 0, 1 - aligned)
    _store_pair_python(obs, 0, 0, aligned, 1.5, 2.5)
    assert obs[0, 0, aligned : aligned + 2].tolist() == [1.5, 2.5]
    with pytest.raises(ValueError, match=r"entry \(0, 0, \d\) is not 8-byte aligned"):
        _store_pair_python(obs, 0, 0, 1 - aligned, 1.0, 1.0)


def test_only_3d_float32_arrays_are_taken():
    @numba.njit
    def store_into(arr):
        store_pair(arr, 0, 0, 0, 1.0, 2.0)

    with pytest.raises(numba.core.errors.TypingError, match="store_pair takes a 3-D float32 array"):
        store_into(np.zeros((1, 1, 4), np.float64))
