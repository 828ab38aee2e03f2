"""The cocotb test of a kernel behind AXI (`wrap="axi"`), with cocotbext-axi's verification IP:
an `AxiRam` answers the kernel's AXI4 master, an `AxiLiteMaster` drives its control port the
way a CPU's driver would (hwgen/hw/axi_regs.py has the map).

Settings come from the JSON file named by $HWGEN_SIM_CONFIG: `image` (a file of the memory's
initial bytes), `size` (bytes), `registers` ([offset, 32-bit value] pairs to write before the
start: arguments and base addresses), `results` (name -> [offset, bits]), `status_offset`,
`cycles_offset`, `timeout_cycles`, `pause` (probability that each AXI channel of the RAM
stalls in a cycle: 0 for none) and `seed`. It resets the design, writes the registers, enables
the interrupt, writes 1 to CTRL, waits for `irq` (no Python per cycle but the RAM's), reads the
cycle counter, STATUS and the results, checks CTRL's done bit and that reading it cleared it,
clears ISR, and writes to $HWGEN_SIM_RESULT what it saw (`cycles`, `status`, `results`,
`measured`: clock periods from the CTRL write's response to `irq`), and the memory's bytes
after the run to the file `dump`.
"""

import json
import os
import random
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, First, RisingEdge, Timer
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

PERIOD_NS = 10
CTRL, GIE, IER, ISR = 0x00, 0x04, 0x08, 0x0C


def _stalls(rng: random.Random, p: float):
    while True:
        yield rng.random() < p


@cocotb.test()
async def run_axi_kernel(dut):
    cfg = json.loads(Path(os.environ["HWGEN_SIM_CONFIG"]).read_text())
    dut.aresetn.value = 0
    ram = AxiRam(
        AxiBus.from_prefix(dut, "m_axi_gmem"), dut.aclk, dut.aresetn, reset_active_level=False, size=cfg["size"]
    )
    lite = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control"), dut.aclk, dut.aresetn, reset_active_level=False)
    if cfg["pause"]:
        rng = random.Random(cfg["seed"])
        for ch in (ram.write_if.aw_channel, ram.write_if.w_channel, ram.write_if.b_channel):
            ch.set_pause_generator(_stalls(rng, cfg["pause"]))
        for ch in (ram.read_if.ar_channel, ram.read_if.r_channel):
            ch.set_pause_generator(_stalls(rng, cfg["pause"]))
    ram.write(0, Path(cfg["image"]).read_bytes())
    await ClockCycles(dut.aclk, 4)
    dut.aresetn.value = 1
    await ClockCycles(dut.aclk, 2)
    for offset, value in cfg["registers"]:
        await lite.write_dword(offset, value)
    await lite.write_dword(GIE, 1)
    await lite.write_dword(IER, 1)
    await lite.write_dword(CTRL, 1)
    started = get_sim_time("ns")
    out = {}
    if not int(dut.irq.value):
        limit = Timer(cfg["timeout_cycles"] * PERIOD_NS, "ns")
        if await First(RisingEdge(dut.irq), limit) is limit:
            out["timeout"] = True
    if not out.get("timeout"):
        out["measured"] = round((get_sim_time("ns") - started) / PERIOD_NS)
        lo = await lite.read_dword(cfg["cycles_offset"])
        out["cycles"] = lo | await lite.read_dword(cfg["cycles_offset"] + 4) << 32
        out["status"] = await lite.read_dword(cfg["status_offset"])
        results = {}
        for name, (offset, bits) in cfg["results"].items():
            value = await lite.read_dword(offset)
            if bits > 32:
                value |= await lite.read_dword(offset + 4) << 32
            results[name] = value
        out["results"] = results
        ctrl = await lite.read_dword(CTRL)
        out["done_bit"] = bool(ctrl & 2)
        out["done_cleared"] = not (await lite.read_dword(CTRL)) & 2
        await lite.write_dword(ISR, 1)
        await ClockCycles(dut.aclk, 2)
        out["irq_cleared"] = not int(dut.irq.value)
    Path(cfg["dump"]).write_bytes(ram.read(0, cfg["size"]))
    Path(os.environ["HWGEN_SIM_RESULT"]).write_text(json.dumps(out))
