"""An FPGA as data, for the HLS path (FlexTensor 5.2/5.3): the resources a design may use, its
clock and the off-chip memory its read and write stages share.

Resource counts are the vendor data sheets': XCVU9P and XCZU9EG from AMD DS890 (UltraScale
Architecture and Product Data Sheet: Overview, device tables), XC7VX485T (the VC707 board's part)
from DS180 (7 Series FPGAs Data Sheet: Overview). Memory: one 64-bit DDR4-2400 channel (19.2 GB/s
peak) on the VCU118 / ZCU102 boards, one 64-bit DDR3-1600 SODIMM (12.8 GB/s) on the VC707 (the
boards' user guides UG1224, UG1182, UG885). Clocks: 100 MHz on the VC707 as in Zhang et al.
(FPGA'15); 200 MHz elsewhere, this model's assumption (a design's achieved clock is a
place-and-route result, which nothing here runs).

DSPs per multiply-accumulate: fp32 takes 3 DSPs for the multiplier and 2 for the adder (PG060,
Floating-Point Operator, "full DSP usage"); int16 one DSP; int8 half a DSP48E2, two products that
share an operand packed in one 27x18 multiplier (WP486), but a whole DSP48E1 on 7-series parts.
Burst overheads and pipeline depths below are this model's assumptions, fixed before any design
was searched, and named as such in every report."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ..errors import TilewrightError


@dataclass(frozen=True)
class FPGADevice:
    name: str
    part: str
    dsp: int
    bram36: int
    uram: int
    luts: int
    clock_mhz: float
    ddr_gbps: float  # peak off-chip bandwidth, shared by every AXI master of the design
    axi_bits: int = 512  # widest AXI data bus a read or write stage uses
    dsp48e2: bool = True  # UltraScale+ DSP slices (int8 packing); False for 7-series DSP48E1
    # model assumptions (no public figure applies to every design)
    burst_overhead: int = 12  # cycles a new AXI burst costs beyond its beats (address phase, DDR row)
    memory_latency: int = 120  # cycles from the first request of a transfer to its first beat
    burst_efficiency: float = 0.85  # of peak DDR bandwidth a stream of long bursts sustains

    def __post_init__(self):
        for f in ("dsp", "bram36", "luts", "axi_bits", "burst_overhead", "memory_latency"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise TilewrightError(f"FPGADevice.{f} must be a positive integer, got {v!r}")
        if not isinstance(self.uram, int) or self.uram < 0:
            raise TilewrightError(f"FPGADevice.uram must be a non-negative integer, got {self.uram!r}")
        for f in ("clock_mhz", "ddr_gbps"):
            if not isinstance(getattr(self, f), (int, float)) or getattr(self, f) <= 0:
                raise TilewrightError(f"FPGADevice.{f} must be positive, got {getattr(self, f)!r}")
        if not 0 < self.burst_efficiency <= 1:
            raise TilewrightError(f"FPGADevice.burst_efficiency must be in (0, 1], got {self.burst_efficiency!r}")
        if self.axi_bits not in (32, 64, 128, 256, 512, 1024):
            raise TilewrightError(f"FPGADevice.axi_bits must be 32, 64, 128, 256, 512 or 1024, got {self.axi_bits}")

    @property
    def bytes_per_cycle(self) -> float:
        """Off-chip bytes per design clock cycle at the sustained bandwidth (all masters together)."""
        ddr = self.ddr_gbps * 1e9 * self.burst_efficiency / (self.clock_mhz * 1e6)
        return min(ddr, self.axi_bits / 8)

    def dsp_per_mac(self, dtype: str) -> float:
        if dtype == "float32":
            return 5.0
        if dtype in ("int16", "uint16"):
            return 1.0
        if dtype in ("int8", "uint8"):
            return 0.5 if self.dsp48e2 else 1.0
        raise TilewrightError(f"{self.name}: no DSP mapping for {dtype} multiply-accumulates; the HLS target maps "
                              f"float32, int16/uint16 and int8/uint8 operands")

    @property
    def key(self) -> str:
        return "hls-" + "-".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))

    def describe(self) -> str:
        return (f"{self.name} ({self.part}): {self.dsp} DSP, {self.bram36} BRAM36, {self.uram} URAM, {self.luts} LUT, "
                f"{self.clock_mhz:g} MHz, {self.ddr_gbps:g} GB/s DDR")


DEVICES = {
    "vu9p": FPGADevice("vu9p", "xcvu9p", dsp=6840, bram36=2160, uram=960, luts=1182240, clock_mhz=200.0,
                       ddr_gbps=19.2),
    "zu9eg": FPGADevice("zu9eg", "xczu9eg", dsp=2520, bram36=912, uram=0, luts=274080, clock_mhz=200.0,
                        ddr_gbps=19.2),
    "vc707": FPGADevice("vc707", "xc7vx485t", dsp=2800, bram36=1030, uram=0, luts=303600, clock_mhz=100.0,
                        ddr_gbps=12.8, dsp48e2=False),
}

# what "hls -name=value" may set; "device" picks a preset, the rest override its facts
OPTIONS = ("device", "dsp", "bram36", "uram", "luts", "clock_mhz", "ddr_gbps", "axi_bits")


def parse_hls_options(opts: dict[str, str]) -> FPGADevice:
    name = opts.get("device", "vu9p")
    if name not in DEVICES:
        raise TilewrightError(f"unknown FPGA device {name!r}; known: {', '.join(DEVICES)} (or give its facts: "
                              f"'hls -device=vu9p -dsp=4000 -bram36=1000 -clock_mhz=300 -ddr_gbps=25.6')")
    dev = DEVICES[name]
    changes = {}
    for key, text in opts.items():
        if key == "device":
            continue
        try:
            value = float(text) if key in ("clock_mhz", "ddr_gbps") else int(text)
        except ValueError:
            raise TilewrightError(f"target option -{key} must be a number, got {text!r}") from None
        changes[key] = value
    return replace(dev, name=f"{name}-custom", **changes) if changes else dev


__all__ = ["DEVICES", "OPTIONS", "FPGADevice", "parse_hls_options"]
