"""Simulation of a mesh kernel (hardware.py): one Verilated mesh top with a DRAM model per PE.

The global arguments are split by their in_specs into each PE's local arrays, written as one
DRAM image per PE; the testbench starts the mesh once and waits for every PE's done (no
Python per cycle); each PE's DRAM is read back, every PE's copy of a replicated result (an
all-reduce's or all-gather's) is checked to agree, and the global result is joined by
out_specs (P(): PE 0's copy; P('x'): PE k's copy is block k).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from hwgen_sim import harness, runner

from .. import progress
from ..dram import DramConfig
from ..errors import HwgenError, MismatchError, SimulationError, user_loc
from ..hw.collective import along
from ..lang.signature import check_args, to_user
from ..loops import Collective, walk
from ..stalls import stalled
from ..waves import asked, check_reached, keep
from .hardware import elaborate
from .spmd import block, join

_DRAM_V = Path(harness.__file__).with_name("dram.v")


def timeout_cycles(predicted: int, dram: DramConfig) -> int:
    """Cycles after which a run that has not finished is a hang (as for one PE)."""
    return max(10 * predicted, predicted + 100_000) + 20 * (dram.latency + dram.jitter)


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
    """`monitor`: PE 0's controller names (or True for all; a collective `coll<k>` by its
    phases) whose runs to record in `SimResult.timeline`, as lists of (go cycle, done cycle).
    `waves`: True or a window of cycles writes out_dir/<kernel>/<kernel>.fst (waves.py)."""
    from ..simulate import SimResult
    from . import pipeline_hw

    if pipeline_hw.is_pipeline(kernel):  # stages on PEs of their own (hw.pipeline)
        from .pipeline_sim import simulate as simulate_pipeline

        return simulate_pipeline(kernel, args, dram, seed, what, monitor, waves, out_dir)
    loc = user_loc()
    waves = asked(waves, loc)
    values = check_args(kernel.name, kernel.params, tuple(args))
    dram = dram or DramConfig()
    t0 = time.perf_counter()
    design = elaborate(kernel, dram, what)
    watched = _watched(design, monitor, loc)
    sources = {
        f"{design.name}.v": design.verilog,
        "hwgen_tb.v": harness.mesh_tb_verilog(design),
        "hwgen_dram.v": _DRAM_V.read_text(),
    }
    try:
        # measured: a split build is a third faster at 16 PEs, and much slower at 64 (the
        # symbol table's constructor, one huge function, then compiles for minutes)
        with progress.following("verilator build"):
            build_dir, hit = runner.build(sources, waves=bool(waves), split=8 < design.plan.p <= 32)
    except runner.ToolError as e:
        raise SimulationError(f"{e} (set HWGEN_VERBOSE=1 for the log)", loc, e.log) from None
    t1 = time.perf_counter()
    layout = harness.MeshLayout(design)
    work = Path(tempfile.mkdtemp(prefix=f"hwgen-{kernel.name}-"))
    try:
        images = _write_images(design, layout, values, work)
        result = _run(design, layout, build_dir, work, dram, seed, loc, watched, waves)
        copies = _read_results(design, layout, images, work, loc)
        check_reached(waves, result["cycles"], kernel.name, loc)
        waves_path = keep(kernel.name, work, out_dir) if waves else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _check_replicas(design, copies, loc)
    mp, port = design.plan, kernel.results[0]
    local_shape = mp.shape
    glob = join([c.reshape(local_shape) for c in copies], mp.out_spec, mp.mesh).reshape(port.shape)
    return SimResult(
        outputs=to_user(port, glob),
        cycles=result["cycles"],
        predicted_cycles=design.report["predicted_cycles"],
        roofline_cycles=design.report["roofline_cycles"],
        build_seconds=t1 - t0,
        sim_seconds=time.perf_counter() - t1,
        run_seconds=result.get("run_seconds", 0.0),
        cache_hit=hit,
        design=design,
        timeline=_timeline(design, result.get("timeline")) if monitor else None,
        waves=waves_path,
    )


def _watched(design, monitor, loc) -> list:
    """The PE units (controllers and collective phases `ring<k>`) to record for `monitor`."""
    if not monitor:
        return []
    colls = _collectives(design)
    units = set(design.component.unit_names) - set(colls)
    names = sorted(units | set(colls)) if monitor is True else list(monitor)
    unknown = [n for n in names if n not in units and n not in colls]
    if unknown:
        raise HwgenError(
            f"monitor names {', '.join(map(repr, unknown))}, which kernel '{design.name}' does not have; "
            f"its controllers: {', '.join(sorted(units | set(colls)))}",
            loc,
        )
    return sorted({u for n in names for u in colls.get(n, [n])})


def _timeline(design, timeline) -> dict:
    """PE 0's recorded runs, unit -> [(go, done)], each collective's from its first phase's go
    to its last phase's done."""
    timeline = dict(timeline or {})
    for name, rings in _collectives(design).items():
        if all(r in timeline for r in (rings[0], rings[-1])):
            timeline[name] = {"go": timeline[rings[0]]["go"], "done": timeline[rings[-1]]["done"]}
    return {u: list(zip(t["go"], t["done"])) for u, t in timeline.items()}


