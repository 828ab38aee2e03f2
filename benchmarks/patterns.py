"""Cycles for every app in patterns/ at its own schedule: measured in Verilator, predicted by
the cycle model, and the roofline bound; plus elaboration time.

    .venv/bin/python benchmarks/patterns.py
"""

import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    rows = []
    for path in sorted((ROOT / "patterns").glob("*.py")):
        app = load(path)
        kernel = getattr(app, path.stem)
        t = time.perf_counter()
        kernel.elaborate()
        build = time.perf_counter() - t
        r = kernel.verify(*app.inputs(0))
        rows.append((path.stem, r.cycles, r.predicted_cycles, 100 * r.prediction_error,
                     r.roofline_cycles, 100 * r.roofline_efficiency, build))
    head = ("app", "measured", "predicted", "error %", "roofline", "of roofline %", "build s")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, meas, pred, err, roof, eff, build in rows:
        print(f"| {name} | {meas} | {pred} | {err:+.1f} | {roof} | {eff:.1f} | {build:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
