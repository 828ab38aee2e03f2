"""k-means, one iteration: each point joins its nearest centroid (squared distance, argmin),
a MultiFold adds the point to its centroid's sum and count (an accumulator row picked by data),
and the new centroids are the sums over the counts (a centroid with no points stays put)."""

import numpy as np

import hwgen as hw
from hwgen import int32

N, K, D = 1024, 8, 16


@hw.kernel(tile={"i": 32, "j": 32, "k": 8, "d": 16, "e": 16, "c": 8, "f": 16}, par={"d": 16, "e": 16})
def kmeans(points: hw.Array[int32, N, D], centroids: hw.Array[int32, K, D]) -> hw.Array[int32, K, D]:
    def nearest(i):
        def gap(k, d):
            diff = points[i, d] - centroids[k, d]
            return diff * diff

        return hw.argmin(hw.map(K, lambda k: hw.sum(D, lambda d: gap(k, d))))

    sums = hw.multifold(N, hw.zeros((K, D), int32), lambda i: (nearest(i), hw.map(D, lambda e: points[i, e])))
    counts = hw.multifold(N, hw.zeros(K, int32), lambda j: (nearest(j), 1))
    return hw.map((K, D), lambda c, f: hw.where(counts[c] > 0, sums[c, f] // hw.maximum(counts[c], 1), centroids[c, f]))


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.integers(-1000, 1000, (K, D))
    points = centres[rng.integers(0, K, N)] + rng.integers(-300, 300, (N, D))
    start = points[rng.choice(N, K, replace=False)]
    return points.astype(np.int32), start.astype(np.int32)


def reference(points, centroids):
    """Plain numpy, written independently of hwgen."""
    p = points.astype(np.int64)
    dist = ((p[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
    nearest = np.argmin(dist, axis=1)
    out = centroids.astype(np.int64).copy()
    for k in range(K):
        mine = p[nearest == k]
        if len(mine):
            out[k] = np.floor_divide(mine.sum(axis=0), len(mine))
    return out.astype(np.int32)
