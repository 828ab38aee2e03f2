"""The DRAM channel: its signals, and the arbiter that shares it among tile units.

The kernel has one channel, `mem`, made of three valid/ready streams (a transfer happens in a
cycle where both valid and ready are high; valid, once high, stays high with the same payload
until ready):

    mem.rd_req   kernel -> DRAM   addr (word address), tag
                 read the `words` consecutive words addr .. addr+words-1 (one beat).
    mem.rd_resp  DRAM -> kernel   data (`words` words, word k in bits [k*W, (k+1)*W)), tag
                 one beat per read request, in request order, carrying the request's tag.
    mem.wr       kernel -> DRAM   addr, data, mask
                 write word k of data to addr+k where mask bit k is set. A write is complete
                 when accepted: a read requested later sees it.

A word holds one array element in its low bits (upper bits zero on writes, ignored on reads).
Arrays are row-major at the word address given on the kernel's `base_<array>` port.

Two forms of the same channel: `dram_port` is the PE's, made of `amaranth.lib.stream` streams
whose payloads are `amaranth.lib.data` structures (`rd_req.payload.addr`, ...); `channel` is
the flat form a top exposes as Verilog ports (`mem__rd_req__addr`, ...), and `connect_flat`
wires one to the other.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .device import KEEP


def read_request(addr_bits: int, tag_bits: int = 0) -> wiring.Signature:
    members = {"valid": Out(1), "ready": In(1), "addr": Out(addr_bits)}
    if tag_bits:
        members["tag"] = Out(tag_bits)
    return wiring.Signature(members)


def read_response(data_bits: int, tag_bits: int = 0) -> wiring.Signature:
    members = {"valid": Out(1), "ready": In(1), "data": Out(data_bits)}
    if tag_bits:
        members["tag"] = Out(tag_bits)
    return wiring.Signature(members)


def write(addr_bits: int, data_bits: int, words: int) -> wiring.Signature:
    return wiring.Signature(
        {"valid": Out(1), "ready": In(1), "addr": Out(addr_bits), "data": Out(data_bits), "mask": Out(words)}
    )


def channel(addr_bits: int, word_bits: int, words: int, tag_bits: int) -> wiring.Signature:
    """The kernel's `mem` port (as seen from the kernel)."""
    data_bits = word_bits * words
    return wiring.Signature(
        {
            "rd_req": Out(read_request(addr_bits, tag_bits)),
            "rd_resp": In(read_response(data_bits, tag_bits)),
            "wr": Out(write(addr_bits, data_bits, words)),
        }
    )


def dram_port(addr_bits: int, word_bits: int, words: int, tag_bits: int) -> wiring.Signature:
    """The PE's DRAM channel (as seen from the PE): typed streams carrying the fields above."""
    data_bits = word_bits * words
    return wiring.Signature(
        {
            "rd_req": Out(stream.Signature(data.StructLayout({"addr": addr_bits, "tag": tag_bits}))),
            "rd_resp": In(stream.Signature(data.StructLayout({"data": data_bits, "tag": tag_bits}))),
            "wr": Out(stream.Signature(data.StructLayout({"addr": addr_bits, "data": data_bits, "mask": words}))),
        }
    )


def connect_flat(m: Module, typed, flat) -> None:
    """Drive the flat channel `flat` (a top's `channel` port) from the PE's `typed` port
    (`dram_port`), and the PE's inputs from the flat port's."""
    for name, fields, outward in (
        ("rd_req", ("addr", "tag"), True),
        ("rd_resp", ("data", "tag"), False),
        ("wr", ("addr", "data", "mask"), True),
    ):
        t, f = getattr(typed, name), getattr(flat, name)
        src, dst = (t, f) if outward else (f, t)
        m.d.comb += dst.valid.eq(src.valid)
        m.d.comb += src.ready.eq(dst.ready)
        for field in fields:
            if outward:
                m.d.comb += getattr(f, field).eq(getattr(t.payload, field))
            else:
                m.d.comb += getattr(t.payload, field).eq(getattr(f, field))


def tag_bits_for(readers: int) -> int:
    return max(1, (readers - 1).bit_length())


