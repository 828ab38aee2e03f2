"""Synthesis of a mesh kernel on the ECP5-85k: the PE's Fmax (the mesh's: links are registers
between PEs) and its resources by part, for each nextpnr seed given. Writes
docs/mesh_synth.md.

    .venv/bin/python benchmarks/meshsynth.py [SEED ...]      (default: seeds 1 and 2)

The kernel: a 2x2 torus psum over both axes of each PE's block of 64 int32 words plus one
(one phase on the torus tours, each one way round), with the default links and DRAM beats. About 5 to 7 minutes a seed.
"""

import sys
import time

from common import ROOT

import hwgen as hw
from hwgen import int32
from hwgen.synth import synthesize

DOCS = ROOT / "docs"
N = 64  # words per PE
MESH = hw.Mesh((2, 2), ("x", "y"))


@hw.kernel(mesh=MESH, tile={"i": N})
def psum2(a: hw.Array[int32, 4 * N]):
    def body(b):
        return hw.psum(hw.map(N, lambda i: b[i] + 1), ("x", "y"))

    return hw.shard_map(body, mesh=MESH, in_specs=hw.P(("x", "y")), out_specs=hw.P())(a)


def main(argv) -> int:
    seeds = [int(a) for a in argv] or [1, 2]
    design = psum2.elaborate()
    phases = " + ".join(
        f"{p['kind'].replace('_', '-')} {','.join(p.get('axes', [p['axis']]))}{' tours' if p.get('tours') else ''}"
        for c in design.report["collectives"]
        for p in c["phases"]
    )
    header = [
        "| seed | Fmax MHz | PE LUT | PE FF | PE BRAM | collective units LUT / FF | links LUT / FF / BRAM | "
        "program LUT / FF | critical path from | s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(header), flush=True)
    rows = []
    for seed in seeds:
        started = time.perf_counter()
        r = synthesize(design, "ecp5", "85k", seed=seed)
        p = r["parts"]
        path = r.get("critical_path") or ["-"]
        row = (
            f"| {seed} | {r['fmax_mhz']} | {p['pe']['luts']} | {p['pe']['ffs']} | {p['pe']['brams']} | "
            f"{p['collective']['luts']} / {p['collective']['ffs']} | "
            f"{p['links']['luts']} / {p['links']['ffs']} / {p['links']['brams']} | "
            f"{p['program']['luts']} / {p['program']['ffs']} | `{path[0]}` | {time.perf_counter() - started:.0f} |"
        )
        print(row, flush=True)
        rows.append(row)
    text = [
        "# Mesh synthesis",
        "",
        'Written by `benchmarks/meshsynth.py`. `kernel.synthesize(target="ecp5", device="85k", seed=...)`',
        f"of a 2x2 torus psum over both axes of 64 int32 words per PE ({phases}): the PE module",
        "placed and routed in the usual harness, at a 100 MHz target; its Fmax is the mesh's (the",
        "links are registers between PEs). The parts are synthesized each on its own: the",
        f"collective unit{'s' if len(design.plan.rings) > 1 else ''}, the link senders and receivers, and the",
        "program with its DRAM arbiters",
        "(the PE less the others). The critical path starts at the net named.",
        "",
        *header,
        *rows,
        "",
    ]
    (DOCS / "mesh_synth.md").write_text("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
