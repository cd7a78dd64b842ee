"""Where a measured time stands against a hardware pack's memory roofline.

The evaluator's own `roofline_pct` is against the copy bandwidth it measures on the machine; this
one is against the figure a hardware pack states (`[specs] mem_tb_s`, the datasheet's), so it
can be shown for any verdict, also one read back from a journal on another machine: the floor of
a shape is the task's `bytes_moved(dims, dtype)` over that bandwidth, and the percentage is the
floor over the measured time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass(frozen=True)
class Roof:
    pack: str  # the hardware pack's id
    hbm_tb_s: float
    floors_us: dict[str, float] = field(default_factory=dict)  # shape name -> time floor, µs

    @property
    def label(self) -> str:
        return f"{self.pack} HBM {self.hbm_tb_s:g} TB/s"

    def pct(self, shape: str, measured_us: Any) -> float | None:
        """% of the roofline for `measured_us` on `shape` (None: no floor, or no time)."""
        floor = self.floors_us.get(shape)
        if floor is None or not isinstance(measured_us, (int, float)) or isinstance(measured_us, bool) \
                or measured_us <= 0:
            return None
        return floor / measured_us * 100.0


def hardware_bandwidth(pack: Any) -> float | None:
    """The pack's HBM bandwidth in TB/s (None: not a hardware pack, or it states none)."""
    if getattr(pack, "kind", None) != "hardware":
        return None
    from harness.hardware import specs_of  # [specs] mem_tb_s, the older hbm_tb_s read as the same

    v = specs_of(getattr(pack, "raw", {}) or {}).get("mem_tb_s")
    return v if v and v > 0 else None


def hbm_roof(task: Any, packs: Iterable[Any]) -> Roof | None:
    """The roof of the first hardware pack in `packs` that states a bandwidth, for every shape the
    task times on a GPU (None: no such pack, or the task has no `bytes_moved`)."""
    pack = next((p for p in packs if hardware_bandwidth(p)), None)
    if pack is None:
        return None
    try:
        import torch  # ~1 s: only when a floor is computed (the TUI loads this module at its start)

        ref = task.load_reference()
    except Exception:
        return None
    bm = getattr(ref, "bytes_moved", None)
    if not callable(bm):
        return None
    bw = hardware_bandwidth(pack)
    assert bw is not None
    dtype = getattr(torch, task.dtypes[0])
    floors: dict[str, float] = {}
    for s in task.shapes:
        try:
            floors[s.name] = float(bm(s.dims, dtype)) / (bw * 1e12) * 1e6
        except Exception:  # a reference that can't size one shape: no floor for it, the rest stand
            continue
    return Roof(pack.id, bw, floors)
