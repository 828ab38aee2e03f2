"""Simulation: run a kernel's Verilog in Verilator through cocotb and read the results back.

    simulate(kernel, args) -> SimResult(outputs, cycles, predicted_cycles, roofline_cycles, ...)
    verify(kernel, args)   -> SimResult, or raises MismatchError against the golden model

Inputs reach the hardware as a DRAM image file that the DRAM model loads at time 0; outputs
come back as the file it dumps when the kernel is done. Python only starts the run and waits
for `done`: nothing runs per cycle outside Verilator.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hwgen_sim import harness, runner

from . import interp, progress
from .build import elaborate
from .dram import DramConfig
from .errors import HwgenError, IndexRangeError, MismatchError, SimulationError, user_loc
from .lang.signature import check_args, to_user
from .loop_interp import overflow_error
from .loops import checked_mems
from .stalls import stalled
from .waves import asked, check_reached, keep
from .waves import env as waves_env

PROGRESS_EVERY = 20_000  # cycles between the testbench's progress lines (one Python call each)
_DRAM_V = Path(harness.__file__).with_name("dram.v")
# simulation models of the device primitives a target's netlist instantiates (hw/device.py)
_CELLS_V = {"ecp5": Path(harness.__file__).with_name("ecp5_cells.v")}


@dataclass
class SimResult:
    """outputs: numpy results shaped like the golden model's; cycles: measured from start to
    done; predicted_cycles: the cycle model; roofline_cycles: the lower bound.
    build_seconds: elaboration and Verilator build (0 when cached); sim_seconds: the whole
    simulation step; run_seconds: wall time from start to done inside the simulator."""

    outputs: object
    cycles: int
    predicted_cycles: int
    roofline_cycles: int
    waves: str | None = None
    timeline: dict | None = None
    build_seconds: float = 0.0
    sim_seconds: float = 0.0
    run_seconds: float = 0.0
    cache_hit: bool = False
    design: object = None

    @property
    def prediction_error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_cycles - self.cycles) / self.cycles

    @property
    def roofline_efficiency(self) -> float:
        return self.roofline_cycles / self.cycles


def _unsigned(value, dtype) -> int:
    return int(value) & ((1 << dtype.bits) - 1)


def _signed(bits: int, dtype):
    return dtype.np.type(dtype.wrap(bits)) if not dtype.is_bool else np.bool_(bits & 1)


def simulate(
    kernel,
    args,
    waves: bool = False,
    dram: DramConfig | None = None,
    seed=None,
    out_dir="rtl_out",
    monitor=None,
    target: str | None = None,
    runs: int = 1,
) -> SimResult:
    """`monitor`: controller instance names (or True for all) whose runs to record in
    `SimResult.timeline` as lists of (go cycle, done cycle), counted from start.
    `target` ("ecp5"): simulate the netlist built for that device's synthesis (multipliers and
    block RAMs as its primitives, run on models of them in sim/) instead of the generic one.
    `runs`: run the kernel this many times back to back without a reset (the same inputs; the
    last run's outputs and cycles are reported): hardware must not depend on its reset state.
    `waves`: True, or a window of cycles (first, end), writes out_dir/<kernel>/<kernel>.fst
    (waves.py)."""
    loc = user_loc()
    waves = asked(waves, loc)
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise HwgenError(f"runs must be a positive integer (runs of the kernel without a reset), got {runs!r}", loc)
    values = check_args(kernel.name, kernel.params, tuple(args))
    dram = dram or DramConfig()
    if target is not None and target not in _CELLS_V:
        raise HwgenError(f"unknown simulation target '{target}'; expected one of {', '.join(_CELLS_V)}", loc)
    t0 = time.perf_counter()
    design = elaborate(kernel, dram, target=target)
    build_dir, hit = _build(design, target, bool(waves), loc)
    t1 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix=f"hwgen-{kernel.name}-"))
    try:
        layout = harness.Layout(design)
        image = layout.image(values)
        result = _run(design, values, layout, image, build_dir, work, dram, seed, monitor, runs, waves, loc)
        outs = _outputs(design, layout, image, result, work, loc)
        check_reached(waves, result["cycles"], kernel.name, loc)
        waves_path = keep(kernel.name, work, out_dir) if waves else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    t2 = time.perf_counter()
    return SimResult(
        outputs=outs[0] if len(outs) == 1 else tuple(outs),
        cycles=result["cycles"],
        predicted_cycles=design.report["predicted_cycles"],
        roofline_cycles=design.report["roofline_cycles"],
        waves=waves_path,
        timeline={u: list(zip(t["go"], t["done"])) for u, t in result.get("timeline", {}).items()} or None,
        build_seconds=t1 - t0,
        sim_seconds=t2 - t1,
        run_seconds=result.get("run_seconds", 0.0),
        cache_hit=hit,
        design=design,
    )


def _build(design, target: str | None, waves: bool, loc) -> tuple:
    """The Verilated simulator of `design` with its testbench: (build folder, cache hit)."""
    sources = {
        f"{design.name}.v": design.verilog,
        "hwgen_tb.v": harness.tb_verilog(design),
        "hwgen_dram.v": _DRAM_V.read_text(),
    }
    if target is not None:
        sources[f"hwgen_{target}_cells.v"] = _CELLS_V[target].read_text()
    try:
        with progress.following("verilator build"):
            return runner.build(sources, waves=waves)
    except runner.ToolError as e:
        raise SimulationError(f"{e} (set HWGEN_VERBOSE=1 for the log)", loc, e.log) from None


def _run(
    design,
    values: dict,
    layout,
    image,
    build_dir,
    work: Path,
    dram: DramConfig,
    seed,
    monitor,
    runs: int,
    waves: bool,
    loc,
) -> dict:
    """Run the simulator in `work` on the DRAM `image`; the testbench's result, checked."""
    kernel = design.kernel
    harness.write_hex(work / "dram_in.hex", image, layout.word_bits)
    inputs = {f"base_{name}": base for name, base in layout.bases.items()}
    for p in kernel.params:
        if not p.is_array:
            inputs[f"arg_{p.name}"] = _unsigned(values[p.name], p.dtype)
    predicted = design.report["predicted_cycles"]
    timeout = max(10 * predicted, predicted + 100_000) + 20 * (dram.latency + dram.jitter)
    units = sorted(design.component.unit_names) if monitor is True else list(monitor or [])
    flags = design.flags
    config = {
        "inputs": inputs,
        "results": [f"res_{s.name}" for s in design.program.scalar_outs] + flags,
        "timeout_cycles": timeout,
        "monitor": units,
        "scope": ["pe0"],
        "runs": runs,
    }
    plusargs = dram_plusargs(work, dram, seed)
    result = run_testbench(build_dir, work, config, plusargs, waves, loc, predicted)
    every = sorted(design.component.unit_names)
    if result.get("timeout") and sorted(units) != every:  # again, watching every controller
        result = run_testbench(build_dir, work, dict(config, monitor=every), plusargs, waves, loc, predicted)
    _check_run(design, values, result, runs, timeout, loc)
    return result


def dram_plusargs(work: Path, dram: DramConfig, seed) -> list:
    """The DRAM model's run-time settings (sim/dram.v): its files in `work`, latency, jitter,
    seed, and the stall fault of $HWGEN_DRAM_STALL_AFTER (to test hang reports)."""
    out = [
        f"+DRAM_IN={work / 'dram_in.hex'}",
        f"+DRAM_OUT={work / 'dram_out.hex'}",
        f"+DRAM_LATENCY={dram.latency}",
        f"+DRAM_JITTER={dram.jitter}",
        f"+DRAM_SEED={(seed or 0) * 2654435761 % (1 << 31) + 1}",
    ]
    if os.environ.get("HWGEN_DRAM_STALL_AFTER"):
        out.append(f"+DRAM_STALL_AFTER={int(os.environ['HWGEN_DRAM_STALL_AFTER'])}")
    return out


def check_counts(name: str, result: dict, loc) -> None:
    """A finished run touched only the simulated memory, and its cycle counter agrees with
    the clock."""
    if result["fault"]:
        raise SimulationError(f"kernel '{name}' accessed DRAM outside the simulated memory", loc)
    if result["measured"] != result["cycles"]:
        raise SimulationError(
            f"kernel '{name}': its cycle counter says {result['cycles']} but {result['measured']} clock cycles passed",
            loc,
        )


def run_testbench(build_dir, work: Path, config: dict, plusargs: list, waves, loc, predicted=None) -> dict:
    """One run of the testbench (sim/testbench.py) in `work` with `config`: its result.
    `waves`: False, True or a window of cycles (waves.py). While a progress report is active
    (`hwgen sim`), the cycle the run has reached (of about `predicted`) goes to it."""
    track = work / "progress.txt"
    track.unlink(missing_ok=True)  # an earlier run's (a hang's second run) must not show
    if progress.active() and predicted is not None:
        config = dict(config, progress={"file": str(track), "every": PROGRESS_EVERY, "predicted": predicted})
    (work / "config.json").write_text(json.dumps(config))
    result = work / "result.json"
    result.unlink(missing_ok=True)  # an earlier run's must not pass for this one's
    env = {"HWGEN_SIM_CONFIG": str(work / "config.json"), "HWGEN_SIM_RESULT": str(result), **waves_env(waves)}
    try:
        with progress.following("simulation", track):
            runner.run(build_dir, work, plusargs, env, waves=bool(waves))
    except runner.ToolError as e:
        raise SimulationError(f"{e} (set HWGEN_VERBOSE=1 for the log)", loc, e.log) from None
    if not result.exists():
        log = (work / "sim.log").read_text(errors="replace") if (work / "sim.log").exists() else ""
        raise SimulationError("the testbench ended without a result (set HWGEN_VERBOSE=1 for the log)", loc, log)
    return json.loads(result.read_text())


def _check_run(design, values: dict, result: dict, runs: int, timeout: int, loc) -> None:
    """Raise a SimulationError (or the group-by's CapacityError) for a run that went wrong."""
    name, predicted = design.kernel.name, design.report["predicted_cycles"]
    if result.get("earlier_runs", 0) != runs - 1:
        raise SimulationError(
            f"kernel '{name}': run {result['earlier_runs'] + 1} of {runs} (without a reset "
            f"after the first) did not finish within {timeout} cycles",
            loc,
        )
    if result.get("timeout"):
        stuck = stalled(design.component.pe.tree, result.get("timeline") or {})
        where = f"; stalled in {'; '.join(stuck)}" if stuck else ""
        raise SimulationError(
            f"kernel '{name}' did not finish within {timeout} cycles (predicted {predicted}): the hardware "
            f"hangs{where}",
            loc,
        )
    check_counts(name, result, loc)
    check_flags(design, values, result["results"])


def check_flags(design, values: dict, flags: dict) -> None:
    """Raise the error a raised run-time flag stands for (`flags`: port name -> value): the
    group-by's CapacityError, or the golden model's error for a subscript out of range."""
    for g in design.program.groups:
        if flags[f"overflow_{g.name}"]:
            raise overflow_error(g)
    for mem in checked_mems(design.program):
        if flags[f"range_{mem.name}"]:
            raise _range_fault(design, values, mem)


def _range_fault(design, values: dict, mem) -> HwgenError:
    """The hardware flagged a multifold subscript outside its accumulator: the golden model's
    error, which names the subscript, its value and where (or a SimulationError if the golden
    model, which must agree, finds none)."""
    try:
        interp.run([r.node for r in design.kernel.program.results], values)
    except IndexRangeError as e:
        return e
    return SimulationError(
        f"kernel '{design.name}': the hardware flagged a subscript outside {mem.label or mem.name} "
        f"but the golden model found none",
        mem.loc,
    )


def _outputs(design, layout, image, result: dict, work: Path, loc) -> list:
    """The kernel's results, as the golden model gives them, from the dumped DRAM and ports."""
    after = harness.read_hex(work / "dram_out.hex", len(image))
    return outputs_from(design, layout, image, after, result["results"], loc)


def outputs_from(design, layout, image, after, ports: dict, loc, where: str = "DRAM") -> list:
    """The kernel's results from the memory `after` the run (`image` before it) and the
    scalar result ports' values (`ports`: port name -> unsigned value); a write outside the
    outputs is a SimulationError."""
    kernel = design.kernel
    arrays, stray = layout.read_outputs(image, after)
    if len(stray):
        raise SimulationError(
            f"kernel '{kernel.name}' wrote {where} outside its outputs ({len(stray)} words, "
            f"first at word {int(stray[0])})",
            loc,
        )
    outs = []
    scalars = {s.name: s for s in design.program.scalar_outs}
    for port in kernel.results:
        if port.is_array:
            outs.append(to_user(port, arrays[port.name]))
        else:
            bits = ports[f"res_{port.name}"]
            outs.append(to_user(port, _signed(bits, scalars[port.name].mem.dtype)))
    return outs


def verify(
    kernel,
    args,
    waves: bool = False,
    dram: DramConfig | None = None,
    seed=None,
    target: str | None = None,
    runs: int = 1,
    out_dir="rtl_out",
) -> SimResult:
    loc = user_loc()
    sim = simulate(kernel, args, waves=waves, dram=dram, seed=seed, target=target, runs=runs, out_dir=out_dir)
    compare(kernel, args, sim.outputs, loc)
    return sim


def compare(kernel, args, outputs, loc) -> None:
    """Raise MismatchError at the first element of `outputs` (a simulation's) that differs
    from the golden model's result for `args`."""
    expected = kernel(*args)
    want = expected if isinstance(expected, tuple) else (expected,)
    got = outputs if isinstance(outputs, tuple) else (outputs,)
    for port, e, g in zip(kernel.results, want, got):
        e, g = np.asarray(e), np.asarray(g)
        if e.shape != g.shape or not np.array_equal(e, g):
            diff = np.argwhere(e != g) if e.shape == g.shape else np.zeros((1, e.ndim), int)
            index = tuple(int(i) for i in diff[0]) if len(diff) else ()
            ev, gv = e[index] if e.ndim else e[()], g[index] if g.ndim else g[()]
            where = f" at index {index}" if index else ""
            raise MismatchError(
                f"kernel '{kernel.name}': output '{port.name}' differs from the golden model"
                f"{where}: expected {ev}, got {gv}",
                port.name,
                index,
                ev,
                gv,
                loc,
            )
