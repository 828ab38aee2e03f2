"""A kernel behind AXI, driven from a cocotb test the way a CPU's driver drives it: its memory
is cocotbext-axi's `AxiRam`, its control port cocotbext-axi's `AxiLiteMaster` (the register
map of hwgen/hw/axi_regs.py). hwgen's own AXI test (sim/axi_testbench.py) uses it, and so can
a user's cocotb test run by `hwgen sim APP.py --cocotb TEST.py`:

    import cocotb
    from hwgen_sim.axi_kernel import AxiKernel

    @cocotb.test()
    async def twice(dut):
        k = await AxiKernel.attach(dut)           # RAM, control master, reset
        k.write("x", x)                           # an input array, numpy in
        cycles = await k.run(a=3)                 # scalar arguments; start, wait for irq
        out = k.read("out")                       # an output array, numpy out
        value = await k.result("total")           # a scalar result

Arrays are given and returned as numpy arrays of the kernel's element type; a fixed-point
array's elements are its raw integers. The kernel's arrays sit where hwgen placed them
(`k.arrays`: name -> base byte address, dtype, shape); `k.ram` and `k.control` are the
cocotbext-axi objects, for tests that want to go further (stalls, their own layout).

What the kernel is comes from the JSON file named by $HWGEN_AXI_KERNEL, which hwgen writes.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from cocotb.triggers import ClockCycles, First, RisingEdge, Timer
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

PERIOD_NS = 10
CTRL, GIE, IER, ISR, STATUS, CYCLES = 0x00, 0x04, 0x08, 0x0C, 0x10, 0x18


@dataclass(frozen=True)
class Element:
    """An element type, as the words in memory hold it."""

    np: str
    bits: int
    signed: bool

    def to_words(self, values) -> np.ndarray:
        flat = np.asarray(values).reshape(-1)
        ints = flat.astype(np.int64) if self.signed else flat.astype(np.uint64)
        return ints.astype(np.uint64) & np.uint64((1 << self.bits) - 1)

    def from_words(self, words: np.ndarray) -> np.ndarray:
        low = words.astype(np.uint64) & np.uint64((1 << self.bits) - 1)
        if not self.signed:
            return low.astype(self.np)
        if self.bits == 64:
            return low.view(np.int64).astype(self.np)
        negative = (low >> np.uint64(self.bits - 1)) & np.uint64(1)
        return (low.astype(np.int64) - negative.astype(np.int64) * (1 << self.bits)).astype(self.np)


class KernelError(AssertionError):
    """The kernel behind AXI misbehaved (an error response, a raised flag, no interrupt)."""


class AxiKernel:
    """See the module doc. Build one with `await AxiKernel.attach(dut)`."""

    def __init__(self, dut, info: dict, ram: AxiRam, control: AxiLiteMaster):
        self.dut, self.info, self.ram, self.control = dut, info, ram, control
        self.word_bytes = info["word_bytes"]
        self.arrays = info["arrays"]

    @classmethod
    async def attach(cls, dut, info: dict | None = None, pause: float = 0.0, seed: int = 0) -> "AxiKernel":
        """Connect the RAM and the control master to the test top `dut`, and reset it.
        `pause`: the share of cycles each of the RAM's AXI channels stalls, at random."""
        info = info or json.loads(Path(os.environ["HWGEN_AXI_KERNEL"]).read_text())
        dut.aresetn.value = 0
        ram = AxiRam(AxiBus.from_prefix(dut, "m_axi_gmem"), dut.aclk, dut.aresetn, False, size=info["size"])
        control = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control"), dut.aclk, dut.aresetn, False)
        if pause:
            rng = random.Random(seed)
            channels = [ram.write_if.aw_channel, ram.write_if.w_channel, ram.write_if.b_channel]
            for ch in channels + [ram.read_if.ar_channel, ram.read_if.r_channel]:
                ch.set_pause_generator(_stalls(rng, pause))
        await ClockCycles(dut.aclk, 4)
        dut.aresetn.value = 1
        await ClockCycles(dut.aclk, 2)
        return cls(dut, info, ram, control)

    def element(self, name: str) -> Element:
        a = self.arrays[name]
        return Element(a["np"], a["bits"], a["signed"])

    def write(self, name: str, values) -> None:
        """Put array `name`'s elements into the RAM."""
        a = self.arrays[name]
        words = self.element(name).to_words(values)
        if words.size != int(np.prod(a["shape"])):
            raise ValueError(f"array '{name}' has shape {tuple(a['shape'])}, got {np.shape(values)}")
        self.ram.write(a["base"], words.astype(f"<u{self.word_bytes}").tobytes())

    def read(self, name: str) -> np.ndarray:
        """Array `name`'s elements in the RAM now."""
        a = self.arrays[name]
        count = int(np.prod(a["shape"]))
        raw = self.ram.read(a["base"], count * self.word_bytes)
        words = np.frombuffer(raw, dtype=f"<u{self.word_bytes}").astype(np.uint64)
        return self.element(name).from_words(words).reshape(a["shape"])

    async def set_register(self, offset: int, value: int, bits: int) -> None:
        await self.control.write_dword(offset, value & 0xFFFFFFFF)
        if bits > 32:
            await self.control.write_dword(offset + 4, value >> 32 & 0xFFFFFFFF)

    async def get_register(self, offset: int, bits: int) -> int:
        value = await self.control.read_dword(offset)
        if bits > 32:
            value |= await self.control.read_dword(offset + 4) << 32
        return value

    async def run(self, timeout_cycles: int = 10_000_000, check: bool = True, **scalars) -> int:
        """Write the scalar arguments and every array's base address, start the kernel, wait
        for its interrupt, check STATUS (`check`: raise KernelError on an error response or a
        raised flag), clear the interrupt; the run's cycles (CYCLES)."""
        params = self.info["params"]
        if sorted(scalars) != sorted(params):
            raise ValueError(f"the kernel takes the scalars {sorted(params)}, got {sorted(scalars)}")
        for name, value in scalars.items():
            p = params[name]
            await self.set_register(p["offset"], int(value) & ((1 << p["bits"]) - 1), p["bits"])
        for name, a in self.arrays.items():
            await self.set_register(a["offset"], a["base"], 64)
        await self.control.write_dword(GIE, 1)
        await self.control.write_dword(IER, 1)
        await self.control.write_dword(CTRL, 1)
        try:
            if not int(self.dut.irq.value):
                limit = Timer(timeout_cycles * PERIOD_NS, "ns")
                if await First(RisingEdge(self.dut.irq), limit) is limit:
                    raise KernelError(f"no interrupt within {timeout_cycles} cycles")
            self.status = status = await self.control.read_dword(STATUS)
            if check and status & 3:
                raise KernelError(f"an AXI error response (STATUS {status:#x})")
            raised = [f for k, f in enumerate(self.info["flags"]) if status >> (2 + k) & 1]
            if check and raised:
                raise KernelError(f"run-time flag raised: {', '.join(raised)}")
            return await self.get_register(CYCLES, 64)
        finally:  # the interrupt cleared, also when the run failed (ISR toggles: write back what is set)
            if await self.control.read_dword(ISR) & 1:
                await self.control.write_dword(ISR, 1)

    async def result(self, name: str) -> int:
        """Scalar result `name` of the last run, as its raw bits."""
        r = self.info["results"][name]
        return await self.get_register(r["offset"], r["bits"])


