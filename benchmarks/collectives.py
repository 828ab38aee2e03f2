"""Collectives on mesh hardware: measured vs predicted cycles, the link bound, efficiency,
build time and simulation speed. Writes docs/collectives.md and docs/collectives.png.

    .venv/bin/python benchmarks/collectives.py [--quick] [--scale P,P,...]

Each case: a shard_map over a ring, torus or mesh whose body all-reduces its local block of n int32
words over every axis (hw.psum of a copy of the block, tiled by 256), verified bit-exact
against the golden model (which itself is checked against JAX in the tests). The collective's
cycles are its phases' (the collective's leaf in the program's root, as predicted, plus any
difference between the measured and predicted totals; the per-PE program copies the block to
the first phase's source array). Its bound is the link bound of an
all-reduce: each PE sends 2(p-1)/p * n words over its outgoing links (2 on a ring, 4 on a 2-D
torus), one word per cycle each; on a mesh without wraparound a corner PE receives as much over
its 2 links in. The scaling table reports the Verilator build and
simulation speed of the ring kernel by PE count (64 PEs with --scale 64). The table covers
the all-reduce; a second table runs every other collective on rings of 4 and 8: reduce-scatter
and all-gather (the same unit), a shift permute, a permutation of several distances (a
reversal) and an all-to-all (phases of one distance each, and a block copy), and a
reduce-scatter and an all-gather over both axes of a 4x4 torus; a third the all-reduce over
links of 1, 2 and 4 words a cycle.
"""

import math
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import hwgen as hw
from hwgen import int32

DOCS = Path(__file__).resolve().parent.parent / "docs"
SIZES = (1024, 4096, 16384)
# (shape, DRAM words per cycle, topology): tori also with beats of 8 words, which feed a unit
# of four engines (each torus tour both ways, every link busy); meshes without wraparound
MESHES = (
    ((4,), 4, "ring"),
    ((8,), 4, "ring"),
    ((2, 2), 4, "torus"),
    ((4, 4), 4, "torus"),
    ((2, 2), 8, "torus"),
    ((4, 4), 8, "torus"),
    ((4, 4), 4, "mesh"),
    ((4, 4), 8, "mesh"),
)
# links of more than one word per cycle: (shape, words per PE, DRAM words per cycle, link words)
WIDE = tuple(((8,), 4096, 16, w) for w in (1, 2, 4)) + tuple(((4, 4), 4096, 16, w) for w in (1, 2))
SCALE = ((2,), (4,), (8,), (16,))
SCALE_WORDS = 4096  # words per PE of the scaling runs: long enough to time the simulation


def kernel(shape, n, latency=8, topology="torus", lanes=1):
    """psum of each PE's block of n words over every axis of a ring (one axis), torus or mesh
    with links of `lanes` words a cycle."""
    names = ("x", "y")[: len(shape)]
    mesh = hw.Mesh(shape, names, topology="ring" if len(shape) == 1 else topology)
    p = math.prod(shape)
    link = hw.LinkConfig(latency=latency, words_per_cycle=lanes)

    @hw.kernel(mesh=mesh, link=link, tile={"i": min(n, 256)})
    def allreduce(a: hw.Array[int32, n * p]):
        def body(b):
            return hw.psum(hw.map(n, lambda i: b[i]), names if len(names) > 1 else names[0])

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P(names), out_specs=hw.P())(a)

    return allreduce


OTHERS = ("reduce_scatter", "all_gather", "shift", "reversal", "all_to_all")


def other_kernel(kind, shape, n, latency=8):
    """One collective of each PE's n words on a ring of shape[0] (a reduce-scatter or an
    all-gather also over both axes of a torus): the body computes b + 1 first."""
    names = ("x", "y")[: len(shape)]
    mesh = hw.Mesh(shape, names, topology="ring" if len(shape) == 1 else "torus")
    p = shape[0]
    group = names if len(names) > 1 else names[0]
    spec = hw.P() if kind == "all_gather" else hw.P(names)

    def collective(v):
        if kind == "reduce_scatter":
            return hw.psum_scatter(v, group, tiled=True)
        if kind == "all_gather":
            return hw.all_gather(v, group, tiled=True)
        if kind == "shift":
            return hw.ppermute(v, "x", [(i, (i + 1) % p) for i in range(p)])
        if kind == "reversal":
            return hw.ppermute(v, "x", [(i, p - 1 - i) for i in range(p)])
        return hw.all_to_all(v, "x", 0, 0, tiled=True)

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=latency), tile={"i": min(n, 256)})
    def moved(a: hw.Array[int32, n * math.prod(shape)]):
        def body(b):
            return collective(hw.map(n, lambda i: b[i] + 1))

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P(names), out_specs=spec)(a)

    return moved


