"""The cycle model: predicted cycles per controller, and the roofline bound.

It reads a `passes.Compiled` (never the hardware): each formula restates the timing its
hardware template documents (hw/*.py), with the constants of timing.py; simulation checks
the sum. With the DRAM at its fixed latency the model is exact, except where transfers in
different stages of a metapipeline share the channel: the model bounds such a step by the sum of
their beats, which is exact when they start together and a few cycles short otherwise:

    Pipe        iterations + latency + 1          (latency: the datapath's write stage)
    SeqLoop     1 + iterations * sum(stage + 1)
    MetaLoop    1 + sum over steps of (slowest stage in the step + 1);
                iterations + stages - 1 steps, stage s busy in steps s .. s + iterations - 1;
                stages of one step that all move data share the channel: the step lasts at
                least their read beats + DRAM latency + 5 (writes: their beats + 4)
    Parallel    max(children) + 1; loads in parallel share one request per cycle:
                total beats + DRAM latency + 5 + 1
    Load        beats + DRAM latency + 5       (requests are registered on the way out,
                                               responses on the way in and again before
                                               the tile memory)
    Store       beats + read latency of its memory + 4   (done once the channel
                                               takes the last beat from the arbiter)
    kernel      root + 1

Roofline: max(compute bound, memory bound), where the compute bound is the busiest pipe's total
cycles of issue (iterations, each carrying all its lanes), and the memory bound moves each
input element in and each output element out once, `words_per_cycle` per cycle each way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .dram import DramConfig
from .loops import Load, Loop, Parallel, Pipe, Store
from .timing import JOIN_EXTRA, LOAD_EXTRA, STORE_EXTRA, beats_of


@dataclass
class Prediction:
    cycles: int
    roofline: int
    compute_bound: int
    memory_bound: int
    lanes: int
    tree: dict


def predict(compiled, dram: DramConfig) -> Prediction:
    """Cycles of a `passes.Compiled` kernel on `dram`; the report's tree is labelled with
    each controller's instance name."""
    model = _Model(compiled, dram)
    prog = compiled.program
    root, tree = model.named(prog.root, 1)
    compute = max(model.pipe_work.values(), default=0)
    read_words = sum(d.size for d in prog.drams if d.role == "in")
    write_words = sum(d.size for d in prog.drams if d.role == "out")
    memory = math.ceil(max(read_words, write_words) / dram.words_per_cycle)
    return Prediction(root + 1, max(compute, memory), compute, memory, model.lanes, tree)