def _write_images(design, layout, values: dict, work: Path) -> list:
    """Each PE's DRAM image (its blocks of the global arguments by their in_specs), also
    written as the DRAM model's input file of that PE."""
    mp = design.plan
    images = []
    for k in range(mp.p):
        at = mp.mesh.coords(k)
        local = {name: values[name][block(values[name].shape, mp.in_specs[name], mp.mesh, at)] for name in mp.in_specs}
        images.append(layout.image(local))
        harness.write_hex(work / f"dram_in.hex.{k}", images[-1], layout.word_bits)
    return images


def _run(design, layout, build_dir, work: Path, dram: DramConfig, seed, loc, monitor=(), waves=False) -> dict:
    """Run the mesh once; its testbench result, checked (a hang names the PEs not done and
    the controllers the first of them is stalled in)."""
    from ..simulate import check_counts, dram_plusargs, run_testbench

    name, predicted = design.name, design.report["predicted_cycles"]
    timeout = timeout_cycles(predicted, dram)
    config = {
        "inputs": {f"base_{a}": base for a, base in layout.bases.items()},
        "results": [],
        "timeout_cycles": timeout,
        "monitor": list(monitor),
        "runs": 1,
    }
    if monitor:  # PE 0's units: the mesh top's pe0, the PE inside its top
        config["scope"] = ["pe0", "pe0"]
    plusargs = dram_plusargs(work, dram, seed)

    def run(cfg):
        return run_testbench(build_dir, work, cfg, plusargs, waves, loc, predicted)

    result = run(config)
    if result.get("timeout"):
        p = design.plan.p
        bits = result.get("pe_done", 0)
        stuck = [k for k in range(p) if not (bits >> k) & 1]
        where = ""
        if stuck:  # again, watching every controller of the first PE not done
            every = sorted(set(design.component.unit_names) - set(_collectives(design)))
            again = run(dict(config, monitor=every, scope=[f"pe{stuck[0]}", "pe0"]))
            units = _stalled_units(design, again.get("timeline") or {})
            where = f"; PE {stuck[0]} is stalled in {'; '.join(units)}" if units else ""
        raise SimulationError(
            f"kernel '{name}' did not finish within {timeout} cycles (predicted {predicted}): the mesh hangs; "
            f"PE(s) {', '.join(map(str, stuck))} of {p} not done{where}",
            loc,
        )
    check_counts(name, result, loc)
    return result


