"""Hardware for hw.pipeline (mesh/pipeline.py): one PE per stage, each its own module.

Supported (everything else raises UnsupportedError with the user's line; docs/mesh.md lists
the forms):

    mesh = hw.Mesh((K,), ("stage",), topology="ring")        # or a torus of one axis
    @hw.kernel(mesh=mesh, ...)
    def k(x: hw.Array[int32, ...], w: ...) -> ...:
        return hw.pipeline([stage0, ..., stageK-1], x, axis="stage", microbatches=M)

where each stage computes an integer array from its micro-batch and the kernel's array
arguments. Stage k's program (`stage_program`) is an ordinary kernel program for one
micro-batch, compiled with the kernel's schedule: its input is `x` (the first stage) or
`act<k>` (the slots the previous stage's activations arrive in), its result `out<k>` (the
slots the PE sends on) or, for the last stage, the kernel's result. Each PE is a
hw/stage.py StageTop; the mesh top (hw/mesh_top.py) instantiates stage k's module on PE k and
wires PE k's `<axis>_next_tx` to PE k+1's `<axis>_prev_rx` (the link from the last PE back to
the first stays idle). Every PE's DRAM has the same layout (`arrays`): the kernel's arguments
(each PE loads them whole; a PE reads what its stage reads), every stage's slots, and the
kernel's result, which the last PE writes.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from .. import ir
from ..errors import UnsupportedError
from ..lang.program import Program, Result
from ..lang.signature import Port, raw_dtype
from .mesh import LinkConfig
from .pipeline import pipelines


@dataclass(frozen=True)
class PipelinePlan:
    """A supported pipeline kernel: its `programs` (one per stage), their StagePlans
    (`stages`), the kernel's `mesh` and `axis`, and every DRAM array of a PE (`arrays`: (name,
    words, dtype, role) with role "in" for the kernel's arguments, "out" for its result,
    "scratch" for the slots)."""

    programs: tuple
    stages: tuple
    mesh: object
    axis: str
    arrays: tuple
    result: str

    @property
    def p(self) -> int:
        return self.mesh.size


def is_pipeline(kernel) -> bool:
    """Whether the kernel's program uses hw.pipeline."""
    return bool(pipelines([r.node for r in kernel.program.results]))


