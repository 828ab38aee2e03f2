"""Simulation of a kernel behind AXI (`kernel.simulate(..., wrap="axi")`): the wrapped Verilog
in Verilator, its memory cocotbext-axi's `AxiRam`, its control port driven through the
register map by cocotbext-axi's `AxiLiteMaster` (sim/axi_testbench.py).

The arrays sit in the RAM where the native simulation's DRAM model puts them (sim/harness.py
`Layout`), at byte address = word address x word bytes; outputs are read back from the RAM
and checked to be the only bytes written. `pause` (0 to 1) stalls each of the RAM's five AXI
channels in that share of cycles, at random (`seed`): cycles change, results must not.

`cycles` is the wrapper's CYCLES register (the kernel's start to its last write answered). The
AXI RAM answers in a cycle or two, not after the DRAM model's latency, so these cycles are not
the cycle model's; `predicted_cycles` is still the native channel's prediction, for comparison.
Python runs per cycle here (the RAM is a cocotb coroutine): about 10k cycles a second, fine for
tests and small inputs.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from hwgen_sim import harness, runner
from hwgen_sim.axi_harness import axi_tb_verilog
from hwgen_sim.axi_kernel import kernel_info

from .build import elaborate
from .dram import DramConfig
from .errors import HwgenError, SimulationError
from .simulate import SimResult, _unsigned, check_flags, outputs_from


def simulate_axi(kernel, values: dict, dram, seed, pause: float, loc) -> SimResult:
    """Run `kernel` wrapped in AXI on checked argument `values`; see the module doc."""
    if isinstance(pause, bool) or not isinstance(pause, (int, float)) or not 0 <= pause < 1:
        raise HwgenError(
            f"pause must be a number in [0, 1): the share of cycles each AXI channel stalls, got {pause!r}", loc
        )
    if dram is not None and (dram.jitter or dram.latency != DramConfig.latency):
        raise HwgenError(
            "wrap='axi' takes the memory's timing from the AXI slave (cocotbext-axi's AxiRam): leave "
            "DramConfig's latency and jitter at their defaults, and stall the AXI channels with pause=",
            loc,
        )
    t0 = time.perf_counter()
    design = elaborate(kernel, dram, wrap="axi")
    build_dir, hit = build_simulator(design, loc)
    t1 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix=f"hwgen-{kernel.name}-axi-"))
    try:
        layout = harness.Layout(design)
        image = layout.image(values)
        nbytes = design.component.word_bytes
        (work / "image.bin").write_bytes(_to_bytes(image, nbytes))
        config = _config(design, values, work, pause, seed)
        (work / "config.json").write_text(json.dumps(config))
        (work / "kernel.json").write_text(json.dumps(kernel_info(design, layout)))
        env = {
            "HWGEN_SIM_CONFIG": str(work / "config.json"),
            "HWGEN_SIM_RESULT": str(work / "result.json"),
            "HWGEN_AXI_KERNEL": str(work / "kernel.json"),
        }
        try:
            runner.run(build_dir, work, [], env, test="hwgen_sim.axi_testbench")
        except runner.ToolError as e:
            raise SimulationError(f"{e} (set HWGEN_VERBOSE=1 for the log)", loc, e.log) from None
        result = _result(design, work, config, values, loc)
        after = _from_bytes((work / "dump.bin").read_bytes(), nbytes)
        outs = outputs_from(design, layout, image, after, result["results"], loc, "memory behind AXI")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    t2 = time.perf_counter()
    return SimResult(
        outputs=outs[0] if len(outs) == 1 else tuple(outs),
        cycles=result["cycles"],
        predicted_cycles=design.report["predicted_cycles"],
        roofline_cycles=design.report["roofline_cycles"],
        waves=None,
        timeline=None,
        build_seconds=t1 - t0,
        sim_seconds=t2 - t1,
        run_seconds=0.0,
        cache_hit=hit,
        design=design,
    )


def build_simulator(design, loc) -> tuple:
    """The Verilated simulator of a wrapped design with its AXI test top: (folder, cache hit)."""
    tb, public = axi_tb_verilog(design)
    sources = {f"{design.module}.v": design.verilog, "hwgen_tb.v": tb, "public.vlt": public}
    try:
        return runner.build(sources)
    except runner.ToolError as e:
        raise SimulationError(f"{e} (set HWGEN_VERBOSE=1 for the log)", loc, e.log) from None


def _config(design, values: dict, work: Path, pause: float, seed) -> dict:
    """sim/axi_testbench.py's settings."""
    scalars = {p.name: _unsigned(values[p.name], p.dtype) for p in design.kernel.params if not p.is_array}
    predicted = design.report["predicted_cycles"]
    return {
        "image": str(work / "image.bin"),
        "dump": str(work / "dump.bin"),
        "scalars": scalars,
        "timeout_cycles": max(20 * predicted, predicted + 100_000),
        "pause": float(pause),
        "seed": 0 if seed is None else int(seed),
    }


def _result(design, work: Path, config: dict, values: dict, loc) -> dict:
    path = work / "result.json"
    if not path.exists():
        raise SimulationError("the AXI testbench ended without a result (set HWGEN_VERBOSE=1 for the log)", loc)
    result = json.loads(path.read_text())
    name = design.name
    if result.get("timeout"):
        raise SimulationError(
            f"kernel '{name}' behind AXI did not raise its interrupt within {config['timeout_cycles']} cycles", loc
        )
    status = result["status"]
    if status & 3:
        which = " and ".join(w for bit, w in ((1, "a read"), (2, "a write")) if status & bit)
        raise SimulationError(f"kernel '{name}' behind AXI: {which} was answered with an error response", loc)
    check_flags(design, values, {flag: status >> (2 + k) & 1 for k, flag in enumerate(design.component.flags)})
    if not result["done_bit"] or not result["done_cleared"] or not result["irq_cleared"]:
        raise SimulationError(f"kernel '{name}' behind AXI: CTRL's done bit or the interrupt misbehaved {result}", loc)
    return result


def _to_bytes(words: np.ndarray, nbytes: int) -> bytes:
    return words.astype(f"<u{nbytes}").tobytes()


def _from_bytes(raw: bytes, nbytes: int) -> np.ndarray:
    return np.frombuffer(raw, dtype=f"<u{nbytes}").astype(np.uint64)
