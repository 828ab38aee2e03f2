"""Black-Scholes option pricing (PARSEC's kernel) in fixed point: per option, d1 and d2 from
log, sqrt and division, the normal distribution from exp and a polynomial, then the call or
put price. A long, memory-bound map: six columns in, one out, every function pipelined."""

import math

import numpy as np

import hwgen as hw

N = 9600
fx = hw.fixed(16, 16)


def cndf(x):
    """The standard normal CDF (Abramowitz and Stegun 26.2.17, as PARSEC computes it)."""
    ax = hw.abs(x)
    k = 1 / (1 + 0.2316419 * ax)
    poly = k * (0.319381530 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429))))
    tail = hw.exp(-0.5 * ax * ax) * (1 / math.sqrt(2 * math.pi)) * poly
    return hw.where(x < 0, tail, 1 - tail)


@hw.kernel(tile={"i": 960})
def blackscholes(
    spot: hw.Array[fx, N],
    strike: hw.Array[fx, N],
    rate: hw.Array[fx, N],
    vol: hw.Array[fx, N],
    years: hw.Array[fx, N],
    is_put: hw.Array[hw.int32, N],
) -> hw.Array[fx, N]:
    def price(i):
        s, k, r, v, t = spot[i], strike[i], rate[i], vol[i], years[i]
        v_sqrt_t = v * hw.sqrt(t)
        d1 = (hw.log(s / k) + (r + 0.5 * v * v) * t) / v_sqrt_t
        d2 = d1 - v_sqrt_t
        discounted = k * hw.exp(-r * t)
        call = s * cndf(d1) - discounted * cndf(d2)
        put = discounted * (1 - cndf(d2)) - s * (1 - cndf(d1))
        return hw.where(is_put[i] != 0, put, call)

    return hw.map(N, price)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    spot = rng.uniform(20, 120, N)
    strike = spot * rng.uniform(0.7, 1.3, N)
    rate = rng.uniform(0.01, 0.08, N)
    vol = rng.uniform(0.1, 0.6, N)
    years = rng.uniform(0.25, 3.0, N)
    is_put = rng.integers(0, 2, N, dtype=np.int32)
    return spot, strike, rate, vol, years, is_put


# Fixed point with 16 fractional bits, functions accurate to about 1e-4: prices stay within
TOLERANCE = 0.05


def reference(spot, strike, rate, vol, years, is_put):
    """Plain numpy in float64, written independently of hwgen (exact normal CDF via erf)."""
    from math import erf

    q = lambda v: np.floor(np.asarray(v) * 65536) / 65536  # noqa: E731  (the fixed inputs)
    s, k, r, v, t = (q(a) for a in (spot, strike, rate, vol, years))
    phi = np.vectorize(lambda x: 0.5 * (1 + erf(x / math.sqrt(2))))
    d1 = (np.log(s / k) + (r + 0.5 * v * v) * t) / (v * np.sqrt(t))
    d2 = d1 - v * np.sqrt(t)
    call = s * phi(d1) - k * np.exp(-r * t) * phi(d2)
    put = k * np.exp(-r * t) * phi(-d2) - s * phi(-d1)
    return np.where(is_put != 0, put, call)
