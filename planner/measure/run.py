"""``layout calibrate --measure``: run the probes within a time budget, fit, return the overlay.

The grids are fixed (:data:`FULL` on a GPU, :data:`DRY_RUN` on the CPU); each phase has a share
of the budget and skips what is left of its grid when its share is spent (listed under
``measurements.skipped``). A progress bar goes to stderr.
"""

from __future__ import annotations

import datetime
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

from planner.catalog import accelerator_names, load_accelerator, load_system, system_names
from planner.catalog.store import suggest
from planner.errors import SpecError
from planner.measure.device import (
    DeviceInfo,
    MeasureUnavailableError,
    detect,
    guess_accelerator,
    import_torch,
)
from planner.measure.fit import MeasuredFit, attention_flops, fit_measurements, sig
from planner.specs.formats import NumberFormat
from planner.specs.hardware import (
    AcceleratorSpec,
    AttentionMeasurement,
    CollectiveMeasurement,
    CopyMeasurement,
    GemmMeasurement,
    MeasurementRecord,
    SystemSpec,
)

DRY_RUN_ACCELERATOR = "h100_sxm"
"""The catalog accelerator whose peaks a dry run divides by, unless --accelerator names one."""

MiB = 2**20

_LLM_KN = (
    (4096, 6144),  # Llama-3-8B qkv
    (4096, 4096),  # 8B attention out
    (4096, 28672),  # 8B gate + up
    (14336, 4096),  # 8B down
    (8192, 10240),  # Llama-3-70B qkv
    (8192, 57344),  # 70B gate + up
    (28672, 8192),  # 70B down
)


@dataclass(frozen=True)
class Grid:
    """What one run measures, and how long it may take."""

    gemm: tuple[tuple[int, int, int], ...]
    """(m, k, n) GEMM shapes, run in bf16 and, where supported, fp8."""
    attention: tuple[tuple[int, int, int, int], ...]
    """(batch, heads, seq_len, head_dim) causal attention shapes."""
    copies: tuple[int, ...]
    """Copy buffer sizes (bytes)."""
    collective_sizes: tuple[int, ...]
    """Collective message sizes (bytes)."""
    target_s: float
    """Timed seconds per probe (over its repeats)."""
    budget_s: float
    """Seconds for the single-device probes."""
    collective_timeout_s: float
    """Seconds for the collectives (spawning the ranks included)."""
    expected_s: float
    """About how long the whole run takes (said at the start)."""


