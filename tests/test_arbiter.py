"""The DRAM channel's arbiter grants round-robin, one client per cycle, searching from the
client after the last grant, into a request register that drives the channel; checked cycle by
cycle against a plain Python model on random valid and ready patterns, for read clients
(address and tag) and write clients (address, data, mask and the `wr_sent` flags), for every
client count the apps use and more."""

import random
import re

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


ADDR_BITS, WORD_BITS, WORDS = 40, 32, 3  # the request register loads in 32-bit chunks


def _payload(kind: str, k: int, cycle: int) -> dict:
    """A client's payload in a cycle (it changes every cycle and in every chunk of the
    request register, so a stale pick or a chunk loaded at the wrong time shows)."""
    mix = (k + 1) * 0x9E3779B97F4A7C15 ^ (cycle + 1) * 0xC2B2AE3D27D4EB4F
    out = {"addr": mix % 2**ADDR_BITS}
    if kind == "wr":
        out.update(data=mix * 0x100000001B3 % 2 ** (WORD_BITS * WORDS), mask=mix % 2**WORDS)
    return out


@pytest.mark.parametrize("clients", [1, 2, 3, 6, 7])
@pytest.mark.parametrize("kind", ["rd", "wr"])
def test_round_robin_matches_the_model(kind, clients):
    readers, writers = (clients, 1) if kind == "rd" else (1, clients)
    arb = Arbiter(readers, writers, ADDR_BITS, WORD_BITS, WORDS)
    out = arb.mem.rd_req if kind == "rd" else arb.mem.wr
    rng = random.Random(clients)
    pattern = [([rng.random() < 0.6 for _ in range(clients)], rng.random() < 0.8) for _ in range(300)]
    seen = []

    async def bench(ctx):
        ports = [getattr(arb, f"{kind}_req_{k}" if kind == "rd" else f"wr_{k}") for k in range(clients)]
        for cycle, (valid, ready) in enumerate(pattern):
            for k, (p, v) in enumerate(zip(ports, valid)):
                ctx.set(p.valid, v)
                for name, value in _payload(kind, k, cycle).items():
                    ctx.set(getattr(p, name), value)
            ctx.set(out.ready, ready)
            await ctx.delay(1e-9)
            got = {name: ctx.get(getattr(out.payload, name)) for name in _payload(kind, 0, 0)}
            if kind == "rd":
                got["tag"] = ctx.get(out.payload.tag)
            sent = [ctx.get(getattr(arb, f"wr_sent_{k}")) for k in range(clients)] if kind == "wr" else []
            seen.append((ctx.get(out.valid), got, [ctx.get(p.ready) for p in ports], sent))
            await ctx.tick()

    sim = Simulator(arb)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    last, held = 0, None  # held: (client, payload) in the request register, or None
    for cycle, ((valid, ready), (out_valid, got, readies, sent)) in enumerate(zip(pattern, seen)):
        assert out_valid == (held is not None), cycle
        if held is not None:
            assert got == held[1], cycle
        if kind == "wr":
            assert sent == [int(held is not None and ready and j == held[0]) for j in range(clients)], cycle
        free = held is None or ready
        k = _expected(valid, last) if free else None
        assert readies == [int(j == k) for j in range(clients)], cycle
        if free:
            held = None
            if k is not None:
                want = _payload(kind, k, cycle)
                if kind == "rd":
                    want["tag"] = k
                held, last = (k, want), k


def test_request_register_loads_on_a_kept_enable_copy_per_chunk():
    """The write request register (40 + 96 + 3 bits) loads on one kept copy of its enable per
    32-bit chunk of each field, so the channel's ready does not fan out to every bit at once."""
    from amaranth.back import verilog

    arb = Arbiter(2, 3, ADDR_BITS, WORD_BITS, WORDS)
    text = verilog.convert(arb, ports=None, name="arb")
    for kind, name, bits in (
        ("wr", "addr", ADDR_BITS),
        ("wr", "data", WORD_BITS * WORDS),
        ("wr", "mask", WORDS),
        ("rd", "addr", ADDR_BITS),
    ):
        chunks = -(-bits // 32)
        for c in range(chunks):
            assert re.search(rf"\(\* keep = [^)]*\)\s*(\(\*[^)]*\)\s*)*reg {kind}_held_{name}_c{c}\b", text), (
                kind,
                name,
                c,
            )
        assert f"{kind}_held_{name}_c{chunks}" not in text
