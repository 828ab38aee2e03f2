"""The benchmark report: every app in patterns/ at its default schedule, simulated and
synthesized, written to docs/results.md with two pictures:

- docs/roofline.png: each app's throughput against the roofline of its lanes and the DRAM;
- docs/timeline.png: when each stage of one metapipeline (dotproduct) is busy, from simulation.

    .venv/bin/python benchmarks/bench.py [APP ...] [--no-synth] [--jobs=N] [--page-only]
                                         [--router=router1|router2]
    (or: make bench)

Rows are kept in docs/results.json; naming apps re-measures only those, and the page is
rewritten from every kept row (`--page-only`: only that). The part of docs/results.md after
the HAND_WRITTEN marker line is written by hand and kept as it is.

Cycles and timelines come from Verilator; the baseline's cycles come from the cycle model,
which matches simulation exactly for the baseline (see `make ablation`); LUT / FF / BRAM / DSP
and Fmax come from Yosys and nextpnr for the ECP5-85k (the YoWASP builds; slow: minutes per
app). nextpnr's default router is router1; router2 (`--router=router2`) routes the larger apps
in minutes where router1 takes hours. Each row records the router it was routed with.
"""

import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from common import ROOT, app_paths, load_app

DOCS = ROOT / "docs"
HAND_WRITTEN = "<!-- Everything below this line is written by hand; benchmarks/bench.py keeps it. -->"


def schedule_text(s) -> str:
    parts = []
    if s.tile:
        parts.append("tile " + ", ".join(f"{k}:{v}" for k, v in s.tile.items()))
    if s.par:
        parts.append("par " + ", ".join(f"{k}:{v}" for k, v in s.par.items()))
    parts.append("metapipelined" if s.metapipeline else "sequential")
    return "; ".join(parts)


def measure(path: Path, synth: bool, router: str = "router1") -> dict:
    app = load_app(path)
    kernel = getattr(app, path.stem)
    t = time.perf_counter()
    design = kernel.elaborate()
    build = time.perf_counter() - t
    r = kernel.verify(*app.inputs(0))
    base = kernel.with_schedule(tile={}, par={}, metapipeline=False).elaborate().report["predicted_cycles"]
    report = design.report
    words = sum(a["size"] for a in _arrays(design))
    row = {
        "app": path.stem,
        "schedule": schedule_text(kernel.schedule),
        "cycles": r.cycles,
        "predicted": r.predicted_cycles,
        "baseline": base,
        "roofline": r.roofline_cycles,
        "lanes": report["lanes"],
        "work": report["compute_bound_cycles"] * report["lanes"],
        "words": words,
        "build_s": round(build, 2),
    }
    if synth:
        from hwgen.synth import synthesize

        row["synth"] = synthesize(design, "ecp5", "85k", pnr_options=("--router", router)) | {"router": router}
    return row


def _arrays(design):
    return [{"size": d.size} for d in design.program.drams]


def table(rows) -> str:
    head = (
        "app",
        "schedule",
        "cycles",
        "speedup",
        "pred. error",
        "of roofline",
        "LUT",
        "FF",
        "BRAM",
        "DSP",
        "Fmax MHz",
        "router",
        "synth s",
        "build s",
    )
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        s = r.get("synth") or {}
        fmax = s.get("fmax_mhz")
        out.append(
            " | ".join(
                [
                    f"| {r['app']}",
                    r["schedule"],
                    str(r["cycles"]),
                    f"{r['baseline'] / r['cycles']:.0f}x",
                    f"{100 * (r['predicted'] - r['cycles']) / r['cycles']:+.1f} %",
                    f"{100 * r['roofline'] / r['cycles']:.0f} %",
                    str(s.get("luts", "-")),
                    str(s.get("ffs", "-")),
                    str(s.get("brams", "-")),
                    str(s.get("dsps", "-")),
                    f"{fmax:.1f}" if fmax else "-",
                    s.get("router", "router1") if s else "-",
                    f"{s['seconds']:.0f}" if "seconds" in s else "-",
                    f"{r['build_s']:.1f} |",
                ]
            )
        )
    return "\n".join(out)


