"""Every mistake with meshes, shard_map and collectives raises a HwgenError whose whole message
is checked, pointing at the user's own file and line (marked by `# L:<name>` comments)."""

import markers
import pytest

import hwgen as hw
from hwgen import cli, int32
from hwgen.errors import show_path

HERE = __file__
M24 = hw.Mesh((2, 4), ("x", "y"))


def line_of(marker: str) -> int:
    return markers.line_of(HERE, marker)


def check(err, kind, message, marker):
    markers.check_error(err, kind, message, HERE, marker)


def body_error(body, in_specs=hw.P("x", "y"), out_specs=hw.P("x", "y"), shape=(8, 8)):
    """The error of a kernel on M24 applying shard_map(body) to one array of `shape`."""
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel(mesh=M24)
        def k(a: hw.Array[(int32, *shape)]):
            return hw.shard_map(body, mesh=M24, in_specs=in_specs, out_specs=out_specs)(a)  # L:call

    return e.value


def test_bad_mesh():
    with pytest.raises(hw.HwgenError) as e:
        hw.Mesh((4, 4), ("x", "y"), topology="hypercube")  # L:topology
    check(e.value, hw.ScheduleError, "hw.Mesh topology must be 'torus', 'mesh' or 'ring', got 'hypercube'", "topology")
    with pytest.raises(hw.HwgenError) as e:
        hw.Mesh((4, 0), ("x", "y"))  # L:shape
    check(e.value, hw.ScheduleError, "hw.Mesh shape must be a tuple of positive ints, like (4, 4), got (4, 0)", "shape")
    with pytest.raises(hw.HwgenError) as e:
        hw.Mesh((4, 4), ("x",))  # L:names
    check(
        e.value,
        hw.ScheduleError,
        "hw.Mesh has 2 axis size(s) (4, 4) but 1 axis name(s) ('x',); give one name per axis",
        "names",
    )
    with pytest.raises(hw.HwgenError) as e:
        hw.Mesh((4, 4), ("x", 3))  # L:name-type
    check(
        e.value,
        hw.ScheduleError,
        "hw.Mesh axis_names must be a tuple of non-empty strings, like ('x', 'y'), got ('x', 3)",
        "name-type",
    )
    with pytest.raises(hw.HwgenError) as e:
        hw.Mesh((4, 4), ("x", "x"))  # L:name-twice
    check(e.value, hw.ScheduleError, "hw.Mesh axis name 'x' is used twice in ('x', 'x')", "name-twice")
    with pytest.raises(hw.HwgenError) as e:
        hw.Mesh((4, 4), ("x", "y"), topology="ring")  # L:ring
    check(
        e.value,
        hw.ScheduleError,
        "a 'ring' has one axis, but this mesh has 2 ('x', 'y'); use topology 'torus' or 'mesh'",
        "ring",
    )


def test_bad_link_spec_and_kernel_options():
    with pytest.raises(hw.HwgenError) as e:
        hw.LinkConfig(latency=0)  # L:latency
    check(e.value, hw.ScheduleError, "LinkConfig.latency must be a positive int, got 0", "latency")
    with pytest.raises(hw.HwgenError) as e:
        hw.LinkConfig(words_per_cycle=3)  # L:wpc
    check(e.value, hw.ScheduleError, "LinkConfig.words_per_cycle must be a power of two, got 3", "wpc")
    with pytest.raises(hw.HwgenError) as e:
        hw.P("x", 0)  # L:p
    check(e.value, hw.ScheduleError, "hw.P entries must be None, an axis name or a tuple of axis names, got 0", "p")
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel(mesh=(4, 4))  # L:mesh-type
        def k(a: hw.Array[int32, 8]) -> hw.Array[int32, 8]:
            return a

    check(e.value, hw.ScheduleError, "mesh must be an hw.Mesh, got (4, 4)", "mesh-type")
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel(link=hw.LinkConfig())  # L:link-alone
        def k2(a: hw.Array[int32, 8]) -> hw.Array[int32, 8]:
            return a

    check(e.value, hw.ScheduleError, "link= describes the links between PEs; it needs mesh= too", "link-alone")


def test_unknown_axis_name():
    e = body_error(lambda b: b, in_specs=hw.P("x", "z"))
    check(e, hw.TraceError, "in_specs[0] P('x', 'z') names mesh axis 'z', but the mesh has axes x, y", "call")
    e = body_error(lambda b: hw.psum(b, ("x", "q")))  # L:psum-axis
    check(e, hw.TraceError, "hw.psum names mesh axis 'q', but the mesh has axes x, y", "psum-axis")
    e = body_error(lambda b: b + hw.axis_index("z"))  # L:index-axis
    check(e, hw.TraceError, "hw.axis_index names mesh axis 'z', but the mesh has axes x, y", "index-axis")


