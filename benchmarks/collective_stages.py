"""Collectives as stages of a tile loop (`@hw.kernel(collective_stages=True)`) against the
whole collective after the loop. Writes docs/collective_stages.md.

    .venv/bin/python benchmarks/collective_stages.py

Each case: on a ring of p PEs, each PE computes n sums of squares of its rows of `a` (8 int32
words a row, 4 lanes) in tiles of `rows` rows and all-reduces them (hw.psum). *whole*: the
all-reduce of all n words after the loop; *staged*: the loop's last stage all-reduces the rows
each iteration stored, beside the next tile's sums; *compute*: the loop alone (no
collective). Every run is bit-exact against the golden model and predicted = measured.
*hidden* is the share of the whole all-reduce's time (whole - compute) that staging hides:
(whole - staged) / (whole - compute).
"""

import sys
import time
from pathlib import Path

import numpy as np

import hwgen as hw
from hwgen import int32

DOCS = Path(__file__).resolve().parent.parent / "docs"
CASES = ((4, 4096, 256), (4, 4096, 512), (4, 4096, 1024), (8, 4096, 256), (8, 4096, 512), (8, 4096, 1024))


def kernel(p: int, n: int, rows: int, mode: str):
    """mode: "whole", "staged" or "compute" (see the module doc)."""
    mesh = hw.Mesh((p,), ("x",), topology="ring")

    @hw.kernel(
        mesh=mesh,
        link=hw.LinkConfig(latency=8),
        tile={"i": rows, "k": 8},
        par={"k": 4},
        collective_stages=mode == "staged",
    )
    def sums(a: hw.Array[int32, p * n, 8]):
        def body(b):
            g = hw.map(n, lambda i: hw.sum(8, lambda k: b[i, k] * b[i, k]) + i)
            return g if mode == "compute" else hw.psum(g, "x")

        out = hw.P("x") if mode == "compute" else hw.P()
        return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=out)(a)

    return sums


def run(p: int, n: int, rows: int) -> dict:
    a = np.random.default_rng(p + rows).integers(-1000, 1000, (p * n, 8)).astype(np.int32)
    row = {"p": p, "n": n, "rows": rows}
    for mode in ("whole", "staged", "compute"):
        sim = kernel(p, n, rows, mode).verify(a)  # bit-exact against the golden model
        assert sim.cycles == sim.predicted_cycles, (mode, sim.cycles, sim.predicted_cycles)
        row[mode] = sim.cycles
    row["hidden"] = (row["whole"] - row["staged"]) / (row["whole"] - row["compute"])
    return row


def line(r: dict) -> str:
    return (
        f"| ring of {r['p']} | {r['n']} | {r['rows']} | {r['n'] // r['rows']} | {r['whole']} | {r['staged']} | "
        f"{r['compute']} | {r['whole'] / r['staged']:.2f}x | {r['hidden']:.0%} |"
    )


def main() -> int:
    started = time.perf_counter()
    head = [
        "| PEs | words per PE | tile rows | iterations | whole | staged | compute | speedup | hidden |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(head), flush=True)
    rows = []
    for case in CASES:
        rows.append(line(run(*case)))
        print(rows[-1], flush=True)
    text = [
        "# Collectives as stages of a tile loop",
        "",
        "Written by `.venv/bin/python benchmarks/collective_stages.py` (see its docstring). On a ring",
        "of p PEs each PE computes n sums of squares of its rows (8 int32 words a row, 4 lanes) in",
        "tiles of *tile rows* and all-reduces them: *whole* all-reduces all n words after the loop,",
        "*staged* (`collective_stages=True`) all-reduces each iteration's rows as the loop's last",
        "stage, beside the next tile's sums; *compute* is the loop alone. Cycles are measured in",
        "Verilator (links of 1 word a cycle and 8 cycles, DRAM of 20 cycles and beats of 4 words),",
        "each equal to the model's prediction and bit-exact against the golden model. *hidden*: the",
        "share of the whole all-reduce's time that staging hides, (whole - staged) / (whole - compute).",
        "",
        *head,
        *rows,
        "",
    ]
    (DOCS / "collective_stages.md").write_text("\n".join(text))
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
