"""A data-parallel training step of a linear model on a ring of 4 PEs, its weight update
sharded ("automatic cross-replica sharding of weight update", ZeRO): each PE holds a quarter
of the samples and a quarter of the weights. It gathers the weights, computes its samples'
errors and its part of the gradient, and the gradient is reduce-scattered, so each PE sums
and applies only its quarter of it; the updated quarters are gathered back. Three
collectives in one body, with patterns between them; integers throughout (the update is the
gradient shifted right by SHIFT bits, like a learning rate of 2**-SHIFT).

`replicated` is the same step with the update replicated instead: the gradient is
all-reduced and every PE updates every weight. Both give the same weights.

`global_sharded` and `global_replicated` are the step written once for whole arrays
(`_step`); only the weights' in_shardings differ, and hwgen's partitioner picks the
collectives (GSPMD): the sharded update from weights placed in quarters, the replicated one
from replicated weights."""

import numpy as np

import hwgen as hw
from hwgen import int32

P, N, D, SHIFT = 4, 32, 64, 10  # PEs, samples per PE, features (weights), update shift
mesh = hw.Mesh((P,), ("x",), topology="ring")


def kernels(features: int) -> dict:
    """The four kernels of the step for a model of `features` weights (a multiple of 4 * P): the
    module's kernels are those of D; `benchmarks/sharding.py` also builds a larger model,
    whose update phase the weights' reads and writes dominate."""
    tiles = {"i": 8, "d": 64, "e": 16, "j": 32, "k": 16}
    whole = {"i": 8, "d": 64, "e": 16, "j": 32}  # the same loops, over whole arrays

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=8), tile=tiles)
    def weight_update(x: hw.Array[int32, P * N, features], y: hw.Array[int32, P * N], w: hw.Array[int32, features]):
        def body(xl, yl, wl):  # this PE's samples, their targets, its quarter of the weights
            wall = hw.all_gather(wl, "x", tiled=True)
            err = hw.map(N, lambda i: hw.sum(features, lambda d: xl[i, d] * wall[d]) - yl[i])
            grad = hw.map(features, lambda e: hw.sum(N, lambda j: xl[j, e] * err[j]))
            mine = hw.psum_scatter(grad, "x", tiled=True)  # this PE's quarter of the summed gradient
            new = hw.map(features // P, lambda k: wl[k] - (mine[k] >> SHIFT))
            return hw.all_gather(new, "x", tiled=True)

        split = hw.P("x")
        return hw.shard_map(body, mesh=mesh, in_specs=(split, split, split), out_specs=hw.P())(x, y, w)

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=8), tile=tiles)
    def replicated(x: hw.Array[int32, P * N, features], y: hw.Array[int32, P * N], w: hw.Array[int32, features]):
        def body(xl, yl, wall):  # this PE's samples and targets, every weight
            err = hw.map(N, lambda i: hw.sum(features, lambda d: xl[i, d] * wall[d]) - yl[i])
            grad = hw.map(features, lambda e: hw.sum(N, lambda j: xl[j, e] * err[j]))
            total = hw.psum(grad, "x")
            return hw.map(features, lambda k: wall[k] - (total[k] >> SHIFT))

        split = hw.P("x")
        return hw.shard_map(body, mesh=mesh, in_specs=(split, split, hw.P()), out_specs=hw.P())(x, y, w)

    @hw.kernel(
        mesh=mesh,
        link=hw.LinkConfig(latency=8),
        tile=whole,
        in_shardings=(hw.P("x"), hw.P("x"), hw.P("x")),
        out_shardings=hw.P("x"),
    )
    def global_sharded(x: hw.Array[int32, P * N, features], y: hw.Array[int32, P * N], w: hw.Array[int32, features]):
        """Weights placed in quarters: the partitioner gathers them for the errors and
        reduce-scatters the gradient, and each PE updates its quarter."""
        return _step(x, y, w)

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=8), tile=whole, in_shardings=(hw.P("x"), hw.P("x"), hw.P()))
    def global_replicated(x: hw.Array[int32, P * N, features], y: hw.Array[int32, P * N], w: hw.Array[int32, features]):
        """Weights replicated: the partitioner all-reduces the gradient and every PE updates
        every weight."""
        return _step(x, y, w)

    return {k.name: k for k in (weight_update, replicated, global_sharded, global_replicated)}


def _step(x, y, w):
    """The training step written for whole arrays: the golden model of `global_sharded` and
    `global_replicated`, which differ only in the weights' placement."""
    n, features = x.shape
    err = hw.map(n, lambda i: hw.sum(features, lambda d: x[i, d] * w[d]) - y[i])
    return hw.map(features, lambda e: w[e] - (hw.sum(n, lambda j: x[j, e] * err[j]) >> SHIFT))


weight_update, replicated, global_sharded, global_replicated = kernels(D).values()


def inputs(seed=0, features=D):
    """Samples, targets and weights of a model of `features` weights."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-8, 9, (P * N, features), dtype=np.int32)
    w = rng.integers(-1024, 1025, features, dtype=np.int32)
    y = rng.integers(-4096, 4097, P * N, dtype=np.int32)
    return x, y, w


def reference(x, y, w):
    """Plain numpy, wrapping in int32 like the hardware: errors X w - y, gradient X^T err
    summed over all samples, then w - (gradient >> SHIFT)."""
    x64, w64 = x.astype(np.int64), w.astype(np.int64)
    err = (x64 @ w64 - y).astype(np.int32).astype(np.int64)
    grad = (x64.T @ err).astype(np.int32)
    return (w64 - (grad >> SHIFT)).astype(np.int32)
