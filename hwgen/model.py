"""The cycle model: predicted cycles per controller, and the roofline bound.

It reads a `passes.Compiled` (never the hardware): each formula restates the timing its
hardware template documents (hw/*.py), with the constants of timing.py; simulation checks
the sum. With the DRAM at its fixed latency (no jitter: the channel takes a read request and
a write beat every cycle) the model is exact:

    Pipe        iterations + latency + 1          (latency: the datapath's write stage)
    SeqLoop     1 + iterations * sum(stage + 1)
    MetaLoop    1 + sum over steps of (the step + 1); iterations + stages - 1 steps, stage s
                busy in steps s .. s + iterations - 1; a step lasts until the last of its
                stages, all started together, is done
    Parallel    (the children, started together, until the last is done) + 1
    Load        beats + DRAM latency + 5       (requests are registered on the way out,
                                               responses on the way in and again before
                                               the tile memory)
    Store       beats + read latency of its memory + 4   (done once the channel
                                               takes the last beat from the arbiter)
    Collective  the sum of its phases' cycles (phase_cycles: a mesh PE's ring collectives
                and block copies, below), the clients of the PE's collective channel
                (hw/pe.py `cmem`): no transfer of the patterns ever waits for them
    kernel      root + 1

Controllers started together (a step's stages, a fork's children) each take their own
cycles unless two of them move data the same way (reads, or writes) during that run: they
then share that direction's arbiter, one grant per cycle, round-robin from the client after
the last one granted (hw/memchannel.py), and a transfer that waits for a grant is slower by
as many cycles as it waits. Such a step or fork is run through `_Channel`, an event-level
model of the two arbiters: every controller below it is a process with the timing above,
each load's requests (from its go + 2, one per grant, done DRAM latency + 4 cycles after the
last) and each store's beats (fetched from its memory from its go + 2 while fewer than read
latency + 2 are owed, each offered read latency + 1 cycles after its fetch, done 2 cycles
after the arbiter takes the last) are arbitrated cycle by cycle in the cycles where any wait.
So its cycles are computed, not bounded, also when the transfers start at different cycles
(a load of the next tile beside the loads of a nested loop). Which client an arbiter last
granted carries from one run to the next (it decides who goes first when two ask in the same
cycle); runs are memoized on (controller, last grants), and a loop's identical iterations or
steps are summed once the last grants repeat, so the model stays in milliseconds.

Under DRAM jitter the channel refuses requests at random and answers late: the model stays
the fixed-latency one (a lower bound in practice; see docs/hardware.md).

Each report entry gives a leaf's cycles when it has the channel to itself, and a loop's or
fork's cycles in its first run.

Roofline: max(compute bound, memory bound), where the compute bound is the busiest pipe's total
cycles of issue (iterations, each carrying all its lanes), and the memory bound moves each
input element in and each output element out once, `words_per_cycle` per cycle each way.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from .dram import DramConfig
from .loops import Collective, Load, Loop, Parallel, Pipe, Store, children, walk
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
    root, _ = model.run(prog.root, (0, 0))
    _, tree = model.named(prog.root, 1)
    compute = max(model.pipe_work.values(), default=0)
    read_words = sum(d.size for d in prog.drams if d.role == "in")
    write_words = sum(d.size for d in prog.drams if d.role == "out")
    memory = math.ceil(max(read_words, write_words) / dram.words_per_cycle)
    return Prediction(root + 1, max(compute, memory), compute, memory, model.lanes, tree)


class _Model:
    """The formulas of the module doc, one method per controller kind. `named` builds the
    report tree (each leaf's uncontended cycles, each loop's and fork's first run); `run` gives
    the cycles of one run of a controller and the arbiters' last grants after it."""

    def __init__(self, compiled, dram: DramConfig):
        self.compiled, self.dram, self.words = compiled, dram, dram.words_per_cycle
        self.pipe_work: dict = {}  # pipe name -> issue cycles over the whole kernel
        self.lanes = 1
        everything = list(walk(compiled.program.root))
        # arbiter client numbers: the PE numbers its loads and stores in this order (hw/pe.py);
        # collective phases are the clients of an arbiter and DRAM channel of their own
        self.client = {
            c.name: k for kind in (Load, Store) for k, c in enumerate(x for x in everything if isinstance(x, kind))
        }
        self.clients = tuple(sum(isinstance(x, kind) for x in everything) for kind in (Load, Store))
        self.first_phase: dict = {}  # collective name -> the number of its first phase (ring<k>)
        phases = 0
        for c in everything:
            if isinstance(c, Collective):
                self.first_phase[c.name] = phases
                phases += len(c.phases)
        self.memo: dict = {}  # (controller name, last grants) -> (cycles, last grants)
        self.first: dict = {}  # controller name -> cycles of its first run
        self.moves: dict = {}  # controller name -> (read beats, write beats) of one run

    # ---------------------------------------------------------------- the report tree

    def named(self, c, trips: int) -> tuple:
        kind = {
            Pipe: self.pipe,
            Load: self.load,
            Store: self.store,
            Parallel: self.parallel,
            Loop: self.loop,
            Collective: self.collective,
        }
        n, entry = kind[type(c)](c, trips)
        return n, {"unit": c.name, **entry}

    def pipe(self, c: Pipe, trips: int) -> tuple:
        latency = self.compiled.pipe_plan(c).latency
        self.pipe_work[c.name] = self.pipe_work.get(c.name, 0) + trips * c.iterations
        lanes = math.prod(k.par for k in c.counters)
        self.lanes = max(self.lanes, lanes)
        n = self.leaf_cycles(c)
        return n, {
            "pipe": [k.name for k in c.counters],
            "iterations": c.iterations,
            "lanes": lanes,
            "latency": latency,
            "cycles": n,
        }

    def load(self, c: Load, trips: int) -> tuple:
        n = self.leaf_cycles(c)
        return n, {"load": c.dram.name, "beats": beats_of(c.mem.shape, self.words), "cycles": n}

    def store(self, c: Store, trips: int) -> tuple:
        n = self.leaf_cycles(c)
        return n, {"store": c.dram.name, "beats": beats_of(c.shape, self.words), "cycles": n}

    def collective(self, c: Collective, trips: int) -> tuple:
        phases = []
        for k, ph in enumerate(c.phases, self.first_phase[c.name]):
            words = ph.words if ph.kind == "copy" else ph.n
            entry = {"unit": f"ring{k}", "collective": ph.kind, "axis": ph.axis, "p": ph.p, "words": words}
            if ph.kind != "copy":
                entry.update(op=ph.op, directions=ph.dirs, slice=ph.slice, rounds=ph.rounds)
                entry.update({"axes": list(ph.axes)} if ph.axes else {})
                entry.update({"tours": True} if ph.tour else {})
            phases.append({**entry, "cycles": phase_cycles(ph, self.dram)})
        n = self.leaf_cycles(c)
        return n, {"collective": phases, "cycles": n}

    def parallel(self, c: Parallel, trips: int) -> tuple:
        kids = [self.named(k, trips) for k in c.children]
        n = self.first.get(c.name) or self.run(c, (0, 0))[0]  # else: only run sharing the channel
        return n, {"parallel": [k[1] for k in kids], "cycles": n}

    def loop(self, c: Loop, trips: int) -> tuple:
        it = c.iterations
        kids = [self.named(k, trips * it) for k in c.stages]
        n = self.first.get(c.name) or self.run(c, (0, 0))[0]  # else: only run sharing the channel
        return n, {
            "loop": [k.name for k in c.counters],
            "iterations": it,
            "metapipeline": c.meta,
            "stages": [k[1] for k in kids],
            "cycles": n,
        }

    # ---------------------------------------------------------------- cycles

    def leaf_cycles(self, c) -> int:
        """Cycles of a pipe, or of a load or store that has the channel to itself."""
        if isinstance(c, Pipe):
            return c.iterations + self.compiled.pipe_plan(c).latency + 1
        if isinstance(c, Load):
            return beats_of(c.mem.shape, self.words) + self.dram.latency + LOAD_EXTRA
        if isinstance(c, Collective):
            return sum(phase_cycles(ph, self.dram) for ph in c.phases)
        return beats_of(c.shape, self.words) + self.read_latency(c) + STORE_EXTRA

    def read_latency(self, c: Store) -> int:
        return self.compiled.plans[c.mem.name].latency

    def run(self, c, last: tuple) -> tuple:
        """(cycles, last grants after) of one run of `c` started when the read and write
        arbiters last granted the clients `last` (a pair)."""
        key = (c.name, last)
        if key not in self.memo:
            self.memo[key] = self._run(c, last)
            self.first.setdefault(c.name, self.memo[key][0])
        return self.memo[key]

    def _run(self, c, last: tuple) -> tuple:
        if isinstance(c, Pipe):
            return self.leaf_cycles(c), last
        if isinstance(c, Load):
            return self.leaf_cycles(c), (self.client[c.name], last[1])
        if isinstance(c, Store):
            return self.leaf_cycles(c), (last[0], self.client[c.name])
        if isinstance(c, Collective):  # on its own channel: the patterns' arbiters stay as they were
            return self.leaf_cycles(c), last
        if isinstance(c, Parallel):
            n, last = self.together(c.children, last)
            return n + JOIN_EXTRA, last
        if c.meta:
            return self.metapipeline(c, last)
        stages = c.stages

        def iteration(last):
            n = 0
            for s in stages:
                d, last = self.run(s, last)
                n += d + 1
            return n, last

        n, last = repeat(c.iterations, iteration, last)
        return 1 + n, last

    def metapipeline(self, c: Loop, last: tuple) -> tuple:
        """1 + sum over steps of (the step's cycles + 1): stage s runs in steps s ..
        s + iterations - 1; consecutive steps with the same stages are repeated."""
        it, S = c.iterations, len(c.stages)
        groups: list = []
        for step in range(it + S - 1):
            active = tuple(c.stages[s] for s in range(S) if 0 <= step - s < it)
            if groups and groups[-1][0] == active:
                groups[-1][1] += 1
            else:
                groups.append([active, 1])
        n = 1
        for active, count in groups:

            def step(last, active=active):
                d, last = self.together(active, last)
                return d + 1, last

            d, last = repeat(count, step, last)
            n += d
        return n, last

    def together(self, stages, last: tuple) -> tuple:
        """(cycles until the last of `stages` is done, last grants after) when they all start
        in the same cycle. When two of them move data the same way they share that arbiter:
        the step is simulated cycle by cycle (_Channel); else each runs as alone."""
        key = (tuple(s.name for s in stages), last)
        if key in self.memo:
            return self.memo[key]
        moves = [self.channel_moves(s) for s in stages]
        if any(sum(1 for m in moves if m[d]) > 1 for d in (0, 1)):
            out = _Channel(self, last).together(stages)
        else:
            runs = [self.run(s, last) for s in stages]
            after = list(last)
            for (_, grants), m in zip(runs, moves):
                for d in (0, 1):
                    if m[d]:
                        after[d] = grants[d]
            out = max(r[0] for r in runs), tuple(after)
        self.memo[key] = out
        return out

    def channel_moves(self, c) -> tuple:
        """(read beats, write beats) that the transfers of controller `c` move in one run."""
        if c.name not in self.moves:
            if isinstance(c, Load):
                m = (beats_of(c.mem.shape, self.words), 0)
            elif isinstance(c, Store):
                m = (0, beats_of(c.shape, self.words))
            elif isinstance(c, (Pipe, Collective)):  # a collective moves data on a channel of its own
                m = (0, 0)
            else:
                kids = [self.channel_moves(k) for k in children(c)]
                times = c.iterations if isinstance(c, Loop) else 1
                m = (times * sum(k[0] for k in kids), times * sum(k[1] for k in kids))
            self.moves[c.name] = m
        return self.moves[c.name]


def repeat(times: int, body, last: tuple) -> tuple:
    """(total cycles, last grants after) of `times` runs of body(last) -> (cycles, last):
    the arbiters' state comes back to one seen before within a few runs, and from there the
    runs repeat with its period."""
    total, seen, history, k = 0, {}, [], 0
    while k < times:
        if last in seen:
            j = seen[last]
            period = k - j
            laps = (times - k) // period
            total += laps * sum(history[j:k])
            k += laps * period
            seen = {}  # fewer than a period left: run them
            if k >= times:
                break
        seen[last] = k
        n, last = body(last)
        history.append(n)
        total += n
        k += 1
    return total, last


class _Channel:
    """An event-level model of controllers that share the DRAM channel: each controller is a
    process (a generator) that starts children and waits for cycles, each load and store a
    client of its arbiter, and every cycle in which clients are waiting each arbiter grants
    one of them, round-robin from the one after its last grant (hw/memchannel.py). With the
    DRAM at its fixed latency the channel takes a request every cycle, so:

    Load   go in t0: requests from t0 + 2 until every beat is granted (a refused one waits in
           its skid register); done `latency + 4` cycles after its last grant.
    Store  go in t0: fetches a beat from its memory each cycle from t0 + 2 while fewer than
           read latency + 2 beats are owed (fetched, not yet taken by the arbiter); a beat
           fetched in f waits for the arbiter from f + read latency + 1; done 2 cycles after
           the last is taken.
    Pipe and controllers that move no data: their cycles from the formulas (the channel
    does not slow them)."""

    def __init__(self, model: _Model, last: tuple):
        self.model = model
        self.last = list(last)
        self.events: list = []  # heap of (cycle, order, process, value)
        self.order = 0
        self.reads: dict = {}  # client -> [first cycle, beats left, process]
        self.writes: dict = {}  # client -> _StoreBeats

    def together(self, stages) -> tuple:
        dones = {}

        def top(k, s):
            dones[k] = yield from self.process(s, 0)

        for k, s in enumerate(stages):
            self.start(top(k, s), None)
        self.loop()
        return max(dones.values()), tuple(self.last)

    def start(self, proc, value) -> None:
        try:
            command = proc.send(value)
        except StopIteration:
            return
        kind = command[0]
        if kind == "at":
            self.wake(command[1], proc, None)
        elif kind == "read":
            _, client, first, beats = command
            self.reads[client] = [first, beats, proc]
        elif kind == "write":
            self.writes[command[1]] = command[2]
            command[2].proc = proc
        else:  # fork: ("fork", processes, dones)
            _, procs, dones = command
            pending = [len(procs)]

            def child(p):
                dones.append((yield from p))
                pending[0] -= 1
                if not pending[0]:
                    self.wake(max(dones), proc, None)

            for p in procs:
                self.start(child(p), None)

    def wake(self, cycle: int, proc, value) -> None:
        self.order += 1
        heapq.heappush(self.events, (cycle, self.order, proc, value))

    def loop(self) -> None:
        cycle = 0
        while self.events or self.reads or self.writes:
            nxt = self.events[0][0] if self.events else math.inf
            waiting = [r[0] for r in self.reads.values()] + [w.t0 + 2 for w in self.writes.values()]
            cycle = max(cycle, min([nxt] + waiting))
            while self.events and self.events[0][0] == cycle:
                _, _, proc, value = heapq.heappop(self.events)
                self.start(proc, value)
            if self.reads_alone(cycle):
                continue
            self.grant_read(cycle)
            self.grant_write(cycle)
            cycle += 1

    def reads_alone(self, cycle: int) -> bool:
        """When one load asks alone (no write, no event before its last beat) from `cycle`
        on, grant all its beats at once, as grant_read would one per cycle."""
        if len(self.reads) != 1 or self.writes:
            return False
        ((k, r),) = self.reads.items()
        if r[0] > cycle or (self.events and self.events[0][0] < cycle + r[1]):
            return False
        self.last[0] = k
        del self.reads[k]
        self.wake(cycle + r[1], r[2], cycle + r[1] - 1)
        return True

    def pick(self, d: int, valid: list):
        n = self.model.clients[d]
        return min(valid, key=lambda k: (k - self.last[d] - 1) % n) if valid else None

    def grant_read(self, cycle: int) -> None:
        k = self.pick(0, [k for k, r in self.reads.items() if r[0] <= cycle])
        if k is None:
            return
        self.last[0] = k
        r = self.reads[k]
        r[1] -= 1
        if not r[1]:
            del self.reads[k]
            self.wake(cycle + 1, r[2], cycle)

    def grant_write(self, cycle: int) -> None:
        k = self.pick(1, [k for k, w in self.writes.items() if w.ready(cycle)])
        for w in self.writes.values():
            w.fetch(cycle)
        if k is not None:
            self.last[1] = k
            w = self.writes[k]
            if w.take(cycle):
                del self.writes[k]
                self.wake(cycle + 1, w.proc, cycle)

    def process(self, c, t0: int):
        """Generator: runs controller `c` from its go in cycle t0; returns its done cycle."""
        m = self.model
        if not any(m.channel_moves(c)) and not isinstance(c, (Load, Store)):
            n, _ = m.run(c, tuple(self.last))
            yield ("at", t0 + n)
            return t0 + n
        if isinstance(c, Load):
            g = yield ("read", m.client[c.name], t0 + 2, beats_of(c.mem.shape, m.words))
            return g + m.dram.latency + LOAD_EXTRA - 1  # alone, the last grant is in t0 + 1 + beats
        if isinstance(c, Store):
            g = yield ("write", m.client[c.name], _StoreBeats(t0, beats_of(c.shape, m.words), m.read_latency(c)))
            return g + STORE_EXTRA - 2  # alone, the last is taken in t0 + 2 + read latency + beats
        if isinstance(c, Parallel):
            dones = []
            yield ("fork", [self.process(k, t0) for k in c.children], dones)
            return max(dones) + JOIN_EXTRA
        t = t0
        S, it = len(c.stages), c.iterations
        if not c.meta:
            for _ in range(it):
                for s in c.stages:
                    t = yield from self.process(s, t + 1)
            return t + 1
        for step in range(it + S - 1):
            dones = []
            active = [s for k, s in enumerate(c.stages) if 0 <= step - k < it]
            yield ("fork", [self.process(s, t + 1) for s in active], dones)
            t = max(dones)
        return t + 1


class _StoreBeats:
    """A store's beats on their way to the write arbiter (hw/transfer.py StoreUnit): fetched
    from t0 + 2 while fewer than `latency` + 2 are owed, each ready `latency` + 1 cycles
    after its fetch."""

    def __init__(self, t0: int, beats: int, latency: int):
        self.t0, self.beats, self.latency = t0, beats, latency
        self.fetched: list = []  # fetch cycle of each beat
        self.taken = 0
        self.proc = None

    def ready(self, cycle: int) -> bool:
        return self.taken < len(self.fetched) and self.fetched[self.taken] + self.latency + 1 <= cycle

    def fetch(self, cycle: int) -> None:
        """Before this cycle's grant: fetch a beat if fewer than latency + 2 are owed."""
        owed = len(self.fetched) - self.taken
        if cycle >= self.t0 + 2 and len(self.fetched) < self.beats and owed < self.latency + 2:
            self.fetched.append(cycle)

    def take(self, cycle: int) -> bool:
        self.taken += 1
        return self.taken == self.beats


# ---------------------------------------------------------------- mesh: the ring all-reduce

RING_HOP = 4  # a word's cycles from one PE's pop to its neighbour's pop, beyond the link latency
RING_LOAD = 4  # the unit's cycles beyond beats + DRAM latency from go to its first SEND
RING_STORE = 6  # the unit's cycles beyond the beats it writes after its last pop, to done


def ring_round_cycles(ring) -> int:
    """One round of a ring collective (hw/collective.py), from its first pop to the next
    round's: T steps (2p - 2 for an all-reduce, else p - 1) of S link beats each (a slice's
    words over the link's words per cycle, RingPlan.beats), step s + 1's
    words arriving F = L + RING_HOP after step s's (the neighbour forwards them as it pops
    them), so each of the first T - 1 steps takes max(S, F); the next round's step 0 was sent
    as the forward part entered the last step, so it arrives as the last step's S words end."""
    hop = ring.latency + RING_HOP
    return (ring.steps - 1) * max(ring.beats, hop) + ring.beats


def ring_collective_cycles(ring, dram: DramConfig) -> int:
    """Cycles from the RingCollective unit's go to its done (hw/collective.py's docstring):
    the load of two slices per engine (of all of the operand when it does not stream), R
    rounds, the last round's last step of S words, then the write of every engine's last
    slice (of all of the result when it does not stream)."""
    W = dram.words_per_cycle
    load = ring.first_beats(W) + dram.latency + RING_LOAD
    return load + ring_span(ring) + ring.last_beats(W) + RING_STORE


def ring_span(ring) -> int:
    """Cycles from a ring collective's first send to the cycle after its last pop: the first
    send's words arrive F = L + RING_HOP later; R - 1 rounds of ring_round_cycles, then the
    last round's T steps (T * max(S, F) from its send) and its last S words. With one step a
    round (a reduce-scatter or all-gather on 2 PEs) a round's send does not wait for a word
    received, so the send of round j + 1 runs while round j's words arrive: round j's pops
    start once its send and round j - 1's pops are done (the cycle after), and no earlier than
    F after its first send; round j + 1's send starts with them (the recurrence below)."""
    S, F = ring.beats, ring.latency + RING_HOP  # a slice's cycles on the link: its beats
    if ring.steps > 1:  # the first send's words arrive F later; the last round's steps
        return (ring.rounds - 1) * ring_round_cycles(ring) + ring.steps * max(S, F) + S
    send, last = 0, None  # round j's first send; round j - 1's last pop
    for j in range(ring.rounds):
        start = send + S - 1 if last is None else max(send + S - 1, last)  # its pops may start
        last = max(send + F, start + 1) + S - 1
        send = start + 1
    return last + 1


def mesh_link_bound(kind: str, n: int, group: int, axes: int, hops: int = 0, pairs=(), wraps: bool = True) -> int:
    """Cycles a collective of an n-word vector over a group of `group` PEs spanning `axes` axes
    of a ring or torus needs at least: each PE sends (group - 1)/group * n words (twice that
    for an all-reduce: a reduce-scatter, then an all-gather) over its 2 * axes outgoing
    links, one word per cycle each. A permute by a shift of k (or group - k: `hops`) on a
    ring moves every block of n / group words k hops one way or group - k the other: split
    at best, k (group - k) / group block-words per link. Any other permutation, and an
    all-to-all, given by its (source, destination) `pairs` of blocks: the hop-words of every
    block over its shortest way, spread over the ring's 2 * group links.

    Without wraparound (`wraps` False: a mesh) a corner PE has one link in per axis, so it
    receives (group - 1)/group * n words (twice, for an all-reduce) over `axes` links; a
    permutation or all-to-all along a line sends every block straight to its destination,
    and the busiest link carries at least the blocks whose way crosses it."""
    if not wraps:
        if kind in ("permute", "all_to_all"):
            block, cuts = n // group, []
            for c in range(group - 1):  # the links between c and c + 1, each way
                cuts.append(sum(block for s, d in pairs if s <= c < d))
                cuts.append(sum(block for s, d in pairs if d <= c < s))
            return max(cuts)
        return math.ceil((group - 1) * n * (2 if kind == "all_reduce" else 1) / (axes * group))
    if kind == "all_to_all" or (kind == "permute" and len({(d - s) % group for s, d in pairs}) > 1):
        # blocks of n / group words, each over its shortest way: the hop-words over the 2 * group
        # links, and at least half a block into each receiving PE (it has two links in)
        block = n // group
        hopwords = sum(min((d - s) % group, (s - d) % group) for s, d in pairs) * block
        return math.ceil(max(hopwords / (2 * group), block / 2 if hopwords else 0))
    if kind == "permute":
        return math.ceil(n // group * hops * (group - hops) / group)
    sends = (group - 1) * n * (2 if kind == "all_reduce" else 1)
    return math.ceil(sends / (2 * axes * group))


def mesh_route_bound(pairs, sizes: tuple, block: int, wraps: bool = True) -> int:
    """Cycles a permutation or all-to-all over several axes (of `sizes`; PEs numbered
    row-major, the first axis major) needs at least, its (source, destination) `pairs` each
    moving a block of `block` words, one word per cycle a link: the hop-words of every block
    over its shortest way (per axis the shorter way round on a torus, straight on a mesh)
    spread over every link, and the blocks into each destination over that PE's links in."""

    from .mesh.mesh import unravel

    p = math.prod(sizes)
    hops, into = 0, {}
    for s, d in pairs:
        cs, cd = unravel(s, sizes), unravel(d, sizes)
        if wraps:
            hops += sum(min((y - x) % q, (x - y) % q) for x, y, q in zip(cs, cd, sizes))
            degree = 2 * len(sizes)
        else:
            hops += sum(abs(y - x) for x, y in zip(cs, cd))
            degree = sum((c > 0) + (c < q - 1) for c, q in zip(cd, sizes))
        if s != d:
            into[d] = into.get(d, 0) + block / degree
    links = 2 * len(sizes) * p if wraps else sum(2 * (q - 1) * (p // q) for q in sizes)
    return math.ceil(max(hops * block / links, *into.values(), 0))


COPY_EXTRA = 5  # BlockCopy: cycles beyond its beats and the DRAM latency, go to done


def copy_cycles(plan, dram: DramConfig) -> int:
    """Cycles from a BlockCopy's go to its done (hw/copy.py): B/W read requests one a cycle,
    each answered Lm + 2 cycles later and written the cycle after; done a cycle after the
    channel takes the last."""
    return plan.words // dram.words_per_cycle + dram.latency + COPY_EXTRA


def phase_cycles(plan, dram: DramConfig) -> int:
    """A collective phase's cycles: a ring collective's or a block copy's."""
    return copy_cycles(plan, dram) if plan.kind == "copy" else ring_collective_cycles(plan, dram)


def predict_mesh(compiled, dram: DramConfig, link_bound: int) -> Prediction:
    """Cycles of a mesh kernel: every PE runs its program, whose root sequence holds its
    collectives (loops.Collective, each a sequence of phases: hw/phases.py), on the same
    timeline (SPMD on a ring or torus: symmetric), and the mesh top adds a cycle to combine
    the PEs' done. Roofline: the largest of the per-PE compute and memory bounds and
    `link_bound` (mesh_link_bound)."""
    body = predict(compiled, dram)
    return Prediction(
        body.cycles + 1, max(body.roofline, link_bound), body.compute_bound, body.memory_bound, body.lanes, body.tree
    )
