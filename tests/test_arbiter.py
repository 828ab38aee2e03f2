"""The DRAM channel's arbiter grants round-robin, one client per cycle, searching from the
client after the last grant; checked cycle by cycle against a plain Python model on random
valid and ready patterns, for every client count the apps use and more."""

import random

import pytest
from amaranth.sim import Simulator

from hwgen.hw.memchannel import Arbiter


def _expected(valid: list, last: int):
    n = len(valid)
    for j in range(n):
        k = (last + 1 + j) % n
        if valid[k]:
            return k
    return None


@pytest.mark.parametrize("readers", [1, 2, 3, 6, 7])
def test_round_robin_matches_the_model(readers):
    arb = Arbiter(readers, 1, 16, 8, 2)
    rng = random.Random(readers)
    pattern = [([rng.random() < 0.6 for _ in range(readers)], rng.random() < 0.8) for _ in range(300)]
    seen = []

    async def bench(ctx):
        clients = [getattr(arb, f"rd_req_{k}") for k in range(readers)]
        for k, c in enumerate(clients):
            ctx.set(c.addr, 100 + k)
        for valid, ready in pattern:
            for c, v in zip(clients, valid):
                ctx.set(c.valid, v)
            ctx.set(arb.mem.rd_req.ready, ready)
            await ctx.delay(1e-9)
            readies = [ctx.get(c.ready) for c in clients]
            seen.append((ctx.get(arb.mem.rd_req.valid), ctx.get(arb.mem.rd_req.addr),
                         ctx.get(arb.mem.rd_req.tag), readies))
            await ctx.tick()

    sim = Simulator(arb)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    last = 0
    for (valid, ready), (out_valid, addr, tag, readies) in zip(pattern, seen):
        k = _expected(valid, last)
        assert out_valid == (k is not None)
        assert readies == [int(ready and j == k) for j in range(readers)]
        if k is not None:
            assert (addr, tag) == (100 + k, k)
            if ready:
                last = k
