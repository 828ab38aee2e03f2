"""Cycles for every app in patterns/ at its own schedule: measured in Verilator, predicted by
the cycle model, and the roofline bound; plus elaboration time.

    .venv/bin/python benchmarks/patterns.py
"""

import sys
import time

from common import app_paths, load_app


def main() -> int:
    rows = []
    for path in app_paths():
        app = load_app(path)
        kernel = getattr(app, path.stem)
        t = time.perf_counter()
        kernel.elaborate()
        build = time.perf_counter() - t
        r = kernel.verify(*app.inputs(0))
        rows.append(
            (
                path.stem,
                r.cycles,
                r.predicted_cycles,
                100 * r.prediction_error,
                r.roofline_cycles,
                100 * r.roofline_efficiency,
                build,
            )
        )
    head = ("app", "measured", "predicted", "error %", "roofline", "of roofline %", "build s")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, meas, pred, err, roof, eff, build in rows:
        print(f"| {name} | {meas} | {pred} | {err:+.1f} | {roof} | {eff:.1f} | {build:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
