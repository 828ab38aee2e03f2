"""TPC-H query 6: the revenue of line items shipped in one year with a discount of 5-7 % and
fewer than 24 units, sum(price * discount). A memory-bound filter-and-reduce: four columns
stream in, one number comes out. Prices are in cents and discounts in percent, so the revenue
is exact in int64 (cents x percent)."""

import numpy as np

import hwgen as hw
from hwgen import int32, int64

N = 15360
YEAR_START = 8766  # 1994-01-01, in days since 1970-01-01


@hw.kernel(tile={"i": 3840}, par={"i": 4})
def tpchq6(
    shipdate: hw.Array[int32, N], quantity: hw.Array[int32, N], discount: hw.Array[int32, N], price: hw.Array[int32, N]
) -> int64:
    def revenue(i):
        shipped = (shipdate[i] >= YEAR_START) & (shipdate[i] < YEAR_START + 365)
        wanted = shipped & (discount[i] >= 5) & (discount[i] <= 7) & (quantity[i] < 24)
        return hw.where(wanted, price[i].astype(int64) * discount[i], 0)

    return hw.sum(N, revenue)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    shipdate = rng.integers(YEAR_START - 730, YEAR_START + 730, N, dtype=np.int32)
    quantity = rng.integers(1, 51, N, dtype=np.int32)
    discount = rng.integers(0, 11, N, dtype=np.int32)
    price = rng.integers(90_000, 10_500_000, N, dtype=np.int32)
    return shipdate, quantity, discount, price


def reference(shipdate, quantity, discount, price):
    """Plain numpy, written independently of hwgen."""
    keep = (
        (shipdate >= YEAR_START) & (shipdate < YEAR_START + 365) & (discount >= 5) & (discount <= 7) & (quantity < 24)
    )
    return np.int64(np.sum(price[keep].astype(np.int64) * discount[keep]))