def run(shape, n, rng, kind="all_reduce", words=4, topology="torus", lanes=1, repeats=1):
    """One case, verified; `repeats`: simulations of it, whose fastest gives the speed (a
    run of a few thousand cycles takes a few tenths of a second on a shared machine)."""
    p = math.prod(shape)
    k = kernel(shape, n, topology=topology, lanes=lanes) if kind == "all_reduce" else other_kernel(kind, shape, n)
    a = rng.integers(-(2**31), 2**31, size=n * p, dtype=np.int64).astype(np.int32)
    t = time.perf_counter()
    sim = k.verify(a, dram=hw.DramConfig(words_per_cycle=words))
    wall = time.perf_counter() - t
    dram = hw.DramConfig(words_per_cycle=words)
    seconds = min([sim.run_seconds] + [k.simulate(a, dram=dram).run_seconds for _ in range(repeats - 1)])
    r = sim.design.report
    # the collective's cycles: its leaf of the program's root (its phases), as measured
    leaves = [s["cycles"] for s in r["controllers"]["stages"] if "collective" in s]
    unit = sum(leaves) + sim.cycles - sim.predicted_cycles
    bound = r["link_bound_cycles"]
    phases = [ph for c in r["collectives"] for ph in c["phases"]]
    return {
        "p": p,
        "kind": kind,
        "mesh": f"ring of {p}" if len(shape) == 1 else f"{'x'.join(map(str, shape))} {topology}",
        "n": n,
        "phases": " + ".join(_phase_name(ph) for ph in phases),
        "words": words,
        "lanes": lanes,
        "dirs": max(ph.get("directions", 0) for ph in phases),
        "measured": sim.cycles,
        "predicted": sim.predicted_cycles,
        "unit": unit,
        "bound": bound,
        "efficiency": bound / unit,
        "build": sim.build_seconds,
        "cached": sim.cache_hit,
        "speed": sim.cycles / seconds if seconds else float("nan"),
        "wall": wall,
    }


def _phase_name(ph: dict) -> str:
    """e.g. "reduce-scatter x", or "reduce-scatter x,y" for a phase along both axes at once."""
    tours = " tours" if ph.get("tours") else ""
    return f"{ph['kind'].replace('_', '-')} {','.join(ph.get('axes', [ph['axis']]))}{tours}"


def table(rows, kinds=False) -> list:
    out = [
        ("| collective " if kinds else "")
        + "| PEs | words per PE | DRAM beat | phases | directions | measured | predicted | unit | link bound "
        "| efficiency |",
        ("|---" if kinds else "") + "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            (f"| {r['kind'].replace('_', '-')} " if kinds else "")
            + f"| {r['mesh']} | {r['n']} | {r['words']} | {r['phases']} | {r['dirs']} | {r['measured']} | "
            f"{r['predicted']} | {r['unit']} | {r['bound']} | {r['efficiency']:.1%} |"
        )
    return out


def wide_table(rows) -> list:
    out = [
        "| PEs | words per PE | DRAM beat | link words/cycle | phases | unit | link bound | efficiency |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['mesh']} | {r['n']} | {r['words']} | {r['lanes']} | {r['phases']} | {r['unit']} | "
            f"{r['bound']} | {r['efficiency']:.1%} |"
        )
    return out


@contextmanager
def fresh_builds():
    """Verilator builds in an empty cache (but for Verilator's runtime and cocotb's main, the
    same for every design), so the scaling rows time a whole build of each design."""
    from hwgen_sim import runner

    with tempfile.TemporaryDirectory() as tmp:
        saved = os.environ.get("HWGEN_CACHE")
        real = runner.cache_root()
        os.environ["HWGEN_CACHE"] = tmp
        runner.cache_root().mkdir(parents=True)
        for lib in real.glob("lib-*"):
            shutil.copytree(lib, runner.cache_root() / lib.name)
        try:
            yield
        finally:
            if saved is None:
                del os.environ["HWGEN_CACHE"]
            else:
                os.environ["HWGEN_CACHE"] = saved


def scale_table(rows) -> list:
    out = ["| PEs | Verilator build s | cycles | simulated cycles/s |", "|---|---|---|---|"]
    for r in rows:
        build = f"{r['build']:.0f}" + (" (cached)" if r["cached"] else "")
        out.append(f"| {r['p']} | {build} | {r['measured']} | {r['speed']:,.0f} |")
    return out


