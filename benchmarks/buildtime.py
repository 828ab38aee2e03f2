"""Build time against parallel lanes: gemm (128 x 128 x 128, tiles of 64) at par 1 .. 64.
`hwgen build` time is elaboration plus Verilog emission; the Verilator column is the C++ build
of the simulator (cached afterwards), shown for reference.

    .venv/bin/python benchmarks/buildtime.py [--verilator]
"""

import shutil
import sys
import time

from common import ROOT, load_app


def main(argv) -> int:
    app = load_app(ROOT / "patterns" / "gemm.py")
    with_verilator = "--verilator" in argv
    head = ["par", "hwgen build s", "Verilog KB"]
    if with_verilator:
        from hwgen_sim import harness, runner

        head.append("Verilator build s")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for par in (1, 4, 16, 64):
        kernel = app.gemm.with_schedule(par={"j": par} if par > 1 else {})
        t = time.perf_counter()
        design = kernel.elaborate()
        seconds = time.perf_counter() - t
        row = [str(par), f"{seconds:.2f}", f"{len(design.verilog) / 1024:.0f}"]
        if with_verilator:
            sources = {"gemm.v": design.verilog, "hwgen_tb.v": harness.tb_verilog(design),
                       "hwgen_dram.v": (Path(harness.__file__).with_name("dram.v")).read_text()}
            folder, cached = runner.build(sources)
            if cached:  # time a real build, not a cache hit
                shutil.rmtree(folder)
            t = time.perf_counter()
            runner.build(sources)
            row.append(f"{time.perf_counter() - t:.1f}")
        print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