def test_axis_index_cannot_pick_elements():
    e = body_error(lambda b: hw.map(2, lambda i: b[i + hw.axis_index("x")]))  # L:index-subscript
    check(
        e,
        hw.TraceError,
        "subscript 0 of the local block of shard_map argument 0 is a data value (int32); "
        "subscripts must be affine expressions of index variables",
        "index-subscript",
    )


def test_axis_used_twice():
    e = body_error(lambda b: b, in_specs=hw.P("x", ("y", "x")))
    check(e, hw.TraceError, "in_specs[0] P('x', ('y', 'x')) uses mesh axis 'x' twice", "call")
    e = body_error(lambda b: hw.all_gather(b, ("y", "y")))  # L:gather-twice
    check(e, hw.TraceError, "hw.all_gather uses mesh axis 'y' twice", "gather-twice")


def test_spec_that_does_not_divide_or_is_too_long():
    e = body_error(lambda b: b, in_specs=hw.P(None, ("x", "y")), shape=(8, 12))
    check(
        e,
        hw.TypeMismatchError,
        "in_specs[0] P(None, ('x', 'y')) splits dimension 1 of size 12 over 8 PEs (x=2 * y=4), which "
        "does not divide it",
        "call",
    )
    e = body_error(lambda b: b, in_specs=hw.P("x", "y", None))
    check(
        e,
        hw.TypeMismatchError,
        "in_specs[0] P('x', 'y', None) has 3 entries but the array has 2 dimension(s) (shape (8, 8))",
        "call",
    )


def test_arity_of_specs():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel(mesh=M24)
        def k(a: hw.Array[int32, 8], b: hw.Array[int32, 8]) -> hw.Array[int32, 8]:
            spmd = hw.shard_map(lambda u, v: u + v, mesh=M24, in_specs=(hw.P("x"),), out_specs=hw.P("x"))
            return spmd(a, b)  # L:arity

    check(
        e.value,
        hw.TraceError,
        "hw.shard_map has 1 in_specs for 2 argument(s); give one hw.P per argument (or one hw.P for all)",
        "arity",
    )
    e = body_error(lambda b: (b, b), out_specs=(hw.P("x", "y"),))
    check(
        e,
        hw.TraceError,
        "hw.shard_map has 1 out_specs for 2 result(s); give one hw.P per result (or one hw.P for all)",
        "call",
    )
    e = body_error(lambda b: b, out_specs=(hw.P("x", "y"),))
    check(
        e,
        hw.TraceError,
        "hw.shard_map has 1 out_specs for a single result; give one hw.P (the body returns no tuple)",
        "call",
    )


def test_bad_permutations():
    e = body_error(lambda b: hw.ppermute(b, "y", [(0, 1), (0, 2)]))  # L:dup-src
    check(
        e,
        hw.TraceError,
        "hw.ppermute: perm is not a permutation: 0 is the source of more than one pair in [(0, 1), (0, 2)]",
        "dup-src",
    )
    e = body_error(lambda b: hw.ppermute(b, "y", [(0, 1), (2, 1)]))  # L:dup-dst
    check(
        e,
        hw.TraceError,
        "hw.ppermute: perm is not a permutation: 1 is the destination of more than one pair in [(0, 1), (2, 1)]",
        "dup-dst",
    )
    e = body_error(lambda b: hw.ppermute(b, ("x", "y"), [(0, 8)]))  # L:range
    check(
        e,
        hw.TraceError,
        "hw.ppermute: perm pair (0, 8) is out of range: indices must be ints from 0 to 7 (the group "
        "over ('x', 'y') has 8 PEs)",
        "range",
    )
    e = body_error(lambda b: hw.ppermute(b, "x", 3))  # L:perm-type
    check(e, hw.TraceError, "hw.ppermute: perm must be a list of (source, destination) pairs, got 3", "perm-type")


