"""The local device: is PyTorch there, which device does it see, which catalog accelerator is it.

PyTorch is imported inside :func:`import_torch` only.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from types import ModuleType
from typing import Literal

from planner.errors import EXIT_BAD_INPUT, PlannerError
from planner.specs.base import FrozenSpec

INSTALL_HINT = "pip install 'layout[calibrate]'"


class MeasureUnavailableError(PlannerError):
    """``--measure`` cannot run here: no PyTorch, or no GPU (exit 2)."""

    exit_code = EXIT_BAD_INPUT


def import_torch() -> ModuleType:
    """PyTorch, or a one-line error saying how to install it."""
    try:
        import torch
    except ImportError:
        raise MeasureUnavailableError(
            f"--measure needs PyTorch, which is not installed: {INSTALL_HINT}"
        ) from None
    return torch


class DeviceInfo(FrozenSpec):
    """What the measurement runs on."""

    backend: Literal["cuda", "rocm", "cpu"]
    """torch device backend."""
    device_name: str
    """The device as the runtime names it."""
    device_count: int
    """Devices visible."""
    total_memory_bytes: float
    """Memory of device 0 (bytes; 0 for the CPU)."""
    driver_version: str | None = None
    """GPU driver version, when known."""
    cuda_version: str | None = None
    """CUDA / HIP version torch was built with."""
    torch_version: str
    """PyTorch version."""
    capability: tuple[int, int] | None = None
    """CUDA compute capability of device 0."""


def detect(torch: ModuleType, *, dry_run: bool) -> DeviceInfo:
    """The device to measure: GPU 0 (and its peers), or the CPU for a dry run.

    Raises MeasureUnavailableError when no GPU is visible and this is not a dry run.
    """
    hip = getattr(torch.version, "hip", None)
    runtime = torch.version.cuda or (f"hip {hip}" if hip else None)
    if dry_run:
        cpu = platform.processor() or platform.machine() or "cpu"
        return DeviceInfo(
            backend="cpu",
            device_name=f"cpu ({cpu}, {torch.get_num_threads()} threads)",
            device_count=1,
            total_memory_bytes=0.0,
            cuda_version=runtime,
            torch_version=torch.__version__,
        )
    if not torch.cuda.is_available():
        raise MeasureUnavailableError(
            "no GPU is visible to PyTorch (torch.cuda.is_available() is False); "
            "--dry-run runs the pipeline on the CPU instead"
        )
    props = torch.cuda.get_device_properties(0)
    return DeviceInfo(
        backend="rocm" if hip else "cuda",
        device_name=torch.cuda.get_device_name(0),
        device_count=torch.cuda.device_count(),
        total_memory_bytes=float(props.total_memory),
        driver_version=driver_version(),
        cuda_version=runtime,
        torch_version=torch.__version__,
        capability=None if hip else tuple(torch.cuda.get_device_capability(0)),
    )


def driver_version() -> str | None:
    """The NVIDIA driver version from ``nvidia-smi`` (None when it is not there)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.strip().splitlines()
    return first[0].strip() if first else None


# Device-name patterns -> catalog accelerator, most specific first. Parts the catalog lacks
# (H100 PCIe / NVL, H200 NVL, L40S, the GH200's 144 GB and the H20's 141 GB variants, ...) match nothing: the
# user names the accelerator.
_NAMES: tuple[tuple[str, str], ...] = (
    (r"\bGB300\b", "gb300"),
    (r"\bGB200\b", "gb200"),
    (r"\bB300\b", "b300"),
    (r"\bB200\b", "b200"),
    (r"\bGH200\b(?!.*\b144\s?G)", "gh200"),
    (r"\bH200\b(?!.*\bNVL\b)", "h200_sxm"),
    (r"\bH800\b", "h800_sxm"),
    (r"\bH20\b(?!-3e)(?!.*\b141\s?GB\b)", "h20"),
    (r"\bH100\b(?!.*\b(PCIe|NVL)\b)", "h100_sxm"),
    (r"\bA100\b.*\b80\s?GB\b", "a100_80gb"),
    (r"\bA100\b", "a100_40gb"),
    (r"\bMI355X\b", "mi355x"),
    (r"\bMI325X\b", "mi325x"),
    (r"\bMI300X\b", "mi300x"),
)


def guess_accelerator(device_name: str) -> str | None:
    """The catalog accelerator a device name denotes, or None.

    >>> guess_accelerator("NVIDIA H100 80GB HBM3")
    'h100_sxm'
    >>> guess_accelerator("NVIDIA A100-SXM4-80GB")
    'a100_80gb'
    >>> guess_accelerator("NVIDIA H100 PCIe") is None
    True
    >>> guess_accelerator("NVIDIA GH200 480GB"), guess_accelerator("NVIDIA H20")
    ('gh200', 'h20')
    >>> guess_accelerator("NVIDIA H200 NVL") is None  # the 600 W PCIe card, not the SXM part
    True
    """
    for pattern, name in _NAMES:
        if re.search(pattern, device_name, flags=re.IGNORECASE):
            return name
    return None
