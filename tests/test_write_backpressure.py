"""A kernel counts as done only once the channel has accepted every write: the arbiter's
request register holds a beat until the channel takes it, and a store waits for its last beat
to leave it (memchannel.Arbiter `wr_sent`). Checked in Amaranth's simulator against a Python
DRAM that refuses most write beats and some read requests."""

import numpy as np
from amaranth.sim import Simulator

import hwgen as hw
from hwgen import int32

N, WORDS, LATENCY = 16, 4, 3
X_BASE, OUT_BASE = 0, 64


@hw.kernel(tile={"i": 8})
def double(x: hw.Array[int32, N]) -> hw.Array[int32, N]:
    return hw.map(N, lambda i: x[i] * 2 + 1)


def _run(write_ok, read_ok):
    """Run `double` once; the DRAM takes a write beat in cycle t only if write_ok(t) and a read
    request only if read_ok(t). Returns (memory, cycle done rose, cycle of each write)."""
    design = double.build()
    dut = design.component
    x = np.arange(N, dtype=np.int64) * 3 - 20
    memory = {X_BASE + k: int(v) & 0xFFFFFFFF for k, v in enumerate(x)}
    state = {"done_at": None, "writes": []}

    async def bench(ctx):
        mem = dut.mem
        ctx.set(dut.base_x, X_BASE)
        ctx.set(dut.base_out, OUT_BASE)
        queue = []  # (due cycle, addr, tag)
        for t in range(2000):
            ctx.set(dut.start, int(t == 2))
            ctx.set(mem.rd_req.ready, int(read_ok(t)))
            ctx.set(mem.wr.ready, int(write_ok(t)))
            head = queue[0] if queue and queue[0][0] <= t else None
            ctx.set(mem.rd_resp.valid, int(head is not None))
            if head is not None:
                words = [memory.get(head[1] + k, 0) for k in range(WORDS)]
                ctx.set(mem.rd_resp.data, sum(w << (32 * k) for k, w in enumerate(words)))
                ctx.set(mem.rd_resp.tag, head[2])
                queue.pop(0)
            await ctx.delay(1e-9)
            if ctx.get(mem.rd_req.valid) and read_ok(t):
                queue.append((t + LATENCY, ctx.get(mem.rd_req.addr), ctx.get(mem.rd_req.tag)))
            if ctx.get(mem.wr.valid) and write_ok(t):
                addr, data, mask = ctx.get(mem.wr.addr), ctx.get(mem.wr.data), ctx.get(mem.wr.mask)
                for k in range(WORDS):
                    if mask >> k & 1:
                        memory[addr + k] = data >> (32 * k) & 0xFFFFFFFF
                state["writes"].append(t)
            if t > 2 and ctx.get(dut.done) and state["done_at"] is None:
                state["done_at"] = t
            if state["done_at"] is not None and t > state["done_at"] + 30:
                break
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    got = np.array([memory.get(OUT_BASE + k, 0) for k in range(N)], dtype=np.uint32).view(np.int32)
    return got, x * 2 + 1, state["done_at"], state["writes"]


def test_done_waits_for_every_refused_write():
    # writes only every 7th cycle; reads refused one cycle in three
    got, want, done_at, writes = _run(lambda t: t % 7 == 0, lambda t: t % 3 != 1)
    assert done_at is not None
    np.testing.assert_array_equal(got, want)
    assert len(writes) == N // WORDS
    assert max(writes) < done_at  # no beat still waiting when the kernel says it is done


def test_done_follows_the_last_write_by_a_fixed_delay():
    """With the channel always ready, the kernel's done comes as many cycles after the last
    write as when writes are refused up to that last write: it waits for the write, not for a
    fixed count."""
    _, _, free_done, free_writes = _run(lambda t: True, lambda t: True)
    last = free_writes[-1]
    _, _, held_done, held_writes = _run(lambda t: t != last and t != last + 1, lambda t: True)
    assert held_writes[-1] == last + 2
    assert held_done - held_writes[-1] == free_done - last
