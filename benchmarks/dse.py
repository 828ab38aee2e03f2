"""`hwgen dse` on gemm: the sweep's size and time on a local Dask cluster, its Pareto front,
and the fastest points of the front simulated (Verilator) and synthesized (Yosys and nextpnr)
beside the models' predictions. Writes docs/dse.md and docs/dse.png.

    .venv/bin/python benchmarks/dse.py [APP] [--limit=1000] [--verify=3] [--synth=3] [--place=1] [--device=ecp5-85k]

Synthesis of the front's fastest points (the largest designs) takes tens of minutes each with
place-and-route; `--place=0` runs Yosys only (`hwgen dse --no-place`): the resources, no Fmax.
"""

import json
import shutil
import subprocess
import sys
import time

from common import ROOT

from hwgen.dse import schedule_text

DOCS = ROOT / "docs"


def main(argv) -> int:
    opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--"))
    app = next((a for a in argv if not a.startswith("--")), "gemm")
    limit, device = int(opts.get("limit", 1000)), opts.get("device", "ecp5-85k")
    verify, synth = int(opts.get("verify", 3)), int(opts.get("synth", 3))
    place = opts.get("place", "1") != "0"
    out = ROOT / "rtl_out" / "dse-benchmark"
    cmd = [str(ROOT / ".venv" / "bin" / "hwgen"), "dse", str(ROOT / "patterns" / f"{app}.py"), "--device", device]
    cmd += ["--limit", str(limit), "--out", str(out)]
    started = time.perf_counter()
    subprocess.run(cmd, check=True)  # the sweep alone: its time
    sweep_s = time.perf_counter() - started
    started = time.perf_counter()
    checks = ["--verify", str(verify), "--synth", str(synth)] + ([] if place else ["--no-place"])
    run = subprocess.run(cmd + checks, check=True, capture_output=True, text=True)
    check_s = time.perf_counter() - started

    result = json.loads((out / app / "dse" / "dse.json").read_text())
    shutil.copyfile(out / app / "dse" / "dse.png", DOCS / "dse.png")
    front = [p for p in result["points"] if p["front"]]
    lines = [
        "# Design-space exploration",
        "",
        f"Written by `benchmarks/dse.py`: `hwgen dse patterns/{app}.py --device {device} --limit {limit}` "
        f"on a local Dask cluster of 2 worker processes, then again with `{' '.join(checks)}`"
        + ("" if place else " (Yosys only: resources, no place-and-route, so no Fmax)")
        + ".",
        "",
        f"- {len(result['points'])} schedules swept of about {result['total']} in the space, in "
        f"{sweep_s:.1f} s (the whole command, the cluster's start included); "
        f"{sum(p['fits'] for p in result['points'])} fit the device; {len(front)} on the Pareto front.",
        f'- `schedule="auto"` chose {schedule_text(result["auto"])}: {result["auto"]["predicted_cycles"]} cycles '
        f"in {result['auto']['seconds']} s ({result['auto']['tried']} schedules judged).",
        f"- Simulating the {verify} and synthesizing the {synth} fastest points of the front took {check_s:.0f} s.",
        "",
        "The front (predicted cycles; resources estimated, and synthesized where checked: "
        "estimate / synthesized, error):",
        "",
        "| schedule | cycles | measured | LUT | FF | BRAM | DSP | Fmax MHz |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in front:
        s = p.get("synthesized")
        cells = []
        for r in ("luts", "ffs", "brams", "dsps"):
            cells.append(f"{p[r]}" if not s else f"{p[r]} / {s[r]} ({100 * (p[r] - s[r]) / max(1, s[r]):+.0f} %)")
        fmax = s["fmax_mhz"] if s and s["fmax_mhz"] is not None else "-"
        lines.append(
            f"| {schedule_text(p)}{' (auto)' if p['auto'] else ''} | {p['cycles']} | {p.get('verified_cycles', '-')} | "
            + " | ".join(cells)
            + f" | {fmax} |"
        )
    lines += ["", "![cycles against LUTs and DSP blocks](dse.png)", ""]
    (DOCS / "dse.md").write_text("\n".join(lines))
    print(run.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
