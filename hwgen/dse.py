"""Design-space exploration: every schedule of a sample of a kernel's schedule space judged by
the cycle model and the resource model, the Pareto front, on Dask.

    space(program, limit)                the schedules swept (tile sizes x lanes on one index)
    sweep(app, kernel, device, client)   each schedule's predicted cycles and resources
    pareto(points)                       the fitting points no other beats in cycles, LUTs and DSPs
    write(result, out_dir, name)         dse.json, dse.csv and dse.png under out_dir

The space: for every index a schedule may use (auto.indices), a tile size from
auto.tile_options, and lanes on at most one index (auto.lane_options of its tile): the
product of the tile sizes, each with no lanes or one lane count on one index. When it holds
more than `limit` schedules, a fixed-seed sample of `limit` of them is swept (the table says
how many there were), with schedule="auto"'s choice always among them. Schedules are judged
in batches, one Dask task each; when a worker is lost mid-sweep, the scheduler runs its tasks
again on the others (Dask's `allowed-failures`, 3 by default, bounds how often a task may take
its worker down before the sweep fails). The batches' function only needs the app's path, so workers on other machines
(`--scheduler`) must see the same files.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import random
import tempfile
import time
from functools import cache
from pathlib import Path

from . import auto
from .dram import DramConfig
from .errors import HwgenError
from .model import predict
from .passes import compile as compile_program
from .resources import RESOURCES, estimate
from .schedule import Schedule

BATCH = 16  # schedules per Dask task
COMBOS = 50_000  # tile combinations listed at most (beyond: a sample of this many)


def space(program, limit: int, seed: int = 0) -> tuple:
    """(the schedules swept as (tile, par) dict pairs, how many the whole space holds: exact
    when its tile combinations number at most COMBOS, else estimated from a sample of them)."""
    names = auto.indices(program.extents)
    options = [auto.tile_options(program.extents[n]) for n in names]
    combos = math.prod(len(t) for t in options)
    listed = itertools.product(*options) if combos <= COMBOS else _sampled(options, COMBOS, seed)
    every = [(tile, par) for tile in (_sizes(names, c) for c in listed) for par in _lanes(tile)]
    total = len(every) if combos <= COMBOS else round(len(every) * combos / COMBOS)
    if len(every) > limit:
        every = random.Random(seed).sample(every, limit)
    return every, total


def _sampled(options: list, count: int, seed: int) -> list:
    """`count` distinct tile combinations drawn with a fixed seed."""
    rng = random.Random(seed)
    seen: set = set()
    while len(seen) < count:
        seen.add(tuple(rng.choice(t) for t in options))
    return sorted(seen)


def _sizes(names, combo) -> dict:
    return {n: t for n, t in zip(names, combo) if t > 1}


def _lanes(tile: dict) -> list:
    """No lanes, or lanes on one index of `tile`."""
    return [{}] + [{n: p} for n, size in tile.items() for p in auto.lane_options(size)]


def judge(program, tile: dict, par: dict, target: str, dram: DramConfig) -> dict:
    """One schedule's point: predicted cycles and resources, or why it was refused."""
    point = {"tile": tile, "par": par}
    try:
        compiled = compile_program(program, Schedule(dict(tile), dict(par), True), dram.words_per_cycle, show_ir=False)
        point["cycles"] = predict(compiled, dram).cycles
    except HwgenError as e:
        point["refused"] = e.message
        return point
    point.update(estimate(compiled, target))
    return point


@cache
def _kernel(app: str, name: str):
    from .cli import kernels_of, load_app

    return kernels_of(load_app(app), app, name)[0]


def judge_batch(app: str, name: str, target: str, batch: list, latency: int, words: int) -> list:
    """The points of a batch of (tile, par) schedules of kernel `name` in `app` (a Dask task:
    it loads the app itself, once per worker process)."""
    program = _kernel(app, name).program
    dram = DramConfig(latency=latency, words_per_cycle=words)
    return [judge(program, tile, par, target, dram) for tile, par in batch]


