"""Every user mistake raises a HwgenError whose whole message is checked, pointing at the
user's own file and line (marked in this file by `# L:<name>` comments)."""

import markers
import numpy as np
import pytest

import hwgen as hw
from hwgen import int16, int32

N = 16
HERE = __file__


def line_of(marker: str) -> int:
    return markers.line_of(HERE, marker)


def check(err, kind, message, marker):
    markers.check_error(err, kind, message, HERE, marker)


@hw.kernel
def total(a: hw.Array[int32, N]) -> int32:
    return hw.sum(N, lambda i: a[i])


def test_wrong_argument_shape():
    with pytest.raises(hw.HwgenError) as e:
        total(np.zeros(3, np.int32))  # L:shape
    check(
        e.value,
        hw.TypeMismatchError,
        "argument 'a' of kernel 'total': expected an int32 array of shape (16,), got an int32 array of shape (3,)",
        "shape",
    )


def test_wrong_argument_dtype():
    with pytest.raises(hw.HwgenError) as e:
        total(np.zeros(N, np.int16))  # L:dtype
    check(
        e.value,
        hw.TypeMismatchError,
        "argument 'a' of kernel 'total': expected an int32 array of shape (16,), got an int16 array of shape (16,)",
        "dtype",
    )


def test_wrong_argument_kind_and_count():
    with pytest.raises(hw.HwgenError) as e:
        total([1, 2])  # L:list
    check(
        e.value,
        hw.TypeMismatchError,
        "argument 'a' of kernel 'total': expected an int32 array of shape (16,) (numpy), got list",
        "list",
    )
    with pytest.raises(hw.HwgenError) as e:
        total()  # L:count
    check(e.value, hw.TypeMismatchError, "kernel 'total' takes 1 argument(s) (a), got 0", "count")


def test_wrong_scalar_argument():
    @hw.kernel
    def scale(s: int16, x: hw.Array[int16, N]) -> hw.Array[int16, N]:
        return hw.map(N, lambda i: s * x[i])

    x = np.zeros(N, np.int16)
    with pytest.raises(hw.HwgenError) as e:
        scale(40000, x)  # L:range
    check(
        e.value,
        hw.TypeMismatchError,
        "argument 's' of kernel 'scale': 40000 is out of range for int16 [-32768, 32767]",
        "range",
    )
    with pytest.raises(hw.HwgenError) as e:
        scale(np.int32(4), x)  # L:scalar-dtype
    check(
        e.value,
        hw.TypeMismatchError,
        "argument 's' of kernel 'scale': expected an int16 scalar, got a numpy int32 scalar",
        "scalar-dtype",
    )


def test_unknown_schedule_key():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel(tile={"q": 4})  # L:tile-key
        def k(a: hw.Array[int32, N]) -> int32:
            return hw.sum(N, lambda i: a[i])

    check(
        e.value,
        hw.ScheduleError,
        "tile names index 'q', but kernel 'k' has no index of that name (its indices: i)",
        "tile-key",
    )
    with pytest.raises(hw.HwgenError) as e:
        total.with_schedule(par={"z": 2})  # L:par-key
    check(
        e.value,
        hw.ScheduleError,
        "par names index 'z', but kernel 'total' has no index of that name (its indices: i)",
        "par-key",
    )


def test_malformed_schedule():
    with pytest.raises(hw.HwgenError) as e:
        total.with_schedule(tile={"i": 0})  # L:tile-size
    check(e.value, hw.ScheduleError, "tile['i'] must be a positive int, got 0", "tile-size")
    with pytest.raises(hw.HwgenError) as e:
        total.with_schedule(metapipeline="yes")  # L:meta
    check(e.value, hw.ScheduleError, "metapipeline must be True or False, got 'yes'", "meta")


def test_out_of_bounds_affine_index():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k(a: hw.Array[int32, N]) -> int32:
            return hw.sum(N, lambda i: a[i + 1])  # L:oob

    check(
        e.value,
        hw.TraceError,
        "subscript 0 of 'a', i + 1, ranges over [1, 16] but axis 0 has extent 16 (valid 0 .. 15); "
        "the access is out of bounds",
        "oob",
    )


def test_lambda_arity_mismatch():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k(a: hw.Array[int32, N, N]) -> hw.Array[int32, N]:
            return hw.map((N, N), lambda i: a[i, i])  # L:arity

    check(
        e.value,
        hw.TraceError,
        "the function given to hw.map takes 1 argument(s) (i) but its domain (16, 16) has 2 "
        "dimension(s); give one index parameter per dimension",
        "arity",
    )


def test_unknown_reduce_op():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k(a: hw.Array[int32, N]) -> int32:
            return hw.reduce(N, lambda i: a[i], "avg")  # L:op

    check(
        e.value,
        hw.TraceError,
        "unknown reduce op 'avg'; expected one of '+' '*' 'max' 'min' '&' '|' '^' or an associative callable(a, b)",
        "op",
    )


