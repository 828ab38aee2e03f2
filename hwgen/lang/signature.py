"""A kernel's interface: `hw.Array[dtype, *shape]` annotations, parameters, results, and the
checking of user arguments against them.

An array parameter or result lives in DRAM; a bare dtype is a scalar (a port on the hardware).
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass

import numpy as np

from ..errors import Loc, TraceError, TypeMismatchError
from .dtypes import DType, as_dtype, bool_


@dataclass(frozen=True)
class ArrayType:
    """The annotation `hw.Array[dtype, *shape]`."""

    dtype: DType
    shape: tuple

    def __repr__(self) -> str:
        return f"Array[{self.dtype.name}, {', '.join(map(str, self.shape))}]"


class Array:
    """`hw.Array[dtype, *shape]` annotates an off-chip (DRAM) array argument or result."""

    def __class_getitem__(cls, key) -> ArrayType:
        if not isinstance(key, tuple):
            key = (key,)
        dtype = as_dtype(key[0])
        if dtype is None:
            raise TypeMismatchError(
                unknown_dtype(key[0], "hw.Array[...] needs a dtype first (like hw.Array[int32, 64])")
            )
        shape = key[1:]
        if not shape:
            raise TypeMismatchError(
                f"hw.Array[{dtype.name}] needs a shape (like hw.Array[{dtype.name}, 64]); "
                f"for a scalar, annotate with the dtype alone"
            )
        for s in shape:
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or int(s) < 1:
                raise TypeMismatchError(
                    f"hw.Array[{dtype.name}, ...] shape entries must be positive ints known at build time, got {s!r}"
                )
        return ArrayType(dtype, tuple(int(s) for s in shape))


@dataclass(frozen=True)
class Port:
    """A parameter or result: `name`, `dtype`, and `shape` (() for a scalar)."""

    name: str
    dtype: DType
    shape: tuple

    @property
    def is_array(self) -> bool:
        return bool(self.shape)

    def describe(self) -> str:
        """'an int32 array of shape (16,)' or 'a uint8 scalar'."""
        article = "an" if self.dtype.name[0] in "aeiou" else "a"
        if not self.shape:
            return f"{article} {self.dtype.name} scalar"
        return f"{article} {self.dtype.name} array of shape {self.shape}"


def unknown_dtype(x, expected: str) -> str:
    """The message for something that is not an hwgen dtype (floats get their own)."""
    try:
        if np.dtype(x).kind in "fc":
            return f"{np.dtype(x)} is not supported: hwgen has integer types only (int8 .. uint64, bool_)"
    except TypeError:
        pass
    return f"{expected}, got {x!r}"


def _as_type(annotation, what: str, loc: Loc):
    if isinstance(annotation, ArrayType):
        return annotation
    dt = as_dtype(annotation)
    if dt is not None:
        return dt
    raise TypeMismatchError(
        f"{what} is annotated {annotation.__name__ if isinstance(annotation, type) else repr(annotation)}; "
        f"expected hw.Array[dtype, *shape] or a dtype such as int32",
        loc,
    )


def parse_params(fn, loc: Loc) -> list:
    """The Ports of `fn`'s parameters, from their annotations."""
    annotations = _annotations(fn, loc)
    ports = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise TraceError(f"kernel parameter '{p.name}' must be a plain positional parameter", loc)
        if p.name not in annotations:
            raise TraceError(
                f"kernel parameter '{p.name}' has no annotation; annotate it as "
                f"hw.Array[dtype, *shape] (an array in DRAM) or a dtype (a scalar)",
                loc,
            )
        t = _as_type(annotations[p.name], f"parameter '{p.name}'", loc)
        ports.append(Port(p.name, t.dtype, t.shape) if isinstance(t, ArrayType) else Port(p.name, t, ()))
    return ports


