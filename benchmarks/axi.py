"""Every app behind AXI (`wrap="axi"`): cycles on the native DRAM channel against cycles behind
the AXI4 master with cocotbext-axi's AxiRam as memory (free, and with each AXI channel stalling
in 20 % of cycles at random), every run checked against the golden model; with --synth, the
wrapper's own resources and the wrapped kernel's Fmax on the ECP5-85k beside the unwrapped
Fmax of docs/results.json (make bench). Writes docs/axi_results.md; rows are kept in
docs/axi_results.json, so naming apps re-measures only those.

    .venv/bin/python benchmarks/axi.py [APP ...] [--synth]

The native channel's DRAM model answers reads after 20 cycles; the AxiRam answers in about 2,
so behind AXI a latency-bound app can take fewer cycles than natively. Synthesis: 100 MHz
target, seed 1, the nextpnr router of the app's row in docs/results.json.
"""

import json
import sys
import time

from common import ROOT, app_paths, load_app

DOCS = ROOT / "docs"
ROWS = DOCS / "axi_results.json"
PAUSE = 0.2


def measure(path, synth: bool) -> dict:
    app = load_app(path)
    kernel = getattr(app, path.stem)
    args = app.inputs(0)
    native = kernel.verify(*args)
    started = time.perf_counter()
    free = kernel.verify(*args, wrap="axi")
    seconds = time.perf_counter() - started
    stalled = kernel.verify(*args, wrap="axi", pause=PAUSE, seed=1)
    row = {
        "app": path.stem,
        "native": native.cycles,
        "axi": free.cycles,
        "axi_paused": stalled.cycles,
        "axi_sim_seconds": round(seconds, 1),
        "data_bits": free.design.report["axi"]["data_bits"],
    }
    if synth:
        from hwgen.synth import synthesize

        plain = json.loads((DOCS / "results.json").read_text()).get(path.stem, {}).get("synth") or {}
        router = plain.get("router", "router1")
        s = synthesize(free.design, "ecp5", "85k", seed=1, pnr_options=("--router", router))
        row["synth"] = {
            "wrapper": s["parts"]["wrapper"],
            "fmax_wrapped": s["fmax_mhz"],
            "fmax_plain": plain.get("fmax_mhz"),
            "router": router,
            "seconds": s["seconds"],
        }
    return row


def page(rows: dict) -> str:
    lines = [
        "# Kernels behind AXI",
        "",
        "Written by `benchmarks/axi.py` (see its docstring). Each app at its default schedule: its",
        "cycles on the native DRAM channel (the DRAM model: 20 cycles' read latency), and behind the",
        "AXI wrapper with cocotbext-axi's `AxiRam` as memory (about 2 cycles' latency), free and with",
        f"every AXI channel stalling in {PAUSE:.0%} of cycles at random; every run bit-exact against the",
        "golden model. AXI cycles count from the kernel's start to its last write answered (CYCLES).",
        "Synthesis: ECP5-85k, 100 MHz target, seed 1; wrapper = the wrapped design's resources less",
        "the kernel's; Fmax unwrapped from docs/results.json (make bench). A `-`: not synthesized.",
        "",
        "| app | bus bits | native cycles | AXI cycles | AXI / native | AXI, 20 % stalls | wrapper LUT | wrapper FF | "
        "Fmax wrapped | Fmax unwrapped | change |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted(rows):
        r = rows[name]
        s = r.get("synth")
        synth = ["-"] * 5
        if s:
            change = (
                f"{100 * (s['fmax_wrapped'] / s['fmax_plain'] - 1):+.1f} %"
                if s["fmax_wrapped"] and s["fmax_plain"]
                else "-"
            )
            synth = [s["wrapper"]["luts"], s["wrapper"]["ffs"], s["fmax_wrapped"], s["fmax_plain"] or "-", change]
        lines.append(
            f"| {name} | {r['data_bits']} | {r['native']} | {r['axi']} | {r['axi'] / r['native']:.3f} | "
            f"{r['axi_paused']} | " + " | ".join(str(x) for x in synth) + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv) -> int:
    synth = "--synth" in argv
    names = [a for a in argv if not a.startswith("--")]
    rows = json.loads(ROWS.read_text()) if ROWS.exists() else {}
    for path in app_paths(names):
        t = time.perf_counter()
        row = measure(path, synth)
        if not synth and "synth" in rows.get(path.stem, {}):
            row["synth"] = rows[path.stem]["synth"]  # kept from its last synthesizing run
        rows[path.stem] = row
        ROWS.write_text(json.dumps(rows, indent=2) + "\n")
        print(f"{path.stem}: {json.dumps(row)} ({time.perf_counter() - t:.0f} s)", flush=True)
    text = page(rows)
    (DOCS / "axi_results.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
