"""The one generic cocotb test for every hwgen kernel.

It reads its settings from the JSON file named by $HWGEN_SIM_CONFIG: `inputs` (port name ->
unsigned value: scalar arguments and array base addresses), `results` (scalar result port
names), `timeout_cycles`, and optionally `monitor` (controller instances whose go/done edges to
record, one callback per edge), and optionally `runs` (how many times to run the kernel back to
back without a reset; the last run is the one reported, `earlier_runs` says how many before
it finished). It resets the design, pulses `start`,
waits for `done` (an edge callback: no Python runs per cycle), has the DRAM model dump its contents, and writes what it
saw to the JSON file named by $HWGEN_SIM_RESULT: `cycles` (the kernel's counter), `measured`
(clock periods between start and done), `run_seconds` (wall time from start to done), result
values, `timeline` (per monitored controller, the cycles of its go and done pulses), `fault`,
or `timeout` (with the timeline so far, and with a mesh top `pe_done`: its PEs' done bits then).
With `progress` ({"file", "every", "predicted"}) it rewrites that file every `every` cycles of
the measured run with "cycle N of about PREDICTED" (hwgen.progress follows it).
"""

import json
import os
import time

import cocotb
from cocotb.triggers import ClockCycles, First, RisingEdge, Timer
from cocotb.utils import get_sim_time

PERIOD_NS = 10


async def _progress(cfg: dict, started: float):
    """Rewrite the progress file every cfg["every"] cycles: one Python call that many cycles."""
    path, every, predicted = cfg["file"], cfg["every"], cfg["predicted"]
    if started > get_sim_time("ns"):  # from the run's first cycle
        await Timer(started - get_sim_time("ns"), "ns")
    while True:
        await Timer(every * PERIOD_NS, "ns")
        cycle = round((get_sim_time("ns") - started) / PERIOD_NS)
        with open(path + ".tmp", "w") as f:
            f.write(f"cycle {cycle} of about {predicted}\n")
        os.replace(path + ".tmp", path)


async def _record(signal, times, origin: dict):
    """Append the cycle (from origin["started"], the run's first cycle) of every rising edge of
    `signal`: one callback an edge."""
    while True:
        await RisingEdge(signal)
        times.append(round((get_sim_time("ns") - origin["started"]) / PERIOD_NS))


@cocotb.test()
async def run_kernel(dut):
    with open(os.environ["HWGEN_SIM_CONFIG"]) as f:
        cfg = json.load(f)
    dut.rst.value = 1
    dut.start.value = 0
    dut.dump.value = 0
    for name, value in cfg["inputs"].items():
        getattr(dut, name).value = value
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    earlier = 0
    for _ in range(cfg.get("runs", 1) - 1):  # earlier runs, back to back, without a reset
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        limit = Timer(cfg["timeout_cycles"] * PERIOD_NS, "ns")
        if await First(RisingEdge(dut.done), limit) is limit:
            break
        earlier += 1
        await RisingEdge(dut.clk)
    out = {"earlier_runs": earlier}
    timeline, origin = {}, {"started": 0}
    scope = dut.dut  # the kernel; its controllers sit inside the PE instance named by "scope"
    for part in cfg.get("scope", []):
        scope = getattr(scope, part)
    for unit in cfg.get("monitor", []):  # watching from before the start: no first edge is missed
        inst = getattr(scope, unit)
        timeline[unit] = {"go": [], "done": []}
        for edge in ("go", "done"):
            cocotb.start_soon(_record(getattr(inst, edge), timeline[unit][edge], origin))
    dut.start.value = 1
    await RisingEdge(dut.clk)  # the test top registers it (sim/harness.py) ...
    dut.start.value = 0
    started = origin["started"] = get_sim_time("ns") + PERIOD_NS  # ... and the design sees it from the next edge
    os.environ["HWGEN_WAVES_ORIGIN_NS"] = str(started)  # where a window of waves starts from (waves_main.cpp)
    if cfg.get("progress"):
        cocotb.start_soon(_progress(cfg["progress"], started))
    await RisingEdge(dut.clk)
    timeout = Timer(cfg["timeout_cycles"] * PERIOD_NS, "ns")
    wall = time.perf_counter()
    fired = await First(RisingEdge(dut.done), timeout)
    out["run_seconds"] = time.perf_counter() - wall
    if fired is timeout:
        out["timeout"] = True
        out["timeline"] = timeline  # up to the timeout: which controllers started and never finished
        try:  # a mesh top: which PEs are done
            out["pe_done"] = int(dut.pe_done.value)
        except AttributeError:
            pass
    else:
        out["measured"] = round((get_sim_time("ns") - started) / PERIOD_NS)
        out["cycles"] = int(dut.cycles.value)
        out["results"] = {name: int(getattr(dut, name).value) for name in cfg["results"]}
        out["timeline"] = timeline
    dut.dump.value = 1
    await RisingEdge(dut.clk)
    dut.dump.value = 0
    await ClockCycles(dut.clk, 2)  # through the test top's register, then the dump
    out["fault"] = int(dut.fault.value)
    with open(os.environ["HWGEN_SIM_RESULT"], "w") as f:
        json.dump(out, f)
