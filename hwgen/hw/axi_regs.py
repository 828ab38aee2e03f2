"""The register map of an AXI-wrapped kernel's control port (hw/axi_top.py), laid out like the
`s_axilite` map of Vitis HLS: 32-bit registers, control first, then one 8-byte slot per
scalar argument, array base address and scalar result.

    0x00 CTRL    bit 0 start (write 1 while idle to run the kernel once; reads 1 until the
                 kernel has taken it), bit 1 done (set when a run has finished and every
                 write has been answered; cleared by reading CTRL or by a start), bit 2 idle
    0x04 GIE     bit 0: global interrupt enable
    0x08 IER     bit 0: interrupt on done
    0x0C ISR     bit 0: done happened (writing 1 toggles it, so writing what was read clears it)
    0x10 STATUS  bit 0: a read answered other than OKAY (RRESP), bit 1: a write answered
                 other than OKAY (BRESP), then one bit per run-time flag (group-by overflow,
                 multifold subscript out of range) in report order; cleared by a start
    0x18 CYCLES  cycles of the last run, low word (0x1C: high word)
    0x20 ...     ARG_<p>, BASE_<a> (byte address, 64 bits), RES_<r>: low word at the slot,
                 high word at slot + 4 (where the value has more than 32 bits; else 0)

`irq` is high while GIE, IER bit 0 and ISR bit 0 are all set.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import HwgenError

CTRL, GIE, IER, ISR, STATUS, CYCLES = 0x00, 0x04, 0x08, 0x0C, 0x10, 0x18
FIRST_SLOT = 0x20


@dataclass(frozen=True)
class Reg:
    """One slot: `name` (upper case, as in the C header), byte `offset`, value `bits`,
    `access` ("rw", "ro"), `port` (the kernel port it drives or reads, or None) and what
    it holds."""

    name: str
    offset: int
    bits: int
    access: str
    port: str | None
    what: str


def register_map(prog, flags: list, addr_bits: int, dtype_bits) -> list:
    """The map for a loop program (`flags`: the run-time flag ports; `addr_bits`: the AXI
    address width; `dtype_bits(dtype)`: a scalar's width)."""
    status = ", ".join(["bit 0 read error", "bit 1 write error"] + [f"bit {2 + k} {f}" for k, f in enumerate(flags)])
    regs = [
        Reg("CTRL", CTRL, 3, "rw", None, "bit 0 start, bit 1 done (clear on read), bit 2 idle"),
        Reg("GIE", GIE, 1, "rw", None, "global interrupt enable"),
        Reg("IER", IER, 1, "rw", None, "bit 0: interrupt on done"),
        Reg("ISR", ISR, 1, "rw", None, "bit 0: done happened (write 1 to toggle)"),
        Reg("STATUS", STATUS, 2 + len(flags), "ro", None, status),
        Reg("CYCLES", CYCLES, 64, "ro", None, "cycles of the last run"),
    ]
    offset = FIRST_SLOT
    for p in prog.params:
        regs.append(
            Reg(f"ARG_{p.name.upper()}", offset, dtype_bits(p.dtype), "rw", f"arg_{p.name}", f"scalar {p.name}")
        )
        offset += 8
    for d in prog.drams:
        regs.append(
            Reg(f"BASE_{d.name.upper()}", offset, addr_bits, "rw", f"base_{d.name}", f"byte address of {d.name}")
        )
        offset += 8
    for s in prog.scalar_outs:
        regs.append(
            Reg(f"RES_{s.name.upper()}", offset, dtype_bits(s.mem.dtype), "ro", f"res_{s.name}", f"result {s.name}")
        )
        offset += 8
    names = {}
    for r in regs:
        if r.name in names:
            raise HwgenError(
                f"wrap='axi' names a register after each argument, array and result in upper case: "
                f"'{names[r.name]}' and '{r.port}' both give {r.name}; rename one"
            )
        names[r.name] = r.port
    return regs


def lite_addr_bits(regs: list) -> int:
    """The control port's address width: the map's span, at least 8 bits (256 bytes)."""
    return max(8, (max(r.offset for r in regs) + 7).bit_length())


def c_header(kernel: str, regs: list, data_bits: int, word_bytes: int) -> str:
    """A C header with the map's offsets and control bits."""
    up = kernel.upper()
    lines = [
        f"/* Control registers of the hwgen kernel '{kernel}' behind AXI (written by hwgen). */",
        f"#ifndef {up}_REGS_H",
        f"#define {up}_REGS_H",
        "",
        f"#define {up}_AXI_DATA_BITS {data_bits}  /* the memory port's data width */",
        f"#define {up}_WORD_BYTES {word_bytes}  /* bytes per array element in memory */",
        f"#define {up}_CTRL_START 0x1u",
        f"#define {up}_CTRL_DONE 0x2u",
        f"#define {up}_CTRL_IDLE 0x4u",
        "",
    ]
    for r in regs:
        lines.append(f"#define {up}_{r.name} 0x{r.offset:02x}  /* {r.access}, {r.bits} bits: {r.what} */")
    lines += ["", f"#endif /* {up}_REGS_H */", ""]
    return "\n".join(lines)


def describe(regs: list) -> list:
    """The map as report.json holds it."""
    return [{"name": r.name, "offset": r.offset, "bits": r.bits, "access": r.access, "holds": r.what} for r in regs]
