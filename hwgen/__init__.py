"""hwgen: compile tiled parallel-pattern programs into metapipelined hardware.

    import hwgen as hw
    from hwgen import int32

    @hw.kernel
    def dotproduct(a: hw.Array[int32, 1024], b: hw.Array[int32, 1024]) -> int32:
        return hw.sum(1024, lambda i: a[i] * b[i])

For the public names, see README.md and docs/language.md.
"""

from .dram import DramConfig
from .errors import (
    CapacityError,
    HwgenError,
    IndexRangeError,
    LanesWarning,
    MismatchError,
    ScheduleError,
    SimulationError,
    TraceError,
    TypeMismatchError,
    UnsupportedError,
)
from .kernel import Kernel, kernel
from .lang.arrays import concatenate, full, roll, table, zeros
from .lang.dtypes import DType, bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64
from .lang.fixedpoint import Fixed, fixed
from .lang.mathfuncs import abs_ as abs
from .lang.mathfuncs import exp, log, sigmoid, sqrt
from .lang.patterns import argmax, argmin, emit, flatmap, groupby_fold, matmul, multifold, reduce
from .lang.patterns import filter_ as filter
from .lang.patterns import map_ as map
from .lang.patterns import max_ as max
from .lang.patterns import min_ as min
from .lang.patterns import sum_ as sum
from .lang.scalars import maximum, minimum, where
from .lang.signature import Array
from .mesh import (
    LinkConfig,
    Mesh,
    P,
    all_gather,
    all_to_all,
    axis_index,
    pipeline,
    pmax,
    pmin,
    ppermute,
    psum,
    psum_scatter,
    shard_map,
    with_sharding_constraint,
)

__all__ = [
    "Array",
    "CapacityError",
    "IndexRangeError",
    "DType",
    "DramConfig",
    "Fixed",
    "abs",
    "argmax",
    "argmin",
    "exp",
    "fixed",
    "log",
    "multifold",
    "sigmoid",
    "sqrt",
    "table",
    "emit",
    "filter",
    "flatmap",
    "groupby_fold",
    "HwgenError",
    "LanesWarning",
    "Kernel",
    "MismatchError",
    "ScheduleError",
    "SimulationError",
    "TraceError",
    "TypeMismatchError",
    "UnsupportedError",
    "bool_",
    "concatenate",
    "full",
    "int8",
    "int16",
    "int32",
    "int64",
    "kernel",
    "map",
    "matmul",
    "max",
    "maximum",
    "min",
    "minimum",
    "reduce",
    "roll",
    "sum",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "where",
    "zeros",
    "LinkConfig",
    "Mesh",
    "P",
    "all_gather",
    "all_to_all",
    "axis_index",
    "pipeline",
    "pmax",
    "pmin",
    "ppermute",
    "psum",
    "psum_scatter",
    "shard_map",
    "with_sharding_constraint",
]