class Arbiter(wiring.Component):
    """Shares one channel among `readers` read clients and `writers` write clients.

    Requests are granted round-robin, one per cycle (a client's `ready` is one AND-OR of the
    other clients' `valid`s), into a request register per direction: the channel's request
    signals (`mem.rd_req`, `mem.wr`) come straight from flip-flops, so a request reaches the
    channel the cycle after its client's transfer. The register takes a new request in any
    cycle it is empty or the channel accepts the one it holds, so requests still flow one per
    cycle. A read request carries its client's number as its tag; responses are registered
    here (they reach a client one cycle after the channel delivers them) and go to the client
    their tag names. Clients are always ready for responses.

    `wr_sent_<k>` is high in a cycle where the channel accepts write client k's beat out of
    the register: a write is complete only then (see the channel's contract above), so a
    store counts itself done after it.

    Members: `rd_req_<k>`, `rd_resp_<k>` (read client k), `wr_<k>` and `wr_sent_<k>` (write
    client k), `mem` (a `dram_port`, its tags at least `tag` bits wide).
    """

    def __init__(self, readers: int, writers: int, addr_bits: int, word_bits: int, words: int, tag: int = 0):
        self._readers, self._writers = readers, writers
        data_bits = word_bits * words
        tag = max(tag, tag_bits_for(readers))
        members = {"mem": Out(dram_port(addr_bits, word_bits, words, tag))}
        for k in range(readers):
            members[f"rd_req_{k}"] = In(read_request(addr_bits))
            members[f"rd_resp_{k}"] = Out(read_response(data_bits))
        for k in range(writers):
            members[f"wr_{k}"] = In(write(addr_bits, data_bits, words))
            members[f"wr_sent_{k}"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        reqs = [getattr(self, f"rd_req_{k}") for k in range(self._readers)]
        wrs = [getattr(self, f"wr_{k}") for k in range(self._writers)]
        self._round_robin(m, reqs, self.mem.rd_req, tagged=True)
        sent = self._round_robin(m, wrs, self.mem.wr, tagged=False)
        for k, s in enumerate(sent):
            m.d.comb += getattr(self, f"wr_sent_{k}").eq(s)
        m.d.comb += self.mem.rd_resp.ready.eq(1)
        resp_in = self.mem.rd_resp.payload
        data = Signal.like(resp_in.data, name="resp_data")
        m.d.sync += data.eq(resp_in.data)
        for k in range(self._readers):
            resp = getattr(self, f"rd_resp_{k}")
            valid = Signal(name=f"resp_valid_{k}")
            m.d.sync += valid.eq(self.mem.rd_resp.valid & (resp_in.tag == k))
            m.d.comb += [resp.valid.eq(valid), resp.data.eq(data)]
        return m

    def _round_robin(self, m, clients, out, tagged: bool) -> list:
        """Grant one valid client per cycle, searching from the one after the last grant, into
        the request register that drives `out`. Returns, for each client, whether the channel
        accepts that client's request out of the register this cycle.

        Each client's grant is its own signal (a valid client wins when no client between the
        last grant and it is valid; which clients are between is kept in flip-flops), so a
        client's `ready` is one AND-OR after the other clients' `valid`s, and the payload is an
        and-or over the grants; the binary grant (the tag) is made from them in parallel."""
        n = len(clients)
        if n == 0:
            m.d.comb += out.valid.eq(0)
            return []
        kind = "rd" if tagged else "wr"
        won = [Signal(name=f"{kind}_won_{k}") for k in range(n)]
        grant = Signal(range(max(2, n)), name=f"{kind}_grant")
        held = Signal(name=f"{kind}_held")  # the request register holds a request
        owner = Signal(n, name=f"{kind}_owner", reset_less=True)  # one-hot: whose it is
        free = Signal(name=f"{kind}_free")  # it takes a new request this cycle
        m.d.comb += [free.eq(~held | out.ready), out.valid.eq(held)]
        if n > 1:

            def ahead(start: int, k: int) -> list:
                """The clients searched before k when the last grant was `start`."""
                order = [(start + 1 + j) % n for j in range(n)]
                return order[: order.index(k)]

            # ahead_k[j]: client j comes before client k in the search from the last grant,
            # held in flip-flops (made from the grant), so a client wins in one AND-OR of the
            # other clients' valids, with no decoding of the last grant on the way
            for k in range(n):
                mask = Signal(n, name=f"{kind}_ahead_{k}", init=sum(1 << j for j in ahead(0, k)))
                with m.If(free & _any(c.valid for c in clients)):
                    m.d.sync += [
                        mask[j].eq(_any(won[g] for g in range(n) if j in ahead(g, k))) for j in range(n) if j != k
                    ]
                m.d.comb += won[k].eq(clients[k].valid & ~_any(mask[j] & clients[j].valid for j in range(n) if j != k))
        else:
            m.d.comb += won[0].eq(clients[0].valid)
        for k, c in enumerate(clients):
            m.d.comb += c.ready.eq(won[k] & free)
            with m.If(won[k]):
                m.d.comb += grant.eq(k)
        payload = ["addr"] + (["tag"] if tagged else ["data", "mask"])
        any_valid = _any(c.valid for c in clients)
        with m.If(free):
            m.d.sync += [held.eq(any_valid), owner.eq(Cat(*won))]
        for name in payload:
            port = getattr(out.payload, name)
            reg = Signal.like(port, name=f"{kind}_held_{name}", reset_less=True)
            m.d.comb += port.eq(reg)
            # and-or over the one-hot grants: no decoding of `grant`; a lone client's payload
            # is taken as it is (its valid need not reach every payload bit)
            if name == "tag":
                value = grant
            elif n == 1:
                value = getattr(clients[0], name)
            else:
                value = _any(getattr(c, name) & won[k].replicate(len(port)) for k, c in enumerate(clients))
            chosen = Signal.like(port, name=f"{kind}_next_{name}")
            m.d.comb += chosen.eq(value)
            # each chunk of the register loads on its own copy of `free` (its own copy of
            # `held`, or'ed with the channel's ready): no one net enables every payload bit
            for lo in range(0, len(port), PAYLOAD_CHUNK):
                hi = min(lo + PAYLOAD_CHUNK, len(port))
                copy = Signal(name=f"{kind}_held_{name}_c{lo // PAYLOAD_CHUNK}", attrs=KEEP)
                with m.If(free):
                    m.d.sync += copy.eq(any_valid)
                with m.If(~copy | out.ready):
                    m.d.sync += reg[lo:hi].eq(chosen[lo:hi])
        return [held & out.ready & owner[k] for k in range(n)]


PAYLOAD_CHUNK = 32  # request-register bits that load on one copy of the load enable


def _any(values):
    out = 0
    for v in values:
        out = out | v
    return out
