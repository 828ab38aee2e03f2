"""Sharded matmuls written for whole arrays and partitioned by hwgen, on 1, 4 and 16 PEs (and,
with --64, an 8x8 torus), and the training step with its weight update replicated or sharded.
Writes docs/sharding.md and docs/sharding.png.

    .venv/bin/python benchmarks/sharding.py [--64]

Every case is simulated in Verilator, bit-exact against numpy, and its cycles checked equal to
the prediction. A 256x256x256 int32 `a @ b` (tiles of 64, or of the contraction's share per PE
when smaller; 16 lanes) under three placements:

- rows x columns: a's rows over x, b's columns over y; every PE computes its block of c alone;
- contracted: the contraction split over (x, y); partial products reduce-scattered by rows;
- gathered: a's rows and b's columns over (x, y), c's columns too: a is all-gathered into the
  contraction; gathered over x: a's rows over x only, so the gather runs along one axis, where
  hwgen can build it as collective matmul (ppermutes overlapped with partial matmuls) when the
  cycle model finds that faster, and the plain gather for comparison.

The 4x4 contracted and gathered placements run also with DRAM beats of 8 words, where their
collectives over both axes run both ways round the torus tours. Parallel efficiency is the
one-PE kernel's cycles (the same `a @ b`, no mesh, the same DRAM beat) over PEs x
cycles. The link bound is the report's: the fewest cycles the collectives' words need on
the links. Collective matmul against all-gather-then-matmul at other shapes is
benchmarks/collective_matmul.py's.
"""

import sys
import time
from pathlib import Path

import numpy as np
from common import ROOT, load_app

import hwgen as hw
from hwgen import int32
from hwgen.dram import DramConfig

DOCS = ROOT / "docs"
N = 256
LANES = 16
PLACEMENTS = {
    "rows x columns": lambda x, y: ((hw.P(x, None), hw.P(None, y)), hw.P(x, y)),
    "contracted": lambda x, y: ((hw.P(None, (x, y)), hw.P((x, y), None)), hw.P((y, x), None)),
    "gathered": lambda x, y: ((hw.P((x, y), None), hw.P(None, (x, y))), hw.P(None, (x, y))),
    "gathered over x": lambda x, y: ((hw.P(x, None), hw.P(None, (x, y))), hw.P(None, (x, y))),
}


