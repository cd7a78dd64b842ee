"""Hardware packs: the `[hardware]` table that describes an NVIDIA or AMD GPU alike, the one-block
summary of it that goes into prompts, and which hardware pack the GPU in this machine maps to.

A hardware pack's prose (its markdown files) is for the agent to read; the `[hardware]` table is the
part the harness itself reads, so that what a chip LACKS is said in the same words for every chip
(an L40S prompt says "absent: wgmma", never leaves the agent to guess from Hopper habits). Feature
names come from a fixed vocabulary (FEATURES): a typo is an error naming the file and line, not a
feature silently never mentioned.

Detection: torch reports an NVIDIA GPU as a compute capability (9, 0) and a name "NVIDIA H200"; a
ROCm build of torch reports the same calls for an AMD GPU, but its capability is not an AMD target,
so the target comes from `get_device_properties(0).gcnArchName` ("gfx942:sramecc+:xnack-") when
`torch.version.hip` is set. `match_hardware` maps (arch, name) to one pack id and says why.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

VENDORS = ("nvidia", "amd")
# Compiler targets: NVIDIA compute capabilities (sm_90, sm_90a, sm_100f) and AMD LLVM targets
# (gfx942, gfx90a, gfx1100).
ARCH_RE = re.compile(r"^(sm_\d{2,3}[af]?|gfx[0-9]{2,4}[0-9a-f]?)$")

# What a kernel author may or may not reach for. Each pack lists every one it knows as present
# (`features`) or absent (`absent`); the prompt says both.
FEATURES: dict[str, str] = {
    "mma.sync": "warp-level tensor-core MMA (`mma.sync`, Ampere style)",
    "cp.async": "asynchronous global->shared copies (`cp.async`, Ampere style)",
    "tma": "TMA bulk tensor copies (`cp.async.bulk.tensor`, CUtensorMap)",
    "wgmma": "warpgroup MMA (`wgmma.mma_async`, sm_90a only)",
    "setmaxnreg": "register reallocation between warpgroups (`setmaxnreg`)",
    "clusters": "thread block clusters and distributed shared memory",
    "tcgen05": "fifth-generation tensor-core MMA (`tcgen05.mma`, datacenter Blackwell)",
    "tmem": "Tensor Memory (TMEM) accumulators",
    "2cta-mma": "CTA-pair MMA (`cta_group::2`)",
    "fp8-mma": "FP8 (E4M3/E5M2) matrix inputs",
    "fp6-mma": "FP6 matrix inputs",
    "fp4-mma": "FP4 matrix inputs",
    "block-scaled-mma": "hardware block-scaled (MX / NVFP4) MMA",
    "mfma": "AMD matrix-core instructions (MFMA, wavefront-wide)",
}
KEYS = ("vendor", "arch", "architecture", "warp_size", "matrix_units", "matrix_dtypes", "features",
        "absent", "triton", "cute_dsl")
REQUIRED = ("vendor", "arch", "architecture", "warp_size", "matrix_units", "features", "absent",
            "triton", "cute_dsl")


def validate_hardware(table: Any, err: Callable[[str, str, str | None], Exception]) -> None:
    """Check a pack.toml's [hardware] table; `err(field, problem, value)` builds the PackError
    (the caller knows the file and finds the line)."""
    if not isinstance(table, dict):
        raise err("hardware", "must be a table: [hardware] vendor = \"nvidia\", arch = \"sm_90a\", ...", None)
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise err(f"hardware.{unknown[0]}", f"unknown key (known: {', '.join(KEYS)})", None)
    for k in REQUIRED:
        if k not in table:
            raise err("hardware", f"missing {k!r} (required: {', '.join(REQUIRED)})", None)
    if table["vendor"] not in VENDORS:
        raise err("hardware.vendor", f"{table['vendor']!r}: one of {', '.join(VENDORS)}", None)
    arch = table["arch"]
    if not isinstance(arch, str) or not ARCH_RE.match(arch):
        raise err("hardware.arch", f"{arch!r} is not a compiler target like \"sm_90a\", \"sm_89\" "
                  "or \"gfx942\"", None)
    if (table["vendor"] == "amd") != arch.startswith("gfx"):
        raise err("hardware.arch", f"{arch!r} is not a {table['vendor']} target "
                  "(NVIDIA: sm_XY, AMD: gfxNNN)", None)
    ws = table["warp_size"]
    if not isinstance(ws, int) or isinstance(ws, bool) or ws not in (32, 64):
        raise err("hardware.warp_size", f"{ws!r}: 32 (NVIDIA warp, AMD wave32) or 64 (AMD wavefront)", None)
    for k in ("architecture", "matrix_units", "triton", "cute_dsl"):
        if not isinstance(table[k], str) or not table[k].strip():
            raise err(f"hardware.{k}", "must be a non-empty string", None)
    for k in ("matrix_dtypes", "features", "absent"):
        v = table.get(k, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise err(f"hardware.{k}", "must be a list of strings", None)
    for k in ("features", "absent"):
        for f in table[k]:
            if f not in FEATURES:
                raise err(f"hardware.{k}", f"unknown feature {f!r} (known: {', '.join(FEATURES)})", f)
    both = sorted(set(table["features"]) & set(table["absent"]))
    if both:
        raise err("hardware.absent", f"{both[0]!r} is listed as present and absent", both[0])


LEGACY_SPECS = {"hbm_gb": "mem_gb", "hbm_tb_s": "mem_tb_s"}  # the names before GDDR cards had packs


@dataclass(frozen=True)
class SpecField:
    means: str  # what the figure is, with its unit
    read_by: str  # who reads it: what goes wrong, or falls back, without it


# Every [specs] figure the harness reads (tests/packs/test_specs_fields.py finds each read in harness/):
# `packs new hardware` scaffolds them all, `packs validate` warns for each one a pack lacks. A pack may
# state more (fp8_dense_tflops...): prose for the prompt's readers, nothing the harness computes with.
SPECS: dict[str, SpecField] = {
    "mem_tb_s": SpecField("memory bandwidth, TB/s (the datasheet's)",
                          "the roofline: the bench pane's and the report's roofline %, the prompt's time floor per "
                          "shape, `profile` expectations; without it there is none"),
    "bf16_dense_tflops": SpecField("dense BF16 tensor-core TFLOP/s (without sparsity)",
                                   "the prompt's time floor per shape and `profile`'s compute ceiling; without it "
                                   "`profile --pack` gives no roofline expectation"),
    "measured_copy_tb_s": SpecField("copy bandwidth measured on this GPU, TB/s (read + write)",
                                    "the tuner's roofline % per bucket where a verdict has none (its stop rule); "
                                    "without it the tuner uses mem_tb_s, which no copy reaches"),
    "smem_per_block_kib": SpecField("shared memory (LDS on AMD) one block may use, KiB",
                                    "the tuner's `require ... <= smem_per_block` (without it: 227, Hopper's) and "
                                    "the prompt's device line"),
    "smem_per_sm_kib": SpecField("shared memory per SM (CU), KiB",
                                 "the tuner's `smem_per_sm` (without it: 228, Hopper's)"),
    "registers_per_sm_kib": SpecField("register file per SM (CU), KiB",
                                      "the tuner's `regs_per_sm` (without it: 256 KiB, Hopper's) and the prompt's "
                                      "device line"),
    "warps_per_sm": SpecField("resident warps (wavefronts) per SM (CU)",
                              "the tuner's `warps_per_sm` (without it: 64, Hopper's)"),
    "sm_count": SpecField("SMs (CUs on AMD)", "the prompt's device line"),
    "mem_gb": SpecField("memory size, GB", "the prompt's device line"),
    "l2_mb": SpecField("L2 cache, MB", "the prompt's device line"),
}


def missing_specs(raw: dict[str, Any]) -> list[str]:
    """The SPECS fields a hardware pack.toml lacks (an older hbm_* name counts as its mem_* one)."""
    have = specs_of(raw)
    return [k for k in SPECS if k not in have]


def specs_of(raw: dict[str, Any]) -> dict[str, float]:
    """A pack.toml's [specs] as floats, with the older hbm_* names read as mem_*."""
    out: dict[str, float] = {}
    for k, v in (raw.get("specs") or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.setdefault(LEGACY_SPECS.get(k, k), float(v))
    return out


def summary(pack: Any) -> str:
    """The [hardware] table as prompt text: what the chip has, and what it does not, said plainly.
    Empty for a pack without one (a user's older pack)."""
    hw = pack.raw.get("hardware") if isinstance(getattr(pack, "raw", None), dict) else None
    if not isinstance(hw, dict):
        return ""
    specs = specs_of(pack.raw)
    unit = "CUs" if hw.get("vendor") == "amd" else "SMs"
    local = "LDS" if hw.get("vendor") == "amd" else "shared memory"
    group = "wavefront" if hw.get("vendor") == "amd" else "warp"
    figs = []
    for key, fmt in (("sm_count", f"{{}} {unit}"), ("mem_gb", "{} GB memory"),
                     ("mem_tb_s", "{} TB/s memory bandwidth"), ("smem_per_block_kib", f"{{}} KiB {local} per block"),
                     ("registers_per_sm_kib", "{} KiB register file per " + unit[:-1]),
                     ("l2_mb", "{} MB L2"), ("bf16_dense_tflops", "{} dense BF16 TFLOP/s")):
        if key in specs:
            figs.append(fmt.format(f"{specs[key]:g}"))
    lines = [f"Device: {hw['vendor'].upper() if hw['vendor'] == 'amd' else 'NVIDIA'} {hw['architecture']}, "
             f"target {hw['arch']}, {group} size {hw['warp_size']}" + (f"; {', '.join(figs)}" if figs else ""),
             f"Matrix units: {hw['matrix_units']}"
             + (f"; input dtypes: {', '.join(hw.get('matrix_dtypes', []))}" if hw.get("matrix_dtypes") else "")]
    if hw["features"]:
        lines.append("Available: " + "; ".join(f"{f} ({FEATURES[f]})" for f in hw["features"]))
    if hw["absent"]:
        lines.append("ABSENT on this GPU, never emit or assume: "
                     + "; ".join(f"{f} ({FEATURES[f]})" for f in hw["absent"]))
    lines.append(f"Triton here: {hw['triton']}")
    lines.append(f"CuTe DSL here: {hw['cute_dsl']}")
    return "\n".join(lines)


# -- which pack is this GPU ---------------------------------------------------------------------

@dataclass
class Detected:
    arch: str | None  # "sm_90", "gfx942"; None: no GPU
    name: str | None  # as torch reports it: "NVIDIA H200", "AMD Instinct MI300X"
    how: str  # one phrase: where the arch came from, or why there is none


def detect() -> Detected:
    """GPU 0 as torch sees it. Never raises: a broken driver is "no GPU" for choosing packs."""
    try:  # torch (~1 s) only when a GPU is looked for: `warpsmith --help` loads this module
        import torch
    except Exception as e:  # pragma: no cover - torch is a dependency
        return Detected(None, None, f"torch unavailable ({type(e).__name__})")
    try:
        if not torch.cuda.is_available():
            return Detected(None, None, "no GPU visible to torch")
        name = torch.cuda.get_device_name(0) or None
        if getattr(torch.version, "hip", None):
            # ROCm: the capability torch reports is not a gfx target; gcnArchName is.
            gcn = str(getattr(torch.cuda.get_device_properties(0), "gcnArchName", "") or "")
            arch = gcn.split(":", 1)[0] or None
            return Detected(arch, name, f"ROCm {torch.version.hip}, gcnArchName {gcn or 'empty'}")
        major, minor = torch.cuda.get_device_capability(0)
        return Detected(f"sm_{major}{minor}", name, f"CUDA compute capability {major}.{minor}")
    except Exception as e:
        return Detected(None, None, f"GPU query failed ({type(e).__name__}: {e})")


def _word_in(token: str, name: str) -> bool:
    # "H200" in "NVIDIA H200 NVL" but not in "NVIDIA GH200 480GB"; "MI300X" not in "MI325X".
    return re.search(rf"(?<![a-z0-9]){re.escape(token.lower())}(?![a-z0-9])", name.lower()) is not None


def arch_matches(pack_archs: Iterable[str], arch: str) -> bool:
    """sm_90a is sm_90 with arch-specific features: a pack for either applies. AMD targets match exactly."""
    if arch.startswith("gfx"):
        return arch in pack_archs
    base = arch.rstrip("af")
    return any(a == arch or (a.startswith("sm_") and a.rstrip("af") == base) for a in pack_archs)


def match_hardware(packs: Iterable[Any], arch: str | None, name: str | None) -> tuple[str | None, str]:
    """(pack id or None, why) for a GPU. A pack applies when its applies_to.arch has the target;
    when it also lists applies_to.gpu and the device name is known, one of those must be a word of
    the name (an A30 is sm_80 too, and must not get the A100's bandwidth). Several left: the one
    whose gpu names it; otherwise none is chosen and the reason lists them."""
    if not arch:
        return None, "no GPU detected"
    hw = [p for p in packs if p.kind == "hardware" and arch_matches(p.applies_to.get("arch", []), arch)]
    if not hw:
        return None, f"no hardware pack applies to {arch}" + (f" ({name})" if name else "")
    if name:
        named = [p for p in hw if any(_word_in(g, name) for g in p.applies_to.get("gpu", []))
                 or _word_in(p.id, name)]
        unnamed = [p for p in hw if not p.applies_to.get("gpu")]  # a pack for the whole arch
        if len(named) == 1:
            p = named[0]
            g = next((g for g in p.applies_to.get("gpu", []) if _word_in(g, name)), p.id)
            return p.id, f"{name!r} is {arch} and names {g}"
        if len(named) > 1:
            return None, (f"{', '.join(p.id for p in named)} all name {name!r}; pick one")
        if len(unnamed) == 1:
            return unnamed[0].id, f"{unnamed[0].id} applies to every {arch} GPU ({name!r})"
        return None, (f"{', '.join(p.id for p in hw)} apply to {arch} but none names {name!r}")
    if len(hw) == 1:
        return hw[0].id, f"the only pack for {arch} (device name unavailable)"
    return None, f"{', '.join(p.id for p in hw)} all apply to {arch} and the device name is unavailable"
