"""Logistic regression, one gradient step's gradient: grad = X^T (sigmoid(X w) - y), in
fixed point. A MultiFold over rows: each row's error scales the row, and the scaled rows
accumulate into the gradient on chip, tile after tile of rows."""

import numpy as np

import hwgen as hw

N, D = 1024, 64
fx = hw.fixed(16, 16)


@hw.kernel(tile={"i": 32, "d": 64, "e": 64}, par={"d": 8, "e": 8})
def logreg(x: hw.Array[fx, N, D], y: hw.Array[fx, N], w: hw.Array[fx, D]) -> hw.Array[fx, D]:
    def row(i):
        err = hw.sigmoid(hw.sum(D, lambda d: x[i, d] * w[d])) - y[i]
        return slice(None), hw.map(D, lambda e: err * x[i, e])

    return hw.multifold(N, hw.zeros(D, fx), row)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (N, D))
    w_true = rng.uniform(-0.5, 0.5, D)
    y = (x @ w_true + rng.normal(0, 0.5, N) > 0).astype(np.float64)
    w = rng.uniform(-0.25, 0.25, D)
    return x, y, w


# Fixed-point rounding: each product rounds down by under 2**-16 (D of them per dot product,
# one per gradient term), sigmoid's error is under 1e-4; over N rows the gradient stays within:
TOLERANCE = N * (D * 2.0**-16 * 0.25 + 1e-4 + 2.0**-16) * 2


def reference(x, y, w):
    """Plain numpy in float64, written independently of hwgen (inputs on the 2**-16 grid)."""
    q = lambda v: np.floor(np.asarray(v) * 65536) / 65536  # noqa: E731  (the fixed inputs)
    x, y, w = q(x), q(y), q(w)
    err = 1 / (1 + np.exp(-(x @ w))) - y
    return x.T @ err
