"""A data-parallel training step of logistic regression in fixed point on a ring of 4 PEs,
written once for whole arrays:

    err = sigmoid(X w) - y;    w' = w - LR * X^T err

The samples (rows of X, and y) are split over the PEs. Only the weights' in_shardings
differ between the two kernels, and hwgen's partitioner picks the collectives (GSPMD,
"automatic cross-replica sharding of weight update"):

- `logreg_step`: weights placed in quarters. Each PE gathers the weights for its samples'
  errors; its part of the gradient is reduce-scattered, so it sums and applies only its
  quarter of the update (all-gather, reduce-scatter).
- `replicated`: weights replicated. The gradient is all-reduced and every PE updates every
  weight.

Both give the same weights, bit for bit (the golden model), within fixed-point rounding of
the float64 reference below.
"""

import numpy as np

import hwgen as hw

P, N, D = 4, 128, 64  # PEs, samples (all PEs), features
LR = 2.0**-4  # the learning rate, on the fixed-point grid
fx = hw.fixed(16, 16)
mesh = hw.Mesh((P,), ("x",), topology="ring")
TILES = {"i": 8, "d": 64, "e": 16, "j": 32}


def _step(x, y, w):
    err = hw.map(N, lambda i: hw.sigmoid(hw.sum(D, lambda d: x[i, d] * w[d])) - y[i])
    return hw.map(D, lambda e: w[e] - hw.sum(N, lambda j: x[j, e] * err[j]) * LR)


@hw.kernel(mesh=mesh, tile=TILES, in_shardings=(hw.P("x"), hw.P("x"), hw.P("x")), out_shardings=hw.P("x"))
def logreg_step(x: hw.Array[fx, N, D], y: hw.Array[fx, N], w: hw.Array[fx, D]) -> hw.Array[fx, D]:
    """Weights in quarters: the update is sharded."""
    return _step(x, y, w)


@hw.kernel(mesh=mesh, tile=TILES, in_shardings=(hw.P("x"), hw.P("x"), hw.P()))
def replicated(x: hw.Array[fx, N, D], y: hw.Array[fx, N], w: hw.Array[fx, D]) -> hw.Array[fx, D]:
    """Weights replicated: the update is replicated."""
    return _step(x, y, w)


def inputs(seed=0):
    """Samples whose labels are drawn from a logistic model, and small starting weights."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (N, D))
    chance = 1 / (1 + np.exp(-(x @ rng.uniform(-0.5, 0.5, D))))
    labels = (rng.random(N) < chance).astype(np.float64)
    return x, labels, rng.uniform(-0.25, 0.25, D)


# Fixed-point rounding: each product rounds down by under 2**-16 (D per dot product, one per
# gradient term), sigmoid's error is under 1e-4; the gradient over N rows stays within
# N * (...) * 2, scaled by LR, plus the rounding of that product and of the inputs:
TOLERANCE = LR * N * (D * 2.0**-16 * 0.25 + 1e-4 + 2.0**-16) * 2 + 2 * 2.0**-16


def reference(x, y, w):
    """Plain numpy in float64, written independently of hwgen (inputs on the 2**-16 grid)."""
    q = lambda v: np.floor(np.asarray(v) * 65536) / 65536  # noqa: E731  (the fixed inputs)
    x, y, w = q(x), q(y), q(w)
    err = 1 / (1 + np.exp(-(x @ w))) - y
    return w - LR * (x.T @ err)
