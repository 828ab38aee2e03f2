"""Simulation speed: dotproduct at N = 65536 through cocotb and Verilator, in cycles per second
of wall time between start and done (the clock and the DRAM model run inside Verilator).

    .venv/bin/python benchmarks/simspeed.py [N]
"""

import sys

import numpy as np

import hwgen as hw
from hwgen import int32


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 65536

    @hw.kernel(metapipeline=False)
    def dotproduct(a: hw.Array[int32, n], b: hw.Array[int32, n]) -> int32:
        return hw.sum(n, lambda i: a[i] * b[i])

    rng = np.random.default_rng(0)
    a = rng.integers(-1000, 1000, n, dtype=np.int32)
    b = rng.integers(-1000, 1000, n, dtype=np.int32)
    dotproduct.verify(a, b)  # build (cached afterwards)
    r = dotproduct.verify(a, b)
    print(
        f"dotproduct N={n}: {r.cycles} cycles in {r.run_seconds:.2f} s of simulation "
        f"({r.cycles / r.run_seconds:,.0f} cycles/s); whole simulate() call {r.sim_seconds:.2f} s "
        f"({r.cycles / r.sim_seconds:,.0f} cycles/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
