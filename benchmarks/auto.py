"""schedule="auto" on every app against its hand-chosen default schedule: both simulated in
Verilator (results checked against the golden model, cycles against the model), the time the
choice took, and the auto schedule's resources, estimated and (with --synth) synthesized by
Yosys against the device. Writes docs/auto.md.

    .venv/bin/python benchmarks/auto.py [APP ...] [--device=ecp5-85k] [--synth]

Rows are kept in docs/auto.json; naming apps re-measures only those.
"""

import json
import sys
import time

from common import ROOT, app_paths, load_app

from hwgen import dse

DOCS = ROOT / "docs"
ROWS = DOCS / "auto.json"


def schedule_text(s) -> str:
    return dse.schedule_text({"tile": s.tile, "par": s.par})


def measure(path, device: str, synth: bool) -> dict:
    app = load_app(path)
    kernel = getattr(app, path.stem)
    inputs = app.inputs(0)
    started = time.perf_counter()
    chosen = kernel.with_schedule("auto", device=device)
    choose_s = time.perf_counter() - started
    hand = kernel.verify(*inputs)
    mine = chosen.verify(*inputs)
    assert hand.cycles == hand.predicted_cycles and mine.cycles == mine.predicted_cycles
    row = {
        "app": path.stem,
        "device": device,
        "default": schedule_text(kernel.schedule),
        "default_cycles": hand.cycles,
        "auto": schedule_text(chosen.schedule),
        "auto_cycles": mine.cycles,
        "choose_s": round(choose_s, 2),
        "tried": chosen.auto["tried"],
        "estimate": {r: v["estimate"] for r, v in chosen.auto["resources"].items()},
        "device_has": {r: v["device"] for r, v in chosen.auto["resources"].items()},
    }
    if synth:
        from hwgen.auto import device_of
        from hwgen.synth import synthesize

        target, _ = device_of(device)
        r = synthesize(chosen.elaborate(), target, device.split("-", 1)[1], place=False)
        row["synthesized"] = {k: r[k] for k in ("luts", "ffs", "brams", "dsps")}
    return row


def page(rows: list) -> str:
    head = [
        '# schedule="auto" against the hand-chosen schedules',
        "",
        "Written by `benchmarks/auto.py`. Each app of `patterns/` at its default (hand-chosen) schedule "
        'and at `with_schedule("auto", device=...)`, both simulated in Verilator with the app\'s `inputs()` '
        "(results bit-exact against the golden model, measured cycles equal to the predicted ones, checked); "
        "`choose s`: the time `auto` took to choose (`tried`: the schedules it judged); resources of the "
        "auto schedule as the resource model estimated them and, where run with `--synth`, as Yosys counted "
        "them, against the device's.",
        "",
        "| app | device | default schedule | cycles | auto schedule | cycles | auto / default | choose s | tried "
        "| LUT est. / synth. / device | FF est. / synth. | BRAM est. / synth. / device | DSP est. / synth. / device |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines = []
    for r in rows:
        syn = r.get("synthesized", {})

        def cell(res, device=True):
            got = syn.get(res, "-")
            return f"{r['estimate'][res]} / {got}" + (f" / {r['device_has'][res]}" if device else "")

        lines.append(
            f"| {r['app']} | {r['device']} | {r['default']} | {r['default_cycles']} | {r['auto']} | "
            f"{r['auto_cycles']} | {r['auto_cycles'] / r['default_cycles']:.2f} | {r['choose_s']} | {r['tried']} | "
            f"{cell('luts')} | {cell('ffs', False)} | {cell('brams')} | {cell('dsps')} |"
        )
    return "\n".join(head + lines) + "\n"


def main(argv) -> int:
    device = next((a.split("=", 1)[1] for a in argv if a.startswith("--device=")), "ecp5-85k")
    synth = "--synth" in argv
    names = [a for a in argv if not a.startswith("--")]
    rows = {r["app"]: r for r in json.loads(ROWS.read_text())} if ROWS.exists() else {}
    for path in app_paths(names):
        row = measure(path, device, synth)
        if not synth and "synthesized" in rows.get(path.stem, {}) and rows[path.stem]["auto"] == row["auto"]:
            row["synthesized"] = rows[path.stem]["synthesized"]  # the same schedule's synthesis, kept
        rows[path.stem] = row
        print(json.dumps(row), flush=True)
        ROWS.write_text(json.dumps(list(rows.values()), indent=1) + "\n")
    (DOCS / "auto.md").write_text(page(sorted(rows.values(), key=lambda r: r["app"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
