"""Compile time against mesh size: a 64x64x64 matmul written for whole arrays, partitioned on
meshes of 1, 4, 16 and 64 PEs (rows of a over x, columns of b over y: no communication; and
the contraction split over both axes, then reduce-scattered), built by hwgen (partition,
per-PE compile, PE and mesh-top Verilog; no Verilator).

    .venv/bin/python benchmarks/meshbuild.py

Prints a table: PEs, the seconds of each build (best of three) and the Verilog's size.
"""

import sys
import time

import hwgen as hw
from hwgen import int32

M = K = N = 64
SHAPES = ((1, 1), (2, 2), (4, 4), (8, 8))


def kernels(shape):
    mesh = hw.Mesh(shape, ("x", "y"))
    schedule = {"tile": {"@i": 8, "@j": 8}}

    @hw.kernel(mesh=mesh, in_shardings=(hw.P("x", None), hw.P(None, "y")), **schedule)
    def rows_by_columns(a: hw.Array[int32, M, K], b: hw.Array[int32, K, N]):
        return a @ b

    @hw.kernel(
        mesh=mesh,
        in_shardings=(hw.P(None, ("x", "y")), hw.P(("x", "y"), None)),
        out_shardings=hw.P(("x", "y"), None),
        **schedule,
    )
    def contracted(a: hw.Array[int32, M, K], b: hw.Array[int32, K, N]):
        return a @ b

    return (rows_by_columns,) if shape == (1, 1) else (rows_by_columns, contracted)


def timed(kernel) -> tuple:
    best, design = None, None
    for _ in range(3):
        t = time.perf_counter()
        design = kernel.elaborate()
        s = time.perf_counter() - t
        best = s if best is None else min(best, s)
    return best, len(design.verilog)


def main() -> int:
    rows = ["| PEs | kernel | collectives | build s | Verilog KB |", "|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    for shape in SHAPES:
        for k in kernels(shape):
            seconds, size = timed(k)
            kinds = ", ".join(c["kind"] for c in k.elaborate().report["collectives"]) or "none"
            row = f"| {shape[0] * shape[1]} | {k.name} | {kinds} | {seconds:.2f} | {size / 1024:.0f} |"
            rows.append(row)
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
