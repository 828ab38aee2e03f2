"""Calibrate and check the resource model (hwgen/resources.py) against synthesis.

    .venv/bin/python benchmarks/resources.py

Reads the synthesized points of docs/resource_points.json (written by
benchmarks/resource_points.py: Yosys's LUT, FF, block RAM and DSP counts of the apps at
several schedules), fits the LUT and flip-flop coefficients of the model to them (least
squares on relative error, coefficients kept non-negative), writes them to
hwgen/resources_fit.json, and writes docs/resources.md: every point's synthesized and
predicted counts, and per resource the median and worst error, both of the fitted model and
with each app left out of the fit in turn (its points predicted by a model that never saw the
app: the error to expect on a new kernel). Block RAMs and DSP blocks are counted by rule, not
fitted.
"""

import json
import sys
import time

import numpy as np
from common import ROOT, load_app
from resource_points import POINTS

from hwgen import resources
from hwgen.build import compile_kernel

DOCS = ROOT / "docs"


def rows(target: str) -> list:
    """(app, schedule text, synthesized counts, features) of every point of `target`."""
    out = []
    for key, got in sorted(json.loads(POINTS.read_text()).items()):
        t, app, tile, par, metapipeline = json.loads(key)
        if t != target:
            continue
        module = load_app(ROOT / "patterns" / f"{app}.py")
        kernel = getattr(module, app).with_schedule(tile=tile, par=par, metapipeline=metapipeline)
        f = resources.features(compile_kernel(kernel), target)
        out.append((app, _text(tile, par, metapipeline), got, f))
    return out


def _text(tile, par, meta) -> str:
    parts = []
    if tile:
        parts.append("tile " + ", ".join(f"{k}:{v}" for k, v in tile.items()))
    if par:
        parts.append("par " + ", ".join(f"{k}:{v}" for k, v in par.items()))
    parts.append("metapipelined" if meta else "sequential")
    return "; ".join(parts)


def fit(points: list, resource: str) -> dict:
    """Non-negative coefficients of FEATURES[resource] minimising the squared relative error."""
    from scipy.optimize import nnls

    names = list(resources.FEATURES[resource])
    y = np.array([p[2][resource] for p in points], float)
    x = np.array([[p[3][n] for n in names] for p in points], float)
    w = 1.0 / np.maximum(y, 1.0)
    scale = np.maximum(np.abs(x * w[:, None]).max(axis=0), 1e-12)  # columns of like size
    coef, _ = nnls(x * w[:, None] / scale, y * w)
    return {n: float(c / s) for n, c, s in zip(names, coef, scale) if c > 0}


def predict(coef: dict, f: dict) -> int:
    return max(0, round(sum(c * f[n] for n, c in coef.items())))


def error(pred: int, got: int) -> float:
    return 100.0 * (pred - got) / max(got, 1)


def summary(errors: list) -> str:
    a = np.abs(errors)
    return f"{np.median(a):.1f} % median, {a.max():.1f} % worst"


def main(argv) -> int:
    target = "ecp5"  # the one family calibrated (block RAMs are counted by ECP5 rules)
    started = time.perf_counter()
    points = rows(target)
    coef = {r: fit(points, r) for r in ("luts", "ffs")}
    apps = sorted({p[0] for p in points})
    held_out = {}  # (point index, resource) -> prediction without its app in the fit
    for app in apps:
        rest = [p for p in points if p[0] != app]
        if not rest:
            continue
        c = {r: fit(rest, r) for r in ("luts", "ffs")}
        for i, p in enumerate(points):
            if p[0] == app:
                for r in c:
                    held_out[i, r] = predict(c[r], p[3])
    fits = json.loads(resources.FIT.read_text()) if resources.FIT.exists() else {}
    fits[target] = {"coefficients": coef, "points": len(points)}
    resources.FIT.write_text(json.dumps(fits, indent=1, sort_keys=True) + "\n")
    resources._fits.cache_clear()
    lines = [
        "| app | schedule | LUT | predicted | FF | predicted | BRAM | predicted | DSP | predicted |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    errs = {r: [] for r in resources.RESOURCES}
    loo = {"luts": [], "ffs": []}
    for i, (app, text, got, f) in enumerate(points):
        pred = {r: predict(coef[r], f) for r in ("luts", "ffs")} | {"brams": f["brams"], "dsps": f["dsps"]}
        cells = []
        for r in resources.RESOURCES:
            errs[r].append(error(pred[r], got[r]))
            cells += [str(got[r]), f"{pred[r]} ({error(pred[r], got[r]):+.0f} %)"]
            if (i, r) in held_out:
                loo[r].append(error(held_out[i, r], got[r]))
        lines.append(f"| {app} | {text} | " + " | ".join(cells) + " |")
    summary_lines = [
        "| resource | fitted model | each app left out of the fit |",
        "|---|---|---|",
    ]
    for r in resources.RESOURCES:
        left = summary(loo[r]) if loo.get(r) else "(counted by rule, not fitted)"
        summary_lines.append(f"| {resources.NAMES[r]} | {summary(errs[r])} | {left} |")
    page = [
        "# Resource model",
        "",
        f"Written by `benchmarks/resources.py` from {len(points)} points of {len(apps)} apps ({target}, "
        "Yosys's counts without place-and-route, `benchmarks/resource_points.py`). The model "
        "(`hwgen/resources.py`) predicts from the compiled kernel, before any hardware is built: "
        "block RAMs and DSP blocks by the rules the hardware is built by, LUTs and flip-flops by a "
        "linear model whose coefficients are fitted here. Error = (predicted - synthesized) / "
        "synthesized.",
        "",
        *summary_lines,
        "",
        "Coefficients: "
        + "; ".join(f"{resources.NAMES[r]}: " + ", ".join(f"{k} {v:.3g}" for k, v in coef[r].items()) for r in coef),
        "",
        *lines,
        "",
    ]
    (DOCS / "resources.md").write_text("\n".join(page))
    print("\n".join(summary_lines))
    print(f"{len(points)} points, {time.perf_counter() - started:.1f} s; wrote docs/resources.md, {resources.FIT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
