"""Simulation of a pipeline kernel (mesh/pipeline_hw.py): one Verilated mesh top, a DRAM model
per PE.

Every PE's DRAM gets the kernel's arguments whole; the testbench starts the mesh once and
waits for every PE's done (no Python per cycle); the result is read from the last PE's DRAM,
and every PE's DRAM is checked for writes outside its result and slots (mesh/simulate.py's
_read_results).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from hwgen_sim import harness, runner

from .. import progress
from ..dram import DramConfig
from ..errors import SimulationError, user_loc
from ..lang.signature import check_args, to_user
from ..waves import asked, check_reached, keep
from .pipeline_hw import elaborate
from .simulate import _DRAM_V, _read_results, timeout_cycles


def layout_of(design) -> harness.EntryLayout:
    return harness.EntryLayout(design.plan.arrays, design.component.word_bits, design.dram.addr_bits)


def simulate(
    kernel,
    args,
    dram: DramConfig | None = None,
    seed=None,
    what: str = "simulate",
    monitor=None,
    waves=False,
    out_dir="rtl_out",
):
    """`monitor`: True or a list of PE numbers whose micro-batch runs to record in
    `SimResult.timeline` ("pe<k>": [(start, done)] of each micro-batch on stage k).
    `waves`: as for a mesh (simulate.py); with `monitor`, the last watched PE's run's."""
    from ..simulate import SimResult, check_counts, dram_plusargs, run_testbench

    loc = user_loc()
    waves = asked(waves, loc)
    values = check_args(kernel.name, kernel.params, tuple(args))
    dram = dram or DramConfig()
    t0 = time.perf_counter()
    design = elaborate(kernel, dram, what)
    p = design.plan.p
    watched = _watched(p, monitor, loc)
    layout = layout_of(design)
    sources = {
        f"{design.name}.v": design.verilog,
        "hwgen_tb.v": harness.mesh_tb_verilog(design, layout),
        "hwgen_dram.v": _DRAM_V.read_text(),
    }
    try:
        with progress.following("verilator build"):
            build_dir, hit = runner.build(sources, waves=bool(waves), split=8 < p <= 32)
    except runner.ToolError as e:
        raise SimulationError(f"{e} (set HWGEN_VERBOSE=1 for the log)", loc, e.log) from None
    t1 = time.perf_counter()
    predicted = design.report["predicted_cycles"]
    timeout = timeout_cycles(predicted, dram)
    work = Path(tempfile.mkdtemp(prefix=f"hwgen-{kernel.name}-"))
    try:
        images = []
        for k in range(p):
            images.append(layout.image(values))
            harness.write_hex(work / f"dram_in.hex.{k}", images[-1], layout.word_bits)
        timeline = {}
        for k in watched or [None]:  # a run per watched PE (the testbench records one scope)
            config = {
                "inputs": {f"base_{a}": base for a, base in layout.bases.items()},
                "results": [],
                "timeout_cycles": timeout,
                "monitor": [design.components[k].pe.tree.name] if k is not None else [],
                "runs": 1,
            }
            if k is not None:  # stage k's root controller: one go and done per micro-batch
                config["scope"] = [f"pe{k}", "stage", "pe0"]
            plusargs = dram_plusargs(work, dram, seed)
            result = run_testbench(build_dir, work, config, plusargs, waves, loc, predicted)
            if result.get("timeout"):
                bits = result.get("pe_done", 0)
                stuck = [j for j in range(p) if not (bits >> j) & 1]
                raise SimulationError(
                    f"kernel '{kernel.name}' did not finish within {timeout} cycles (predicted {predicted}): "
                    f"the pipeline hangs; stage PE(s) {', '.join(map(str, stuck))} of {p} not done",
                    loc,
                )
            check_counts(kernel.name, result, loc)
            if k is not None:  # as the Top's start and done: a cycle before go, a cycle after done
                t = result["timeline"][config["monitor"][0]]
                timeline[f"pe{k}"] = [(g - 1, d + 1) for g, d in zip(t["go"], t["done"])]
        outs = _read_results(design, layout, images, work, loc)[-1]  # the last PE's
        check_reached(waves, result["cycles"], kernel.name, loc)
        waves_path = keep(kernel.name, work, out_dir) if waves else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    port = kernel.results[0]
    return SimResult(
        outputs=to_user(port, outs.reshape(port.shape)),
        cycles=result["cycles"],
        predicted_cycles=predicted,
        roofline_cycles=design.report["roofline_cycles"],
        build_seconds=t1 - t0,
        sim_seconds=time.perf_counter() - t1,
        run_seconds=result.get("run_seconds", 0.0),
        cache_hit=hit,
        design=design,
        timeline=timeline if monitor else None,
        waves=waves_path,
    )


def _watched(p: int, monitor, loc) -> list:
    from ..errors import HwgenError

    if not monitor:
        return []
    pes = list(range(p)) if monitor is True else monitor
    if not isinstance(pes, (list, tuple)) or any(not isinstance(k, int) or not 0 <= k < p for k in pes):
        raise HwgenError(
            f"monitor of a pipeline kernel is True or a list of PE numbers 0 .. {p - 1}, got {monitor!r}", loc
        )
    return list(pes)
