"""Built-in hardware packs against a table of figures kept here, each with its source; what each
chip lacks is stated absent and never offered as available in the prompt; which pack a GPU maps to,
with device names as torch reports them."""
from __future__ import annotations

import re
import types

import pytest

from harness.authoring import hardware as H
from harness.authoring.hardware import FEATURES, match_hardware, summary
from harness.authoring.packs import BUILTIN_PACKS, load_pack
from harness.prompt import render_packs

# pack id -> spec key -> (value, source). Every [specs] figure of a built-in hardware pack must be
# here and agree: a figure changed in a pack without its source being re-checked fails this test.
CUDA_CC = "CUDA C++ Programming Guide, Compute Capabilities tables"
FIGURES: dict[str, dict[str, tuple[float, str]]] = {
    "a100": {
        "sm_count": (108, "Ampere architecture whitepaper (108 SMs)"),
        "mem_gb": (80, "A100 datasheet (80GB HBM2e)"),
        "mem_tb_s": (2.039, "A100 datasheet (2,039 GB/s, SXM 80GB)"),
        "l2_mb": (40, "Ampere architecture whitepaper (40 MB L2)"),
        "smem_per_sm_kib": (164, "Ampere whitepaper; " + CUDA_CC + " (8.0: 164 KB per SM)"),
        "smem_per_block_kib": (163, CUDA_CC + " (8.0: 163 KB per block)"),
        "registers_per_sm_kib": (256, CUDA_CC + " (64K 32-bit registers per SM)"),
        "warps_per_sm": (64, CUDA_CC + " (Table 30: 8.0, 64 resident warps per SM)"),
        "bf16_dense_tflops": (312, "A100 datasheet (BF16 312 TFLOPS, 624 with sparsity)"),
    },
    "l40s": {
        "sm_count": (142, "L40S datasheet (18,176 CUDA cores, 142 RT cores: one per SM)"),
        "mem_gb": (48, "L40S datasheet (48GB GDDR6 with ECC)"),
        "mem_tb_s": (0.864, "L40S datasheet (864GB/s)"),
        "smem_per_sm_kib": (100, CUDA_CC + " (8.9: 100 KB per SM)"),
        "smem_per_block_kib": (99, CUDA_CC + " (8.6 and 8.9: 99 KB per block)"),
        "registers_per_sm_kib": (256, CUDA_CC + "; Ada whitepaper (256 KB register file per SM)"),
        "warps_per_sm": (48, CUDA_CC + " (Table 30: 8.9, 48 resident warps per SM)"),
        "bf16_dense_tflops": (362, "L40S datasheet (BF16 362.05 | 733 with sparsity)"),
        "fp8_dense_tflops": (733, "L40S datasheet (FP8 733 | 1,466 with sparsity)"),
    },
    "rtx4090": {
        "sm_count": (128, "Ada whitepaper; deviceQuery in pytorch/pytorch#87115 (128 multiprocessors)"),
        "mem_gb": (24, "RTX 4090 specifications (24 GB GDDR6X)"),
        "mem_tb_s": (1.008, "Ada whitepaper (1008 GB/s)"),
        "l2_mb": (72, "Ada whitepaper (72 MB of the full AD102's 96 MB)"),
        "smem_per_sm_kib": (100, CUDA_CC + " (8.9: 100 KB per SM)"),
        "smem_per_block_kib": (99, CUDA_CC + " (8.9: 99 KB per block)"),
        "registers_per_sm_kib": (256, CUDA_CC + "; Ada whitepaper"),
        "warps_per_sm": (48, CUDA_CC + " (Table 30: 8.9, 48 resident warps per SM)"),
    },
    "rtx5090": {
        "sm_count": (170, "deviceQuery in NVIDIA/nccl#1637 (170 multiprocessors, CC 12.0)"),
        "mem_gb": (32, "RTX 5090 specifications (32 GB GDDR7)"),
        "mem_tb_s": (1.792, "RTX 5090 specifications (1,792 GB/s)"),
        "l2_mb": (96, "deviceQuery in NVIDIA/nccl#1637 (L2 100663296 bytes)"),
        "smem_per_sm_kib": (100, "deviceQuery in NVIDIA/nccl#1637 (102400 bytes per multiprocessor)"),
        "smem_per_block_kib": (99, "Blackwell Tuning Guide (12.0: 99 KB per block); pytorch/pytorch#161376"),
        "registers_per_sm_kib": (256, "Blackwell Tuning Guide (64K 32-bit registers per SM)"),
        "warps_per_sm": (48, CUDA_CC + " (Table 30: 12.x, 48 resident warps per SM)"),
    },
    "mi300x": {
        "sm_count": (304, "ROCm GPU specifications (304 CUs, 38 per XCD)"),
        "mem_gb": (192, "MI300X data sheet; ROCm GPU specifications (192 GiB VRAM)"),
        "mem_tb_s": (5.3, "MI300X data sheet (5.3 TB/s)"),
        "l2_mb": (32, "ROCm GPU specifications (32 MiB L2, 4 per XCD)"),
        "smem_per_block_kib": (64, "ROCm GPU specifications (LDS 64 KiB)"),
        "registers_per_sm_kib": (512, "ROCm GPU specifications (VGPR file 512 KiB)"),
        "bf16_dense_tflops": (1307.4, "MI300X data sheet (peak FP16/BF16 1307.4 TFLOPS dense)"),
        "fp8_dense_tflops": (2614.9, "MI300X data sheet (peak FP8 2614.9 TFLOPS dense)"),
    },
    "h100": {
        "sm_count": (132, "Hopper architecture in-depth (H100 SXM5: 132 SMs)"),
        "mem_gb": (80, "H100 product page (80GB)"), "mem_tb_s": (3.35, "H100 product page (3.35TB/s)"),
        "l2_mb": (50, "Hopper architecture in-depth (50 MB L2)"),
        "smem_per_sm_kib": (228, CUDA_CC + " (9.0)"), "smem_per_block_kib": (227, CUDA_CC + " (9.0)"),
        "registers_per_sm_kib": (256, CUDA_CC), "bf16_dense_tflops": (989, "H100 product page (1,979 sparse)"),
        "warps_per_sm": (64, CUDA_CC + " (Table 30: 9.0, 64 resident warps per SM)"),
        "fp8_dense_tflops": (1979, "H100 product page (3,958 sparse)"),
    },
    "h200": {
        "sm_count": (132, "inferred from H100 SXM5 (same GH100 compute), see h200/overview.md"),
        "mem_gb": (141, "H200 product page (141GB HBM3e)"), "mem_tb_s": (4.8, "H200 product page (4.8TB/s)"),
        "l2_mb": (50, "inferred from H100 SXM5, see h200/overview.md"),
        "smem_per_sm_kib": (228, CUDA_CC + " (9.0)"), "smem_per_block_kib": (227, CUDA_CC + " (9.0)"),
        "registers_per_sm_kib": (256, CUDA_CC), "bf16_dense_tflops": (989, "H200 product page (1,979 sparse)"),
        "warps_per_sm": (64, CUDA_CC + " (Table 30: 9.0, 64 resident warps per SM)"),
        "fp8_dense_tflops": (1979, "H200 product page (3,958 sparse)"),
        "measured_copy_tb_s": (4.25, "measured on this project's H200 (bench/compare.py, 2026-12-02)"),
        "measured_bf16_matmul_tflops": (740, "the device machine's published measurement (690-790)"),
    },
    "b200": {
        "sm_count": (148, "see b200/overview.md"), "mem_gb": (180, "HGX B200 datasheet column (180 GB)"),
        "mem_tb_s": (7.7, "HGX B200 datasheet column (7.7 TB/s)"), "l2_mb": (126, "Blackwell Tuning Guide (126 MB)"),
        "smem_per_sm_kib": (228, "Blackwell Tuning Guide (10.0: 228 KB)"),
        "smem_per_block_kib": (227, "Blackwell Tuning Guide (10.0: 227 KB)"),
        "registers_per_sm_kib": (256, "Blackwell Tuning Guide (64K registers)"),
        "warps_per_sm": (64, CUDA_CC + " (Table 30: 10.0, 64 resident warps per SM)"),
        "tmem_per_sm_kib": (256, "see b200/blackwell.md (TMEM 256 KB per SM)"),
        "bf16_dense_tflops": (2250, "see b200/overview.md"), "fp8_dense_tflops": (4500, "see b200/overview.md"),
        "fp4_dense_tflops": (9000, "see b200/overview.md"),
    },
}

