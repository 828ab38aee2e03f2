"""A pipelined divider for `//` and `%` with numpy's integer semantics, one result per cycle.

Timing (timing.divider_bits gives the sizes, timing.latency_of the total): the operands'
magnitudes and signs are registered (1 cycle); non-restoring division then finds one quotient
bit per stage, from the most significant down (n cycles for n quotient bits). A stage adds the
divisor to its remainder or subtracts it, by the sign of that remainder (a flip-flop), in one
carry chain whose result goes straight to the next register: no compare, then select, after
the chain. Its remainder lies in [-divisor, divisor); a stage's quotient bit is 1 when its
remainder is not negative (the bits of restoring division). One cycle adds the divisor back to
a negative final remainder; the last two turn the magnitudes' quotient and remainder into
numpy's floor quotient or remainder: every candidate registered, then the choice registered.
Numpy's rules: the quotient rounds toward minus infinity, the remainder takes the divisor's
sign, and division by zero gives 0 for both.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal, signed, unsigned


def build(m, op: str, a, b, out, bits: tuple, new_signal) -> None:
    """Drive `out` with `a // b` (op "floordiv") or `a % b` (op "mod"), n + 4 cycles after
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
    # n cycles: non-restoring division, most significant quotient bit first
    rem, quo, div, flags = Const(0, signed(w + 1)), None, b_mag, (a_neg, b_neg, b_zero)
    for k in reversed(range(n)):
        rem, quo = _step(m, new_signal, rem, quo, div, a_mag[k], n - k)
        div, flags, a_mag = _carry(m, new_signal, div, flags, a_mag, k)
    # one cycle: a negative remainder takes the divisor back
    r = _hold(m, new_signal, (rem + (div & rem[-1].replicate(w)))[:w], "dv_rc")  # one carry chain
    q, div = _hold(m, new_signal, quo, "dv_qc"), _hold(m, new_signal, div, "dv_dc")
    flags = tuple(_hold(m, new_signal, f, "dv_f") for f in flags)
    # two last cycles: numpy's floor semantics, and 0 for a zero divisor (its flag is a
    # flip-flop: no compare of the divisor's bits on the way to the result's register). The
    # first registers every candidate (each negation its own carry chain) and whether the
    # division was exact; the second only picks one, so the result's register can sit far from
    # the divider (by its users) without a carry chain before the long route.
    an, bn, zero = flags
    inexact = new_signal(1, "dv_ix")
    m.d.sync += inexact.eq(r != 0)
    differ, zero = _hold(m, new_signal, an ^ bn, "dv_df"), _hold(m, new_signal, zero, "dv_zz")
    if op == "floordiv":
        q_hold, neg = _hold(m, new_signal, q, "dv_qq"), _hold(m, new_signal, -q, "dv_nq")
        value = Mux(differ, Mux(inexact, ~Cat(q_hold, Const(0, 1)).as_signed(), neg), q_hold)  # -q-1 is ~q
    else:
        # the remainder, taken up to the divisor's sign, and their negations (one chain each)
        pick = [_hold(m, new_signal, v, f"dv_m{k}") for k, v in enumerate((r, div - r, -r, r - div))]
        b_hold = _hold(m, new_signal, bn, "dv_bb")
        value = Mux(b_hold, Mux(inexact & differ, pick[3], pick[2]), Mux(inexact & differ, pick[1], pick[0]))
    m.d.sync += out.eq(Mux(zero, 0, value))


def _step(m, new_signal, rem, quo, div, bit, bits):
    """One non-restoring stage: the remainder shifted, taking the dividend's next `bit`, plus
    the divisor when the remainder is negative, minus it otherwise; and the quotient so far
    (`bits` long) with its new bit (the new remainder not negative). One carry chain: the
    subtraction is the divisor's complement plus a carry into a low bit that is always 1."""
    w = len(div)
    trial = Cat(bit, rem)  # 2 * rem + bit, w + 2 bits, two's complement
    sub = ~rem[-1]
    addend = Cat(div, Const(0, 2)) ^ sub.replicate(w + 2)
    total = Cat(Const(1, 1), trial) + Cat(sub, addend)
    new_rem, new_quo = new_signal(signed(w + 1), "dv_r"), new_signal(unsigned(bits), "dv_q")
    fits = ~total[w + 1]  # the new remainder's sign, inverted
    m.d.sync += [new_rem.eq(total[1 : w + 2]), new_quo.eq(fits if quo is None else Cat(fits, quo))]
    return new_rem, new_quo


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
    m.d.sync += [d.eq(div), *(a.eq(b) for a, b in zip(kept, flags)), rest.eq(a_mag[: max(1, k)])]
    return d, kept, rest
