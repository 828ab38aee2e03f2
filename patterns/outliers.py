"""A filter: the positions of the sensor readings that stray more than `limit` from the
expected level, compacted in order (hw.filter), and how many there are. One reading per
cycle; the kept positions stream back to DRAM with zeros after the last one."""

import numpy as np

import hwgen as hw
from hwgen import int32

N = 8192


@hw.kernel(tile={"i": 1024})
def outliers(readings: hw.Array[int32, N], level: int32, limit: int32):
    return hw.filter(N, lambda i: hw.abs(readings[i] - level) > limit)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    readings = rng.normal(5000, 300, N).astype(np.int32)
    return readings, np.int32(5000), np.int32(800)


def reference(readings, level, limit):
    """Plain numpy, written independently of hwgen."""
    where = np.flatnonzero(np.abs(readings.astype(np.int64) - level) > limit)
    out = np.zeros(N, np.int64)
    out[: len(where)] = where
    return out, np.int64(len(where))
