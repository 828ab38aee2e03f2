"""Fmax against parallel lanes: gemm (128 x 128 x 128, tiles of 64) synthesized for the ECP5-85k
at several `par` values, in int32 (three DSP blocks a lane: 16-bit partial products) and int16
(one block a lane). A schedule that needs more than the device has is shown as such.

    .venv/bin/python benchmarks/fmaxpar.py [--jobs=N] [--freq=MHZ] [--seeds=1,2,3]
                                           [--router=router1|router2] [int32:PAR | int16:PAR ...]
    (default: int32:4 int32:16 int32:64 int16:4 int16:16 int16:64; nextpnr's target 125 MHz,
    seed 1, nextpnr's default router, router1)

Placement moves a large design's Fmax by more than 15 %, so `--seeds` routes each case once per
seed and prints each seed's Fmax and their mean; below the table, each case's mean against
par 4's of the same dtype.
"""

import re
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


def measure(job: tuple) -> dict:
    """Synthesize one case at one seed: its resources and Fmax, or why it does not fit."""
    from hwgen.synth import synthesize

    case, freq, seed, router = job
    name, par = case.split(":")
    kernel = gemm_of({"int32": int32, "int16": int16}[name]).with_schedule(par={"j": int(par)})
    t = time.perf_counter()
    try:
        r = synthesize(kernel.elaborate(), "ecp5", "85k", freq=freq, seed=seed, pnr_options=("--router", router))
    except hw.HwgenError as e:  # a fit error: what the device lacks
        short = e.message.split(": it needs ", 1)[-1].split("; choose")[0]
        return {"fit": f"does not fit: needs {short}"}
    return {k: r[k] for k in ("luts", "ffs", "brams", "dsps", "fmax_mhz")} | {"seconds": time.perf_counter() - t}


def _option(argv, name: str, default: str) -> str:
    return next((a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")), default)


def _row(case: str, runs: list) -> tuple:
    """A table row for one case's runs (one per seed), and its mean Fmax (None if it does not fit)."""
    name, par = case.split(":")
    if "fit" in runs[0]:
        return [name, par] + ["-"] * (5 + len(runs)) + [runs[0]["fit"]], None
    mean = sum(r["fmax_mhz"] for r in runs) / len(runs)
    first = runs[0]
    return (
        [name, par, str(first["luts"]), str(first["ffs"]), str(first["brams"]), str(first["dsps"])]
        + [f"{r['fmax_mhz']:.1f}" for r in runs]
        + [f"{mean:.1f}", f"{sum(r['seconds'] for r in runs):.0f} s"]
    ), mean


USAGE = "fmaxpar.py [--jobs=N] [--freq=MHZ] [--seeds=S,S,...] [--router=router1|router2] [int16:PAR | int32:PAR ...]"


def main(argv) -> int:
    bad = f"error: usage: {USAGE}; got: {' '.join(argv)}"
    try:
        jobs = int(_option(argv, "jobs", "1"))
        freq = float(_option(argv, "freq", "125"))
        seeds = [int(x) for x in _option(argv, "seeds", "1").split(",")]
    except ValueError:
        print(bad, file=sys.stderr)
        return 1
    router = _option(argv, "router", "router1")
    cases = [a for a in argv if not a.startswith("--")] or [
        "int32:4",
        "int32:16",
        "int32:64",
        "int16:4",
        "int16:16",
        "int16:64",
    ]
    wrong = [c for c in cases if not re.fullmatch(r"(int16|int32):[1-9][0-9]*", c)]
    if wrong or router not in ("router1", "router2") or jobs < 1 or freq <= 0:
        print(bad, file=sys.stderr)
        return 1
    head = ["dtype", "par", "LUT", "FF", "BRAM", "DSP"] + [f"Fmax seed {s}" for s in seeds] + ["mean MHz", "synthesis"]
    print(f"ECP5-85k, {freq:g} MHz target, {router}")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head), flush=True)
    means = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        runs = list(pool.map(measure, [(c, freq, s, router) for c in cases for s in seeds]))
    for n, case in enumerate(cases):
        row, means[case] = _row(case, runs[n * len(seeds) : (n + 1) * len(seeds)])
        print("| " + " | ".join(row) + " |", flush=True)
    for case, mean in means.items():
        base = means.get(case.split(":")[0] + ":4")
        if mean is not None and base and not case.endswith(":4"):
            print(
                f"{case}: mean Fmax {100 * (base - mean) / base:.1f} % below par 4's "
                f"({mean:.1f} against {base:.1f} MHz)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
