"""Your own cocotb test of a hwgen kernel, run against the kernel behind AXI:

    hwgen sim patterns/saxpy.py --cocotb examples/saxpy_cocotb_test.py

The kernel is patterns/saxpy.py's `saxpy(a, x, y) = a * x + y` on int32 arrays. `AxiKernel`
(hwgen_sim.axi_kernel) puts arrays into the AXI RAM the kernel reads, runs the kernel through its
control registers as a CPU's driver would, and reads the results back.
"""

import cocotb
import numpy as np

from hwgen_sim.axi_kernel import AxiKernel


@cocotb.test()
async def saxpy_twice_without_reset(dut):
    """Two runs back to back: new inputs and a new scalar each time."""
    k = await AxiKernel.attach(dut)
    n = k.arrays["x"]["shape"][0]
    rng = np.random.default_rng(1)
    for a in (3, -7):
        x = rng.integers(-1000, 1000, n).astype(np.int32)
        y = rng.integers(-1000, 1000, n).astype(np.int32)
        k.write("x", x)
        k.write("y", y)
        cycles = await k.run(a=a)
        assert np.array_equal(k.read("out"), a * x + y)
        dut._log.info(f"a={a}: {cycles} cycles")


@cocotb.test()
async def saxpy_under_back_pressure(dut):
    """Every AXI channel of the RAM stalls in 30 % of cycles: slower, the same result."""
    k = await AxiKernel.attach(dut, pause=0.3, seed=5)
    n = k.arrays["x"]["shape"][0]
    x = np.arange(n, dtype=np.int32)
    k.write("x", x)
    k.write("y", np.ones(n, np.int32))
    await k.run(a=2)
    assert np.array_equal(k.read("out"), 2 * x + 1)
