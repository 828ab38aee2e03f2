"""hwgen's cocotb test of a kernel behind AXI (`wrap="axi"`), with cocotbext-axi's verification
IP driven through sim/axi_kernel.py: an `AxiRam` answers the kernel's AXI4 master, an
`AxiLiteMaster` drives its control port as a CPU's driver would.

Settings come from the JSON file named by $HWGEN_SIM_CONFIG: `image` (a file of the memory's
initial bytes: the inputs in place, a canary pattern elsewhere), `dump` (where to write the
memory's bytes after the run), `scalars` (argument name -> unsigned value), `timeout_cycles`,
`pause` (the share of cycles each AXI channel of the RAM stalls, at random) and `seed`; the
kernel's description from $HWGEN_AXI_KERNEL. It writes the image, runs the kernel once (start,
wait for `irq`), reads STATUS, CYCLES and the results, checks that CTRL's done bit is set and
that reading it cleared it and that writing ISR dropped `irq`, and writes to $HWGEN_SIM_RESULT
what it saw.
"""

import json
import os
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles

from hwgen_sim.axi_kernel import CTRL, AxiKernel, KernelError


@cocotb.test()
async def run_axi_kernel(dut):
    cfg = json.loads(Path(os.environ["HWGEN_SIM_CONFIG"]).read_text())
    k = await AxiKernel.attach(dut, pause=cfg["pause"], seed=cfg["seed"])
    k.ram.write(0, Path(cfg["image"]).read_bytes())
    out = {}
    try:
        out["cycles"] = await k.run(timeout_cycles=cfg["timeout_cycles"], check=False, **cfg["scalars"])
    except KernelError:
        out["timeout"] = True
    if not out.get("timeout"):
        out["status"] = k.status
        out["results"] = {f"res_{name}": await k.result(name) for name in k.info["results"]}
        ctrl = await k.control.read_dword(CTRL)
        out["done_bit"] = bool(ctrl & 2)
        out["done_cleared"] = not (await k.control.read_dword(CTRL)) & 2
        await ClockCycles(dut.aclk, 2)
        out["irq_cleared"] = not int(dut.irq.value)
    Path(cfg["dump"]).write_bytes(k.ram.read(0, k.info["size"]))
    Path(os.environ["HWGEN_SIM_RESULT"]).write_text(json.dumps(out))
