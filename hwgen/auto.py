"""`schedule="auto"`: the schedule with the fewest predicted cycles that fits a device.

    choose(program, device, loc) -> (Schedule, why)

Every candidate is compiled (passes.compile, milliseconds) and judged by the cycle model
(model.predict) and the resource model (resources.estimate); no hardware is built, and a
candidate the compiler refuses or whose estimate does not fit the device (with the MARGIN left
for routing and the model's error) is skipped. The search is a coordinate descent:

- starting points: the untiled schedule and uniform tilings (every index tiled by its largest
  tile option up to each of SEEDS), without lanes; the descent runs from the fastest, and from
  the next ones (up to STARTS) while fewer than BUDGET schedules have been judged;
- each round, index by index, first the lanes (halved, doubled, or half of them moved to one of
  the MOVE_TO indices with the largest tiles), then the tile (one option smaller or larger;
  options are the divisors of the extent that are powers of two or the extent over a power of
  two, up to MAX_TILE);
- a move is kept when it saves IMPROVEMENT of the cycles, or saves none and SMALLER of the
  LUTs; the rounds stop when one changes nothing (at most ROUNDS).

The result is deterministic (it counts schedules, it never times them). `why` (report.json's
"auto") says what was chosen, the predicted cycles and resources against the device, the
schedules tried and the time taken.

Devices are named "<family>-<size>" (devices.TARGETS); only the families the resource model is
calibrated for (resources.calibrated(): ECP5) can be used.
"""

from __future__ import annotations

import gc
import time

from .dram import DramConfig
from .errors import HwgenError, ScheduleError
from .model import predict
from .passes import compile as compile_program
from .resources import NAMES, calibrated, estimate
from .schedule import Schedule

IMPROVEMENT = 0.005  # a change must save this share of the cycles,
SMALLER = 0.02  # or, saving none, this share of the LUTs
MARGIN = {"luts": 0.75, "ffs": 0.75, "brams": 1.0, "dsps": 1.0}  # share of the device to fill
ROUNDS = 12
SEEDS = (8, 16, 32, 64, 128)  # uniform tile sizes tried as starting points (and untiled)
STARTS = 3  # the descent runs from up to this many of the fastest starting points,
BUDGET = 50  # starting another only while fewer schedules than this have been judged
MOVE_TO = 2
MAX_LANES = 64
MAX_TILE = 1 << 14


def device_of(name, loc=None):
    """(target, devices.Device) for a device name like "ecp5-85k"."""
    from .devices import TARGETS, device_for

    names = [f"{t}-{d}" for t in TARGETS for d in TARGETS[t]["devices"]]
    if not isinstance(name, str) or name not in names:
        raise ScheduleError(f"unknown device {name!r} for schedule='auto'; expected one of {', '.join(names)}", loc)
    target, size = name.split("-", 1)
    if target not in calibrated():
        devices = ", ".join(n for n in names if n.split("-", 1)[0] in calibrated())
        raise ScheduleError(
            f"the resource model is not calibrated for {target} devices yet, so {name} cannot be used; "
            f"use one of {devices}",
            loc,
        )
    return target, device_for(target, size)