def test_index_name_used_twice():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k(a: hw.Array[int32, N]) -> int32:
            s = hw.sum(N, lambda i: a[i])
            return s + hw.max(N, lambda i: a[i])  # L:twice

    first = line_of("twice") - 1
    check(
        e.value,
        hw.TraceError,
        f"index name 'i' is used twice in kernel 'k' (first at line {first}); give "
        f"each lambda parameter its own name, schedules refer to indices by name",
        "twice",
    )


def test_python_control_flow_on_traced_value():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k(a: hw.Array[int32, N]) -> int32:
            return hw.sum(N, lambda i: a[i] if a[i] > 0 else 0)  # L:bool

    check(
        e.value,
        hw.TraceError,
        "a traced value has no Python truth value (it is known only in hardware): use "
        "hw.where(cond, a, b) instead of if/and/or/not, and & | ~ to combine conditions",
        "bool",
    )


def test_result_annotation_mismatch():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel  # L:result
        def k(a: hw.Array[int32, N]) -> hw.Array[int16, N]:
            return hw.map(N, lambda i: a[i])

    check(
        e.value,
        hw.TypeMismatchError,
        "the result of kernel 'k' is an int32 array of shape (16,), but the annotation says an "
        "int16 array of shape (16,); convert with .astype(...)",
        "result",
    )


def test_data_dependent_subscript_and_floats():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k(a: hw.Array[int32, N], b: hw.Array[int32, N]) -> int32:
            return hw.sum(N, lambda i: a[b[i]])  # L:gather

    check(
        e.value,
        hw.TraceError,
        "subscript 0 of 'a' is a data value (int32); subscripts must be affine expressions of index variables",
        "gather",
    )
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k2(a: hw.Array[int32, N]) -> int32:
            return hw.sum(N, lambda i: a[i] * 2.5)  # L:float

    check(e.value, hw.TypeMismatchError, "the float 2.5 cannot be used: hwgen has integer types only", "float")


def test_numpy_function_on_traced_value():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k(a: hw.Array[int32, N]) -> int32:
            return hw.sum(N, lambda i: np.abs(a[i]))  # L:ufunc

    check(
        e.value,
        hw.TraceError,
        "numpy functions cannot take traced values; inside a kernel use Python operators and "
        "hwgen's functions (hw.where, hw.maximum, hw.sum, ...)",
        "ufunc",
    )


def test_weak_python_int_out_of_range():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k(a: hw.Array[int16, N]) -> hw.Array[int16, N]:
            return hw.map(N, lambda i: a[i] + 40000)  # L:weak

    check(
        e.value,
        hw.TypeMismatchError,
        "the Python integer 40000 is out of bounds for int16 in '+' (numpy raises "
        "OverflowError); convert explicitly with .astype(...)",
        "weak",
    )


def test_unsigned_and_signed_64_bit_promote_to_float():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k(a: hw.Array[hw.int64, N], b: hw.Array[hw.uint64, N]) -> hw.Array[hw.int64, N]:
            return hw.map(N, lambda i: a[i] + b[i])  # L:float64

    check(
        e.value,
        hw.TypeMismatchError,
        "mixing int64 and uint64 promotes to float64 in numpy, which hwgen does not support; "
        "convert one side explicitly with .astype(...)",
        "float64",
    )


def test_sum_of_bools_is_ambiguous():
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k(a: hw.Array[int32, N]) -> hw.bool_:
            return hw.sum(N, lambda i: a[i] > 0)  # L:boolsum

    check(
        e.value,
        hw.TypeMismatchError,
        "reducing bool_ values with '+' is ambiguous (numpy would count them as int64, hwgen "
        "accumulates in the values' dtype): use .astype(int32) to count, or op '|' / '&' for "
        "any / all",
        "boolsum",
    )


def test_tile_that_does_not_divide():
    with pytest.raises(hw.HwgenError) as e:
        total.with_schedule(tile={"i": 5})  # L:tile-divide
    check(e.value, hw.ScheduleError, "tile size 5 for index 'i' does not divide its extent 16", "tile-divide")


def test_par_must_divide_its_tile():
    with pytest.raises(hw.HwgenError) as e:
        total.with_schedule(tile={"i": 8}, par={"i": 3})  # L:par-divide
    check(
        e.value,
        hw.ScheduleError,
        "par 3 for index 'i' needs its tile size (8) to be a multiple of 3: lanes run inside a "
        "tile; use a tile size that is a multiple of 3",
        "par-divide",
    )
    with pytest.raises(hw.HwgenError) as e:
        total.with_schedule(par={"i": 3})  # L:par-untiled
    check(
        e.value,
        hw.ScheduleError,
        "par 3 for index 'i' needs tiles of a multiple of 3 elements, which do not divide its "
        "extent 16; choose lanes that divide 16",
        "par-untiled",
    )


