"""hw.pipeline (GPipe pipeline parallelism): its golden model (per micro-batch, as SPEC 7.4
says), its errors, and its hardware (one module per stage, activations over the links,
patterns/mesh/pipeline_mlp.py) bit-exact and in the predicted cycles."""

import markers
import numpy as np
import pytest
from test_mesh_patterns import load

import hwgen as hw
from hwgen import int8, int32
from hwgen.errors import TraceError, UnsupportedError

HERE = __file__
RING2 = hw.Mesh((2,), ("stage",), topology="ring")


def test_the_golden_model_is_the_composition_per_micro_batch():
    app, _ = load("pipeline_mlp")
    for stages, m in ((1, 1), (2, 4), (4, 8), (4, 32)):
        kernel = app.build(stages, m)
        x, w = app.inputs(stages)
        np.testing.assert_array_equal(kernel(x, w), app.reference(x, w))


def test_a_stage_sees_one_micro_batch_only():
    """A stage that mixes rows (each row minus its micro-batch's first row) is computed per
    micro-batch, not over the whole batch."""

    @hw.kernel(mesh=RING2)
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
        first = lambda h: hw.map(h.shape, lambda n, c: h[n, c] - h[0, c])  # noqa: E731
        double = lambda h: hw.map(h.shape, lambda r, d: h[r, d] * 2)  # noqa: E731
        return hw.pipeline([first, double], x, axis="stage", microbatches=2)

    x = np.arange(32, dtype=np.int32).reshape(8, 4) ** 2
    want = np.concatenate([2 * (x[:4] - x[0]), 2 * (x[4:] - x[4])])
    np.testing.assert_array_equal(k(x), want)


def _pipeline_error(build, kind=TraceError):
    with pytest.raises(kind) as e:
        build()
    return e.value


def test_micro_batches_must_divide_dimension_0():
    def build():
        @hw.kernel(mesh=RING2)
        def k(x: hw.Array[int32, 6, 4]) -> hw.Array[int32, 6, 4]:
            return hw.pipeline([lambda h: h, lambda h: h], x, axis="stage", microbatches=4)  # L:divide

    markers.check_error(
        _pipeline_error(build),
        TraceError,
        "hw.pipeline cannot split dimension 0 of x (6 rows) into 4 equal micro-batches; give "
        "microbatches= a divisor of 6",
        HERE,
        "divide",
    )


def test_one_stage_per_pe_of_the_axis():
    def build():
        @hw.kernel(mesh=RING2)
        def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
            return hw.pipeline([lambda h: h] * 3, x, axis="stage", microbatches=2)  # L:count

    markers.check_error(
        _pipeline_error(build),
        TraceError,
        "hw.pipeline has 3 stage(s) but mesh axis 'stage' has 2 PEs; give one stage per PE along the axis",
        HERE,
        "count",
    )


def test_the_axis_must_be_the_kernel_mesh_s():
    def build():
        @hw.kernel(mesh=RING2)
        def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
            return hw.pipeline([lambda h: h] * 2, x, axis="x", microbatches=2)  # L:axis

    markers.check_error(
        _pipeline_error(build),
        TraceError,
        "hw.pipeline axis 'x' is not an axis of the kernel's mesh 2 ring (stage)",
        HERE,
        "axis",
    )


def test_a_pipeline_needs_a_mesh():
    def build():
        @hw.kernel
        def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
            return hw.pipeline([lambda h: h] * 2, x, axis="stage", microbatches=2)  # L:nomesh

    markers.check_error(
        _pipeline_error(build),
        TraceError,
        "hw.pipeline runs on a mesh, but kernel 'k' has none; declare it with @hw.kernel(mesh=...)",
        HERE,
        "nomesh",
    )


def test_a_stage_returns_an_array():
    def build():
        @hw.kernel(mesh=RING2)
        def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
            return hw.pipeline([lambda h: h, lambda h: 3], x, axis="stage", microbatches=2)  # L:scalar

    markers.check_error(
        _pipeline_error(build),
        TraceError,
        "stage 1 of hw.pipeline returned 3; a stage returns an array (its micro-batch's "
        "activations, dimension 0 its rows)",
        HERE,
        "scalar",
    )


