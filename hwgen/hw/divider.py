"""A pipelined divider for `//` and `%` with numpy's integer semantics, one result per cycle.

Timing (timing.divider_bits gives the sizes, timing.latency_of the total): the operands'
magnitudes and signs are registered (1 cycle); restoring division then finds one quotient bit
per stage, from the most significant down, each stage a subtract-and-compare of the divisor's
width (n cycles for n quotient bits); the last two cycles turn the magnitudes' quotient and
remainder into numpy's floor quotient or remainder: every candidate registered, then the
choice registered. Numpy's rules: the
quotient rounds toward minus infinity, the remainder takes the divisor's sign, and division by
zero gives 0 for both.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal, unsigned


def build(m, op: str, a, b, out, bits: tuple, new_signal) -> None:
    """Drive `out` with `a // b` (op "floordiv") or `a % b` (op "mod"), n + 3 cycles after
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
    # two last cycles: numpy's floor semantics, and 0 for a zero divisor (its flag is a
    # flip-flop: no compare of the divisor's bits on the way to the result's register). The
    # first registers every candidate (each negation its own carry chain) and whether the
    # division was exact; the second only picks one, so the result's register can sit far from
    # the divider (by its users) without a carry chain before the long route.
    q, r = quo, rem
    an, bn, zero = flags
    inexact = new_signal(1, "dv_ix")
    m.d.sync += inexact.eq(r != 0)
    differ, zero = _hold(m, new_signal, an ^ bn, "dv_df"), _hold(m, new_signal, zero, "dv_zz")
    if op == "floordiv":
        q_hold, neg = _hold(m, new_signal, q, "dv_qq"), _hold(m, new_signal, -q, "dv_nq")
        value = Mux(differ, Mux(inexact, ~Cat(q_hold, Const(0, 1)).as_signed(), neg), q_hold)  # -q-1 is ~q
    else:
        up = div - r  # the remainder taken up to the divisor's sign
        pick = [_hold(m, new_signal, v, f"dv_m{k}") for k, v in enumerate((r, up, -r, -up))]
        b_hold = _hold(m, new_signal, bn, "dv_bb")
        value = Mux(b_hold, Mux(inexact & differ, pick[3], pick[2]), Mux(inexact & differ, pick[1], pick[0]))
    m.d.sync += out.eq(Mux(zero, 0, value))


def _hold(m, new_signal, value, hint):
    """`value` registered (a signal of its own shape)."""
    held = new_signal(value.shape(), hint)
    m.d.sync += held.eq(value)
    return held


def _carry(m, new_signal, div, flags, a_mag, k):
    """Register what the next stages still need: the divisor, the signs and zero flag, the
    dividend's bits below k."""
    d = new_signal(div.shape(), "dv_d")
    kept = tuple(new_signal(1, name) for name in ("dv_sa", "dv_sb", "dv_z"))
    rest = new_signal(unsigned(max(1, k)), "dv_x")
    m.d.sync += [d.eq(div), *(a.eq(b) for a, b in zip(kept, flags)), rest.eq(a_mag[:max(1, k)])]
    return d, kept, rest
