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
    from harness.authoring.hardware import specs_of  # [specs] mem_tb_s, the older hbm_tb_s read as the same

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


# -- a verdict's shapes against the copy bandwidth: the tuner's stop rule and the run's summary ----------

NEAR_PCT = 95.0  # a bucket within 5% of its roofline on every shape that counts: the tuner stops there
MIN_ROOFLINE_US = 10.0  # a shape whose roofline time is shorter is launch-bound: it never counts toward that


def shape_pct(shape: dict, copy_tb_s: float | None = None) -> tuple[float | None, float | None]:
    """(% of roofline, roofline time in µs) of one timed shape of a verdict: its `roofline_pct`
    (against the copy bandwidth measured on the GPU), else its `bytes_moved` over `copy_tb_s` (a
    hardware pack's measured_copy_tb_s or hbm_tb_s); (None, None) without either."""
    us, pct = shape.get("candidate_us"), shape.get("roofline_pct")
    if not isinstance(us, (int, float)) or us <= 0:
        return None, None
    if isinstance(pct, (int, float)) and pct > 0:
        return float(pct), us * pct / 100
    moved = shape.get("bytes_moved")
    if copy_tb_s and isinstance(moved, (int, float)) and moved > 0:
        roof_us = moved / (copy_tb_s * 1e6)
        return roof_us / us * 100, roof_us
    return None, None


@dataclass
class BucketRoof:
    """Where one bucket's kernel stands: % of roofline per shape, and the figure that decides (the
    lowest over the shapes of at least MIN_ROOFLINE_US)."""
    pcts: dict[str, float] = field(default_factory=dict)  # shape name -> %
    counted: list[str] = field(default_factory=list)  # shapes long enough to count

    @property
    def pct(self) -> float | None:
        xs = [self.pcts[n] for n in self.counted]
        return min(xs) if xs else None

    @property
    def near(self) -> bool:
        return self.pct is not None and self.pct >= NEAR_PCT


def bucket_roof(shapes: Iterable[dict], copy_tb_s: float | None = None) -> BucketRoof:
    out = BucketRoof()
    for s in shapes:
        pct, roof_us = shape_pct(s, copy_tb_s)
        if pct is None:
            continue
        name = str(s.get("name", "?"))
        out.pcts[name] = pct
        if roof_us is not None and roof_us >= MIN_ROOFLINE_US:
            out.counted.append(name)
    return out