def test_par_without_a_tile_gets_the_smallest_tile_its_lanes_need():
    kernel = total.with_schedule(par={"i": 4})
    assert kernel.schedule.tiles == {"i": 4}
    report = kernel.elaborate().report
    assert report["schedule"]["implied_tile"] == {"i": 4}
    assert report["lanes"] == 4


def test_parallel_access_the_banking_cannot_serve():
    @hw.kernel(tile={"i": 4, "j": 4}, par={"i": 2, "j": 2})
    def diagonal_sums(x: hw.Array[int32, 16]) -> hw.Array[int32, 8, 8]:
        return hw.map((8, 8), lambda i, j: x[i + j])  # L:conflict

    with pytest.raises(hw.HwgenError) as e:
        diagonal_sums.elaborate()
    check(
        e.value,
        hw.ScheduleError,
        "cannot serve the read x[i + j] (the tile of 'x') with these parallel lanes: lanes "
        "(i=0, j=1) and (i=1, j=0) need the same element in the same cycle; choose par so that "
        "each lane touches its own element",
        "conflict",
    )


def test_missing_annotation():
    def k(a, b: hw.Array[int32, N]) -> int32:  # L:noann
        return hw.sum(N, lambda i: b[i])

    with pytest.raises(hw.HwgenError) as e:
        hw.kernel(k)  # L:noann-call
    assert e.value.message == (
        "kernel parameter 'a' has no annotation; annotate it as hw.Array[dtype, *shape] (an "
        "array in DRAM) or a dtype (a scalar)"
    )
    assert e.value.line == line_of("noann-call")


def test_custom_op_fold_order_under_tiling():
    @hw.kernel(tile={"k": 2, "m": 2})
    def last_positive(x: hw.Array[int32, 4, 4]) -> int32:
        return hw.reduce((4, 4), lambda k, m: x[k, m], lambda p, q: hw.where(q > 0, q, p))  # L:fold

    with pytest.raises(hw.HwgenError) as e:
        last_positive.elaborate()
    check(
        e.value,
        hw.ScheduleError,
        "the custom reduce op folds in index order, but tiling 'k' by 2 and also splitting 'm' "
        "into tiles would visit the indices tile by tile; tile 'm' by its whole extent (4), or "
        "leave 'k' untiled",
        "fold",
    )
    x = np.arange(16, dtype=np.int32).reshape(4, 4) - 8
    assert last_positive.with_schedule(tile={"k": 2, "m": 4}).verify(x).outputs == 7


ORDER_MSG = (
    "{what}, but tiling 'i' by 4 and also splitting 'j' into tiles would visit the indices "
    "tile by tile; tile 'j' by its whole extent (6), or leave 'i' untiled"
)


@pytest.mark.parametrize("tile", [{"i": 4, "j": 2}, {"i": 4}])
def test_index_order_patterns_under_tiling(tile):
    @hw.kernel
    def positives(x: hw.Array[int32, 8, 6]):
        return hw.filter((8, 6), lambda i, j: x[i, j] > 0)  # L:order-filter

    @hw.kernel
    def emits(x: hw.Array[int32, 8, 6]):
        return hw.flatmap((8, 6), lambda i, j: hw.emit(x[i, j], when=x[i, j] > 0), max_out=1)  # L:order-flatmap

    @hw.kernel
    def groups(x: hw.Array[int32, 8, 6]):
        return hw.groupby_fold((8, 6), lambda i, j: (x[i, j] % 5, x[i, j]), max_keys=8)  # L:order-group

    def last(p, q):
        return hw.where(q > 0, q, p)

    @hw.kernel
    def last_positive(x: hw.Array[int32, 8, 6], z: hw.Array[int32, 2]):
        return hw.multifold((8, 6), z, lambda i, j: (j % 2, x[i, j]), op=last)  # L:order-multifold

    cases = [
        (positives, "hw.filter / hw.flatmap keeps its values in index order", "order-filter"),
        (emits, "hw.filter / hw.flatmap keeps its values in index order", "order-flatmap"),
        (groups, "hw.groupby_fold orders its groups by first appearance in index order", "order-group"),
        (last_positive, "the custom multifold op folds in index order", "order-multifold"),
    ]
    for kernel, what, marker in cases:
        with pytest.raises(hw.HwgenError) as e:
            kernel.with_schedule(tile=tile).elaborate()
        check(e.value, hw.ScheduleError, ORDER_MSG.format(what=what), marker)


def test_tile_of_a_helper_index_over_two_extents():
    @hw.kernel
    def two_sizes(x: hw.Array[int32, 8], y: hw.Array[int32, 4]) -> hw.Array[int32, 2]:
        def norm(a, n):
            return hw.sum(n, lambda i: a[i] * a[i])

        return hw.map(2, lambda r: hw.where(r == 0, norm(x, 8), norm(y, 4)))

    with pytest.raises(hw.HwgenError) as e:
        two_sizes.with_schedule(tile={"i": 8})  # L:two-extents
    check(e.value, hw.ScheduleError, "tile size 8 for index 'i' does not divide its extent 4", "two-extents")
