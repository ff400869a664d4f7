"""Distance keys order as (distance, id) pairs and give both back, compiled and under the simulator alike."""

from __future__ import annotations

import numba
import numpy as np

from gpu_vecenv import distance_keys
from gpu_vecenv.distance_keys import distance_key, key_distance, key_id


@numba.njit
def keys_of(d2, ids):
    keys = np.empty(d2.size, np.int64)
    for i in range(d2.size):
        keys[i] = distance_key(d2[i], ids[i])
    return keys


@numba.njit
def parts_of(keys):
    d2 = np.empty(keys.size, np.float32)
    ids = np.empty(keys.size, np.int32)
    for i in range(keys.size):
        d2[i] = key_distance(keys[i])
        ids[i] = key_id(keys[i])
    return d2, ids


def test_keys_sort_as_distance_then_id_pairs_and_give_both_back():
    rng = np.random.default_rng(0)
    # Ties on purpose (few distinct distances), zero, the smallest subnormal, the largest float and infinity.
    d2 = np.concatenate([rng.choice(np.float32([0.5, 2.0, 7.25]), 300), rng.random(300, np.float32) * 400,
                         np.float32([0.0, 1e-45, 3.4e38, np.inf])])  # fmt: skip
    ids = rng.integers(0, 4096, d2.size).astype(np.int32)
    keys = keys_of(d2, ids)
    assert np.array_equal(np.argsort(keys, kind="stable"), np.lexsort((ids, d2)))
    back_d2, back_ids = parts_of(keys)
    assert np.array_equal(back_d2, d2) and np.array_equal(back_ids, ids)


def test_an_empty_place_sorts_after_every_agent_at_its_distance_and_says_minus_one():
    empty = keys_of(np.float32([np.inf]), np.int32([-1]))[0]
    last_agent = keys_of(np.float32([np.inf]), np.int32([2**31 - 1]))[0]
    assert empty > last_agent > keys_of(np.float32([3.4e38]), np.int32([0]))[0]
    assert parts_of(np.int64([empty]))[1][0] == -1


def test_the_simulators_plain_python_gives_the_compiled_keys():
    d2 = np.float32([0.0, 1e-45, 0.25, 9.5, np.inf])
    ids = np.int32([7, 0, 4095, 1, -1])
    compiled = keys_of(d2, ids)
    plain = [distance_keys._distance_key_python(x, j) for x, j in zip(d2, ids, strict=True)]
    assert [int(k) for k in plain] == [int(k) for k in compiled]
    assert [distance_keys._key_distance_python(k) for k in plain] == list(d2)
    assert [distance_keys._key_id_python(k) for k in plain] == list(ids)
