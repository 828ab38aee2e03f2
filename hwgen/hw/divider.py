"""A pipelined divider for `//` and `%` with numpy's integer semantics, one result per cycle.

Timing (timing.divider_bits gives the sizes, timing.latency_of the total): the operands'
magnitudes and signs are registered (1 cycle); restoring division then finds one quotient bit
per stage, from the most significant down, each stage a subtract-and-compare of the divisor's
width (n cycles for n quotient bits); the last cycle turns the magnitudes' quotient and
remainder into numpy's floor quotient or remainder and registers it. Numpy's rules: the
quotient rounds toward minus infinity, the remainder takes the divisor's sign, and division by
zero gives 0 for both.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal, unsigned


def build(m, op: str, a, b, out, bits: tuple, new_signal) -> None:
    """Drive `out` with `a // b` (op "floordiv") or `a % b` (op "mod"), n + 2 cycles after
    `a` and `b` (n, w = `bits`: quotient bits and divisor bits); `new_signal(shape, hint)`."""
    n, w = bits
    # cycle 1: magnitudes and signs
    a_neg = Signal(name="dv_an")
    b_neg = Signal(name="dv_bn")
    b_zero = Signal(name="dv_bz")
    a_mag, b_mag = new_signal(unsigned(n), "dv_a"), new_signal(unsigned(w), "dv_b")
    m.d.sync += [
        a_neg.eq(a < 0) if a.shape().signed else a_neg.eq(0),
        b_neg.eq(b < 0) if b.shape().signed else b_neg.eq(0),
        b_zero.eq(b == 0),
        a_mag.eq(Mux(a < 0, -a, a) if a.shape().signed else a),
        b_mag.eq(Mux(b < 0, -b, b) if b.shape().signed else b),
    ]
    # n cycles: restoring division, most significant quotient bit first
    rem, quo, div, flags = Const(0, w), None, b_mag, (a_neg, b_neg, b_zero)
    for k in reversed(range(n)):
        trial = Cat(a_mag[k], rem)  # the remainder, shifted, takes the dividend's next bit
        fits = trial >= div
        new_rem = new_signal(unsigned(w), "dv_r")
        new_quo = new_signal(unsigned(n - k), "dv_q")
        m.d.sync += [new_rem.eq(Mux(fits, trial - div, trial)), new_quo.eq(fits if quo is None else Cat(fits, quo))]
        rem, quo = new_rem, new_quo
        div, flags, a_mag = _carry(m, new_signal, div, flags, a_mag, k)
    # the last cycle: numpy's floor semantics, and 0 for a zero divisor (its flag is a
    # flip-flop: no compare of the divisor's bits on the way to the result's register)
    q, r = quo, rem
    an, bn, zero = flags
    inexact = r != 0
    differ = an ^ bn
    if op == "floordiv":
        value = Mux(differ, Mux(inexact, -q - 1, -q), q)
    else:
        value = Mux(inexact & differ, div - r, r)
        value = Mux(bn, -value, value)
    m.d.sync += out.eq(Mux(zero, 0, value))


def _carry(m, new_signal, div, flags, a_mag, k):
    """Register what the next stages still need: the divisor, the signs and zero flag, the
    dividend's bits below k."""
    d = new_signal(div.shape(), "dv_d")
    kept = tuple(new_signal(1, name) for name in ("dv_sa", "dv_sb", "dv_z"))
    rest = new_signal(unsigned(max(1, k)), "dv_x")
    m.d.sync += [d.eq(div), *(a.eq(b) for a, b in zip(kept, flags)), rest.eq(a_mag[:max(1, k)])]
    return d, kept, rest
