"""Synthesized resources of the apps at several schedules: the data the resource model
(hwgen/resources.py) is calibrated against and checked with.

    .venv/bin/python benchmarks/resource_points.py [APP ...]

For each app in patterns/ and each schedule of `schedules(kernel)` (its default, five
variations and schedule="auto"'s choice), Yosys synthesizes the kernel (no
place-and-route: resources only) and the LUT, FF, block RAM and DSP counts are kept in
docs/resource_points.json, one entry per (target, app, schedule). Points already there are
not synthesized again; a schedule the compiler refuses is skipped.
"""

import json
import sys
import time

from common import ROOT, app_paths, load_app

from hwgen.errors import HwgenError

POINTS = ROOT / "docs" / "resource_points.json"


def schedules(kernel) -> list:
    """(label, kernel) pairs: the default schedule, not metapipelined, without lanes, with
    twice and half the lanes, with half of each tile, and schedule="auto"'s choice for the
    ECP5-85k (those the compiler accepts)."""
    s = kernel.schedule
    wanted = [("default", {}), ("sequential", {"metapipeline": False})]
    if s.par:
        wanted.append(("no lanes", {"par": {}}))
        wanted.append(("twice the lanes", {"par": {k: 2 * v for k, v in s.par.items()}}))
        if any(v >= 4 for v in s.par.values()):
            wanted.append(("half the lanes", {"par": {k: max(1, v // 2) for k, v in s.par.items()}}))
    if s.tile:
        wanted.append(("half the tiles", {"tile": {k: max(1, v // 2) for k, v in s.tile.items()}}))
    wanted.append(("auto", {"tile": "auto"}))
    out = []
    for label, change in wanted:
        try:
            out.append((label, kernel.with_schedule(**change)))
        except HwgenError as e:
            print(f"{kernel.name} {label}: skipped ({e})", flush=True)
    return out


def key(target: str, app: str, kernel) -> str:
    s = kernel.schedule
    return json.dumps([target, app, s.tile, s.par, s.metapipeline], sort_keys=True)


def load() -> dict:
    return json.loads(POINTS.read_text()) if POINTS.exists() else {}


def main(argv) -> int:
    from hwgen.synth import synthesize

    target = "ecp5"  # the family the resource model is calibrated for
    names = [a for a in argv if not a.startswith("--")]
    points = load()
    for path in app_paths(names):
        app = load_app(path)
        kernel = getattr(app, path.stem)
        for label, k in schedules(kernel):
            at = key(target, path.stem, k)
            if at in points:
                continue
            started = time.perf_counter()
            try:
                r = synthesize(k.elaborate(), target, place=False)
            except HwgenError as e:
                print(f"{path.stem} {label}: skipped ({e})", flush=True)
                continue
            entry = {r_: r[r_] for r_ in ("luts", "ffs", "brams", "dsps")}
            entry["seconds"] = round(time.perf_counter() - started, 1)
            points[at] = entry
            POINTS.write_text(json.dumps(points, indent=1, sort_keys=True) + "\n")
            print(f"{path.stem} {label}: {entry}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
