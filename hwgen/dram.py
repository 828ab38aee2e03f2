"""The off-chip memory the hardware talks to: its latency and bandwidth.

The defaults describe one DRAM channel as the simulation's DRAM model implements it and as the
cycle model and the roofline assume it:

- `words_per_cycle` (default 4): one read beat and one write beat per cycle, each carrying up to
  this many consecutive words. A word holds one array element (see `word_bits`).
- `latency` (default 20): cycles from a read request being accepted to its data being valid.
- `jitter` (default 0, simulation only): up to this many extra cycles per read, chosen at random;
  responses still arrive in request order. When nonzero, the channel also refuses read
  requests and write beats (ready low) in about one cycle in four each, at random. It changes
  cycles, never results.
- `addr_bits` (default 32): width of word addresses; the one limit on array sizes.

The channel's signals are described in hw/memchannel.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import HwgenError


@dataclass(frozen=True)
class DramConfig:
    latency: int = 20
    words_per_cycle: int = 4
    jitter: int = 0
    addr_bits: int = 32

    def __post_init__(self):
        for name in ("latency", "words_per_cycle", "addr_bits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise HwgenError(f"DramConfig.{name} must be a positive int, got {value!r}")
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, int) or self.jitter < 0:
            raise HwgenError(f"DramConfig.jitter must be a non-negative int, got {self.jitter!r}")
        if self.words_per_cycle & (self.words_per_cycle - 1):
            raise HwgenError(f"DramConfig.words_per_cycle must be a power of two, got {self.words_per_cycle}")
        if self.latency > 200 or self.jitter > 200:
            raise HwgenError("DramConfig.latency and jitter are limited to 200 cycles each")


def word_bits(dtypes) -> int:
    """The DRAM word width for a kernel whose arrays have `dtypes`: the widest element,
    rounded up to 8, 16, 32 or 64 bits."""
    widest = max((d.bits for d in dtypes), default=8)
    for w in (8, 16, 32, 64):
        if widest <= w:
            return w
    raise HwgenError(f"elements of {widest} bits do not fit a 64-bit DRAM word")
