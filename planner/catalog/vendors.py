"""Where a profile runs: the ``vendors`` and ``default_on`` lists of the training framework
(:class:`planner.specs.framework.FrameworkSpec`) and serving engine
(:class:`planner.specs.engine.ServingEngineSpec`) profiles, matched case-insensitively against
:attr:`planner.specs.hardware.AcceleratorSpec.vendor`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol


class VendorProfile(Protocol):
    """A catalog profile that says which accelerators it runs on."""

    @property
    def vendors(self) -> tuple[str, ...]: ...

    @property
    def default_on(self) -> tuple[str, ...]: ...


def lists(vendors: Sequence[str], vendor: str) -> bool:
    """Whether ``vendors`` names ``vendor``, case aside.

    >>> lists(("NVIDIA", "AMD"), "amd"), lists(("NVIDIA",), "Google")
    (True, False)
    """
    return vendor.lower() in (v.lower() for v in vendors)


def default_profile(
    profiles: Mapping[str, VendorProfile], vendor: str | None, fallback: str
) -> str:
    """The profile whose ``default_on`` lists ``vendor`` (the first by name), else ``fallback``."""
    if vendor is not None:
        for name, profile in profiles.items():
            if lists(profile.default_on, vendor):
                return name
    return fallback


def refusal(
    profile: VendorProfile, vendor: str, part: str, profiles: Mapping[str, VendorProfile], flag: str
) -> str:
    """Why ``profile`` cannot run on ``vendor``'s ``part`` ('' if it can), naming the
    ``profiles`` that do as ``flag`` values. A profile with no vendors runs anywhere, and a
    vendor no profile lists (hardware added as a YAML file) is not refused: nothing is known
    to refuse there."""
    if not profile.vendors or lists(profile.vendors, vendor):
        return ""
    others = [name for name, p in profiles.items() if lists(p.vendors, vendor)]
    if not others:
        return ""
    return (
        f"runs on {' and '.join(profile.vendors)} accelerators, not on {vendor}'s {part}; "
        f"{flag} {' or '.join(others)} runs there"
    )
