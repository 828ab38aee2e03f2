"""The top (hw/top.py): one or more PEs, each on its own DRAM channel. With one PE the Verilog
ports are the documented ones; with two, each PE runs on its own memory (a DRAM model in
Amaranth's simulator serves each channel) and `done` / `cycles` wait for the slower PE."""

import numpy as np
from amaranth.sim import Simulator

import hwgen as hw
from hwgen import int32
from hwgen.build import compile_kernel
from hwgen.dram import DramConfig
from hwgen.hw.top import Top
from hwgen.synth import ports_of
from hwgen.verilog import to_verilog, waivers
from hwgen_sim import runner

N = 16


@hw.kernel(tile={"i": 8})
def add_one(a: hw.Array[int32, N]) -> hw.Array[int32, N]:
    return hw.map(N, lambda i: a[i] + 1)


def test_one_pe_has_the_documented_ports():
    names = {n for n, _, _ in ports_of(add_one.elaborate().component)}
    assert {
        "start",
        "done",
        "busy",
        "cycles",
        "base_a",
        "base_out",
        "mem__rd_req__valid",
        "mem__rd_req__addr",
        "mem__rd_req__tag",
        "mem__rd_resp__data",
        "mem__wr__addr",
        "mem__wr__data",
        "mem__wr__mask",
    } <= names
    assert not any(n.startswith("pe") for n in names)


def test_two_pes_lint_clean(tmp_path):
    top = Top(compile_kernel(add_one), DramConfig(), pes=2)
    names = {n for n, _, _ in ports_of(top)}
    assert {"mem_0__rd_req__addr", "mem_1__wr__data", "done", "cycles"} <= names
    path = tmp_path / "two.v"
    path.write_text(to_verilog(top, "two"))
    (tmp_path / "two.vlt").write_text(waivers("two"))
    warnings = runner.lint(str(path), str(tmp_path / "two.vlt"))
    assert "%Warning" not in warnings and "%Error" not in warnings, warnings


async def _dram(ctx, chan, memory: dict, latency: int, stall: int):
    """Serve one channel: reads answered in order `latency` cycles later (tag echoed); writes
    taken, except that the write side refuses every `stall`-th cycle. Each step sets the
    inputs for the coming clock edge and records the transfers that edge makes."""
    pending, cycle = [], 0
    while True:
        await ctx.tick()
        cycle += 1
        ctx.set(chan.rd_req.ready, 1)
        ctx.set(chan.wr.ready, int(cycle % stall != 0))
        if ctx.get(chan.rd_req.valid):
            pending.append((cycle + latency, ctx.get(chan.rd_req.addr), ctx.get(chan.rd_req.tag)))
        if ctx.get(chan.wr.valid) and cycle % stall != 0:
            addr, data, mask = ctx.get(chan.wr.addr), ctx.get(chan.wr.data), ctx.get(chan.wr.mask)
            for k in range(4):
                if mask >> k & 1:
                    memory[addr + k] = (data >> (32 * k)) & 0xFFFFFFFF
        if pending and pending[0][0] <= cycle:
            _, addr, tag = pending.pop(0)
            word = sum(memory.get(addr + k, 0) << (32 * k) for k in range(4))
            ctx.set(chan.rd_resp.valid, 1)
            ctx.set(chan.rd_resp.data, word)
            ctx.set(chan.rd_resp.tag, tag)
        else:
            ctx.set(chan.rd_resp.valid, 0)


def test_two_pes_each_compute_on_their_own_memory():
    top = Top(compile_kernel(add_one), DramConfig(), pes=2)
    inputs = [np.arange(N, dtype=np.int32) * 3 - 7, np.arange(N, dtype=np.int32) * -5 + 2]
    memories = [{k: int(v) & 0xFFFFFFFF for k, v in enumerate(x)} for x in inputs]
    result = {}

    async def run(ctx):
        ctx.set(top.base_a, 0)
        ctx.set(top.base_out, 64)
        await ctx.tick().repeat(2)
        ctx.set(top.start, 1)
        await ctx.tick()
        ctx.set(top.start, 0)
        for _ in range(2000):
            await ctx.tick()
            if ctx.get(top.done):
                break
        result["done"], result["cycles"] = ctx.get(top.done), ctx.get(top.cycles)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(run)
    # the second PE's memory is slower: the top waits for it
    for chan, memory, latency in ((top.mem_0, memories[0], 5), (top.mem_1, memories[1], 30)):

        async def serve(ctx, c=chan, mem=memory, lat=latency):
            await _dram(ctx, c, mem, lat, 3)

        sim.add_testbench(serve, background=True)
    sim.run_until(3e-5)
    assert result["done"] == 1
    for x, memory in zip(inputs, memories):
        got = np.array([memory.get(64 + k, 0) for k in range(N)], dtype=np.uint32).view(np.int32)
        np.testing.assert_array_equal(got, add_one(x))
    assert result["cycles"] > 2 * 30  # counted until the slower PE was done
