"""Combinational costs in the pipeline schedule (hw/timing.py): a comparison costs as much as
the carry chain of its operands, so a saturation (`where(x > hi, hi, x)`) of a 64-bit value
does not fit a stage together with the select feeding it and the select after it."""

from hwgen import bool_, int32, int64, ir, timing


def test_a_comparison_costs_as_much_as_its_operands_carry_chain():
    for dtype, cost in ((int32, 2), (int64, 3)):
        x = ir.Param("x", dtype)
        assert timing.op_cost(ir.Binary("gt", x, ir.Const(5, dtype), bool_)) == cost
        assert timing.op_cost(ir.Binary("add", x, x, dtype)) == cost


def test_a_wide_saturation_takes_two_stages():
    x, flag = ir.Param("x", int64), ir.Param("f", bool_)
    picked = ir.Select(flag, ir.Const(7, int64), x, int64)
    hi = ir.Const(2**31 - 1, int64)
    over = ir.Binary("gt", picked, hi, bool_)
    clipped = ir.Select(over, hi, picked, int64)
    t = timing.schedule([clipped], lambda mem: (0, 0, 0))
    assert t.stage[over] == 0 and t.stage[clipped] == 1
