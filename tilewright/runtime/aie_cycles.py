"""The AI-Engine-like core's cycle model (simulated; our model, not AMD's cycle-accurate simulator).

The innermost loop is software-pipelined, as the core's compiler does for loops marked
`chess_prepare_for_pipelining`: its initiation interval is the modulo-schedule bound
II = max(MACs / vector slots, loads / load slots, stores / store slots, RecMII), where RecMII is
the recurrence through memory a program without lazy stores has (each partial sum is stored,
loaded back and accumulated again: load latency + MAC latency + 1 per 1-D MAC of an output). One
iteration from its first load to its last store takes `load_latency + MACs + mac_latency + 1`
cycles (at least II), so n iterations take (n - 1) * II + that; every entry into the inner loop costs
`loop_entry` cycles more (set-up of its pointers and loop counter). Pipelined code is prologue,
kernel and epilogue (II x (2 x stages - 1) bundles of 16 bytes); where that overflows the 16 KB
program memory, the loop runs unpipelined (one iteration after another). MACs per cycle counts the
operator's true MACs (a padded zero tap is work the datapath does, not useful MACs)."""

from __future__ import annotations

from dataclasses import dataclass

from ..lower.aie_program import AIEProgram, Load, Mac, Store


@dataclass(frozen=True)
class CycleReport:
    cycles: int
    macs: int
    ii: int
    iteration: int  # cycles of one iteration, first load to last store
    inner_trips: int
    entries: int  # times the inner loop is entered
    loads: int  # per iteration
    stores: int
    vector_macs: int
    code_bytes: int  # program-memory proxy: bundles of the pipelined loop (prologue, kernel, epilogue) x 16 B
    peak: int  # MACs per cycle the datapath can do
    pipelined: bool = True  # False where the pipelined loop would overflow the program memory

    @property
    def macs_per_cycle(self) -> float:
        return self.macs / self.cycles

    @property
    def steady_macs_per_cycle(self) -> float:
        """The inner loop's rate alone (no fill, drain or loop entry)."""
        per_trip = self.ii if self.pipelined else self.iteration
        return self.macs / (self.entries * self.inner_trips * per_trip)

    def slot_utilization(self) -> dict[str, float]:
        return {"vector": self.vector_macs / self.ii, "load": self.loads / (2 * self.ii),
                "store": self.stores / self.ii}

    def as_dict(self) -> dict:
        return {"cycles": self.cycles, "macs_per_cycle": round(self.macs_per_cycle, 3),
                "steady_macs_per_cycle": round(self.steady_macs_per_cycle, 3), "ii": self.ii,
                "iteration_cycles": self.iteration, "loads": self.loads, "stores": self.stores,
                "vector_macs": self.vector_macs, "code_bytes": self.code_bytes, "pipelined": self.pipelined,
                "slot_utilization": {k: round(v, 3) for k, v in self.slot_utilization().items()},
                "simulated": True}


def cycles(program: AIEProgram, config) -> CycleReport:
    macs = program.count(Mac)
    loads = program.count(Load)
    stores = program.count(Store)
    rec = 0
    if not program.schedule.lazy_stores:
        per_output: dict[str, int] = {}
        for op in program.body:
            if isinstance(op, Mac):
                per_output[op.acc] = per_output.get(op.acc, 0) + 1
        rec = max(per_output.values()) * (config.load_latency + config.mac_latency + 1)
    ii = max(-(-macs // config.vector_slots), -(-loads // config.load_slots), -(-stores // config.store_slots),
             rec, 1)
    iteration = max(ii, config.load_latency + macs + config.mac_latency + 1)
    *outer, inner = program.loops
    trips = inner[1] // inner[2]
    entries = program.trips // trips
    stages = -(-iteration // ii)
    overhead = config.bundle_bytes * config.loop_entry * (len(outer) + 1)
    code = config.bundle_bytes * ii * (2 * stages - 1) + overhead  # prologue, kernel, epilogue
    if code <= config.program_memory_bytes:
        per_entry = (trips - 1) * ii + max(iteration, ii) + config.loop_entry
        pipelined = True
    else:  # the pipelined loop does not fit the program memory: one iteration after another
        code = config.bundle_bytes * iteration + overhead
        per_entry = trips * iteration + config.loop_entry
        pipelined = False
    return CycleReport(entries * per_entry, program.form.macs, ii, iteration, trips, entries, loads, stores, macs,
                       code, config.peak_macs(program.bits), pipelined)


__all__ = ["CycleReport", "cycles"]
