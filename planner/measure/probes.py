"""Single-device probes: GEMMs (bf16, fp8 via ``torch._scaled_mm``), causal
``scaled_dot_product_attention`` and a large copy, each timed as seconds per call.

Every function takes the ``torch`` module as its first argument: PyTorch is never imported at
module level. On CUDA / ROCm calls are timed with CUDA events around a loop of calls; on the CPU
(``--dry-run``) with ``time.perf_counter``. The time of a probe is the best of a few repeats.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from planner.specs.formats import NumberFormat

REPEATS = 3
"""Timed repeats per probe; the best one is kept."""
WARMUP_CALLS = 2
"""Untimed calls before timing (allocator, kernel selection, clocks)."""
MAX_ITERS = 10_000
"""Calls per timed repeat at most."""


def synchronize(torch: ModuleType, device: Any) -> None:
    """Wait for the device's queued work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(
    torch: ModuleType, device: Any, fn: Callable[[], object], *, target_s: float
) -> float:
    """Seconds per call of ``fn``: warm up, size the loop to ~target_s over all repeats, keep
    the best repeat."""
    for _ in range(WARMUP_CALLS):
        fn()
    synchronize(torch, device)
    start = time.perf_counter()
    fn()
    synchronize(torch, device)
    once = max(time.perf_counter() - start, 1e-7)
    iters = int(min(MAX_ITERS, max(1, target_s / REPEATS / once)))
    best = float("inf")
    for _ in range(REPEATS):
        if device.type == "cuda":
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            elapsed = begin.elapsed_time(end) / 1e3
        else:
            start = time.perf_counter()
            for _ in range(iters):
                fn()
            elapsed = time.perf_counter() - start
        best = min(best, elapsed / iters)
    return best


def fp8_dtype(torch: ModuleType, device: Any) -> tuple[Any | None, str]:
    """(an fp8 E4M3 dtype ``torch._scaled_mm`` runs on ``device``, '') or (None, why not)."""
    if device.type == "cuda" and not getattr(torch.version, "hip", None):
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) < (8, 9):
            return None, f"fp8 GEMMs need compute capability 8.9+, device has {major}.{minor}"
    if not hasattr(torch, "_scaled_mm"):
        return None, f"torch {torch.__version__} has no torch._scaled_mm"
    reason = "no fp8 dtype"
    for name in ("float8_e4m3fn", "float8_e4m3fnuz"):
        dtype = getattr(torch, name, None)
        if dtype is None:
            continue
        try:
            _scaled_mm_call(torch, device, dtype, 32, 32, 32)()
            synchronize(torch, device)
        except Exception as exc:  # any failure means: not supported here
            reason = f"torch._scaled_mm({name}) failed: {type(exc).__name__}: {str(exc)[:120]}"
            continue
        return dtype, ""
    return None, reason


def _scaled_mm_call(
    torch: ModuleType, device: Any, dtype: Any, m: int, k: int, n: int
) -> Callable[[], object]:
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16).to(dtype)
    w = torch.randn(n, k, device=device, dtype=torch.bfloat16).to(dtype)
    b = w.t()  # column-major (k x n), as _scaled_mm wants its second operand
    scale = torch.ones((), device=device, dtype=torch.float32)

    def call() -> object:
        return torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)

    return call


def gemm_seconds(
    torch: ModuleType,
    device: Any,
    fmt: NumberFormat,
    m: int,
    k: int,
    n: int,
    *,
    target_s: float,
    fp8: Any = None,
) -> float:
    """Seconds of one (m x k) @ (k x n) GEMM with inputs in ``fmt`` (bf16, or fp8 with the
    dtype from :func:`fp8_dtype`)."""
    if fmt == NumberFormat.BF16:
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
        out = torch.empty(m, n, device=device, dtype=torch.bfloat16)

        def call() -> object:
            return torch.matmul(a, b, out=out)

    elif fmt == NumberFormat.FP8 and fp8 is not None:
        call = _scaled_mm_call(torch, device, fp8, m, k, n)
    else:
        raise ValueError(f"no GEMM probe for {fmt}")
    return time_call(torch, device, call, target_s=target_s)


def attention_seconds(
    torch: ModuleType,
    device: Any,
    batch: int,
    heads: int,
    seq_len: int,
    head_dim: int,
    *,
    target_s: float,
) -> float:
    """Seconds of one causal ``scaled_dot_product_attention`` forward in bf16."""
    shape = (batch, heads, seq_len, head_dim)
    q, k, v = (torch.randn(shape, device=device, dtype=torch.bfloat16) for _ in range(3))
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def call() -> object:
        return sdpa(q, k, v, is_causal=True)

    return time_call(torch, device, call, target_s=target_s)


def copy_seconds(torch: ModuleType, device: Any, num_bytes: int, *, target_s: float) -> float:
    """Seconds of one device-to-device copy of a ``num_bytes`` buffer (reads and writes it)."""
    src = torch.ones(num_bytes, device=device, dtype=torch.uint8)
    dst = torch.empty_like(src)

    def call() -> object:
        return dst.copy_(src)

    return time_call(torch, device, call, target_s=target_s)
