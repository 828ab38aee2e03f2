"""Build time of every app: `hwgen build` seconds (`kernel.elaborate()`: lowering, the
Amaranth design, Verilog through Yosys, the report; the median of three builds in this
process) and the Verilog's size, for each app in patterns/ at its default schedule, then gemm
(128 x 128 x 128, tiles of 64) at par 1, 4, 16 and 64. `--verilator` adds a column:
Verilator's C++ build of the simulator (a real build: a cached one is removed first), shown
for reference.

    .venv/bin/python benchmarks/buildtime.py [APP ...] [--verilator]

Naming apps (patterns/APP.py, or gemm1 / gemm4 / gemm16 / gemm64) measures only those.
"""

import shutil
import statistics
import sys
import time
from pathlib import Path

from common import ROOT, app_paths, load_app

REPEATS = 3
GEMM_PARS = (1, 4, 16, 64)


def cases(names) -> list:
    """(row name, kernel) for every app's default kernel, then gemm at each par."""
    rows = []
    for path in app_paths():
        if not names or path.stem in names:
            rows.append((path.stem, getattr(load_app(path), path.stem)))
    gemm = load_app(ROOT / "patterns" / "gemm.py").gemm
    for par in GEMM_PARS:
        if not names or f"gemm{par}" in names:
            rows.append((f"gemm par {par}", gemm.with_schedule(par={"j": par} if par > 1 else {})))
    return rows


def build_seconds(kernel) -> tuple:
    """(median seconds of REPEATS elaborations, the last design)."""
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        design = kernel.elaborate()
        times.append(time.perf_counter() - t)
    return statistics.median(times), design


def verilator_seconds(design) -> float:
    from hwgen_sim import harness, runner

    sources = {
        f"{design.name}.v": design.verilog,
        "hwgen_tb.v": harness.tb_verilog(design),
        "hwgen_dram.v": Path(harness.__file__).with_name("dram.v").read_text(),
    }
    folder, cached = runner.build(sources)
    if cached:  # time a real build, not a cache hit
        shutil.rmtree(folder)
    t = time.perf_counter()
    runner.build(sources)
    return time.perf_counter() - t


def main(argv) -> int:
    with_verilator = "--verilator" in argv
    names = [a for a in argv if not a.startswith("--")]
    known = [p.stem for p in app_paths()] + [f"gemm{par}" for par in GEMM_PARS]
    unknown = [n for n in names if n not in known]
    unknown += [a for a in argv if a.startswith("--") and a != "--verilator"]
    if unknown:
        print(f"usage: buildtime.py [APP ...] [--verilator]; unknown: {' '.join(unknown)} (APP: {' '.join(known)})")
        return 2
    rows = cases(names)
    head = ["app", f"hwgen build s (median of {REPEATS})", "Verilog KB"]
    if with_verilator:
        head.append("Verilator build s")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, kernel in rows:
        seconds, design = build_seconds(kernel)
        row = [name, f"{seconds:.2f}", f"{len(design.verilog) / 1024:.0f}"]
        if with_verilator:
            row.append(f"{verilator_seconds(design):.1f}")
        print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