@pytest.mark.parametrize(
    "stages, x, microbatches, message",
    [
        ([], "x", 2, "hw.pipeline needs a list of stages, each a function of one array, got []"),
        ("f", "x", 2, "hw.pipeline needs a list of stages, each a function of one array, got 'f'"),
        ("ok", "x", 0, "hw.pipeline needs microbatches=, a positive int, got 0"),
        ("ok", "x", True, "hw.pipeline needs microbatches=, a positive int, got True"),
        ("ok", 5, 1, "hw.pipeline needs an array x to split into micro-batches, got 5"),
    ],
)
def test_bad_arguments(stages, x, microbatches, message):
    def build():
        @hw.kernel(mesh=RING2)
        def k(a: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
            s = [lambda h: h] * 2 if stages == "ok" else stages
            return hw.pipeline(s, a if x == "x" else x, axis="stage", microbatches=microbatches)  # L:bad

    markers.check_error(_pipeline_error(build), TraceError, message, HERE, "bad")


def test_not_inside_a_shard_map_body():
    def build():
        @hw.kernel(mesh=RING2)
        def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
            def body(b):
                return hw.pipeline([lambda h: h] * 2, b, axis="stage")  # L:body

            return hw.shard_map(body, mesh=RING2, in_specs=hw.P(), out_specs=hw.P())(x)

    markers.check_error(
        _pipeline_error(build),
        TraceError,
        "hw.pipeline places its stages on the mesh itself; call it outside hw.shard_map",
        HERE,
        "body",
    )


REFUSAL = (
    ". Pipeline hardware supports a kernel returning one hw.pipeline over a one-axis ring or torus "
    "whose stages compute integer arrays from their micro-batch and the kernel's array arguments "
    "(see docs/mesh.md); the golden model k(*arrays) works"
)


def _refused(kernel, why: str, marker: str, mesh="2 ring (stage)"):
    with pytest.raises(UnsupportedError) as e:
        kernel.elaborate()
    markers.check_error(
        e.value, UnsupportedError, f"cannot elaborate kernel 'k' on mesh {mesh}: {why}" + REFUSAL, HERE, marker
    )


def test_hardware_refuses_a_mesh_of_two_axes():
    mesh = hw.Mesh((2, 2), ("stage", "y"))

    @hw.kernel(mesh=mesh)
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
        return hw.pipeline([lambda h: h] * 2, x, axis="stage", microbatches=2)  # L:twoaxes

    np.testing.assert_array_equal(k(np.ones((8, 4), np.int32)), np.ones((8, 4), np.int32))
    _refused(k, "the mesh must have the pipeline's axis 'stage' only", "twoaxes", "2x2 torus (stage, y)")


def test_hardware_refuses_a_zigzag_ring():
    mesh = hw.Mesh((3,), ("stage",), topology="mesh")

    @hw.kernel(mesh=mesh)
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
        return hw.pipeline([lambda h: h] * 3, x, axis="stage", microbatches=2)  # L:zigzag

    _refused(
        k, "stage k+1 must be the next PE round the ring: use topology 'ring' or 'torus'", "zigzag", "3 mesh (stage)"
    )


def test_hardware_refuses_a_computed_input_and_a_stage_reading_x_whole():
    @hw.kernel(mesh=RING2)
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
        return hw.pipeline([lambda h: h] * 2, x + 1, axis="stage", microbatches=2)  # L:computed

    _refused(k, "the pipeline's input x must be a kernel argument, passed as it is", "computed")

    @hw.kernel(mesh=RING2)
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
        whole = lambda h: hw.map(h.shape, lambda n, c: h[n, c] + x[n + 4, c])  # noqa: E731
        return hw.pipeline([whole, lambda h: h], x, axis="stage", microbatches=2)  # L:whole

    _refused(k, "stage 0 may not read x whole besides its micro-batch", "whole")


def test_hardware_refuses_slots_that_are_not_whole_dram_beats():
    @hw.kernel(mesh=RING2)
    def k(x: hw.Array[int32, 6, 3]) -> hw.Array[int32, 6, 3]:
        return hw.pipeline([lambda h: h] * 2, x, axis="stage", microbatches=2)  # L:beats

    _refused(
        k,
        "stage 0's micro-batch activations (9 words) must be a whole number of DRAM beats (4 words): "
        "change the micro-batch's shape or DramConfig.words_per_cycle",
        "beats",
    )


def test_hardware_refuses_links_wider_than_the_dram_beat():
    @hw.kernel(mesh=RING2, link=hw.LinkConfig(words_per_cycle=8))
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
        return hw.pipeline([lambda h: h] * 2, x, axis="stage", microbatches=2)  # L:wide

    _refused(k, "the link's 8 words a cycle must not exceed the DRAM's 4 (DramConfig.words_per_cycle)", "wide")


def test_hardware_refuses_stages_of_different_word_widths():
    @hw.kernel(mesh=RING2)
    def k(x: hw.Array[int8, 8, 4]) -> hw.Array[int32, 8, 4]:
        widen = lambda h: hw.map(h.shape, lambda n, c: h[n, c].astype(int32))  # noqa: E731
        return hw.pipeline(
            [lambda h: hw.map(h.shape, lambda r, d: h[r, d] + 1), widen], x, axis="stage", microbatches=2
        )

    with pytest.raises(UnsupportedError) as e:
        k.elaborate()
    assert e.value.message == (
        "cannot elaborate kernel 'k': its stages' arrays need DRAM words of different widths (8, 32 "
        "bits); give every stage elements of one width"
    )


def test_the_mesh_top_instantiates_each_stage_s_own_module():
    app, _ = load("pipeline_mlp")
    design = app.build(4, 4).elaborate()
    v = design.verilog
    for k in range(4):
        assert f"pipeline_mlp_s{k} pe{k} (" in v
        assert f"module pipeline_mlp_s{k}(" in v
    assert design.report["pipeline"]["stages"] == 4
    assert design.report["pipeline"]["bubble"] == pytest.approx(3 / 7)


def test_the_model_s_pace_is_the_slowest_stage():
    """Three stages of 1, 3 and 2 layers' work: in steady state a micro-batch leaves every
    (slowest stage + 2) cycles."""
    app, _ = load("pipeline_mlp")
    design = _uneven(app, 16).elaborate()
    starts = design.report["pipeline"]
    from hwgen.mesh.pipeline_model import predict

    pp, compiled = design.plan, design.compiled
    model = predict(pp, compiled, design.dram, design.kernel.link)
    slow = max(model.stage_cycles)
    assert model.stage_cycles.index(slow) == 1
    gaps = np.diff(model.starts[-1])
    assert set(gaps[2:]) == {slow + 2}
    assert starts["stage_cycles"] == model.stage_cycles


def _uneven(app, microbatches, link=None, rows=32):
    """A 3-stage pipeline of the MLP's layers: stage 0 one layer, stage 1 three, stage 2 two."""
    mesh = hw.Mesh((3,), ("stage",), topology="ring")
    width = 16

    def layers(w, count):
        def apply(h):
            for _ in range(count):
                h = hw.map(
                    h.shape,
                    lambda n, o: hw.minimum(hw.maximum(hw.sum(width, lambda i: h[n, i] * w[i, o]) >> 3, 0), 127),
                )
            return h

        return apply

    @hw.kernel(mesh=mesh, link=link or hw.LinkConfig(), tile={"n": rows // microbatches}, par={"i": 4})
    def uneven(x: hw.Array[int32, rows, width], w: hw.Array[int32, width, width]) -> hw.Array[int32, rows, width]:
        return hw.pipeline([layers(w, 1), layers(w, 3), layers(w, 2)], x, axis="stage", microbatches=microbatches)

    return uneven


def _uneven_inputs(seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 100, (32, 16)).astype(np.int32), rng.integers(-8, 9, (16, 16)).astype(np.int32)


def _uneven_reference(x, w):
    h = x.astype(np.int64)
    for _ in range(6):
        h = np.clip((h @ w) >> 3, 0, 127)
    return h.astype(np.int32)


def test_the_uneven_pipeline_s_reference():
    app, _ = load("pipeline_mlp")
    args = _uneven_inputs(1)
    np.testing.assert_array_equal(_uneven(app, 8)(*args), _uneven_reference(*args))


@pytest.mark.rtl
def test_uneven_stages_other_links_and_dram_latency_keep_the_predicted_cycles():
    app, _ = load("pipeline_mlp")
    args = _uneven_inputs(2)
    kernel = _uneven(app, 8, hw.LinkConfig(words_per_cycle=2, latency=3))
    sim = kernel.simulate(*args, dram=hw.DramConfig(latency=7), monitor=True)
    np.testing.assert_array_equal(sim.outputs, _uneven_reference(*args))
    assert sim.cycles == sim.predicted_cycles
    model = sim.design.report["pipeline"]["stage_cycles"]
    last = [start for start, _ in sim.timeline["pe2"]]
    assert set(np.diff(last)[2:]) == {max(model) + 2}  # the slowest stage sets the pace
    runs = sim.timeline["pe1"]
    assert all(done - start == model[1] + 1 for start, done in runs)


@pytest.mark.rtl
def test_dram_jitter_changes_cycles_never_results():
    app, _ = load("pipeline_mlp")
    kernel = app.build(2, 4)
    x, w = app.inputs(4)
    sim = kernel.verify(x, w, dram=hw.DramConfig(jitter=6), seed=3)
    np.testing.assert_array_equal(sim.outputs, app.reference(x, w))
    assert sim.cycles > sim.predicted_cycles


@pytest.mark.rtl
def test_one_stage_runs_every_micro_batch_on_one_pe():
    app, _ = load("pipeline_mlp")
    kernel = app.build(1, 2)
    x, w = app.inputs(5)
    sim = kernel.verify(x, w)
    assert sim.cycles == sim.predicted_cycles
    assert "pipeline_mlp_s0 pe0 (" in sim.design.verilog and "_wire" in sim.design.verilog


def test_a_stage_reads_no_other_stage_s_input():
    def build():
        @hw.kernel(mesh=RING2)
        def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
            seen = []

            def first(h):
                seen.append(h)
                return h

            def second(h):
                return hw.map(h.shape, lambda n, c: h[n, c] + seen[0][n, c])

            return hw.pipeline([first, second], x, axis="stage", microbatches=2)  # L:other

    markers.check_error(
        _pipeline_error(build),
        TraceError,
        "stage 1 of hw.pipeline reads stage 0's input; a stage reads only its own argument and the kernel's arrays",
        HERE,
        "other",
    )


def test_hardware_refuses_what_a_stage_program_cannot_be():
    @hw.kernel(mesh=RING2)
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
        return hw.pipeline([lambda h: h] * 2, x, axis="stage", microbatches=2) + 1  # L:indirect

    _refused(k, "the kernel must return the result of one hw.pipeline directly", "indirect")

    @hw.kernel(mesh=RING2)
    def k(x: hw.Array[int32, 8, 4], s: int32) -> hw.Array[int32, 8, 4]:
        return hw.pipeline([lambda h: h] * 2, x, axis="stage", microbatches=2)  # L:scalar_arg

    _refused(
        k,
        "every kernel argument must be an array of integers (scalars and fixed point are not built yet)",
        "scalar_arg",
    )

    @hw.kernel(mesh=RING2)
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[bool, 8, 4]:
        positive = lambda h: hw.map(h.shape, lambda n, c: h[n, c] > 0)  # noqa: E731
        return hw.pipeline([lambda h: h, positive], x, axis="stage", microbatches=2)  # L:bool

    _refused(k, "stage 1 must compute an array of integers", "bool")

    @hw.kernel(mesh=RING2)
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
        y = x * 2  # computed by the stage that reads it
        uses_y = lambda h: hw.map(h.shape, lambda n, c: h[n, c] + y[n, c])  # noqa: E731
        return hw.pipeline([lambda h: h, uses_y], x, axis="stage", microbatches=2)

    design = k.elaborate()
    assert [p.name for p in design.plan.programs[1].params] == ["act1", "x"]

    @hw.kernel(mesh=RING2)
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
        inner = lambda h: hw.pipeline([lambda g: g] * 2, h, axis="stage")  # noqa: E731
        return hw.pipeline([inner, lambda h: h], x, axis="stage", microbatches=2)  # L:nested

    _refused(k, "stage 0 may not use hw.shard_map, collectives or another hw.pipeline", "nested")


def test_monitor_names_pes():
    app, kernel = load("pipeline_mlp")
    with pytest.raises(hw.HwgenError) as e:
        kernel.simulate(*app.inputs(0), monitor=[7])
    assert e.value.message == "monitor of a pipeline kernel is True or a list of PE numbers 0 .. 3, got [7]"


def test_show_ir_lists_each_stage_s_program():
    app, _ = load("pipeline_mlp")
    text = app.build(2, 2, 16, 16).show_ir()
    assert "pipeline of 2 stages on 2 ring (stage), 2 micro-batches:" in text
    assert "stage 0 on PE 0: x -> out0 (one micro-batch)" in text
    assert "stage 1 on PE 1: act1 -> out (one micro-batch)" in text
    assert "kernel pipeline_mlp_s1" in text

    @hw.kernel(mesh=hw.Mesh((2, 1), ("stage", "y")))
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
        return hw.pipeline([lambda h: h] * 2, x, axis="stage", microbatches=2)

    assert "pipeline not built: cannot show kernel 'k' on mesh 2x1 torus (stage, y): the mesh must have" in k.show_ir()


def test_synthesis_wraps_the_whole_pipeline_s_top_and_counts_each_stage():
    from hwgen.mesh.synth import part_modules, synth_top

    app, _ = load("pipeline_mlp")
    design = app.build(2, 2, 16, 16).elaborate()
    top, ports = synth_top(design)
    assert top == "pipeline_mlp"
    header = design.verilog.split(");")[0]
    for name, bits, is_input in ports:
        kind = "input" if is_input else "output reg" if name in ("done", "busy", "cycles") else "output"
        width = f"[{bits - 1}:0] " if bits > 1 or name == "pe_done" else ""
        assert f"{kind} {width}{name}" in header
    assert part_modules(design) == {"stage0": ["pipeline_mlp_s0"], "stage1": ["pipeline_mlp_s1"]}


def test_a_stage_s_values_stay_inside_it():
    saved = {}

    def build():
        @hw.kernel(mesh=RING2)  # L:leak
        def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 4, 4]:
            def first(h):
                saved["h"] = h
                return h

            hw.pipeline([first, lambda h: h], x, axis="stage", microbatches=2)
            return hw.map((4, 4), lambda a, b: saved["h"][a, b] + 1)

    markers.check_error(
        _pipeline_error(build),
        TraceError,
        "kernel 'k' uses a value computed inside a hw.pipeline stage outside that stage; a stage's values "
        "reach the rest of the kernel only through the pipeline's result",
        HERE,
        "leak",
    )


def test_a_pipeline_inside_a_pattern_is_refused_also_through_x():
    def build():
        @hw.kernel(mesh=RING2)
        def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8]:
            rows = lambda a: hw.pipeline([lambda h: h] * 2, x[a], axis="stage", microbatches=2)  # noqa: E731  # L:inmap
            return hw.map((8,), lambda a: rows(a)[0])

    markers.check_error(
        _pipeline_error(build),
        TraceError,
        "hw.pipeline cannot be used inside the function given to hw.map, hw.sum or another pattern",
        HERE,
        "inmap",
    )


def test_messages_name_a_stage_s_input_by_its_stage():
    def build():
        @hw.kernel(mesh=RING2)
        def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
            shifted = lambda h: hw.map(h.shape, lambda n, q: h[n + 1, q])  # noqa: E731  # L:shift
            return hw.pipeline([lambda h: h, shifted], x, axis="stage", microbatches=np.int64(2))

    err = _pipeline_error(build)
    assert err.line == markers.line_of(HERE, "shift")
    assert err.message.startswith("subscript 0 of the micro-batch input of hw.pipeline stage 1, n + 1, ranges over")


def test_hardware_refuses_an_axis_name_that_is_no_identifier_a_fixed_point_result_and_run_time_checks():
    mesh = hw.Mesh((2,), ("r-1",), topology="ring")

    @hw.kernel(mesh=mesh)
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
        return hw.pipeline([lambda h: h] * 2, x, axis="r-1", microbatches=2)  # L:name

    _refused(k, "the axis name 'r-1' must be a plain identifier (it names Verilog ports)", "name", "2 ring (r-1)")

    @hw.kernel(mesh=RING2)
    def k(x: hw.Array[int32, 8, 4]):
        fx = lambda h: hw.map(h.shape, lambda n, c: h[n, c].astype(hw.fixed(16, 0)))  # noqa: E731
        return hw.pipeline([lambda h: h, fx], x, axis="stage", microbatches=2)  # L:fixed

    _refused(k, "fixed-point results are not built yet", "fixed")

    @hw.kernel(mesh=RING2)
    def k(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8]:
        count = lambda h: hw.multifold(4, hw.zeros(4, int32), lambda i: (h[i, 0], 1))  # noqa: E731  # L:checked
        return hw.pipeline([lambda h: h, count], x, axis="stage", microbatches=2)

    with pytest.raises(UnsupportedError) as e:
        k.elaborate()
    assert "run-time checks (a group-by's max_keys, a multifold subscript from data) are not built in pipelines" in (
        e.value.message
    )
    assert e.value.line == markers.line_of(HERE, "checked")


@pytest.mark.rtl
def test_a_dram_that_stops_answering_is_a_hang_naming_the_stage_pes(monkeypatch):
    monkeypatch.setenv("HWGEN_DRAM_STALL_AFTER", "20")
    app, kernel = load("pipeline_mlp")
    with pytest.raises(hw.SimulationError) as e:
        kernel.simulate(*app.inputs(0))
    assert e.value.message.startswith("kernel 'pipeline_mlp' did not finish within")
    assert e.value.message.endswith("the pipeline hangs; stage PE(s) 0, 1, 2, 3 of 4 not done")
