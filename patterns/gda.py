"""Gaussian discriminant analysis, the covariance step: sigma = sum over rows r of
(x_r - mu_{y_r}) (x_r - mu_{y_r})^T, with each row centred on its class's mean. Tiled over
rows like gemm over k: each C x C tile of sigma accumulates on chip while row tiles stream in."""

import numpy as np

import hwgen as hw
from hwgen import int32

R, C = 512, 32


@hw.kernel(tile={"r": 64, "a": 32, "b": 32}, par={"b": 16})
def gda(
    x: hw.Array[int32, R, C], y: hw.Array[int32, R], mu0: hw.Array[int32, C], mu1: hw.Array[int32, C]
) -> hw.Array[int32, C, C]:
    def centred(r, c):
        return x[r, c] - hw.where(y[r] == 1, mu1[c], mu0[c])

    return hw.map((C, C), lambda a, b: hw.sum(R, lambda r: centred(r, a) * centred(r, b)))


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, R, dtype=np.int32)
    centres = rng.integers(-200, 200, (2, C))
    x = (centres[y] + rng.integers(-500, 500, (R, C))).astype(np.int32)
    mu0 = np.round(x[y == 0].mean(axis=0)).astype(np.int32)
    mu1 = np.round(x[y == 1].mean(axis=0)).astype(np.int32)
    return x, y, mu0, mu1


def reference(x, y, mu0, mu1):
    """Plain numpy, written independently of hwgen: exact in int64, wrapped to int32."""
    centred = x.astype(np.int64) - np.where(y[:, None] == 1, mu1[None, :], mu0[None, :])
    return (centred.T @ centred).astype(np.int32)