def gemm(mesh=None, placement=None, collective_matmul="auto"):
    """`a @ b` on `mesh` placed by `placement` (a name of PLACEMENTS), or on one PE."""
    options, local = {}, {"@i": N, "@j": N, "@k": N}  # each PE's extents of the matmul's loops
    if mesh is not None:
        x, y = mesh.axis_names if len(mesh.axis_names) == 2 else (mesh.axis_names[0], None)
        (ins, out) = PLACEMENTS[placement](x, y) if y else _ring(placement, x)
        options = dict(mesh=mesh, in_shardings=ins, out_shardings=out, link=hw.LinkConfig(latency=8))
        p, px = mesh.size, mesh.axis_sizes[0]
        split = {
            "rows x columns": {"@i": px, "@j": p // px},
            "contracted": {"@k": p},
            "gathered": {"@j": p},
            "gathered over x": {"@j": p},
        }[placement]
        local.update((n, N // parts) for n, parts in split.items())
        if placement.startswith("gathered"):
            options["collective_matmul"] = collective_matmul
    tile = {n: min(64, e) for n, e in local.items()}

    @hw.kernel(tile=tile, par={"@j": LANES}, **options)
    def sharded_gemm(a: hw.Array[int32, N, N], b: hw.Array[int32, N, N]):
        return a @ b

    return sharded_gemm


def _ring(placement, x):
    """The placements on a one-axis mesh."""
    return {
        "rows x columns": ((hw.P(x, None), hw.P()), hw.P(x, None)),
        "contracted": ((hw.P(None, x), hw.P(x, None)), hw.P(x, None)),
        "gathered": ((hw.P(x, None), hw.P(None, x)), hw.P(None, x)),
    }[placement]


def run(kernel, a, b, want, words=4):
    sim = kernel.simulate(a, b, dram=DramConfig(words_per_cycle=words))
    np.testing.assert_array_equal(sim.outputs, want)
    assert sim.cycles == sim.predicted_cycles, (sim.cycles, sim.predicted_cycles)
    return sim


def main() -> int:
    big = "--64" in sys.argv[1:]
    rng = np.random.default_rng(0)
    a = rng.integers(-1000, 1000, (N, N)).astype(np.int32)
    b = rng.integers(-1000, 1000, (N, N)).astype(np.int32)
    want = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    header = [
        "| PEs | mesh | placement | DRAM beat | collectives | cycles | predicted | link bound | parallel efficiency "
        "| build s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(header), flush=True)
    started = time.perf_counter()
    rows, points = [], []
    ones = {}
    for words in (4, 8):
        one = ones[words] = run(gemm(), a, b, want, words)
        rows.append(
            f"| 1 | - | - | {words} | - | {one.cycles} | {one.predicted_cycles} | 0 | 100.0 % "
            f"| {one.build_seconds:.0f} |"
        )
        print(rows[-1], flush=True)
    cases = [((4,), "ring", p, "auto", 4) for p in PLACEMENTS if p != "gathered over x"]
    cases += [((4,), "ring", "gathered", False, 4)]
    for shape in ((2, 2), (4, 4)):
        cases += [(shape, "torus", p, "auto", 4) for p in PLACEMENTS]
        cases += [(shape, "torus", "gathered over x", False, 4)]
    cases += [((4, 4), "torus", p, "auto", 8) for p in ("contracted", "gathered")]
    if big:
        cases += [((8, 8), "torus", p, "auto", 4) for p in ("rows x columns", "contracted")]
    for shape, topology, placement, mode, words in cases:
        names = ("x", "y")[: len(shape)]
        mesh = hw.Mesh(shape, names, topology=topology)
        sim = run(gemm(mesh, placement, mode), a, b, want, words)
        report = sim.design.report
        kinds = [c["kind"] for c in report["collectives"]]
        what = placement + (" (collective matmul)" if "permute" in kinds else "")
        what += " (collective matmul off)" if mode is False else ""
        shown = ", ".join(f"{k} x{kinds.count(k)}" if kinds.count(k) > 1 else k for k in dict.fromkeys(kinds))
        eff = ones[words].cycles / (mesh.size * sim.cycles)
        row = (
            f"| {mesh.size} | {'x'.join(map(str, shape))} {topology} | {what} | {words} | {shown or 'none'} "
            f"| {sim.cycles} | "
            f"{sim.predicted_cycles} | {report['link_bound_cycles']} | {100 * eff:.1f} % | {sim.build_seconds:.0f} |"
        )
        print(row, flush=True)
        rows.append(row)
        if words == 4:
            points.append((mesh.size, placement, mode, eff, topology))
    step = training_step()
    plot(points, DOCS / "sharding.png")
    text = [
        "# Sharded matmuls and the training step",
        "",
        "Written by `benchmarks/sharding.py` (Verilator; every result bit-exact against numpy,",
        "every measured cycle count equal to the predicted one). A 256x256x256 int32 `a @ b`",
        "written for whole arrays, placed by `in_shardings` / `out_shardings` and partitioned by",
        "hwgen (see [mesh.md](mesh.md)): *rows x columns* needs no communication; *contracted*",
        "splits the contraction and reduce-scatters the partial products; *gathered* all-gathers",
        "a's rows into the contraction (*gathered over x*: along one axis, which hwgen builds as",
        "collective matmul when the cycle model finds that faster; the rows marked off force the",
        "plain gather). Tiles of 64 (or",
        "the contraction's share per PE when smaller), 16 lanes, links of one word a cycle and 8",
        "cycles, DRAM beats of 4 words (8 in the rows that say so). A collective over both axes of",
        "a square torus runs on its torus tours: one way round with beats of 4 words, both ways, on",
        "all four links, with 8. Parallel efficiency is the one-PE kernel's cycles (with the same DRAM beat) over",
        "PEs x cycles; the link bound is the fewest cycles the collectives' words need on the links.",
        "",
        *header,
        *rows,
        "",
        "## The training step: weight update replicated or sharded",
        "",
        "`patterns/mesh/weight_update.py` on a ring of 4: a linear model's step (int32) whose update is",
        "sharded (the weights all-gathered, the gradient reduce-scattered, each PE updating its",
        "quarter, the quarters all-gathered) or replicated (the gradient all-reduced, every PE",
        "updating every weight), written per PE (`hw.shard_map`) and for whole arrays (the",
        "weights' placement alone chooses); `patterns/mesh/logreg_step.py`, a logistic-regression",
        "step in fixed point written for whole arrays. Link words per PE are those each PE sends by the",
        "collectives' plans: (p - 1) / p of each vector, twice that for an all-reduce. Update cycles:",
        "the PE's work after the gradient's collective (the weights read and written, all of them or",
        "a quarter), up to the next collective. The weight-update step also runs with 1024 and 4096",
        "weights: with 64, the update is mostly the fixed latency of its loads; with more, the",
        "reads and writes of the weights, of which a sharded update moves a quarter.",
        "",
        *step,
        "",
        "![parallel efficiency by placement](sharding.png)",
        "",
    ]
    print(f"({time.perf_counter() - started:.0f} s)")
    (DOCS / "sharding.md").write_text("\n".join(text))
    return 0


STEPS = (  # the training steps: (app, weights or None for the app's own, [(kernel, update)])
    (
        "weight_update",
        None,
        [
            ("weight_update", "sharded"),
            ("replicated", "replicated"),
            ("global_sharded", "sharded"),
            ("global_replicated", "replicated"),
        ],
    ),
    *(("weight_update", f, [("weight_update", "sharded"), ("replicated", "replicated")]) for f in (1024, 4096)),
    ("logreg_step", None, [("logreg_step", "sharded"), ("replicated", "replicated")]),
)


def training_step() -> list:
    lines = [
        "| app | kernel | weights | update | collectives | link words per PE | update cycles | cycles | predicted |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for stem, features, kernels in STEPS:
        app = load_app(ROOT / "patterns" / "mesh" / f"{stem}.py")
        built = app.kernels(features) if features else {}
        args = app.inputs(0, features) if features else app.inputs(0)
        for name, update in kernels:
            kernel = built.get(name) or getattr(app, name)
            sim = kernel.verify(*args)  # bit-exact against the golden model
            assert sim.cycles == sim.predicted_cycles
            colls = sim.design.report["collectives"]
            words = sum(_sent(c, app.P) for c in colls)
            line = (
                f"| {stem} | {name} | {features or app.D} | {update} | {', '.join(c['kind'] for c in colls)} | "
                f"{words} | {_update_cycles(sim.design.report)} | {sim.cycles} | {sim.predicted_cycles} |"
            )
            print(line, flush=True)
            lines.append(line)
    return lines


def _update_cycles(report: dict) -> int:
    """The cycles of the update: the PE's root stages after the gradient's collective (its
    last reduce-scatter or all-reduce) up to the next collective (the model's, which equal
    the measured ones here)."""
    stages = report["controllers"]["stages"]
    kinds = [[ph["collective"] for ph in s.get("collective", [])] for s in stages]
    last = max(k for k, ks in enumerate(kinds) if {"reduce_scatter", "all_reduce"} & set(ks))
    after = []
    for s in stages[last + 1 :]:
        if "collective" in s:
            break
        after.append(s["cycles"])
    return sum(after)


def _sent(coll: dict, p: int) -> int:
    """Words a PE sends in collective `coll` (its report entry) on a ring of p: (p - 1) / p of
    the vector for a reduce-scatter or all-gather, twice that for an all-reduce."""
    n = coll["phases"][0]["words"]
    share = n * (p - 1) // p
    return 2 * share if coll["kind"] == "all_reduce" else share


def plot(points, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for placement, marker in zip(PLACEMENTS, "osDv"):  # the tori, from one PE
        on = [(pes, e) for pes, pl, mode, e, top in points if pl == placement and top == "torus" and mode == "auto"]
        ax.plot([1] + [p for p, _ in on], [100] + [100 * e for _, e in on], marker=marker, label=placement)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("PEs")
    ax.set_ylabel("parallel efficiency (%)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8)
    ax.set_title("256x256x256 int32 a @ b on tori, partitioned by its shardings", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