def choose(program, device: str, loc=None, dram: DramConfig | None = None) -> tuple:
    """The auto schedule of a traced `program` for `device`, and the record of why. Python's
    cycle collector is paused meanwhile: the search makes many short-lived IR nodes, and in a
    process with a large heap, the collections it would start take a fifth of the time."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _choose(program, device, loc, dram)
    finally:
        if collecting:
            gc.enable()


def _choose(program, device: str, loc, dram: DramConfig | None) -> tuple:
    target, dev = device_of(device, loc)
    dram = dram or DramConfig()
    started = time.perf_counter()
    limits = {r: int(getattr(dev, r) * MARGIN[r]) for r in MARGIN}
    seen: dict = {}

    def judge(tile: dict, par: dict):
        """(cycles, resources) of a schedule, or None when it is refused or does not fit."""
        key = (tuple(sorted(tile.items())), tuple(sorted(par.items())))
        if key not in seen:
            seen[key] = _judge(program, Schedule(dict(tile), dict(par), True, loc), target, dram, limits)
        return seen[key]

    names = indices(program.extents)
    options = {n: tile_options(program.extents[n]) for n in names}
    seeds = [{}]
    for size in SEEDS:
        seed = _uniform(options, size)
        if seed not in seeds:
            seeds.append(seed)
    found = [(judge(t, {}), t) for t in seeds]
    found = sorted(((f, t) for f, t in found if f is not None), key=lambda ft: ft[0][0])
    if not found:
        raise _no_fit(program, device, dev, target, dram, loc)
    ends = []
    for f, t in found[:STARTS]:  # the next start only while the budget lasts (counted: deterministic)
        if ends and len(seen) >= BUDGET:
            break
        ends.append(_descend(judge, names, options, t, f))
    best, tile, par = min(ends, key=lambda e: (e[0][0], e[0][1]["luts"]))
    schedule = Schedule(dict(tile), dict(par), True, loc)
    cycles, used = best
    why = {
        "device": device,
        "predicted_cycles": cycles,
        "resources": {r: {"estimate": used[r], "device": getattr(dev, r), "limit": limits[r]} for r in used},
        "tried": len(seen),
        "seconds": round(time.perf_counter() - started, 3),
        "rule": (
            f"fewest predicted cycles (a change kept when it saves at least {IMPROVEMENT:.1%} of them, "
            f"or {SMALLER:.0%} of the LUTs at no more cycles) with LUTs and flip-flops within "
            f"{MARGIN['luts']:.0%} of the device and block RAMs and DSP blocks within it"
        ),
    }
    return schedule, why


def _descend(judge, names: list, options: dict, tile: dict, best) -> tuple:
    """Coordinate descent from (tile, no lanes): (its end's judgement, tile, par)."""
    par: dict = {}
    for _ in range(ROUNDS):
        changed = False
        for step in (_lanes, _tiles):  # lanes first: they change the cycles most
            for name in names:
                for trial_tile, trial_par in step(tile, par, name, options[name], names):
                    trial = judge(trial_tile, trial_par)
                    if _better(trial, best):
                        tile, par, best, changed = trial_tile, trial_par, trial, True
        if not changed:
            break
    return best, tile, par


def _judge(program, schedule: Schedule, target: str, dram: DramConfig, limits: dict):
    try:
        compiled = compile_program(program, schedule, dram.words_per_cycle, show_ir=False)
        cycles = predict(compiled, dram).cycles
    except HwgenError:
        return None
    used = estimate(compiled, target)
    if any(used[r] > limits[r] for r in limits):
        return None
    return cycles, used


def _better(found, best) -> bool:
    """Fewer cycles by IMPROVEMENT, or as few and SMALLER of the LUTs."""
    if found is None:
        return False
    (cycles, used), (best_cycles, best_used) = found, best
    if cycles < best_cycles * (1 - IMPROVEMENT):
        return True
    return cycles <= best_cycles and used["luts"] < best_used["luts"] * (1 - SMALLER)


def _uniform(options: dict, size: int) -> dict:
    """Every index tiled by its largest tile option of at most `size`."""
    return {
        n: max(t for t in opts if t <= size) for n, opts in options.items() if max(t for t in opts if t <= size) > 1
    }


def _tiles(tile: dict, par: dict, name: str, options: list, names: list) -> list:
    """Schedules with index `name`'s tile one option smaller or larger (its lanes kept when they
    still divide it, else none)."""
    t, lanes = tile.get(name, 1), par.get(name, 1)
    at = options.index(t) if t in options else 0
    out = []
    for k in (at - 1, at + 1):
        if 0 <= k < len(options):
            size = options[k]
            out.append((_with(tile, name, size), _with(par, name, lanes if size % lanes == 0 else 1)))
    return out


def _lanes(tile: dict, par: dict, name: str, options: list, names: list) -> list:
    """Schedules with index `name`'s lanes halved or doubled, or half of them moved to another
    index (`_moves`)."""
    t, lanes = tile.get(name, 1), par.get(name, 1)
    out = []
    for more in (lanes // 2, lanes * 2):
        if 1 <= more <= MAX_LANES and more != lanes and t % more == 0:
            out.append((tile, _with(par, name, more)))
    return out + _moves(tile, par, name, names)


def _moves(tile: dict, par: dict, name: str, names: list) -> list:
    """Schedules with half of index `name`'s lanes moved to another index, one of the MOVE_TO
    with the largest tiles (as many lanes in all: what a full device still allows)."""
    lanes = par.get(name, 1)
    if lanes < 2:
        return []
    out = []
    others = sorted((n for n in names if n != name), key=lambda n: -tile.get(n, 1))[:MOVE_TO]
    for other in others:
        more = par.get(other, 1) * 2
        if tile.get(other, 1) % more == 0:
            out.append((tile, _with(_with(par, name, lanes // 2), other, more)))
    return out


def _with(sizes: dict, name: str, value: int) -> dict:
    out = {k: v for k, v in sizes.items() if k != name}
    if value > 1:
        out[name] = value
    return out


def indices(extents: dict) -> list:
    """The index names a schedule may use, the longest extents first."""
    names = [n for n in extents if not n.startswith("%") and "." not in n]
    return sorted(names, key=lambda n: (-extents[n], n))


def tile_options(extent: int) -> list:
    """Tile sizes tried for an index of `extent`: divisors that are powers of two, and the
    extent over powers of two, up to MAX_TILE."""
    out = {1}
    p = 1
    while p <= extent:
        if extent % p == 0:
            out.update({p, extent // p})
        p *= 2
    return sorted(t for t in out if t <= MAX_TILE)


def lane_options(tile: int) -> list:
    """Lane counts tried for an index tiled by `tile`: powers of two from 2 that divide it, up
    to MAX_LANES."""
    out, p = [], 2
    while p <= min(tile, MAX_LANES) and tile % p == 0:
        out.append(p)
        p *= 2
    return out


def _no_fit(program, device: str, dev, target: str, dram: DramConfig, loc) -> HwgenError:
    """The error for a program whose smallest schedule does not fit `dev`: which resource
    binds and by how much."""
    try:
        compiled = compile_program(program, Schedule({}, {}, True, loc), dram.words_per_cycle, show_ir=False)
    except HwgenError as e:
        return e
    used = estimate(compiled, target)
    over = max(MARGIN, key=lambda r: used[r] / max(1, getattr(dev, r) * MARGIN[r]))
    limit = int(getattr(dev, over) * MARGIN[over])
    return ScheduleError(
        f"no schedule of this kernel fits the {device} ({dev.name}): even untiled with one lane it "
        f"needs about {used[over]} {NAMES[over]}, {used[over] - limit} more than the {limit} "
        f"schedule='auto' may use there; choose a larger device",
        loc,
    )


def describe(kernel) -> str:
    """One line on an auto-scheduled kernel: the schedule chosen, its predicted cycles and
    resources against the device, and how long the choice took."""
    why, s = kernel.auto, kernel.schedule
    parts = [f"{k}:{v}" for k, v in s.tile.items()]
    lanes = [f"{k}:{v}" for k, v in s.par.items()]
    used = ", ".join(f"{v['estimate']}/{v['device']} {NAMES[r]}" for r, v in why["resources"].items())
    return (
        f"auto schedule for {kernel.name} on the {why['device']}: tile {', '.join(parts) or 'none'}; "
        f"par {', '.join(lanes) or 'none'}: predicted {why['predicted_cycles']} cycles, about {used} "
        f"({why['tried']} schedules tried in {why['seconds']:.2f} s)"
    )
