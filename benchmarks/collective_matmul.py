"""Collective matmul against all-gather-then-matmul on rings of PEs: measured and predicted
cycles, the speedup, and how close each step comes to hiding its permute. Writes
docs/collective_matmul.md and docs/collective_matmul.png (PE 0's measured timeline of both
forms at the app's size).

    .venv/bin/python benchmarks/collective_matmul.py

Each case is patterns/mesh/collective_matmul.py's `build(p, m, k, n)`: a (p*m, k) by rows and
b (k, p*n) by columns over a ring of p PEs (int32, tiles of 16, 16 lanes, links of latency 4),
both forms verified bit-exact against the golden model. From PE 0's timeline: t_c, a partial
matmul's cycles, and t_m, a permute's; the overlapped ideal is t_c + (p - 1) max(t_c, t_m)
(each step as long as the slower of the two), all-gather-then-matmul's is about
(p - 1) t_m + p t_c.
"""

import sys
import time
from pathlib import Path

import numpy as np
from common import ROOT, load_app

from hwgen.loops import Collective, Parallel

DOCS = ROOT / "docs"
APP = load_app(ROOT / "patterns" / "mesh" / "collective_matmul.py")
CASES = ((4, 16, 64, 16), (4, 32, 64, 16), (4, 16, 128, 32), (8, 16, 64, 16))


def run(p, m, k, n):
    """(row of the table, the two SimResults) of one size."""
    ring, gathered = APP.build(p, m, k, n, **APP.SCHEDULE)
    rng = np.random.default_rng(p * m + k + n)
    a = rng.integers(-1000, 1000, (p * m, k)).astype(np.int32)
    b = rng.integers(-1000, 1000, (k, p * n)).astype(np.int32)
    want = APP.reference(a, b)
    sims = []
    for kernel in (ring, gathered):
        sim = kernel.simulate(a, b, monitor=True)
        np.testing.assert_array_equal(sim.outputs, want)
        sims.append(sim)
    level = next(s for s in sims[0].design.program.root.stages if isinstance(s, Parallel))
    coll = next(c for c in level.children if isinstance(c, Collective))
    work = next(c for c in level.children if not isinstance(c, Collective))
    (cg, cd), (wg, wd) = sims[0].timeline[coll.name][0], sims[0].timeline[work.name][0]
    t_m, t_c = cd - cg, wd - wg
    ideal = t_c + (p - 1) * max(t_c, t_m)
    row = (
        f"| {p} | {m} x {k} x {n} | {sims[0].cycles} | {sims[0].predicted_cycles} | {sims[1].cycles} | "
        f"{sims[1].predicted_cycles} | {sims[1].cycles / sims[0].cycles:.2f}x | {t_c} | {t_m} | {ideal} | "
        f"{100 * ideal / sims[0].cycles:.1f} % |"
    )
    return row, sims


def plot(sims, path: Path) -> None:
    """PE 0's timelines: one row per controller at the root of each form."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(10, 4.5), sharex=True)
    for ax, sim, title in zip(axes, sims, ("collective matmul", "all-gather, then matmul")):
        root = sim.design.program.root.stages
        leaves = [c for s in root for c in (s.children if isinstance(s, Parallel) else (s,))]
        names = [c.name for c in leaves if c.name in sim.timeline]
        for y, name in enumerate(names):
            coll = name.startswith("coll")
            for go, done in sim.timeline[name]:
                ax.barh(y, done - go, left=go, color="tab:orange" if coll else "tab:blue")
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        ax.set_title(f"{title}: {sim.cycles} cycles (PE 0; orange: collective, blue: partial matmul)", fontsize=9)
    axes[-1].set_xlabel("cycle")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    header = [
        "| PEs | rows x k x cols per PE | collective matmul | predicted | all-gather, matmul | predicted | "
        "speedup | t_c | t_m | overlapped ideal | of ideal |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(header), flush=True)
    rows, first = [], None
    started = time.perf_counter()
    for case in CASES:
        row, sims = run(*case)
        first = first or sims
        print(row, flush=True)
        rows.append(row)
    plot(first, DOCS / "collective_matmul.png")
    text = [
        "# Collective matmul",
        "",
        "Written by `benchmarks/collective_matmul.py` (Verilator, every result bit-exact against the",
        "golden model, predicted cycles from the cycle model). An all-gather feeding a matmul on a ring",
        "of PEs, as p ring steps (each partial matmul beside the permute that passes its block on:",
        "`patterns/mesh/collective_matmul.py`) and as an all-gather followed by the matmul. t_c and t_m:",
        "one partial matmul's and one permute's cycles in PE 0's measured timeline; the overlapped ideal",
        "is t_c + (p - 1) max(t_c, t_m).",
        "",
        *header,
        *rows,
        "",
        "![PE 0's timeline](collective_matmul.png)",
        "",
    ]
    print(f"({time.perf_counter() - started:.0f} s)")
    (DOCS / "collective_matmul.md").write_text("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
