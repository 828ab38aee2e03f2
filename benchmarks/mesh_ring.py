"""Ring all-reduce on mesh hardware: measured vs predicted cycles and the link bound.

    PYTHONPATH=.simpkg:. python benchmarks/mesh_ring.py [p,n,L ...]

Each case: a shard_map over a ring of p PEs whose body is v = a_local * b_local (n int32 words
per PE) and returns hw.psum(v, 'x'); verified bit-exact against the golden model. Prints the
kernel's measured and predicted cycles, the RingAllReduce unit's share (measured minus the
per-PE program's predicted cycles and the top's 1), the link bound 2(p-1)/p * n and the
unit's efficiency against it, and the Verilator build seconds.
"""

import sys
import time

import numpy as np

import hwgen as hw
from hwgen import int32
from hwgen.model import predict

CASES = [(2, 64, 1), (2, 64, 8), (2, 256, 8), (4, 64, 8), (4, 256, 1), (4, 256, 8), (8, 64, 8)]


def kernel(p, n, latency):
    mesh = hw.Mesh((p,), ("x",), topology="ring")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=latency), tile={"i": 16})
    def dotv(a: hw.Array[int32, n * p], b: hw.Array[int32, n * p]):
        def body(al, bl):
            return hw.psum(hw.map(n, lambda i: al[i] * bl[i]), "x")

        return hw.shard_map(body, mesh=mesh, in_specs=(hw.P("x"), hw.P("x")), out_specs=hw.P())(a, b)

    return dotv


def main(cases):
    rng = np.random.default_rng(0)
    print("| p | n | L | slice x rounds | measured | predicted | ring unit | link bound | unit efficiency | build s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for p, n, latency in cases:
        k = kernel(p, n, latency)
        a = rng.integers(-(2**31), 2**31, size=n * p, dtype=np.int64).astype(np.int32)
        b = rng.integers(-(2**31), 2**31, size=n * p, dtype=np.int64).astype(np.int32)
        t = time.perf_counter()
        sim = k.verify(a, b)
        r = sim.design.report
        body = predict(sim.design.compiled, sim.design.dram).cycles
        unit = sim.cycles - body - 1
        bound = r["link_bound_cycles"]
        c = r["collective"]
        print(
            f"| {p} | {n} | {latency} | {c['slice']} x {c['rounds']} | {sim.cycles} | {sim.predicted_cycles} | "
            f"{unit} | {bound} | {bound / unit:.0%} | {sim.build_seconds:.0f}{' (cached)' if sim.cache_hit else ''} |",
            flush=True,
        )
        del t


if __name__ == "__main__":
    args = [tuple(int(x) for x in a.split(",")) for a in sys.argv[1:]]
    main(args or CASES)