# pack id -> (target, warp size, must be present, must be ABSENT, source of the absences)
FACTS = {
    "a100": ("sm_80", 32, {"mma.sync", "cp.async"}, {"fp8-mma", "tma", "wgmma", "clusters", "tcgen05", "tmem"},
             CUDA_CC + "; A100 datasheet lists no FP8 rate"),
    "l40s": ("sm_89", 32, {"mma.sync", "cp.async", "fp8-mma"}, {"tma", "wgmma", "clusters", "tcgen05", "tmem", "fp4-mma"},
             CUDA_CC + " (TMA, clusters, wgmma are 9.0+); L40S datasheet (FP8)"),
    "rtx4090": ("sm_89", 32, {"mma.sync", "cp.async", "fp8-mma"}, {"tma", "wgmma", "clusters", "tcgen05", "tmem", "fp4-mma"},
                CUDA_CC + "; Ada whitepaper"),
    "rtx5090": ("sm_120a", 32, {"mma.sync", "tma", "fp8-mma", "fp4-mma", "block-scaled-mma"},
                {"tcgen05", "tmem", "2cta-mma", "wgmma"},
                "modular/modular#5707; triton-lang/triton#6680 (sm_120 uses mma.sync, not tcgen05)"),
    "mi300x": ("gfx942", 64, {"mfma", "fp8-mma"},
               {"mma.sync", "cp.async", "tma", "wgmma", "tcgen05", "tmem", "clusters", "fp4-mma", "fp6-mma", "block-scaled-mma"},
               "ROCm GPU specifications (gfx942, wavefront 64); AMD matrix-core blog (FP4/FP6, block scaling: CDNA4)"),
    "h200": ("sm_90a", 32, {"tma", "wgmma", "clusters", "fp8-mma"}, {"tcgen05", "tmem", "fp4-mma"}, "h200/hopper.md"),
    "b200": ("sm_100a", 32, {"tcgen05", "tmem", "tma", "fp4-mma"}, {"wgmma"}, "b200/blackwell.md"),
}