def test_untiled_with_a_wrong_dimension_size():
    e = body_error(lambda b: hw.psum_scatter(b, "y", scatter_dimension=1))  # L:scatter
    check(
        e,
        hw.TypeMismatchError,
        "hw.psum_scatter: with tiled=False dimension 1 of the operand must have the group's size 4 "
        "('y'), but it has size 2",
        "scatter",
    )
    e = body_error(lambda b: hw.psum_scatter(b, ("x", "y"), tiled=True))  # L:scatter-tiled
    check(
        e,
        hw.TypeMismatchError,
        "hw.psum_scatter: dimension 0 of the operand has size 4, which the group of 8 PEs over ('x', 'y') "
        "does not divide (tiled=True)",
        "scatter-tiled",
    )
    e = body_error(lambda b: hw.all_to_all(b, "y", 1, 0))  # L:a2a
    check(
        e,
        hw.TypeMismatchError,
        "hw.all_to_all: with tiled=False split_axis 1 of the operand must have the group's size 4 ('y'), "
        "but it has size 2",
        "a2a",
    )
    e = body_error(lambda b: hw.all_to_all(b, "y", 1, 0, tiled=True))  # L:a2a-tiled
    check(
        e,
        hw.TypeMismatchError,
        "hw.all_to_all: split_axis 1 of the operand has size 2, which the group of 4 PEs over 'y' does not "
        "divide (tiled=True)",
        "a2a-tiled",
    )


def test_bad_collective_arguments():
    e = body_error(lambda b: hw.all_gather(b, "y", axis=3))  # L:gather-axis
    check(e, hw.TraceError, "hw.all_gather: axis=3 is out of range (valid: -3 .. 2)", "gather-axis")
    e = body_error(lambda b: hw.all_gather(b, "y", axis=0, tiled=1))  # L:tiled
    check(e, hw.TraceError, "hw.all_gather: tiled must be True or False, got 1", "tiled")
    e = body_error(lambda b: b + hw.all_gather(b[0, 0], "y", tiled=True))  # L:gather-scalar
    check(e, hw.TraceError, "hw.all_gather needs an array, got a scalar", "gather-scalar")
    e = body_error(lambda b: hw.psum(b > 0, "y"))  # L:psum-bool
    check(
        e,
        hw.TypeMismatchError,
        "hw.psum of bool_ values is ambiguous (JAX counts them in int32, hwgen keeps the dtype): use "
        ".astype(int32) to count, or hw.pmax for any",
        "psum-bool",
    )
    e = body_error(lambda b: hw.psum(b, 3))  # L:axis-type
    check(e, hw.TraceError, "hw.psum: axis_name must be a mesh axis name or a tuple of them, got 3", "axis-type")
    e = body_error(lambda b: hw.map((4, 2), lambda i, j: hw.psum(b[i, j], "y")))  # L:inside-map
    check(
        e,
        hw.TraceError,
        "hw.psum cannot be used inside the function given to hw.map, hw.sum or another pattern; apply it "
        "to a whole array",
        "inside-map",
    )


def test_shard_map_inside_a_pattern():
    smap = hw.shard_map(lambda b: b, mesh=M24, in_specs=hw.P(), out_specs=hw.P())
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel(mesh=M24)
        def k(a: hw.Array[int32, 8]) -> hw.Array[int32, 8]:
            return hw.map(8, lambda i: smap(a[i]))  # L:smap-in-map

    check(
        e.value,
        hw.TraceError,
        "hw.shard_map cannot be used inside the function given to hw.map, hw.sum or another pattern; "
        "call it on whole arrays",
        "smap-in-map",
    )


def test_collective_outside_shard_map():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel(mesh=M24)
        def k(a: hw.Array[int32, 8]) -> hw.Array[int32, 8]:
            return hw.psum(a, "x")  # L:outside

    check(e.value, hw.TraceError, "hw.psum can only be used inside the body of hw.shard_map", "outside")
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel(mesh=M24)
        def k2(a: hw.Array[int32, 8]) -> hw.Array[int32, 8]:
            return a + hw.axis_index("x")  # L:outside-index

    check(e.value, hw.TraceError, "hw.axis_index can only be used inside the body of hw.shard_map", "outside-index")


def test_shard_map_mesh_must_be_the_kernels():
    other = hw.Mesh((4, 2), ("x", "y"))
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel(mesh=M24)
        def k(a: hw.Array[int32, 8]) -> hw.Array[int32, 8]:
            return hw.shard_map(lambda b: b, mesh=other, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)  # L:other

    check(
        e.value,
        hw.TraceError,
        "hw.shard_map uses the mesh 4x2 torus (x, y), but kernel 'k' runs on 2x4 torus (x, y); use the kernel's mesh",
        "other",
    )
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k2(a: hw.Array[int32, 8]) -> hw.Array[int32, 8]:
            return hw.shard_map(lambda b: b, mesh=M24, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)  # L:none

    check(
        e.value,
        hw.TraceError,
        "hw.shard_map runs on a mesh, but kernel 'k2' has none; declare it with @hw.kernel(mesh=...)",
        "none",
    )


