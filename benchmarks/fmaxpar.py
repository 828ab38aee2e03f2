"""Fmax against parallel lanes: gemm (128 x 128 x 128, tiles of 64) synthesized for the ECP5-85k
at several `par` values, in int32 (three DSP blocks a lane: 16-bit partial products) and int16
(one block a lane). A schedule that needs more than the device has is shown as such.

    .venv/bin/python benchmarks/fmaxpar.py [--jobs=N] [--freq=MHZ] [int32:PAR | int16:PAR ...]
    (default: int32:4 int32:16 int32:64 int16:4 int16:16 int16:64; nextpnr's target 125 MHz)
"""

import sys
import time
from concurrent.futures import ProcessPoolExecutor

import hwgen as hw
from hwgen import int16, int32

M = K = N = 128


def gemm_of(dtype):
    @hw.kernel(tile={"i": 64, "j": 64, "k": 64})
    def gemm(a: hw.Array[dtype, M, K], b: hw.Array[dtype, K, N]) -> hw.Array[dtype, M, N]:
        return hw.map((M, N), lambda i, j: hw.sum(K, lambda k: a[i, k] * b[k, j]))

    return gemm


def measure(job: tuple) -> list:
    from hwgen.synth import synthesize

    case, freq = job
    name, par = case.split(":")
    kernel = gemm_of({"int32": int32, "int16": int16}[name]).with_schedule(par={"j": int(par)})
    t = time.perf_counter()
    try:
        r = synthesize(kernel.elaborate(), "ecp5", "85k", freq=freq)
    except hw.HwgenError as e:  # a fit error: what the device lacks
        short = e.message.split(": it needs ", 1)[-1].split("; choose")[0]
        return [name, par, "-", "-", "-", "-", "-", f"does not fit: needs {short}"]
    return [name, par, str(r["luts"]), str(r["ffs"]), str(r["brams"]), str(r["dsps"]),
            f"{r['fmax_mhz']:.1f}", f"{time.perf_counter() - t:.0f} s"]


def main(argv) -> int:
    jobs = next((int(a.split("=", 1)[1]) for a in argv if a.startswith("--jobs=")), 1)
    freq = next((float(a.split("=", 1)[1]) for a in argv if a.startswith("--freq=")), 125.0)
    cases = [a for a in argv if not a.startswith("--")] or [
        "int32:4", "int32:16", "int32:64", "int16:4", "int16:16", "int16:64"]
    head = ["dtype", "par", "LUT", "FF", "BRAM", "DSP", "Fmax MHz", "synthesis"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head), flush=True)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for row in pool.map(measure, [(c, freq) for c in cases]):
            print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