# How each feature is written in prose, to find it in a pack's markdown.
WORDS = {"wgmma": r"wgmma", "tma": r"\bTMA\b", "tcgen05": r"tcgen05", "tmem": r"\bTMEM\b",
         "clusters": r"\bclusters?\b", "fp8-mma": r"\bFP8\b", "fp4-mma": r"\bFP4\b", "mfma": r"\bMFMA\b"}


def hw_pack(pid):
    return load_pack(BUILTIN_PACKS / "hardware" / pid, "builtin")


HARDWARE_IDS = sorted(p.name for p in (BUILTIN_PACKS / "hardware").iterdir() if (p / "pack.toml").is_file())


def test_every_builtin_hardware_pack_is_in_the_figures_table():
    assert set(HARDWARE_IDS) == set(FIGURES), "a hardware pack without its figures in FIGURES, or the reverse"


@pytest.mark.parametrize("pid", sorted(FIGURES))
def test_pack_figures_match_the_sourced_table(pid):
    specs = hw_pack(pid).raw.get("specs", {})
    table = FIGURES[pid]
    assert set(specs) == set(table), f"{pid}: figures without a source here: {set(specs) ^ set(table)}"
    for key, (value, source) in table.items():
        assert source and specs[key] == pytest.approx(value), f"{pid} {key}: pack {specs[key]} vs {value} ({source})"


@pytest.mark.parametrize("pid", sorted(FIGURES))
def test_every_pack_names_its_sources_and_has_a_hardware_table(pid):
    p = hw_pack(pid)
    assert p.sources and isinstance(p.raw.get("hardware"), dict)
    text = p.content()
    if pid not in ("h100", "h200", "b200"):  # the new packs cite per row, with keys listed at the end
        keys = set(re.findall(r"^- ([A-Z0-9][A-Z0-9-]+):", text, re.M))
        key = r"[A-Z][A-Z0-9]*-[A-Z0-9-]+"  # every source key has a dash: A100-DS, CUDA-CC, PT-87115
        cited = {k for part in re.findall(r"\[src: ([^\]]+)\]", text) for k in re.findall(key, part)}
        cited |= {k for row in re.findall(r"^\|[^|]+\|[^|]+\| ([^|]+) \|$", text, re.M) for k in re.findall(key, row)}
        assert keys and cited and cited <= keys, f"{pid}: cited keys with no source line: {cited - keys}"


@pytest.mark.parametrize("pid", sorted(FACTS))
def test_what_the_chip_lacks_is_stated_absent(pid):
    arch, warp, present, absent, source = FACTS[pid]
    hw = hw_pack(pid).raw["hardware"]
    assert (hw["arch"], hw["warp_size"]) == (arch, warp)
    assert present <= set(hw["features"]), f"{pid}: missing {present - set(hw['features'])} ({source})"
    assert absent <= set(hw["absent"]), f"{pid}: not stated absent: {absent - set(hw['absent'])} ({source})"


