"""The halo-exchange stencil on 1, 4 and 16 PEs: measured and predicted cycles, the roofline,
parallel efficiency (one PE's cycles / (PEs x cycles)), and the halo exchange's share of the
time. Writes docs/stencil.md and docs/stencil.png.

    .venv/bin/python benchmarks/stencil.py [N]      (the grid's side, default 512)

Each case is patterns/mesh/halo_stencil.py's `build(px, py, n)`: an n x n int32 grid in blocks
over a px x py torus (1 x 1: one PE, zero halos, no link), verified bit-exact against the
numpy reference. From the cycle model's report of PE 0 (equal to the measurement, checked):
`copy`, the level in which the block is copied into the padded block (the four halo
permutes run beside it, one after another: `permutes`, their cycles); `stencil`, the
stencil's loop; `halo`, everything else: the edges copied out for the permutes before that
level, and the received edges (zeros on one PE) stored into the padded block after it.
"""

import sys
import time
from pathlib import Path

import numpy as np
from common import ROOT, load_app

from hwgen.loops import Collective, Load, Store, walk

DOCS = ROOT / "docs"
APP = load_app(ROOT / "patterns" / "mesh" / "halo_stencil.py")
MESHES = ((1, 1), (2, 2), (4, 4))


def copies_the_block(loop) -> bool:
    """Whether `loop` loads the grid's block and stores it into the padded block."""
    stages = getattr(loop, "stages", ())
    return any(isinstance(s, Load) and s.dram.name == "a" for s in stages) and any(
        isinstance(s, Store) and s.dram.name.startswith("joined") for s in stages
    )


def parts(sim) -> dict:
    """PE 0's cycles by part: the copy of the block alone (`copy`), the stencil's loop, the
    permutes, and what the halo exchange adds to the run (`halo`: everything else, the
    exchange's share of the DRAM channel beside the copy included)."""
    root = sim.design.program.root.stages
    report = sim.design.report["controllers"]["stages"]
    level = next(j for j, s in enumerate(root) if any(copies_the_block(c) for c in walk(s)))
    kids = getattr(root[level], "children", (root[level],))
    entries = report[level].get("parallel", [report[level]])
    alone = next(e["cycles"] for k, e in zip(kids, entries) if any(copies_the_block(c) for c in walk(k)))
    permutes = sum(c["cycles"] for s in report for c in _leaves(s) if c.get("collective"))
    total = sim.cycles
    out = {"level": report[level]["cycles"] + 1, "copy": alone + 1, "stencil": report[-1]["cycles"] + 1}
    out["permutes"] = permutes
    out["halo"] = total - out["copy"] - out["stencil"]
    assert not any(isinstance(c, Collective) for c in walk(root[-1]))  # the stencil comes last
    return out


def _leaves(entry):
    yield entry
    for c in entry.get("stages", []) + entry.get("parallel", []):
        yield from _leaves(c)


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    header = [
        "| PEs | mesh | block per PE | cycles | predicted | roofline | of roofline | parallel efficiency | "
        "copy alone | copy level | permutes | stencil | halo cost | halo share |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(header), flush=True)
    rows, bars, one = [], [], None
    started = time.perf_counter()
    (a,) = APP.inputs(0, n)
    want = APP.reference(a)
    for px, py in MESHES:
        kernel = APP.build(px, py, n)
        sim = kernel.simulate(a)
        np.testing.assert_array_equal(sim.outputs, want)
        assert sim.cycles == sim.predicted_cycles
        block = (n // px, n // py)
        p = parts(sim)
        one = one or sim.cycles
        eff = one / (px * py * sim.cycles)
        roof = sim.design.report["roofline_cycles"]
        row = (
            f"| {px * py} | {px}x{py} | {block[0]}x{block[1]} | {sim.cycles} | {sim.predicted_cycles} | {roof} | "
            f"{100 * roof / sim.cycles:.1f} % | {100 * eff:.1f} % | {p['copy']} | {p['level']} | {p['permutes']} | "
            f"{p['stencil']} | {p['halo']} | {100 * p['halo'] / sim.cycles:.1f} % |"
        )
        print(row, flush=True)
        rows.append(row)
        bars.append((px * py, p, sim.cycles))
    plot(bars, one, DOCS / "stencil.png")
    text = [
        "# Halo-exchange stencil",
        "",
        "Written by `benchmarks/stencil.py` (Verilator; every result bit-exact against numpy, every",
        f"measured cycle count equal to the predicted one). A 5-point stencil over a {n}x{n} int32 grid",
        "in blocks over a torus (`patterns/mesh/halo_stencil.py`): each PE copies its edges out,",
        "exchanges them with its neighbours (four `hw.ppermute`s, one after another on the collective",
        "unit) and stores the received edges into the padded block, all beside the copy of its block",
        "into the padded block, then runs the stencil over it. Parallel efficiency is one PE's cycles",
        "/ (PEs x cycles); the columns after it split PE 0's cycles: the copy of the block with the",
        "DRAM channel to itself, the level it runs in (the exchange beside it, sharing that channel),",
        "the permutes' own cycles, the stencil's loop, and what the halo exchange adds to the run",
        "(cycles less the copy alone and the stencil: the exchange's share of the channel, and on one",
        "PE the zero halos' stores).",
        "The roofline is the PE program's: each of its DRAM arrays moved once at 4 words a cycle, the",
        "padded block read as well as the grid (the stencil alone, reading the grid once, would have",
        "half of it).",
        "",
        *header,
        *rows,
        "",
        "![cycles per PE by part](stencil.png)",
        "",
    ]
    print(f"({time.perf_counter() - started:.0f} s)")
    (DOCS / "stencil.md").write_text("\n".join(text))
    return 0


def plot(bars, one, path: Path) -> None:
    """Per PE count, PE 0's cycles by part, against one PE's cycles / PEs (the ideal)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [f"{pes} PE" + ("s" if pes > 1 else "") for pes, _, _ in bars]
    bottom = np.zeros(len(bars))
    for part, color in (("copy", "tab:blue"), ("stencil", "tab:green"), ("halo", "tab:orange")):
        values = np.array([p[part] / (one / pes) for pes, p, _ in bars])
        ax.bar(labels, values, bottom=bottom, color=color, label=part)
        bottom += values
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label="one PE / PEs")
    ax.set_ylabel("cycles / (one PE's cycles / PEs)")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("halo stencil: PE 0's cycles by part", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