def roofline_chart(rows, words_per_cycle: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [r["work"] / r["words"] for r in rows]
    lo, hi = min(xs) / 2, max(xs) * 2
    grid = [lo * (hi / lo) ** (k / 100) for k in range(101)]
    for lanes in sorted({r["lanes"] for r in rows}):
        ax.plot(
            grid,
            [min(lanes, words_per_cycle * x) for x in grid],
            "--",
            lw=1,
            label=f"roofline, {lanes} lane{'s' if lanes > 1 else ''}",
        )
    for r, x in zip(rows, xs):
        y = r["work"] / r["cycles"]
        ax.plot([x], [y], "o")
        ax.annotate(r["app"], (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("operations per DRAM word")
    ax.set_ylabel("operations per cycle (measured)")
    ax.set_title(f"hwgen apps against their roofline (DRAM: {words_per_cycle} words/cycle)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def timeline_chart(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    app = load_app(ROOT / "patterns" / "dotproduct.py")
    r = app.dotproduct.simulate(*app.inputs(0), monitor=True)
    lanes = [("parallel0", "stage 0: load a, b tiles"), ("pipe0", "stage 1: multiply-add (8 lanes)")]
    fig, ax = plt.subplots(figsize=(9, 2.6))
    for row, (unit, label) in enumerate(lanes):
        spans = r.timeline[unit][:6]
        ax.broken_barh(
            [(s, e - s) for s, e in spans], (row - 0.35, 0.7), facecolors=[f"C{k % 10}" for k in range(len(spans))]
        )
        for k, (s, e) in enumerate(spans):
            ax.text((s + e) / 2, row, f"tile {k}", ha="center", va="center", fontsize=7, color="white")
    ax.set_yticks(range(len(lanes)), [label for _, label in lanes])
    ax.set_xlabel("cycle (from start)")
    ax.set_title("dotproduct's metapipeline: the load of tile t+1 runs while tile t is computed")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _keep(row: dict, saved: dict, store: Path, synth: bool) -> None:
    """Add a measured row to the kept rows (keeping an earlier synthesis with --no-synth)."""
    app = row["app"]
    if not synth and "synth" in saved.get(app, {}):
        row["synth"] = saved[app]["synth"]
    saved[app] = row
    store.write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n")
    shown = {k: v for k, v in (row.get("synth") or {}).items() if k != "critical_path"}
    print(json.dumps({k: v for k, v in row.items() if k != "synth"} | {"synth": shown}), flush=True)


def main(argv) -> int:
    synth = "--no-synth" not in argv
    router = next((a.split("=", 1)[1] for a in argv if a.startswith("--router=")), "router1")
    if router not in ("router1", "router2"):
        print(f"error: --router must be router1 or router2, not {router!r}", file=sys.stderr)
        return 1
    names = [a for a in argv if not a.startswith("--")]
    DOCS.mkdir(exist_ok=True)
    store = DOCS / "results.json"  # every app's last row: naming apps re-measures only those
    saved = json.loads(store.read_text()) if store.exists() else {}
    jobs = next((int(a.split("=", 1)[1]) for a in argv if a.startswith("--jobs=")), 1)
    todo = [] if "--page-only" in argv else app_paths(names)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        pending = [pool.submit(measure, path, synth, router) for path in todo]
        for done in as_completed(pending):
            try:
                _keep(done.result(), saved, store, synth)
            except Exception as e:  # report it, keep the other apps' rows
                print(f"error: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    rows = [saved[p.stem] for p in app_paths() if p.stem in saved]
    from hwgen import DramConfig

    roofline_chart(rows, DramConfig().words_per_cycle, DOCS / "roofline.png")
    timeline_chart(DOCS / "timeline.png")
    page = [
        "# Results",
        "",
        "Written by `make bench` (`benchmarks/bench.py`). Every app at its default schedule;",
        "cycles from Verilator with the default DRAM (latency 20, 4 words per cycle each way);",
        "speedup against the paper's baseline (no tiling, no metapipelining, one lane; its cycles",
        "from the cycle model, exact for the baseline, see `make ablation`); resources and Fmax from",
        "Yosys and nextpnr for the ECP5-85k (LFE5U-85F, CABGA381) at a 100 MHz target, on the ECP5",
        "netlist (DSP and block RAM primitives, see [hardware.md](hardware.md#ecp5-primitives)),",
        "speed grade 6, seed 1, with the nextpnr router named in the row; synth s: the wall time of",
        "synthesis and place-and-route, build s: of hwgen's build. A `-`: not synthesized. A row's",
        "synthesis is kept from its last synthesizing run (`--no-synth` keeps it).",
        "",
        table(rows),
        "",
        "![roofline](roofline.png)",
        "",
        "![timeline](timeline.png)",
        "",
    ]
    old = (DOCS / "results.md").read_text() if (DOCS / "results.md").exists() else ""
    kept = "\n" + old[old.index(HAND_WRITTEN) :] if HAND_WRITTEN in old else ""
    (DOCS / "results.md").write_text("\n".join(page) + kept)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