@pytest.mark.parametrize("pid", sorted(FACTS))
def test_prompt_never_offers_an_absent_feature_as_available(pid):
    p = hw_pack(pid)
    text, cut = render_packs([p], budget_tokens=200_000)
    assert not cut
    hw = p.raw["hardware"]
    available = next(line for line in text.splitlines() if line.startswith("Available: "))
    absent_line = next(line for line in text.splitlines() if line.startswith("ABSENT on this GPU"))
    for f in hw["absent"]:
        assert re.search(rf"(^|[ (]){re.escape(f)} \(", absent_line), f"{pid}: {f} not said absent"
        assert not re.search(rf"(^|[ ;:]){re.escape(f)} \(", available), f"{pid}: {f} offered as available"
    # The prose's "What ... HAS" sections never mention an absent feature either.
    has_sections = re.findall(r"^## What [^\n]*HAS\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert has_sections or pid == "b200", pid  # b200's prose has a has/lacks table instead
    for f in hw["absent"]:
        if f in WORDS:
            for sec in has_sections:
                assert not re.search(WORDS[f], sec), f"{pid}: {f} appears under a HAS heading"


def test_l40s_prompt_says_wgmma_is_absent_and_never_available():
    text, _ = render_packs([hw_pack("l40s")], budget_tokens=200_000)
    for line in text.splitlines():
        if "wgmma" in line.lower():
            assert re.search(r"ABSENT|\bNo\b|\bno\b|not|only|LACKS|from 9\.0|required", line), line
    assert "ABSENT on this GPU, never emit or assume: tma" in text and "wgmma (" in text


def test_summary_names_the_vendors_words():
    amd = summary(hw_pack("mi300x"))
    assert "wavefront size 64" in amd and "304 CUs" in amd and "64 KiB LDS per block" in amd
    assert "CuTe DSL here: not available" in amd
    nv = summary(hw_pack("l40s"))
    assert "warp size 32" in nv and "142 SMs" in nv and "0.864 TB/s" in nv


# -- detection ---------------------------------------------------------------------------------

def builtin_hardware():
    return [hw_pack(p) for p in HARDWARE_IDS]


@pytest.mark.parametrize("name,arch,want", [
    ("NVIDIA H200", "sm_90", "h200"),
    ("NVIDIA H100 80GB HBM3", "sm_90", "h100"),
    ("NVIDIA A100-SXM4-80GB", "sm_80", "a100"),
    ("NVIDIA GeForce RTX 4090", "sm_89", "rtx4090"),
    ("NVIDIA L40S", "sm_89", "l40s"),
    ("NVIDIA GeForce RTX 5090", "sm_120", "rtx5090"),
    ("AMD Instinct MI300X", "gfx942", "mi300x"),
    ("NVIDIA B200", "sm_100", "b200"),
])
def test_torch_device_names_map_to_their_pack(name, arch, want):
    got, why = match_hardware(builtin_hardware(), arch, name)
    assert got == want, why
    assert name in why and arch in why


@pytest.mark.parametrize("name,arch,says", [
    ("NVIDIA A30", "sm_80", "a100 apply to sm_80 but none names 'NVIDIA A30'"),  # sm_80, but not an A100
    ("NVIDIA L40", "sm_89", "l40s, rtx4090 apply to sm_89 but none names 'NVIDIA L40'"),
    ("NVIDIA GH200 480GB", "sm_90", "none names 'NVIDIA GH200 480GB'"),  # GH200 is not "H200"
    ("AMD Instinct MI325X", "gfx942", "mi300x apply to gfx942 but none names"),  # 256 GB, not an MI300X
    ("NVIDIA GeForce RTX 3090", "sm_86", "no hardware pack applies to sm_86"),
    (None, None, "no GPU detected"),
])
def test_unknown_gpus_get_no_pack_and_the_reason(name, arch, says):
    got, why = match_hardware(builtin_hardware(), arch, name)
    assert got is None and says in why


def test_rocm_device_is_read_from_gcn_arch_name(monkeypatch):
    """torch on ROCm answers the CUDA calls; the target must come from gcnArchName, not the
    capability (an MI300X reports (9, 4): sm_94 would match nothing, or worse, an NVIDIA pack)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "AMD Instinct MI300X")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (9, 4))
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i=0: types.SimpleNamespace(gcnArchName="gfx942:sramecc+:xnack-"))
    d = H.detect()
    assert (d.arch, d.name) == ("gfx942", "AMD Instinct MI300X") and "gcnArchName gfx942" in d.how
    assert match_hardware(builtin_hardware(), d.arch, d.name)[0] == "mi300x"


def test_feature_vocabulary_is_what_packs_use():
    used = {f for p in builtin_hardware() for k in ("features", "absent") for f in p.raw["hardware"][k]}
    assert used <= set(FEATURES)
