"""The machine a mesh kernel runs on: `hw.Mesh`, `hw.P` (a PartitionSpec) and `hw.LinkConfig`.

    mesh = hw.Mesh((2, 4), ("x", "y"), topology="torus")
    mesh.shape        # {"x": 2, "y": 4}
    mesh.size         # 8 processing elements (PEs)
    mesh.axis_names   # ("x", "y")

PEs are numbered row-major over the axes (the last axis varies fastest): PE (ix, iy) of the
mesh above has id 4 * ix + iy. Topologies: "torus" (neighbours along every axis, with
wraparound), "mesh" (no wraparound), "ring" (one axis, with wraparound).

`hw.P(*entries)` says how an array's dimensions are split over mesh axes, as JAX's
PartitionSpec: entry k is None (dimension k is not split), an axis name, or a tuple of axis
names (split over their product, the first name major). Dimensions past the last entry are not
split; mesh axes a spec does not name replicate the array.

`hw.LinkConfig(words_per_cycle=1, latency=8)` describes each link between neighbouring PEs:
words per cycle each way and cycles from sending a word to receiving it.

Bad arguments raise ScheduleError at the user's line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ScheduleError

TOPOLOGIES = ("torus", "mesh", "ring")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class Mesh:
    """A grid of PEs with named axes; see the module docstring."""

    __slots__ = ("axis_names", "axis_sizes", "topology")

    def __init__(self, shape, axis_names, topology: str = "torus"):
        if _is_int(shape):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)) or not shape or not all(_is_int(s) and s >= 1 for s in shape):
            raise ScheduleError(f"hw.Mesh shape must be a tuple of positive ints, like (4, 4), got {shape!r}")
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        if not isinstance(axis_names, (tuple, list)) or not all(isinstance(a, str) and a for a in axis_names):
            raise ScheduleError(
                f"hw.Mesh axis_names must be a tuple of non-empty strings, like ('x', 'y'), got {axis_names!r}"
            )
        if len(axis_names) != len(shape):
            raise ScheduleError(
                f"hw.Mesh has {len(shape)} axis size(s) {tuple(shape)} but "
                f"{len(axis_names)} axis name(s) {tuple(axis_names)}; give one name per axis"
            )
        dup = sorted({a for a in axis_names if list(axis_names).count(a) > 1})
        if dup:
            raise ScheduleError(f"hw.Mesh axis name '{dup[0]}' is used twice in {tuple(axis_names)}")
        if topology not in TOPOLOGIES:
            raise ScheduleError(f"hw.Mesh topology must be 'torus', 'mesh' or 'ring', got {topology!r}")
        if topology == "ring" and len(shape) != 1:
            raise ScheduleError(
                f"a 'ring' has one axis, but this mesh has {len(shape)} {tuple(axis_names)}; "
                f"use topology 'torus' or 'mesh'"
            )
        object.__setattr__(self, "axis_sizes", tuple(shape))
        object.__setattr__(self, "axis_names", tuple(axis_names))
        object.__setattr__(self, "topology", topology)

    def __setattr__(self, name, value):
        raise AttributeError("hw.Mesh is immutable")

    @property
    def shape(self) -> dict:
        """Axis name -> size, in axis order."""
        return dict(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        """The number of PEs."""
        return math.prod(self.axis_sizes)

    def pe_id(self, coords) -> int:
        """The id of the PE at `coords` (one index per axis): row-major."""
        return int(sum(c * math.prod(self.axis_sizes[k + 1 :]) for k, c in enumerate(coords)))

    def coords(self, pe: int) -> tuple:
        """The coordinates (one index per axis) of PE `pe`."""
        return tuple(int(c) for c in unravel(pe, self.axis_sizes))

    def ring_order(self, axis: str) -> tuple:
        """The coordinates along `axis` in the order of its ring: 0, 1, ..., size - 1 on a
        torus or ring; on a "mesh" (no wraparound) of more than 2, the zigzag 0, 2, 4, ...
        up the even coordinates and back down the odd ones, so that each ring hop spans at
        most two links and every link carries one hop (of the ring's one direction)."""
        q = self.shape[axis]
        if self.topology != "mesh" or q <= 2:
            return tuple(range(q))
        return tuple(range(0, q, 2)) + tuple(range(q - 1 - q % 2, 0, -2))

    def one_way(self, axis: str) -> bool:
        """Whether rings along `axis` run one way round only (a "mesh": its zigzag ring uses
        every link in its own direction)."""
        return self.topology == "mesh"

    def hop_latency(self, axis: str, latency: int) -> int:
        """Cycles of one hop of the ring along `axis` for links of `latency`: a link's, or on
        a zigzag ring (ring_order) two links' and the register passing the PE between them,
        every hop padded to that so the ring is uniform."""
        return latency if self.ring_order(axis) == tuple(range(self.shape[axis])) else 2 * latency + 1

    def describe(self) -> str:
        """'2x4 torus (x, y)'."""
        return f"{'x'.join(map(str, self.axis_sizes))} {self.topology} ({', '.join(self.axis_names)})"

    def _key(self):
        return (self.axis_sizes, self.axis_names, self.topology)

    def __eq__(self, other):
        return isinstance(other, Mesh) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self) -> str:
        return f"hw.Mesh({self.axis_sizes}, {self.axis_names}, topology={self.topology!r})"


def unravel(pe: int, sizes: tuple) -> list:
    """The coordinates of number `pe` over axes of `sizes`, row-major (the last axis fastest)."""
    out = []
    for s in reversed(sizes):
        out.append(pe % s)
        pe //= s
    return out[::-1]


class P:
    """A PartitionSpec: one entry per leading array dimension (None, an axis name, or a tuple
    of axis names). `P()` replicates. Entries are stored normalised: None or a tuple of names."""

    __slots__ = ("entries",)

    def __init__(self, *entries):
        norm = []
        for e in entries:
            if e is None or e == ():
                norm.append(None)
            elif isinstance(e, str):
                norm.append((e,))
            elif isinstance(e, tuple) and all(isinstance(a, str) for a in e):
                norm.append(e)
            else:
                raise ScheduleError(f"hw.P entries must be None, an axis name or a tuple of axis names, got {e!r}")
        object.__setattr__(self, "entries", tuple(norm))

    def __setattr__(self, name, value):
        raise AttributeError("hw.P is immutable")

    def __len__(self):
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)

    def __getitem__(self, k):
        return self.entries[k]

    def axes(self) -> tuple:
        """Every axis name the spec uses, in order."""
        return tuple(a for e in self.entries if e is not None for a in e)

    def __eq__(self, other):
        return isinstance(other, P) and self.entries == other.entries

    def __hash__(self):
        return hash(("P", self.entries))

    def __repr__(self) -> str:
        def show(e):
            if e is None:
                return "None"
            return repr(e[0]) if len(e) == 1 else repr(e)

        return f"P({', '.join(show(e) for e in self.entries)})"


@dataclass(frozen=True)
class LinkConfig:
    """A link between neighbouring PEs: `words_per_cycle` each way (a power of two) and
    `latency`, cycles from a word entering the link to it leaving at the other end."""

    words_per_cycle: int = 1
    latency: int = 8

    def __post_init__(self):
        for name in ("words_per_cycle", "latency"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ScheduleError(f"LinkConfig.{name} must be a positive int, got {value!r}")
        if self.words_per_cycle & (self.words_per_cycle - 1):
            raise ScheduleError(f"LinkConfig.words_per_cycle must be a power of two, got {self.words_per_cycle}")
        if self.latency > 200:
            raise ScheduleError(f"LinkConfig.latency is limited to 200 cycles, got {self.latency}")
