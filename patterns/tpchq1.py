"""TPC-H query 1 style group-by: per (return flag, line status) pair, the total quantity, base
price, discounted price and number of line items shipped by a cut-off date. hw.groupby_fold
keeps the groups in an on-chip content-addressed memory, one line item per cycle; groups
appear in order of first appearance (a row past the cut-off still opens its group, with
nothing added to it). Prices are in cents and discounts in percent, so the sums are exact."""

import numpy as np

import hwgen as hw
from hwgen import int32, int64

N = 4096
CUTOFF = 10_470  # 1998-09-02, in days since 1970-01-01


@hw.kernel(tile={"i": 512})
def tpchq1(
    flag: hw.Array[int32, N],
    status: hw.Array[int32, N],
    shipdate: hw.Array[int32, N],
    quantity: hw.Array[int32, N],
    price: hw.Array[int32, N],
    discount: hw.Array[int32, N],
):
    def line(i):
        shipped = shipdate[i] <= CUTOFF
        base = price[i].astype(int64)

        def keep(v):
            return hw.where(shipped, v, 0)

        return flag[i] * 2 + status[i], (
            keep(quantity[i].astype(int64)),
            keep(base),
            keep(base * (100 - discount[i])),
            keep(np.int64(1)),
        )

    keys, totals, groups = hw.groupby_fold(N, line, max_keys=8)
    return keys, totals, groups


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    flag = rng.integers(0, 3, N, dtype=np.int32)  # A, N, R
    status = rng.integers(0, 2, N, dtype=np.int32)  # F, O
    shipdate = rng.integers(CUTOFF - 2000, CUTOFF + 200, N, dtype=np.int32)
    quantity = rng.integers(1, 51, N, dtype=np.int32)
    price = rng.integers(90_000, 10_500_000, N, dtype=np.int32)
    discount = rng.integers(0, 11, N, dtype=np.int32)
    return flag, status, shipdate, quantity, price, discount


def reference(flag, status, shipdate, quantity, price, discount):
    """Plain Python and numpy, written independently of hwgen."""
    order, sums = [], {}
    for f, s, d, q, p, c in zip(flag, status, shipdate, quantity, price, discount):
        key = int(f) * 2 + int(s)
        if key not in sums:
            order.append(key)
            sums[key] = [0, 0, 0, 0]
        if d <= CUTOFF:
            row = sums[key]
            row[0] += int(q)
            row[1] += int(p)
            row[2] += int(p) * (100 - int(c))
            row[3] += 1
    keys = np.zeros(8, np.int32)
    totals = np.zeros((8, 4), np.int64)
    keys[: len(order)] = order
    for slot, key in enumerate(order):
        totals[slot] = sums[key]
    return keys, totals, np.int64(len(order))