def plan(kernel, what: str, dram) -> PipelinePlan:  # noqa: C901  (one refusal per unsupported form)
    """The kernel's pipeline plan, or UnsupportedError saying why its hardware cannot be built."""
    from ..hw.stage import StagePlan

    prog, mesh = kernel.program, kernel.mesh
    node = prog.results[0].node
    loc = node.loc if isinstance(node, ir.Pipeline) else pipelines([r.node for r in prog.results])[0].loc

    def refuse(why: str, where=None):
        raise UnsupportedError(
            f"cannot {what} kernel '{kernel.name}' on mesh {mesh.describe()}: {why}. Pipeline hardware "
            f"supports a kernel returning one hw.pipeline over a one-axis ring or torus whose stages "
            f"compute integer arrays from their micro-batch and the kernel's array arguments (see "
            f"docs/mesh.md); the golden model {kernel.name}(*arrays) works",
            where or loc,
        )

    if len(prog.results) != 1 or not isinstance(node, ir.Pipeline):
        refuse("the kernel must return the result of one hw.pipeline directly")
    axis, link = node.axis, kernel.link or LinkConfig()
    if mesh.axis_names != (axis,):
        refuse(f"the mesh must have the pipeline's axis '{axis}' only")
    if not axis.isidentifier() or not axis.isascii():
        refuse(f"the axis name {axis!r} must be a plain identifier (it names Verilog ports)")
    if mesh.ring_order(axis) != tuple(range(mesh.size)):
        refuse("stage k+1 must be the next PE round the ring: use topology 'ring' or 'torus'")
    params = {pp.name: pp for pp in prog.params}
    if any(not pp.is_array or pp.dtype != raw_dtype(pp.dtype) for pp in prog.params):
        refuse("every kernel argument must be an array of integers (scalars and fixed point are not built yet)")
    res = prog.results[0].port
    if res.dtype != raw_dtype(res.dtype):
        refuse("fixed-point results are not built yet")
    if not isinstance(node.x, ir.Input):
        refuse("the pipeline's input x must be a kernel argument, passed as it is")
    W, w = dram.words_per_cycle, link.words_per_cycle
    if w > W:
        refuse(f"the link's {w} words a cycle must not exceed the DRAM's {W} (DramConfig.words_per_cycle)")
    taken = set(params) | {res.name}
    names = [node.x.name]
    for k in range(1, len(node.params)):
        names.append(_fresh(f"act{k}", taken))
        taken.add(names[-1])
    outs = []
    for k in range(len(node.params) - 1):
        outs.append(_fresh(f"out{k}", taken))
        taken.add(outs[-1])
    outs.append(res.name)
    M = node.microbatches
    programs, stages, arrays = [], [], [(a.name, math.prod(a.shape), a.dtype, "in") for a in prog.params]
    for k, (inp, body) in enumerate(zip(node.params, node.bodies)):
        where = f"stage {k}"
        if body.dtype.is_bool:
            refuse(f"{where} must compute an array of integers")
        reads = []
        for sub in ir.walk(body):
            if isinstance(sub, (ir.ShardMap, ir.ShardOut, ir.Collective, ir.Pipeline)):
                refuse(f"{where} may not use hw.shard_map, collectives or another hw.pipeline")
            if isinstance(sub, ir.Param):
                refuse(f"{where} may not read the scalar {sub.name} yet")
            if isinstance(sub, ir.Input) and sub is not inp:  # a kernel argument (pipeline.py checks)
                if k == 0 and sub.name == names[0]:
                    refuse(f"{where} may not read x whole besides its micro-batch")
                reads.append(sub)
            if (isinstance(sub, ir.MultiFold) and sub.checked) or (isinstance(sub, ir.Collect) and sub.kind == "group"):
                refuse(
                    "run-time checks (a group-by's max_keys, a multifold subscript from data) are not built "
                    "in pipelines",
                    sub.loc,
                )
        src = ir.Input(names[k], inp.dtype, inp.shape)
        value = ir.transform(body, lambda n, inp=inp, src=src: src if n is inp else None)
        if isinstance(value, ir.Input):  # a stage returning its input: copied by a Map
            dims = tuple(ir.Dim(f"%pipe_i{k}_{d}", e) for d, e in enumerate(value.shape))
            value = ir.Map(dims, ir.Read(value, tuple(ir.Index(d.name) for d in dims)))
        ports = [Port(names[k], inp.dtype, inp.shape)]
        ports += [Port(r.name, r.dtype, r.shape) for r in dict.fromkeys(reads)]
        result = Result(Port(outs[k], body.dtype, body.shape), value)
        extents = dict(prog.extents)
        extents.update({d.name: d.extent for d in ir.walk(value) if isinstance(d, ir.Dim)})
        programs.append(Program(f"{prog.name}_s{k}", tuple(ports), (result,), extents, prog.loc))
        src_words, dst_words = math.prod(inp.shape), math.prod(body.shape)
        for words, edge in ((src_words, k > 0), (dst_words, k < len(node.params) - 1)):
            if edge and words % W:
                refuse(
                    f"{where}'s micro-batch activations ({words} words) must be a whole number of DRAM beats "
                    f"({W} words): change the micro-batch's shape or DramConfig.words_per_cycle"
                )
        stages.append(StagePlan(k, len(node.params), axis, names[k], outs[k], src_words, dst_words, M))
        if k > 0:
            arrays.append((names[k], M * src_words, inp.dtype, "scratch"))
        if k < len(node.params) - 1:
            arrays.append((outs[k], M * dst_words, body.dtype, "scratch"))
    arrays.append((res.name, math.prod(res.shape), res.dtype, "out"))
    return PipelinePlan(tuple(programs), tuple(stages), mesh, axis, tuple(arrays), res.name)