def sweep(app: str, kernel, device: str, client=None, limit: int = 1000, dram=None, report=None) -> dict:
    """Sweep `kernel` (of the app file `app`) for `device`; returns {"device", "points",
    "total", "seconds", "auto"}: every point with "fits", "front" and "auto" set, sorted by
    (fits, cycles, LUTs, schedule), and auto's record (None with "auto_refused" when no
    schedule fits for it). `client`: a Dask client (None: judged here, in this process).
    `report(done, count)` is called as batches end."""
    target, dev = auto.device_of(device)
    dram = dram or DramConfig()
    started = time.perf_counter()
    schedules, total = space(kernel.program, limit)
    try:
        chosen, why = auto.choose(kernel.program, device, kernel.schedule.loc, dram)
        mine = (dict(chosen.tile), dict(chosen.par))
        why = why | {"tile": mine[0], "par": mine[1]}
        if mine not in schedules:
            schedules.append(mine)
    except HwgenError as e:
        mine, why, refused = None, None, e.message
    batches = [schedules[k : k + BATCH] for k in range(0, len(schedules), BATCH)]
    args = (app, kernel.name, target)
    done = [None] * len(batches)  # each batch's points, kept in submission order
    if client is None:
        for k, batch in enumerate(batches):
            done[k] = judge_batch(*args, batch, dram.latency, dram.words_per_cycle)
            if report:
                report(sum(len(d) for d in done if d), len(schedules))
    else:
        from dask.distributed import as_completed

        dram_args = (dram.latency, dram.words_per_cycle)
        futures = [client.submit(judge_batch, *args, b, *dram_args, pure=False) for b in batches]
        where = {f.key: k for k, f in enumerate(futures)}
        for future in as_completed(futures):
            done[where[future.key]] = future.result()
            if report:
                report(sum(len(d) for d in done if d), len(schedules))
    points = [p for d in done for p in d]
    limits = {r: int(getattr(dev, r) * auto.MARGIN[r]) for r in RESOURCES}
    for p in points:
        p["fits"] = "cycles" in p and all(p[r] <= limits[r] for r in RESOURCES)
        p["auto"] = (p["tile"], p["par"]) == mine
    points.sort(key=lambda p: (not p["fits"], p.get("cycles", math.inf), p.get("luts", 0), schedule_text(p)))
    front = pareto([p for p in points if p["fits"]])
    for p in points:
        p["front"] = any(p is q for q in front)
    out = {"device": device, "points": points, "total": total, "seconds": round(time.perf_counter() - started, 2)}
    return out | ({"auto": why} if why else {"auto": None, "auto_refused": refused})


def pareto(points: list) -> list:
    """The points no other point matches or beats in cycles, LUTs and DSP blocks at once
    (beating in at least one)."""
    keys = [(p["cycles"], p["luts"], p["dsps"]) for p in points]
    front = []
    for p, k in zip(points, keys):
        if not any(o != k and all(a <= b for a, b in zip(o, k)) for o in keys):
            if k not in [(q["cycles"], q["luts"], q["dsps"]) for q in front]:
                front.append(p)
    return sorted(front, key=lambda p: p["cycles"])


def schedule_text(p: dict) -> str:
    tile = ", ".join(f"{k}:{v}" for k, v in p["tile"].items()) or "none"
    par = ", ".join(f"{k}:{v}" for k, v in p["par"].items()) or "none"
    return f"tile {tile}; par {par}"


def write(result: dict, out_dir: Path, name: str) -> dict:
    """dse.json (everything), dse.csv (a row per point) and dse.png (cycles against LUTs and
    DSP blocks, the front marked) in `out_dir`, each written whole or not at all."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {k: out_dir / f"dse.{k}" for k in ("json", "csv", "png")}
    _atomic(paths["json"], json.dumps(result, indent=1).encode())
    _atomic(paths["csv"], _csv(result["points"]).encode())
    _atomic(paths["png"], _plot(result, name))
    return paths


def _csv(points: list) -> str:
    out = io.StringIO()
    cols = ["schedule", "cycles", *RESOURCES, "fits", "front", "auto", "verified_cycles", "refused"]
    w = csv.writer(out)
    w.writerow(cols)
    for p in points:
        w.writerow([schedule_text(p), *(p.get(c, "") for c in cols[1:])])
    return out.getvalue()


def _plot(result: dict, name: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fits = [p for p in result["points"] if p["fits"]]
    front = [p for p in fits if p["front"]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, r, label in ((axes[0], "luts", "LUTs (estimated)"), (axes[1], "dsps", "DSP blocks")):
        ax.scatter([p[r] for p in fits], [p["cycles"] for p in fits], s=8, c="0.7", label="schedules that fit")
        ax.scatter([p[r] for p in front], [p["cycles"] for p in front], s=18, c="C3", label="Pareto front")
        mine = [p for p in fits if p["auto"]]
        if mine:
            ax.scatter([p[r] for p in mine], [p["cycles"] for p in mine], s=60, marker="*", c="C0", label="auto")
        ax.set_xlabel(label)
        ax.set_ylabel("predicted cycles")
        if fits:
            ax.set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{name} on the {result['device']}: {len(result['points'])} schedules of about {result['total']}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
