"""Registered multipliers, mapped onto a device's DSP blocks when building for synthesis.

    multiply(m, a, b, out, new_signal)   out <= a * b two cycles later (operands registered,
                                          then the product), truncated to len(out) bits
    constant_product(value, c)           value * c as shifts and adds (no block, no register)
    pipelined_product(m, value, c, out, new_signal)
                                          out <= value * c as shifts and adds, a register after
                                          each level of adders (shift_add_levels(c) cycles)

The generic form (simulation, and any Verilog a user drops into their own design) is plain
registers and `*`. Built for ECP5 (hw/device.py), a product that one 18x18 block can make
becomes an ECP5 MULT18X18D with its input and output registers switched on, so neither register
leaves the block: Yosys cannot pack fabric registers into ECP5 DSP blocks, and without them the
route into and out of the block limits Fmax. Latency and results are the same in both forms.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance
from amaranth.hdl import signed as signed_shape

from ..timing import csd_terms, pair_up
from . import device

DSP_WIDTH = 18


def _operand(value, width: int, new_signal):
    """(operand, its assignment or None) for a product whose low `width` bits are wanted, or
    (None, None) when one block cannot make them. Up to 18 bits, the low `width` bits of each
    operand suffice (arithmetic modulo 2**width) and the block multiplies them unsigned."""
    if width <= DSP_WIDTH:
        low = new_signal(width, "dsp_in_")
        return low, low.eq(value)
    return value, None


def _exact_mode(a, b) -> str | None:
    """How one block makes the whole product a * b: "unsigned" (both unsigned, at most 18
    bits), "signed" (each fits 18 bits as a signed value), or None."""
    sa, sb = a.shape(), b.shape()
    if not sa.signed and not sb.signed and sa.width <= DSP_WIDTH and sb.width <= DSP_WIDTH:
        return "unsigned"
    if all(s.width <= (DSP_WIDTH if s.signed else DSP_WIDTH - 1) for s in (sa, sb)):
        return "signed"
    return None


def multiply(m, a, b, out, new_signal) -> None:
    """out <= a * b (low len(out) bits, operands read by their shapes), two cycles later."""
    width = len(out)
    if device.current() == "ecp5":
        if width <= DSP_WIDTH:
            (ea, sa), (eb, sb) = _operand(a, width, new_signal), _operand(b, width, new_signal)
            m.d.comb += [s for s in (sa, sb) if s is not None]
            _mult18x18d(m, ea, eb, out, new_signal, signed=False)
            return
        mode = _exact_mode(a, b)
        if mode is not None:
            _mult18x18d(m, a, b, out, new_signal, signed=mode == "signed")
            return
    held = [new_signal(v.shape(), "mo_") for v in (a, b)]
    m.d.sync += [h.eq(v) for h, v in zip(held, (a, b))]
    m.d.sync += out.eq(held[0] * held[1])


def _mult18x18d(m, a, b, out, new_signal, signed: bool) -> None:
    """out <= a * b through one MULT18X18D: operands extended to 18 bits (by their own
    signedness), multiplied signed or unsigned; the 36-bit product extended into `out`."""
    p = new_signal(signed_shape(2 * DSP_WIDTH) if signed else 2 * DSP_WIDTH, "dsp_p_")
    ea, eb = new_signal(DSP_WIDTH, "dsp_a_"), new_signal(DSP_WIDTH, "dsp_b_")
    m.d.comb += [ea.eq(a), eb.eq(b)]  # sign- or zero-extends by the operand's shape
    ports = {f"i_A{i}": ea[i] for i in range(DSP_WIDTH)}
    ports.update({f"i_B{i}": eb[i] for i in range(DSP_WIDTH)})
    ports.update({f"o_P{i}": p[i] for i in range(2 * DSP_WIDTH)})
    flag = Const(int(signed), 1)
    m.submodules += Instance(
        "MULT18X18D",
        p_REG_INPUTA_CLK="CLK0",
        p_REG_INPUTB_CLK="CLK0",
        p_REG_OUTPUT_CLK="CLK0",
        p_GSR="DISABLED",
        i_CLK0=ClockSignal(),
        i_CE0=Const(1, 1),
        i_RST0=Const(0, 1),
        i_SIGNEDA=flag,
        i_SIGNEDB=flag,
        i_SOURCEA=Const(0, 1),
        i_SOURCEB=Const(0, 1),
        **ports,
    )
    m.d.comb += out.eq(p)  # truncates, or extends by the product's signedness


def constant_product(value, c: int):
    """value * c from shifts and a balanced tree of adders over the constant's canonical signed
    digits (3840 = 4096 - 256 is one subtractor). For address arithmetic, where a DSP block
    with unregistered ports would put its own delay and two long routes in one cycle."""
    terms = [(p, value << k if k else value) for p, k in csd_terms(c)]
    if not terms:
        return Const(0, 1)
    while len(terms) > 1:
        terms = pair_up(terms, _sum_signed)
    positive, v = terms[0]
    return v if positive else -v


def pipelined_product(m, value, c: int, out, new_signal) -> None:
    """out <= value * c, shift_add_levels(c) (at least 2 digits) cycles later: the shifted
    copies of `value` (read from a register by the caller) summed by a balanced tree of adders,
    registered after each level, all modulo 2**len(out) (only the low bits are kept)."""
    width = len(out)

    def term(v):
        t = new_signal(width, "csd_")
        m.d.comb += t.eq(v)  # sign- or zero-extended by v's shape, then truncated
        return t

    def registered(v):
        r = new_signal(width, "csd_r")
        m.d.sync += r.eq(v)
        return r

    terms = [(p, term(value << k)) for p, k in csd_terms(c)]
    while len(terms) > 1:
        terms = [(p, registered(v)) for p, v in pair_up(terms, _sum_signed)]
    positive, v = terms[0]
    m.d.comb += out.eq(v) if positive else out.eq(registered(-v))


def _sum_signed(x, y):
    """The sum of two signed terms (sign, value), as a signed term."""
    (px, vx), (py, vy) = x, y
    if px == py:
        return px, vx + vy
    return (True, vx - vy) if px else (True, vy - vx)