FULL = Grid(
    gemm=(
        tuple((s, s, s) for s in (256, 512, 1024, 2048, 4096, 8192))
        + tuple((m, 8192, 8192) for m in (16, 128, 512))
        + tuple((m, k, n) for m in (2048, 8192) for k, n in _LLM_KN)
    ),
    attention=tuple((16384 // t, 32, t, 128) for t in (1024, 2048, 4096, 8192)),
    copies=(256 * MiB, 1024 * MiB, 2048 * MiB),
    collective_sizes=tuple(MiB * 4**i for i in range(6)),  # 1 MiB .. 1 GiB
    target_s=0.25,
    budget_s=150.0,
    collective_timeout_s=120.0,
    expected_s=120.0,
)
"""The GPU grid: about two to four minutes on one 8-GPU node."""

DRY_RUN = Grid(
    gemm=(*((s, s, s) for s in (32, 64, 128, 256)), (8, 256, 256), (128, 256, 512)),
    attention=((2, 4, 128, 32), (1, 4, 256, 32)),
    copies=(1 * MiB, 4 * MiB, 16 * MiB),
    collective_sizes=(64 * 1024, 256 * 1024, 1 * MiB),
    target_s=0.02,
    budget_s=60.0,
    collective_timeout_s=120.0,
    expected_s=15.0,
)
"""The CPU grid of ``--dry-run``: tiny shapes, a few seconds (plus spawning two gloo ranks)."""

_PHASE_SHARE = {"hbm": 0.1, "gemm": 0.75, "attention": 1.0}
"""Cumulative share of the probe budget at which each phase must stop."""


class Progress:
    """A progress bar on stderr when it is a terminal; quiet otherwise (notes still print)."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total, self.done = max(1, total), 0
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.phase = ""

    def step(self, phase: str, label: str, count: int = 1) -> None:
        """Count ``count`` finished probes of ``phase``."""
        self.done = min(self.total, self.done + count)
        if self.tty:
            width = 30
            filled = width * self.done // self.total
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(
                f"\r[{bar}] {self.done}/{self.total} {phase} {label}"[:100].ljust(100)
            )
        self.phase = phase
        self.stream.flush()

    def note(self, text: str) -> None:
        """A line of its own."""
        if self.tty:
            self.stream.write("\r" + " " * 100 + "\r")
        self.stream.write(f"layout calibrate: note: {text}\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def system_for(accelerator: str) -> SystemSpec | None:
    """The catalog system built from ``accelerator`` (HGX boards first), whose links the
    collectives are divided by."""
    names = sorted(system_names(), key=lambda s: (not s.startswith("hgx_"), s))
    for name in names:
        system = load_system(name)
        if system.accelerator == accelerator:
            return system
    return None


def resolve_accelerator(name: str | None, info: DeviceInfo, *, dry_run: bool) -> AcceleratorSpec:
    """The catalog accelerator whose peaks the measurements are divided by."""
    if name is None:
        name = DRY_RUN_ACCELERATOR if dry_run else guess_accelerator(info.device_name)
    if name is None:
        raise SpecError(
            f"cannot tell which catalog accelerator '{info.device_name}' is; name it with "
            f"--accelerator (one of: {', '.join(accelerator_names())})"
        )
    if name not in accelerator_names():
        raise SpecError(
            f"unknown accelerator '{name}'{suggest(name, accelerator_names())} "
            f"(one of: {', '.join(accelerator_names())})"
        )
    return load_accelerator(name)


def measure(
    *,
    accelerator: str | None = None,
    dry_run: bool = False,
    stream: TextIO | None = None,
    grid: Grid | None = None,
) -> MeasuredFit:
    """Measure the local device (or the CPU for a dry run), fit, return the overlay."""
    torch = import_torch()
    info = detect(torch, dry_run=dry_run)
    acc = resolve_accelerator(accelerator, info, dry_run=dry_run)
    system = system_for(acc.name)
    grid = grid or (DRY_RUN if dry_run else FULL)
    started = time.monotonic()
    date = datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat()
    device = torch.device("cpu") if dry_run else torch.device("cuda", 0)
    if not dry_run:
        torch.cuda.set_device(device)
    skipped: list[str] = []
    formats = [NumberFormat.BF16]
    fp8 = None
    if acc.supports(NumberFormat.FP8):
        fp8, why = _fp8(torch, device)
        if fp8 is not None:
            formats.append(NumberFormat.FP8)
        else:
            skipped.append(f"fp8 GEMMs: {why}")
    else:
        skipped.append(f"fp8 GEMMs: {acc.name} has no fp8 peak in the catalog")
    ranks = 2 if dry_run else min(info.device_count, system.domain_size if system else 8)
    collective_probes = len(grid.collective_sizes) * 3 if ranks > 1 and system else 0
    total = len(grid.copies) + len(grid.gemm) * len(formats) + len(grid.attention)
    progress = Progress(total + collective_probes, stream)
    kind = "dry run on the CPU" if dry_run else f"{info.device_name} x{info.device_count}"
    limit = grid.budget_s + grid.collective_timeout_s
    progress.note(
        f"{kind}: fractions of {acc.name}'s peaks; typically {grid.expected_s:.0f} s, "
        f"at most {limit:.0f} s"
    )
    probes = _Probes(torch, device, grid, started, progress, skipped)
    hbm = probes.copies()
    gemm = probes.gemms(formats, fp8)
    attention = probes.attention()
    del probes
    if not dry_run:
        torch.cuda.empty_cache()
    collectives = _collectives(grid, ranks, system, dry_run, progress, skipped)
    progress.close()
    if not (gemm or attention or hbm or collectives):
        raise MeasureUnavailableError(f"nothing could be measured: {'; '.join(skipped)}")
    meas = MeasurementRecord(
        date=date,
        device_name=info.device_name,
        device_count=info.device_count,
        backend=info.backend,
        dry_run=dry_run,
        accelerator=acc.name,
        system=system.name if system else None,
        driver_version=info.driver_version,
        cuda_version=info.cuda_version,
        torch_version=info.torch_version,
        duration_s=round(time.monotonic() - started, 3),
        gemm=gemm,
        attention=attention,
        hbm=hbm,
        collectives=collectives,
        skipped=skipped,
    )
    return fit_measurements(meas, acc, system, date=date[:10])


def _fp8(torch: Any, device: Any) -> tuple[Any, str]:
    from planner.measure.probes import fp8_dtype

    return fp8_dtype(torch, device)


class _Probes:
    """The single-device phases, each stopping at its share of the budget."""

    def __init__(
        self,
        torch: Any,
        device: Any,
        grid: Grid,
        started: float,
        progress: Progress,
        skipped: list[str],
    ) -> None:
        self.torch, self.device, self.grid = torch, device, grid
        self.started, self.progress, self.skipped = started, progress, skipped

    def _over(self, phase: str, left: int) -> bool:
        deadline = self.started + _PHASE_SHARE[phase] * self.grid.budget_s
        if time.monotonic() <= deadline:
            return False
        self.skipped.append(f"{phase}: {left} probe(s) left out by the time budget")
        self.progress.step(phase, "time budget spent", left)
        return True

    def _timed(self, phase: str, label: str, call: Any) -> float | None:
        """``call()``'s seconds, or None (noted under skipped) when the device refuses it, e.g.
        out of memory."""
        try:
            return float(call())
        except RuntimeError as exc:  # torch.OutOfMemoryError and kernel errors
            self.skipped.append(f"{phase} {label}: {type(exc).__name__}: {str(exc)[:120]}")
            self.progress.step(phase, f"{label} failed")
            if self.device.type == "cuda":
                self.torch.cuda.empty_cache()
            return None

    def copies(self) -> list[CopyMeasurement]:
        from planner.measure.probes import copy_seconds

        out = []
        free = self._free_bytes()
        for i, size in enumerate(self.grid.copies):
            if self._over("hbm", len(self.grid.copies) - i):
                break
            if free is not None and 3 * size > free:
                self.skipped.append(f"hbm: {size} B copy does not fit in free device memory")
                self.progress.step("hbm", "too large")
                continue
            seconds = self._timed(
                "hbm",
                f"copy {size} B",
                lambda size=size: copy_seconds(
                    self.torch, self.device, size, target_s=self.grid.target_s
                ),
            )
            if seconds is None:
                continue
            out.append(
                CopyMeasurement(
                    buffer_bytes=size,
                    time_us=sig(seconds * 1e6),
                    GB_per_s=sig(2 * size / seconds / 1e9),
                )
            )
            self.progress.step("hbm", f"copy {size // MiB} MiB")
        return out

    def gemms(self, formats: list[NumberFormat], fp8: Any) -> list[GemmMeasurement]:
        from planner.measure.probes import gemm_seconds

        out = []
        work = [(f, s) for f in formats for s in self.grid.gemm]
        for i, (fmt, (m, k, n)) in enumerate(work):
            if self._over("gemm", len(work) - i):
                break
            seconds = self._timed(
                "gemm",
                f"{fmt} {m}x{k}x{n}",
                lambda fmt=fmt, m=m, k=k, n=n: gemm_seconds(
                    self.torch, self.device, fmt, m, k, n, target_s=self.grid.target_s, fp8=fp8
                ),
            )
            if seconds is None:
                continue
            out.append(
                GemmMeasurement(
                    format=fmt,
                    m=m,
                    k=k,
                    n=n,
                    time_us=sig(seconds * 1e6),
                    TFLOP_per_s=sig(2.0 * m * k * n / seconds / 1e12),
                )
            )
            self.progress.step("gemm", f"{fmt} {m}x{k}x{n}")
        return out

    def attention(self) -> list[AttentionMeasurement]:
        from planner.measure.probes import attention_seconds

        out = []
        for i, (b, h, t, d) in enumerate(self.grid.attention):
            if self._over("attention", len(self.grid.attention) - i):
                break
            seconds = self._timed(
                "attention",
                f"{b}x{h}x{t}x{d}",
                lambda b=b, h=h, t=t, d=d: attention_seconds(
                    self.torch, self.device, b, h, t, d, target_s=self.grid.target_s
                ),
            )
            if seconds is None:
                continue
            probe = AttentionMeasurement(
                batch=b, heads=h, seq_len=t, head_dim=d, time_us=sig(seconds * 1e6), TFLOP_per_s=1
            )
            tflops = attention_flops(probe) / seconds / 1e12
            out.append(probe.model_copy(update={"TFLOP_per_s": sig(tflops)}))
            self.progress.step("attention", f"{b}x{h}x{t}x{d}")
        return out

    def _free_bytes(self) -> float | None:
        if self.device.type != "cuda":
            return None
        free, _total = self.torch.cuda.mem_get_info(self.device)
        return float(free)


def _collectives(
    grid: Grid,
    ranks: int,
    system: SystemSpec | None,
    dry_run: bool,
    progress: Progress,
    skipped: list[str],
) -> list[CollectiveMeasurement]:
    if system is None:
        skipped.append("collectives: no catalog system gives this accelerator's link bandwidth")
        return []
    if ranks < 2:
        skipped.append("collectives: one GPU visible (NCCL bus bandwidth needs two or more)")
        return []
    if not grid.collective_sizes:
        return []
    from planner.measure.collectives import CollectiveTimeoutError, run_collectives

    backend = "gloo" if dry_run else "nccl"
    done = [0]

    def on_progress(count: int) -> None:
        if count > done[0]:
            progress.step("collectives", f"{backend} x{ranks}", count - done[0])
            done[0] = count

    try:
        rows = run_collectives(
            world_size=ranks,
            backend=backend,
            sizes=grid.collective_sizes,
            timeout_s=grid.collective_timeout_s,
            on_progress=on_progress,
        )
    except (CollectiveTimeoutError, RuntimeError, OSError) as exc:
        skipped.append(f"collectives: {exc}")
        progress.note(f"collectives skipped: {exc}")
        return []
    on_progress(len(rows))
    return [
        CollectiveMeasurement(
            link="scale_up",
            op=row["op"],
            ranks=row["ranks"],
            message_bytes=row["message_bytes"],
            time_us=sig(row["time_us"]),
            bus_GB_per_s=sig(row["bus_GB_per_s"]),
        )
        for row in rows
    ]
