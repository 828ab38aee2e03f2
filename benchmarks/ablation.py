"""The paper's ablation: every app in patterns/ as the baseline (no tiling, no metapipelining,
one lane), tiled, tiled + metapipelined, and tiled + metapipelined + parallel (its default
schedule). Cycles come from Verilator; the model's prediction, its error, the roofline bound
and the efficiency against it are printed beside them.

    .venv/bin/python benchmarks/ablation.py [APP ...]      (or: make ablation)
"""

import sys
import time

from common import app_paths, load_app


def variants(kernel):
    s = kernel.schedule
    return (
        [
            ("baseline", kernel.with_schedule(tile={}, par={}, metapipeline=False)),
            ("tiled", kernel.with_schedule(par={}, metapipeline=False)),
            ("tiled+meta", kernel.with_schedule(par={}, metapipeline=True)),
            ("tiled+meta+par", kernel.with_schedule(metapipeline=True)),
        ]
        if s.tile
        else [("baseline", kernel)]
    )


def main(names) -> int:
    paths = app_paths(names)
    head = ("app", "schedule", "cycles", "speedup", "predicted", "error %", "roofline", "of roofline %", "sim s")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for path in paths:
        app = load_app(path)
        kernel = getattr(app, path.stem)
        args = app.inputs(0)
        base = None
        for label, k in variants(kernel):
            t = time.perf_counter()
            r = k.verify(*args)
            base = base or r.cycles
            print(
                f"| {path.stem} | {label} | {r.cycles} | {base / r.cycles:.1f}x | {r.predicted_cycles} | "
                f"{100 * r.prediction_error:+.2f} | {r.roofline_cycles} | {100 * r.roofline_efficiency:.1f} | "
                f"{time.perf_counter() - t:.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
