"""Accumulators in block RAM: a read misses the last few writes (MemPlan.unseen_writes), so
the pipe forwards them, unless no element can be written twice that close together
(pipe.reuse_distance), in which case the update reads the RAM directly (a shorter loop)."""

import numpy as np
import pytest

import hwgen as hw
from hwgen import int32, ir
from hwgen.loops import Counter
from hwgen.passes.pipeplan import reuse_distance


def _idx(*names):
    return tuple(ir.Index(n, hw.int64) for n in names)


def test_reuse_distance_counts_the_innermost_indexing_counters():
    k, i, j = Counter("k", 8), Counter("i", 64), Counter("j", 64, par=16)
    assert reuse_distance([k, i, j], _idx("i", "j")) == 64 * 4  # k moves after all i, j issues
    assert reuse_distance([i, k], _idx("i")) == 1  # k is innermost and does not index
    assert reuse_distance([k, i], _idx("i", "k")) is None  # every counter indexes: never twice
    assert reuse_distance([k, i], (ir.Const(0, hw.int64),)) == 1


def test_reuse_distance_assumes_the_worst_for_other_indices():
    k, i = Counter("k", 8), Counter("i", 64)
    a, b = _idx("i", "k")
    assert reuse_distance([k, i], (ir.Binary("add", a, b, hw.int64),)) == 1  # two counters in one dimension
    assert reuse_distance([k, i], (a, a)) == 1  # one counter in two dimensions
    assert reuse_distance([i], _idx("outer")) == 1  # a counter of an enclosing loop


def colsum(K):
    @hw.kernel(tile={"i": 32, "j": K})
    def colsum(x: hw.Array[int32, 64, K]) -> hw.Array[int32, K]:
        return hw.map(K, lambda j: hw.sum(64, lambda i: x[i, j]))

    return colsum


@pytest.mark.rtl
@pytest.mark.parametrize("K", [5, 6])
def test_column_sums_at_the_forwarding_threshold(K):
    """K columns: element j is updated every K issues; at 5 and more (past the 4 writes a read
    misses) nothing is forwarded, also from one run of the pipe to the next tile's."""
    x = np.random.default_rng(K).integers(-1000, 1000, (64, K), dtype=np.int32)
    r = colsum(K).verify(x, runs=2)
    np.testing.assert_array_equal(r.outputs, x.sum(axis=0, dtype=np.int32))
    assert r.cycles == r.predicted_cycles