def chart(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for mesh, words in dict.fromkeys((r["mesh"], r["words"]) for r in rows):
        pts = [r for r in rows if (r["mesh"], r["words"]) == (mesh, words)]
        ax.plot([r["n"] for r in pts], [100 * r["efficiency"] for r in pts], "o-", label=f"{mesh}, beats of {words}")
    ax.axhline(95, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("words per PE")
    ax.set_ylabel("% of the link bound")
    ax.set_title("All-reduce units, int32, links of 1 word/cycle, latency 8")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv):
    quick = "--quick" in argv
    scale = SCALE
    for a in argv:
        if a.startswith("--scale"):
            scale = tuple((int(x),) for x in a.split("=", 1)[1].split(","))
    rng = np.random.default_rng(0)
    sizes = SIZES[:2] if quick else SIZES
    rows = []
    for shape, words, topology in MESHES:
        for n in sizes if len(shape) == 1 or not quick else sizes[:1]:
            rows.append(run(shape, n, rng, words=words, topology=topology))
            print(table(rows[-1:])[-1], flush=True)
    others = []
    for kind in OTHERS:
        for p in (4, 8):
            for n in sizes[:2]:
                others.append(run((p,), n, rng, kind))
                print(table(others[-1:], True)[-1], flush=True)
    for kind in ("reduce_scatter", "all_gather"):  # over both axes of a torus: its tours
        for n in sizes[:2]:
            others.append(run((4, 4), n, rng, kind, words=8))
            print(table(others[-1:], True)[-1], flush=True)
    wides = []
    for shape, n, words, lanes in WIDE[:3] if quick else WIDE:
        wides.append(run(shape, n, rng, words=words, lanes=lanes))
        print(wide_table(wides[-1:])[-1], flush=True)
    scaled = []
    with fresh_builds():
        for shape in scale:
            scaled.append(run(shape, SCALE_WORDS, rng, repeats=3))
            print(scale_table(scaled[-1:])[-1], flush=True)
    text = [
        "# Collectives on mesh hardware",
        "",
        "Written by `.venv/bin/python benchmarks/collectives.py` (see its docstring). A shard_map",
        "all-reduces each PE's block of int32 words over every mesh axis (`hw.psum`); links of 1 word per",
        "cycle and 8 cycles' latency, DRAM of 20 cycles' latency and beats of 4 or 8 words (each way).",
        "*unit* is the collective's cycles (its phases', from their first go to the last one's done); the",
        "*link bound*: each PE sends 2(p-1)/p x words over its outgoing links (2 on a ring, 4 on a torus),",
        "one word per cycle each. A torus all-reduce runs as one phase on the torus tours: two rings",
        "through all of its PEs that together use each link once (docs/mesh.md), each tour both ways",
        "round, on all 4 links (an all-reduce's four engines need DRAM beats of 4 words, a reduce-scatter's",
        "or all-gather's of 8). A mesh without wraparound runs three",
        "phases (reduce-scatter, all-reduce, all-gather), each half of the vector along x first and half",
        "along y first (x,y), each axis' ring one way round a zigzag (0, 2, 3, 1 on an axis of 4) whose",
        "hops span two links, each link carrying one hop; its corner PEs have one link in per axis, so",
        "its bound is twice a torus'. Every run is bit-exact against the golden model and predicted =",
        "measured.",
        "",
        *table(rows),
        "",
        "![efficiency](collectives.png)",
        "",
        "The other collectives on rings, and a reduce-scatter and an all-gather over both axes of a",
        "4x4 torus (on its tours, DRAM beats of 8 words), each PE's n words (an all-gather's result is",
        "p n words, a reduce-scatter's n / p). The link bound of a permutation or all-to-all: each block's hop-words",
        "over its shortest way, spread over the ring's 2p links. A permutation of several distances",
        "and an all-to-all run one ring permute per distance, one after another (and a block copy for",
        "the block a PE keeps), so they reach a fraction of their bound:",
        "",
        *table(others, True),
        "",
        "Links of more than one word per cycle (`hw.LinkConfig(words_per_cycle=w)`): the engines pop,",
        "combine and send w words a cycle, and the link bound is 1/w of a one-word link's; DRAM beats of",
        "16 words feed them:",
        "",
        *wide_table(wides),
        "",
        f"Build and simulation speed of the ring all-reduce ({SCALE_WORDS} words per PE; the build is",
        "Verilator's and the C++ compiler's, on 2 cores, of each design from scratch; simulated cycles/s is",
        "from start to done, the fastest of three runs):",
        "",
        *scale_table(scaled),
        "",
    ]
    (DOCS / "collectives.md").write_text("\n".join(text))
    chart(rows, DOCS / "collectives.png")
    bad = [r for r in rows + others + wides + scaled if r["predicted"] != r["measured"]]
    if bad:
        print(f"predicted != measured in {len(bad)} case(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