def _collectives(design) -> dict:
    """The program's collectives (loops.Collective leaves, by name) -> their phases' units.
    A collective's go and done are its first phase's go and its last phase's done (they are
    not kept as signals of their own in the simulator)."""
    out, k = {}, 0
    for c in walk(design.program.root):
        if isinstance(c, Collective):
            out[c.name] = [f"ring{j}" for j in range(k, k + len(c.phases))]
            k += len(c.phases)
    return out


def _stalled_units(design, timeline: dict) -> list:
    """A PE's controllers that started and never finished (stalls.stalled): a load or pipe
    of its program, or a collective, then with its phase in flight."""
    timeline = dict(timeline)
    for name, rings in _collectives(design).items():
        first, last = (timeline.get(r, {"go": [], "done": []}) for r in (rings[0], rings[-1]))
        timeline[name] = {"go": first["go"], "done": last["done"]}
    out = stalled(design.component.pe.tree, timeline)
    # ring<k> is the k-th phase in the PE's tree order (overlap may run a later collective first)
    ordered = [ph for c in walk(design.program.root) if isinstance(c, Collective) for ph in c.phases]
    phases = dict(zip((f"ring{k}" for k in range(len(ordered))), ordered))
    for name, rings in _collectives(design).items():
        for j, unit in enumerate(rings):
            t, r = timeline.get(unit, {"go": [], "done": []}), phases[unit]
            if len(t["go"]) > len(t["done"]):
                what = "a block copy" if r.kind == "copy" else f"a ring {r.kind.replace('_', '-')}"
                out.append(f"{unit}, {what} {along(r)} (phase {j + 1} of {len(rings)} of {name})")
    return out


def _read_results(design, layout, images: list, work: Path, loc) -> list:
    """Each PE's copy of the result, from its dumped DRAM (a write outside it is an error)."""
    copies = []
    for k in range(design.plan.p):
        after = harness.read_hex(work / f"dram_out.hex.{k}", len(images[k]))
        outs, stray = layout.read_outputs(images[k], after)
        if len(stray):
            raise SimulationError(
                f"kernel '{design.name}': PE {k} wrote DRAM outside its result "
                f"({len(stray)} words, first at word {int(stray[0])})",
                loc,
            )
        copies.append(outs[design.plan.result])
    return copies


def _check_replicas(design, copies: list, loc) -> None:
    """Every PE of a group holds the same copy of a replicated result (all-reduce, all-gather)."""
    mp = design.plan
    if not mp.replicated_axes:
        return
    others = [a for a in mp.mesh.axis_names if a not in mp.replicated_axes]
    first = {}
    for k in range(mp.p):
        at = dict(zip(mp.mesh.axis_names, mp.mesh.coords(k)))
        j = first.setdefault(tuple(at[a] for a in others), k)
        if not np.array_equal(copies[k], copies[j]):
            i = int(np.argwhere(copies[k] != copies[j])[0][0])
            raise MismatchError(
                f"kernel '{design.name}': PE {k}'s copy of the replicated result differs from PE {j}'s at "
                f"local index {i}: {copies[k][i]} vs {copies[j][i]}",
                mp.result,
                (i,),
                copies[j][i],
                copies[k][i],
                loc,
            )


def verify(kernel, args, dram: DramConfig | None = None, seed=None, waves=False, out_dir="rtl_out"):
    loc = user_loc()
    expected = np.asarray(kernel(*args))
    sim = simulate(kernel, args, dram=dram, seed=seed, what="verify", waves=waves, out_dir=out_dir)
    got = np.asarray(sim.outputs)
    if expected.shape != got.shape or not np.array_equal(expected, got):
        diff = np.argwhere(expected != got) if expected.shape == got.shape else np.zeros((1, expected.ndim), int)
        index = tuple(int(i) for i in diff[0])
        port = kernel.results[0]
        raise MismatchError(
            f"kernel '{kernel.name}': output '{port.name}' differs from the golden model at "
            f"index {index}: expected {expected[index]}, got {got[index]}",
            port.name,
            index,
            expected[index],
            got[index],
            loc,
        )
    return sim
