"""Schedules: `tile`, `par` and `metapipeline`. They change hardware, never results.

`Schedule.parse` checks the form (dicts of index name to positive int, a bool);
`Schedule.check` checks the names against the kernel's index variables once it is traced.
Whether the compiler can apply a legal schedule is decided later, when it builds hardware.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import Loc, ScheduleError


@dataclass(frozen=True)
class Schedule:
    """tile: index -> tile size; par: index -> lanes; metapipeline: overlap outer-loop stages."""

    tile: dict = field(default_factory=dict)
    par: dict = field(default_factory=dict)
    metapipeline: bool = True
    loc: Loc | None = field(default=None, compare=False)

    @staticmethod
    def parse(tile=None, par=None, metapipeline=True, loc: Loc | None = None) -> "Schedule":
        return Schedule(_sizes(tile, "tile", loc), _sizes(par, "par", loc), _flag(metapipeline, loc), loc)

    @property
    def is_baseline(self) -> bool:
        """The paper's baseline: no tiling, no parallel lanes, no metapipelining."""
        return not self.tile and not self.par and not self.metapipeline

    def check(self, extents: dict, kernel_name: str) -> None:
        """Every key must name an index variable of the kernel (`extents`: name -> extent);
        a tile size must divide its index's extent; lanes must divide their tile."""
        user_names = sorted(n for n in extents if not n.startswith("%") and "." not in n)
        for what, sizes in (("tile", self.tile), ("par", self.par)):
            for name in sizes:
                if name not in user_names:
                    known = ", ".join(user_names) or "none"
                    hidden = (
                        ""
                        if not any(n.startswith("@") for n in extents)
                        else (
                            "; loops without a lambda are named by rule: '@i', '@j', '@k' for '@', "
                            "'@0', '@1', ... for an array's axes, '@r0', ... for a reduction method's"
                        )
                    )
                    raise ScheduleError(
                        f"{what} names index '{name}', but kernel '{kernel_name}' has no index "
                        f"of that name (its indices: {known}){hidden}",
                        self.loc,
                    )
        for name, size in self.tile.items():
            # a helper's index traced over several extents ('i', copy 'i.n4') shares its tile
            for extent in sorted({e for n, e in extents.items() if n.split(".", 1)[0] == name}, reverse=True):
                if extent % size:
                    raise ScheduleError(
                        f"tile size {size} for index '{name}' does not divide its extent {extent}", self.loc
                    )
        for name, lanes in self.par.items():
            if lanes > 1 and name not in self.tile:  # it gets tiles of `lanes` (lanes run inside a tile)
                for extent in sorted({e for n, e in extents.items() if n.split(".", 1)[0] == name}):
                    if extent % lanes:
                        raise ScheduleError(
                            f"par {lanes} for index '{name}' needs tiles of a multiple of {lanes} "
                            f"elements, which do not divide its extent {extent}; choose lanes "
                            f"that divide {extent}",
                            self.loc,
                        )
                continue
            tile = self.tile.get(name, 1)
            if lanes > 1 and tile % lanes:
                raise ScheduleError(
                    f"par {lanes} for index '{name}' needs its tile size ({tile}) to be a "
                    f"multiple of {lanes}: lanes run inside a tile; use a tile size that is a "
                    f"multiple of {lanes}",
                    self.loc,
                )

    @property
    def tiles(self) -> dict:
        """The tile sizes the compiler uses: `tile`, plus tiles of `lanes` for an index given
        lanes but no tile size (the smallest tile its lanes need)."""
        implied = {n: lanes for n, lanes in self.par.items() if lanes > 1 and n not in self.tile}
        return {**self.tile, **implied}

    def describe(self) -> dict:
        out = {"tile": dict(self.tile), "par": dict(self.par), "metapipeline": self.metapipeline}
        implied = {n: t for n, t in self.tiles.items() if n not in self.tile}
        if implied:
            out["implied_tile"] = implied  # tiles the lanes needed (see `tiles`)
        return out


def _sizes(value, what: str, loc) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ScheduleError(f"{what} must be a dict of index name to size, like {{'i': 16}}, got {value!r}", loc)
    out = {}
    for name, size in value.items():
        if not isinstance(name, str):
            raise ScheduleError(f"{what} keys must be index names (strings), got {name!r}", loc)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ScheduleError(f"{what}['{name}'] must be a positive int, got {size!r}", loc)
        out[name] = size
    return out


def _flag(value, loc) -> bool:
    if not isinstance(value, bool):
        raise ScheduleError(f"metapipeline must be True or False, got {value!r}", loc)
    return value