def _fresh(name: str, taken: set) -> str:
    k, out = 0, name
    while out in taken:
        k += 1
        out = f"{name}{k}"
    return out


@dataclass
class PipelineDesign:
    """A built pipeline kernel: its `plan`, each stage's `compiled` program and StageTop
    (`components`), the whole `verilog` (mesh top, stage modules, link wire) and `report`.
    `component` is the first stage's (its word and tag widths are every stage's)."""

    kernel: object
    dram: object
    plan: PipelinePlan
    compiled: list
    components: list
    verilog: str
    report: dict
    paths: dict

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def component(self):
        return self.components[0]


def elaborate(kernel, dram=None, what: str = "build", show_ir=None, target=None) -> PipelineDesign:
    """The pipeline kernel's hardware (`target` "ecp5": the device's primitives)."""
    from ..dram import DramConfig
    from ..hw import device
    from ..hw.link import LinkWire
    from ..hw.mesh_top import mesh_top_verilog, pe_ports
    from ..hw.stage import StageTop
    from ..hw.top import Top
    from ..passes import compile
    from ..verilog import to_verilog
    from .pipeline_model import predict

    started = time.perf_counter()
    dram = dram or DramConfig()
    pp = plan(kernel, what, dram)
    link = kernel.link or LinkConfig()
    compiled = [compile(prog, kernel.schedule, dram.words_per_cycle, show_ir) for prog in pp.programs]
    names = [a[0] for a in pp.arrays]
    name = kernel.name
    with device.primitives(target):
        tops = [Top(c, dram) for c in compiled]
        bits = {t.word_bits for t in tops}
        if len(bits) != 1:
            raise UnsupportedError(
                f"cannot {what} kernel '{kernel.name}': its stages' arrays need DRAM words of "
                f"different widths ({', '.join(map(str, sorted(bits)))} bits); give every stage "
                f"elements of one width",
                pp.programs[0].loc,
            )
        tag, word = max(t.tag_bits for t in tops), bits.pop()
        stages = [StageTop(t, dram, s, names, tag, link, word) for t, s in zip(tops, pp.stages)]
        modules = [f"{name}_s{k}" for k in range(len(stages))]
        parts = [to_verilog(s, mod) for s, mod in zip(stages, modules)]
        wire_v = to_verilog(LinkWire(stages[0].word_bits, link.words_per_cycle, link.latency), f"{name}_wire")
    ports = pe_ports(stages[0])
    top_v = mesh_top_verilog(
        name, ports, pp.mesh, modules, {pp.axis: f"{name}_wire"}, stages[0].word_bits * link.words_per_cycle
    )
    model = predict(pp, compiled, dram, link)
    report = {
        "kernel": name,
        "schedule": kernel.schedule.describe(),
        "mesh": {
            "shape": list(pp.mesh.axis_sizes),
            "axes": list(pp.mesh.axis_names),
            "topology": pp.mesh.topology,
            "pes": pp.p,
        },
        "link": {"latency": link.latency, "words_per_cycle": link.words_per_cycle},
        "pipeline": {
            "stages": len(pp.stages),
            "microbatches": pp.stages[0].microbatches,
            "stage_cycles": model.stage_cycles,
            "transfer_cycles": model.transfer_cycles,
            "bubble": model.bubble,
        },
        "dram": {
            "latency": dram.latency,
            "words_per_cycle": dram.words_per_cycle,
            "word_bits": stages[0].word_bits,
            "addr_bits": dram.addr_bits,
        },
        "predicted_cycles": model.cycles,
        "roofline_cycles": model.roofline,
        "build_seconds": round(time.perf_counter() - started, 3),
    }
    verilog = "\n".join([top_v, *parts, wire_v])
    return PipelineDesign(kernel, dram, pp, compiled, stages, verilog, report, {})
