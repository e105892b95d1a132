"""Why a runner-up loses, and why nothing fits."""

from __future__ import annotations

from planner.search.space import CandidateSet
from planner.specs.result import Plan
from planner.units import format_seconds

TERM_WORDS: dict[str, str] = {
    "compute": "compute",
    "tp_comm": "TP communication",
    "cp_comm": "CP communication",
    "ep_comm": "EP all-to-all",
    "pp_bubble": "pipeline bubble",
    "pp_comm": "pipeline sends",
    "dp_comm": "exposed DP communication",
    "optimizer": "optimizer step",
}
_DIMS: tuple[str, ...] = ("tp", "pp", "vpp", "dp", "ep", "mbs", "recompute", "zero")


def layout_changes(alt: Plan, best: Plan) -> str:
    """The fields where ``alt`` differs from ``best``, e.g. 'TP 8 (vs 4), PP 1 (vs 2)'."""
    parts = []
    for dim in _DIMS:
        a, b = getattr(alt.layout, dim), getattr(best.layout, dim)
        if a != b:
            parts.append(
                f"{dim.upper() if dim in ('tp', 'pp', 'vpp', 'dp', 'ep') else dim} {a} (vs {b})"
            )
    return ", ".join(parts) or "same degrees"


def why_not(alt: Plan, best: Plan) -> str:
    """One sentence: how much slower, and the breakdown terms that account for it."""
    delta = alt.step_time_s - best.step_time_s
    pct = 100.0 * delta / best.step_time_s if best.step_time_s else 0.0
    diffs = sorted(
        ((alt.breakdown_s.get(k, 0.0) - best.breakdown_s.get(k, 0.0), k) for k in alt.breakdown_s),
        reverse=True,
    )
    worse = [f"{TERM_WORDS.get(k, k)} +{format_seconds(d)}" for d, k in diffs if d > 1e-6][:2]
    gains = [(d, k) for d, k in diffs if d < -1e-6]
    reason = "; ".join(worse) or "no single term"
    offset = ""
    if gains:
        gain, key = gains[-1]
        offset = f" (it saves {format_seconds(-gain)} of {TERM_WORDS.get(key, key)})"
    return (
        f"{layout_changes(alt, best)}: {format_seconds(delta)} slower per step ({pct:.1f}%): "
        f"{reason}{offset}"
    )


def infeasible_message(candidates: CandidateSet, *, model: str, cluster: str) -> str:
    """Why nothing fits: the closest layout's binding limit, and the rejection histogram."""
    counts = ", ".join(
        f"{v} {k}" for k, v in sorted(candidates.rejection_counts.items(), key=lambda kv: -kv[1])
    )
    if not candidates.rejections:
        return f"no layout of '{model}' on {cluster} to consider"
    closest = candidates.rejections[0]
    hint = ""
    if closest.reason == "memory":
        hint = "; try more GPUs, a larger pp or tp, full recompute, or a smaller seq-len"
    return (
        f"nothing fits '{model}' on {cluster}: closest {closest.detail}{hint} "
        f"[{candidates.num_enumerated} layouts rejected: {counts}]"
    )
