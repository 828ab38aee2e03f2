"""A group-by's on-chip state: a content-addressed memory (CAM) of `capacity` slots in
registers.

Slot j holds a key, its folded values and a valid bit; slots fill in order of first
appearance, so `count` (how many are valid) is also the next free slot. One update per cycle,
at full rate even when consecutive updates share a key:

    update port  en, first, key, v<c>: In   (from the group-by's pipe)
    - every valid slot compares its key with `key` at once (one-hot: keys are unique);
    - the slot that matches combines `v<c>` into its values with the group's op;
    - with no match, slot `count` takes the key and values and `count` grows by one; with no
      free slot the sticky `overflow` flag rises instead (the golden model raises then);
    - `first` (the group-by's first element) empties the table before the update, so the slots
      not written read 0, as the golden model's do.

Two stages, so that no cycle both compares keys and adds values: in the update's cycle the
keys are compared (against the table, and against the key the update before is opening a
slot for), and the one-hot match is registered; the next cycle applies it. The table holds an
update the cycle after its request: before its pipe's `done` is seen.

Reads: `keys_r<k>`, `values_r<k>`, `count_r<k>` are ordinary read ports (onchip.read_port)
with no latency, for the stores and scalar results that consume the group-by.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .datapath import combine, dtype_shape, select
from .onchip import lane_data, lane_index, read_port

ROLES = ("keys", "values", "count")


def update_port(group) -> wiring.Signature:
    members = {"en": Out(1), "first": Out(1), "key": Out(dtype_shape(group.keys.dtype))}
    for c in range(width_of(group)):
        members[f"v{c}"] = Out(dtype_shape(group.values.dtype))
    return wiring.Signature(members)


def width_of(group) -> int:
    return group.values.shape[1] if len(group.values.shape) == 2 else 1


class GroupMem(wiring.Component):
    """Hardware for a loops.Group. `reads`: role -> list of lane counts, one per read port."""

    def __init__(self, group, reads: dict):
        self.group = group
        self._reads = reads
        members = {"upd": In(update_port(group)), "overflow": Out(1)}
        for role in ROLES:
            mem = getattr(group, role)
            for k, lanes in enumerate(reads.get(role, [])):
                members[f"{role}_r{k}"] = In(read_port(mem.shape, mem.dtype, lanes))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        g, u = self.group, self.upd
        cap, width = g.capacity, width_of(g)
        vshape = dtype_shape(g.values.dtype)
        keys = [Signal(dtype_shape(g.keys.dtype), name=f"key{j}") for j in range(cap)]
        values = [[Signal(vshape, name=f"val{j}_{c}") for c in range(width)] for j in range(cap)]
        valid = [Signal(name=f"valid{j}") for j in range(cap)]
        count = Signal(range(cap + 1))
        names = iter(range(1 << 30))

        def new_signal(shape, hint):
            return Signal(shape, name=f"{hint}{next(names)}")

        # stage B: the update of the cycle before, with its match found
        b_en, b_first, b_found = Signal(name="b_en"), Signal(name="b_first"), Signal(name="b_found")
        b_key = Signal.like(u.key, name="b_key")
        b_values = [Signal(vshape, name=f"b_v{c}") for c in range(width)]
        b_hits = [Signal(name=f"b_hit{j}") for j in range(cap)]
        base = Signal(range(cap + 1))  # the slots in use before B's update
        m.d.comb += base.eq(Mux(b_first, 0, count))
        opening = Signal()  # B opens slot `base` for b_key
        m.d.comb += opening.eq(b_en & ~b_found & (base != cap))
        # stage A: compare the request's key with the table as B leaves it
        kept = ~(b_en & b_first)  # B empties the table before its update
        same_as_b = Signal()
        m.d.comb += same_as_b.eq(opening & (b_key == u.key))
        hits = [Signal(name=f"hit{j}") for j in range(cap)]
        m.d.comb += [
            h.eq(u.en & ~u.first & ((valid[j] & kept & (keys[j] == u.key)) | (same_as_b & (base == j))))
            for j, h in enumerate(hits)
        ]
        m.d.sync += [b_en.eq(u.en), b_first.eq(u.first), b_key.eq(u.key), b_found.eq(_any(hits))]
        m.d.sync += [a.eq(b) for a, b in zip(b_hits, hits)]
        m.d.sync += [b.eq(getattr(u, f"v{c}")) for c, b in enumerate(b_values)]
        with m.If(b_en):
            for j in range(cap):
                with m.If(b_hits[j]):
                    for c in range(width):
                        m.d.sync += values[j][c].eq(
                            combine(m, g.op, values[j][c], b_values[c], g.values.dtype, new_signal)
                        )
                with m.Elif(~b_found & (base == j)):
                    m.d.sync += [keys[j].eq(b_key), valid[j].eq(1)]
                    m.d.sync += [values[j][c].eq(b_values[c]) for c in range(width)]
                with m.Elif(b_first):
                    m.d.sync += [keys[j].eq(0), valid[j].eq(0)]
                    m.d.sync += [values[j][c].eq(0) for c in range(width)]
            with m.If(b_first):
                m.d.sync += self.overflow.eq(0)
            with m.If(b_found):
                m.d.sync += count.eq(base)
            with m.Elif(base == cap):
                m.d.sync += [count.eq(base), self.overflow.eq(1)]
            with m.Else():
                m.d.sync += count.eq(base + 1)

        for role in ROLES:
            mem = getattr(g, role)
            for k, lanes in enumerate(self._reads.get(role, [])):
                port = getattr(self, f"{role}_r{k}")
                for lane in range(lanes):
                    idx = lane_index(port, lane, len(mem.shape))
                    if role == "count":
                        value = count
                    elif role == "keys":
                        value = select(keys, idx[0])
                    elif width == 1:
                        value = select([row[0] for row in values], idx[0])
                    else:
                        value = select([select(row, idx[1]) for row in values], idx[0])
                    m.d.comb += lane_data(port, lane).eq(value)
        return m


def _any(bits):
    out = bits[0]
    for b in bits[1:]:
        out = out | b
    return out
