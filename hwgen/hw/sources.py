"""Where a PE's units come from in the user's source.

`unit_sources(program)` maps the instance name of each controller and memory of a PE built
for a loops.LoopProgram (`pipe0`, `load1`, `metaloop0`, `mem_a_tile0`, ...) to the lines of
the user's Python it implements, written as a Verilog `src` attribute's text: "kmeans.py:20",
or for a controller over several patterns their lines joined by "|"
("kmeans.py:20|kmeans.py:22"), in the order the program meets them. Files are named by their
base name, so the Verilog is the same wherever the project lies. hwgen/verilog.py writes the
attribute on each unit's module: `(* src = "kmeans.py:20" *)`, and `with_sources` adds them
to report.json's controller tree. A unit with no user line (a collective's phases, the DRAM
arbiters) has no entry.
"""

from __future__ import annotations

import os

from ..loops import AppendWrite, Collective, GroupWrite, Load, Loop, Parallel, Pipe, Store, children


def unit_sources(program) -> dict:
    """Instance name -> src text, for the controllers and memories of `program` (see above)."""
    out: dict = {}
    _controller(program.root, out)
    for mem in program.mems:
        _put(out, f"mem_{mem.name}", [mem.loc])
    for g in program.groups:
        _put(out, f"mem_{g.name}", [g.loc])
    return out


def with_sources(tree: dict, program) -> dict:
    """The cycle model's controller tree (report.json's "controllers") with each unit's lines
    under "src" (unit_sources) where it has any."""
    sources = unit_sources(program)

    def go(entry):
        out = {**entry, **({"src": sources[entry["unit"]]} if entry.get("unit") in sources else {})}
        for key in ("stages", "parallel"):
            if key in entry:
                out[key] = [go(e) for e in entry[key]]
        return out

    return go(tree)


def src_text(locs) -> str:
    """The src attribute's text for user locations `locs` (None skipped, repeats dropped)."""
    seen: list = []
    for loc in locs:
        text = f"{_quotable(os.path.basename(loc.file))}:{loc.line}" if loc is not None else None
        if text and text not in seen:
            seen.append(text)
    return "|".join(seen)


def _controller(ctrl, out: dict) -> list:
    """The user locations of `ctrl` (its subtree's, for a loop), recording each on the way."""
    if isinstance(ctrl, (Loop, Parallel)):
        locs = [loc for child in children(ctrl) for loc in _controller(child, out)]
    elif isinstance(ctrl, Pipe):
        locs = [_write_loc(w) for w in ctrl.writes]
    elif isinstance(ctrl, (Load, Store)):
        locs = [ctrl.mem.loc]
    elif isinstance(ctrl, Collective):
        locs = []
    else:
        raise TypeError(f"no source locations for {type(ctrl).__name__}")
    _put(out, ctrl.name, locs)
    return locs


def _quotable(name: str) -> str:
    """`name` fit for a Verilog string: `"` and `\\` written as `_`."""
    return name.replace('"', "_").replace("\\", "_")


def _write_loc(w):
    if isinstance(w, GroupWrite):
        return w.group.loc
    if isinstance(w, AppendWrite):
        return w.values.loc
    return w.mem.loc


def _put(out: dict, name: str, locs) -> None:
    text = src_text(locs)
    if text:
        out[name] = text