def _stalls(rng: random.Random, p: float):
    while True:
        yield rng.random() < p


def kernel_info(design, layout) -> dict:
    """What AxiKernel needs to know of a built, wrapped design (hwgen.build.Design) whose
    arrays sit as sim/harness.py's `layout` places them."""
    top = design.component
    slots = {r.port: r for r in top.regs if r.port}
    arrays = {}
    for d, region in zip(design.program.drams, layout.regions):
        arrays[d.name] = {
            "base": region.base * top.word_bytes,
            "offset": slots[f"base_{d.name}"].offset,
            "shape": list(d.shape),
            "role": d.role,
            "np": np.dtype(d.dtype.np).str,
            "bits": d.dtype.bits,
            "signed": bool(d.dtype.signed),
        }
    scalars = [p for p in design.kernel.params if not p.is_array]
    return {
        "module": design.report["axi"]["module"],
        "word_bytes": top.word_bytes,
        "size": (1 << layout.depth_log2) * top.word_bytes,
        "arrays": arrays,
        "params": {p.name: {"offset": slots[f"arg_{p.name}"].offset, "bits": p.dtype.bits} for p in scalars},
        "results": {
            s.name: {"offset": slots[f"res_{s.name}"].offset, "bits": s.mem.dtype.bits}
            for s in design.program.scalar_outs
        },
        "flags": list(top.flags),
    }