class _Model:
    """The formulas of the module doc, one method per controller kind. Each returns (cycles,
    report dict) of a controller run `trips` times in all (trips count a pipe's work)."""

    def __init__(self, compiled, dram: DramConfig):
        self.compiled, self.dram, self.words = compiled, dram, dram.words_per_cycle
        self.pipe_work: dict = {}  # pipe name -> issue cycles over the whole kernel
        self.lanes = 1

    def named(self, c, trips: int) -> tuple:
        kind = {Pipe: self.pipe, Load: self.load, Store: self.store, Parallel: self.parallel, Loop: self.loop}
        n, entry = kind[type(c)](c, trips)
        return n, {"unit": c.name, **entry}

    def pipe(self, c: Pipe, trips: int) -> tuple:
        latency = self.compiled.pipe_plan(c).latency
        self.pipe_work[c.name] = self.pipe_work.get(c.name, 0) + trips * c.iterations
        lanes = math.prod(k.par for k in c.counters)
        self.lanes = max(self.lanes, lanes)
        n = c.iterations + latency + 1
        return n, {"pipe": [k.name for k in c.counters], "iterations": c.iterations,
                   "lanes": lanes, "latency": latency, "cycles": n}

    def load(self, c: Load, trips: int) -> tuple:
        beats = beats_of(c.mem.shape, self.words)
        n = beats + self.dram.latency + LOAD_EXTRA
        return n, {"load": c.dram.name, "beats": beats, "cycles": n}

    def store(self, c: Store, trips: int) -> tuple:
        beats = beats_of(c.shape, self.words)
        n = beats + self.compiled.plans[c.mem.name].latency + STORE_EXTRA
        return n, {"store": c.dram.name, "beats": beats, "cycles": n}

    def parallel(self, c: Parallel, trips: int) -> tuple:
        kids = [self.named(k, trips) for k in c.children]
        if all(isinstance(k, Load) for k in c.children):  # loads share one request per cycle
            beats = sum(beats_of(k.mem.shape, self.words) for k in c.children)
            n = beats + self.dram.latency + LOAD_EXTRA + JOIN_EXTRA
        else:
            n = max(k[0] for k in kids) + JOIN_EXTRA
        return n, {"parallel": [k[1] for k in kids], "cycles": n}

    def loop(self, c: Loop, trips: int) -> tuple:
        it = c.iterations
        kids = [self.named(k, trips * it) for k in c.stages]
        durations = [k[0] for k in kids]
        n = self.metapipeline(c, durations) if c.meta else 1 + it * sum(d + 1 for d in durations)
        return n, {"loop": [k.name for k in c.counters], "iterations": it,
                   "metapipeline": c.meta, "stages": [k[1] for k in kids], "cycles": n}

    def metapipeline(self, c: Loop, durations: list) -> int:
        """1 + sum over steps of (slowest active stage + 1); stages of one step that all move
        data share the channel's one request per cycle each way."""
        it, S = c.iterations, len(durations)
        reads = [self.channel_beats(k, Load) for k in c.stages]
        writes = [self.channel_beats(k, Store) for k in c.stages]
        n = 1
        for step in range(it + S - 1):
            active = [s for s in range(S) if 0 <= step - s < it]
            slowest = max(durations[s] for s in active)
            r = [reads[s] for s in active if reads[s]]
            w = [writes[s] for s in active if writes[s]]
            if len(r) > 1:
                slowest = max(slowest, sum(r) + self.dram.latency + LOAD_EXTRA)
            if len(w) > 1:
                slowest = max(slowest, sum(w) + STORE_EXTRA)
            n += slowest + 1
        return n

    def channel_beats(self, c, kind) -> int:
        """DRAM beats that Loads (or Stores) of controller `c` move in one run of it."""
        if isinstance(c, kind):
            return beats_of(c.mem.shape if kind is Load else c.shape, self.words)
        if isinstance(c, Parallel):
            return sum(self.channel_beats(k, kind) for k in c.children)
        if isinstance(c, Loop):
            return c.iterations * sum(self.channel_beats(k, kind) for k in c.stages)
        return 0


# ---------------------------------------------------------------- mesh: the ring all-reduce

RING_HOP = 4    # a word's cycles from one PE's pop to its neighbour's pop, beyond the link latency
RING_LOAD = 4   # the unit's cycles beyond beats + DRAM latency from go to its first SEND
RING_STORE = 6  # the unit's cycles beyond the beats it writes after its last pop, to done


def ring_round_cycles(ring) -> int:
    """One round of the ring all-reduce (hw/collective.py), from its first send to the next
    round's: 2p - 2 steps of max(S, F) each, F = L + RING_HOP (the next round's step 0 is
    sent during this round's last step)."""
    hop = ring.latency + RING_HOP
    return (2 * ring.p - 2) * max(ring.slice, hop)


def ring_allreduce_cycles(ring, dram: DramConfig) -> int:
    """Cycles from the RingAllReduce unit's go to its done (hw/collective.py's docstring):
    the load of round 0's slices (of all of the operand when it does not stream), R rounds,
    the last round's last step of S words, then the write of the last round's slices (of
    all of the result when it does not stream: the same number of beats)."""
    first = ring.first_beats(dram.words_per_cycle)
    return (first + dram.latency + RING_LOAD) + ring.rounds * ring_round_cycles(ring) + ring.slice \
        + first + RING_STORE


def predict_mesh(compiled, dram: DramConfig, ring) -> Prediction:
    """Cycles of a mesh kernel: every PE runs Seq[program, ring all-reduce] on the same
    timeline (SPMD on a ring: symmetric), and the mesh top adds a cycle to combine the PEs'
    done. Roofline: the largest of the per-PE compute and memory bounds and the link bound
    2(p - 1)/p * n words over one link each way."""
    body = predict(compiled, dram)
    ring_cycles = ring_allreduce_cycles(ring, dram)
    cycles = body.cycles + ring_cycles + 1
    link = math.ceil(2 * (ring.p - 1) * ring.n / ring.p)
    tree = {"unit": "seq", "stages": [body.tree, {"unit": "ring0", "all_reduce": ring.op, "p": ring.p,
                                                  "words": ring.n, "slice": ring.slice,
                                                  "rounds": ring.rounds, "cycles": ring_cycles}],
            "cycles": cycles}
    return Prediction(cycles, max(body.roofline, link), body.compute_bound, body.memory_bound, body.lanes, tree)