def test_nested_shard_map_and_leaked_body_values():
    inner = hw.shard_map(lambda c: c, mesh=M24, in_specs=hw.P(), out_specs=hw.P())
    e = body_error(lambda b: inner(b))  # L:nested
    check(e, hw.TraceError, "hw.shard_map cannot be nested inside another hw.shard_map body", "nested")
    leaked = []

    def body(b):
        leaked.append(b * 2)
        return b

    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel(mesh=M24)  # L:leak
        def k(a: hw.Array[int32, 8, 8]):
            out = hw.shard_map(body, mesh=M24, in_specs=hw.P("x", "y"), out_specs=hw.P("x", "y"))(a)
            return out, leaked[0]

    check(
        e.value,
        hw.TraceError,
        "kernel 'k' uses a value of a hw.shard_map body outside that body; return it from the body instead",
        "leak",
    )


def test_cli_refuses_to_build_or_simulate_a_mesh_kernel(capsys, tmp_path):
    path = tmp_path / "allreduce.py"
    path.write_text(
        "import hwgen as hw\n"
        "from hwgen import int32\n"
        "mesh = hw.Mesh((4,), ('r',), topology='ring')\n"
        "\n"
        "@hw.kernel(mesh=mesh)\n"
        "def allreduce(x: hw.Array[int32, 16]):\n"
        "    return hw.shard_map(lambda b: b > 0, mesh=mesh, in_specs=hw.P('r'), out_specs=hw.P())(x)\n"
    )
    message = (
        f"error: {show_path(str(path))}:7: cannot {{}} kernel 'allreduce' on mesh 4 ring (r): the "
        f"shard_map body must return an array of integers. Mesh hardware supports one "
        f"hw.shard_map whose body computes an integer array from its blocks with "
        f"hw.psum / hw.pmax / hw.pmin / hw.psum_scatter / hw.all_gather / hw.ppermute / hw.all_to_all of "
        f"integer arrays along the way (see docs/mesh.md); the golden model allreduce(*arrays) works\n"
    )
    out_dir = tmp_path / "rtl"
    for command, verb in (("build", "build"), ("sim", "verify")):
        code = cli.main([command, str(path), "--out", str(out_dir)] if command == "build" else [command, str(path)])
        out, err = capsys.readouterr()
        assert code == 1 and out == "" and err == message.format(verb)
    assert not out_dir.exists()


def hardware_error(body, mesh=M24, out_specs=None, words=64):
    """The UnsupportedError of building a kernel whose shard_map (over every axis of `mesh`)
    applies `body` to one int32 array of `words` words."""
    names = mesh.axis_names
    spec = hw.P(names if len(names) > 1 else names[0])
    outs = spec if out_specs is None else out_specs

    @hw.kernel(mesh=mesh)  # L:kernel
    def k(a: hw.Array[int32, words]):
        return hw.shard_map(body, mesh=mesh, in_specs=spec, out_specs=outs)(a)  # L:sm

    with pytest.raises(hw.UnsupportedError) as e:
        k.elaborate()
    return e.value


def refused(err, why: str, marker: str) -> None:
    """`err` says `why` (after the mesh it names) and points at the marked line."""
    assert why in err.message, err.message
    assert err.message.endswith("works") or "DRAM beat" in err.message
    assert err.file == HERE and err.line == line_of(marker)


def test_mesh_hardware_refuses_a_result_of_booleans():
    def body(b):
        s = hw.psum(b, ("x", "y"))
        return hw.map(8, lambda j: s[j] > 0)

    refused(hardware_error(body), "the shard_map body must return an array of integers", "sm")


def test_mesh_hardware_refusals_name_the_reason_and_the_line():
    err = hardware_error(lambda b: hw.psum(b, "x"), mesh=hw.Mesh((1, 4), ("x", "y")))  # L:one-pe
    refused(err, "every axis the collective runs over needs at least 2 PEs", "one-pe")
    err = hardware_error(lambda b: hw.psum(b, "r-1"), mesh=hw.Mesh((2,), ("r-1",), topology="ring"))
    refused(err, "the axis name 'r-1' must be a plain identifier (it names Verilog ports)", "kernel")
    fold = lambda b: hw.psum(hw.multifold(8, hw.zeros(4, int32), lambda i: (b[i], 1)), "x")  # noqa: E731  # L:checked
    err = hardware_error(fold)
    refused(
        err,
        "run-time checks (a group-by's max_keys, a multifold subscript from data) are not built on meshes",
        "checked",
    )
    err = hardware_error(lambda b: hw.psum_scatter(b, "y", tiled=True))  # L:beat
    beat = "the reduce-scatter along 'y' of 8 words needs each of its 4 blocks to be a multiple of the DRAM beat"
    refused(err, beat + " (4 words); make the vector a multiple of 16 words, or give a DramConfig", "beat")