def _annotations(fn, loc: Loc) -> dict:
    """`fn`'s annotations, evaluated (string annotations see the function's closure too)."""
    closure = {n: c.cell_contents for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ()) if _filled(c)}
    try:
        return inspect.get_annotations(fn, locals=closure, eval_str=True)
    except Exception as e:  # a NameError in a string annotation, say
        hint = ""
        if isinstance(e, NameError) and any(isinstance(a, str) for a in fn.__annotations__.values()):
            hint = (
                " (with `from __future__ import annotations`, annotations are evaluated later "
                "and can only use module-level names)"
            )
        raise TraceError(f"cannot evaluate the annotations of '{fn.__name__}': {e}{hint}", loc) from None


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def parse_results(fn, loc: Loc):
    """The declared result types (a list), or None when `fn` has no return annotation."""
    annotations = _annotations(fn, loc)
    if "return" not in annotations:
        return None
    ann = annotations["return"]
    if typing.get_origin(ann) is tuple:
        ann = typing.get_args(ann)
    items = ann if isinstance(ann, tuple) else (ann,)
    return [_as_type(a, "the result", loc) for a in items]


def raw_dtype(dtype: DType) -> DType:
    """The integer dtype that carries values of `dtype` in the IR and in DRAM."""
    return getattr(dtype, "storage", dtype)


def to_user(port: "Port", value):
    """A raw result value as the user sees it (fixed point comes back as floats)."""
    if hasattr(port.dtype, "to_float"):
        out = port.dtype.to_float(value)
        return out if port.shape else np.float64(out)
    return value


def result_names(n: int, taken=()) -> list:
    """The results' array names: `out`, or `out0`, `out1`, ...; each with `_` appended until
    it is not in `taken` (the parameters' names: a parameter may be called `out`)."""
    names = ["out"] if n == 1 else [f"out{k}" for k in range(n)]
    out = []
    for name in names:
        while name in taken:
            name += "_"
        out.append(name)
    return out


def check_args(kernel_name: str, params: list, args: tuple) -> dict:
    """Check user arguments against `params`; returns name -> numpy value."""
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise TypeMismatchError(f"kernel '{kernel_name}' takes {len(params)} argument(s) ({names}), got {len(args)}")
    out = {}
    for p, a in zip(params, args):
        out[p.name] = _check_array(kernel_name, p, a) if p.is_array else _check_scalar(kernel_name, p, a)
    return out


def _check_array(kernel_name: str, p: Port, a) -> np.ndarray:
    if hasattr(p.dtype, "quantize"):
        return _check_fixed(kernel_name, p, a)
    if not isinstance(a, np.ndarray):
        raise TypeMismatchError(
            f"argument '{p.name}' of kernel '{kernel_name}': expected {p.describe()} (numpy), got {type(a).__name__}"
        )
    got = f"{'an' if a.dtype.name[0] in 'aeiou' else 'a'} {a.dtype} array of shape {a.shape}"
    if a.dtype != p.dtype.np or a.shape != p.shape:
        raise TypeMismatchError(f"argument '{p.name}' of kernel '{kernel_name}': expected {p.describe()}, got {got}")
    return np.ascontiguousarray(a)


def _check_fixed(kernel_name: str, p: Port, a):
    """Fixed-point arguments are numbers (floats or ints), rounded down to the grid."""
    arr = np.asarray(a) if not isinstance(a, np.ndarray) else a
    if arr.dtype.kind not in "fiu" or arr.shape != p.shape:
        raise TypeMismatchError(
            f"argument '{p.name}' of kernel '{kernel_name}': expected numbers of shape {p.shape} "
            f"for {p.dtype.name}, got {arr.dtype} values of shape {arr.shape}"
        )
    raw = p.dtype.quantize(arr)
    return raw if p.shape else raw[()]


def _check_scalar(kernel_name: str, p: Port, a):
    if hasattr(p.dtype, "quantize"):
        return _check_fixed(kernel_name, p, a)
    if isinstance(a, np.ndarray) and a.shape == ():
        a = a[()]
    if isinstance(a, np.generic):
        if a.dtype != p.dtype.np:
            raise TypeMismatchError(
                f"argument '{p.name}' of kernel '{kernel_name}': expected {p.describe()}, got a numpy {a.dtype} scalar"
            )
        return a
    ok_type = isinstance(a, bool) if p.dtype == bool_ else (isinstance(a, int) and not isinstance(a, bool))
    if not ok_type:
        raise TypeMismatchError(
            f"argument '{p.name}' of kernel '{kernel_name}': expected {p.describe()}, got {type(a).__name__} {a!r}"
        )
    if not p.dtype.fits(int(a)):
        raise TypeMismatchError(
            f"argument '{p.name}' of kernel '{kernel_name}': {a} is out of range for "
            f"{p.dtype.name} [{p.dtype.min}, {p.dtype.max}]"
        )
    return p.dtype.np.type(a)
