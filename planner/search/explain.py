"""Why a runner-up loses, and why nothing fits."""

from __future__ import annotations

from planner.search.rules import ep_experts_rule, pp_layers_rule, tp_heads_rule
from planner.search.space import CP_MIN_TOKENS_PER_RANK, PINNABLE, CandidateSet
from planner.specs.cluster import ClusterSpec
from planner.specs.layout import field_label
from planner.specs.model import ModelSpec
from planner.specs.result import Plan
from planner.specs.workload import TrainWorkload
from planner.units import GiB, format_seconds

TERM_WORDS: dict[str, str] = {
    "compute": "compute",
    "tp_comm": "TP communication",
    "cp_comm": "CP communication",
    "ep_comm": "EP all-to-all",
    "moe_sync": "MoE dispatcher host sync",
    "offload": "activation offload copies",
    "pp_bubble": "pipeline bubble",
    "pp_comm": "pipeline sends",
    "dp_comm": "exposed DP communication",
    "optimizer": "optimizer step",
    "step_sync": "per-step host overhead",
}
_DIMS: tuple[str, ...] = PINNABLE
"""Every layout field a user can pin, in display order."""


def layout_changes(alt: Plan, best: Plan) -> str:
    """The fields where ``alt`` differs from ``best``, e.g. 'TP 8 (vs 4), PP 1 (vs 2)'."""
    parts = []
    for dim in _DIMS:
        a, b = getattr(alt.layout, dim), getattr(best.layout, dim)
        if a != b:
            parts.append(f"{field_label(dim)} {a} (vs {b})")
    return ", ".join(parts) or "same degrees"


TERM_EPSILON_S = 1e-7
"""Breakdown differences below 0.1 us are float noise (the ranking resolves 1 us), not a term
that differs."""


def signed_seconds(delta_s: float) -> str:
    """A time difference with its sign, e.g. '-600 ms' or '+1.20 s'.

    >>> signed_seconds(-0.6)
    '-600 ms'
    """
    return ("-" if delta_s < 0 else "+") + format_seconds(abs(delta_s))


def term_differences(alt: Plan, best: Plan) -> list[tuple[str, float]]:
    """Every breakdown term that differs between ``alt`` and ``best`` with ``alt``'s excess
    (negative where it saves), largest first; they sum to the step-time gap, since each
    breakdown sums to its step time."""
    keys = list(dict.fromkeys([*best.breakdown_s, *alt.breakdown_s]))
    diffs = [(k, alt.breakdown_s.get(k, 0.0) - best.breakdown_s.get(k, 0.0)) for k in keys]
    return sorted(
        ((k, d) for k, d in diffs if abs(d) >= TERM_EPSILON_S), key=lambda kd: -abs(kd[1])
    )


def objective_gap(alt: Plan, best: Plan, objective: str) -> str:
    """How much more ``alt`` spends than ``best`` in the objective's own unit, with the sign
    written as a word: '$0.012 more per million tokens (+2.3%)', '0.41 J more per token
    (+3.0%)', '32 more GPUs (128 vs 96)'; '' for the time objective (the step gap says it)."""
    if objective == "target":
        if alt.num_gpus == best.num_gpus:
            return ""
        more = "more" if alt.num_gpus > best.num_gpus else "fewer"
        return (
            f"{abs(alt.num_gpus - best.num_gpus)} {more} {best.device_noun}s "
            f"({alt.num_gpus} vs {best.num_gpus})"
        )
    if objective not in ("cost", "energy"):
        return ""
    if objective == "cost":
        a, b, unit = alt.usd_per_million_tokens, best.usd_per_million_tokens, "per million tokens"
        amount = f"${abs(a - b):.3g}"
    else:
        a, b, unit = alt.joules_per_token, best.joules_per_token, "per token"
        amount = f"{abs(a - b):.3g} J"
    pct = 100.0 * (a - b) / b if b else 0.0
    return f"{amount} {'more' if a >= b else 'less'} {unit} ({pct:+.1f}%)"


def step_gap(alt: Plan, best: Plan) -> str:
    """The step-time difference with the sign as a word: '2.1 s slower per step (+3.4%)' or
    '1.5 s faster per step (-2.0%)' (a runner-up of a cost objective may be faster)."""
    delta = alt.step_time_s - best.step_time_s
    pct = 100.0 * delta / best.step_time_s if best.step_time_s else 0.0
    word = "slower" if delta >= 0 else "faster"
    return f"{format_seconds(abs(delta))} {word} per step ({pct:+.1f}%)"


def why_not(alt: Plan, best: Plan, objective: str = "time") -> str:
    """One sentence: how much more the runner-up spends in the objective's unit (cost, energy,
    GPUs), how much slower (or faster) its step is, whether that is a tie (inside the best
    plan's uncertainty band), and every breakdown term that differs, signed, which sum to the
    step-time gap.

    E.g. 'PP 8 (vs 4): 181 ms slower per step (+3.2%): pipeline bubble +240 ms, TP
    communication +12 ms, exposed DP communication -71 ms'.
    """
    gap = step_gap(alt, best)
    pct = (
        100.0 * (alt.step_time_s - best.step_time_s) / best.step_time_s if best.step_time_s else 0.0
    )
    band = best.uncertainty_pct
    if band is not None and abs(pct) <= band:
        gap = f"a tie: {gap} is inside the prediction's +/-{band:.0f}% band"
    terms = [f"{TERM_WORDS.get(k, k)} {signed_seconds(d)}" for k, d in term_differences(alt, best)]
    lead = objective_gap(alt, best, objective)
    if lead and alt.num_gpus != best.num_gpus and objective != "target":
        lead += f" on {alt.num_gpus} {best.device_noun}s (vs {best.num_gpus})"
    head = f"{layout_changes(alt, best)}: " + (f"{lead}; " if lead else "")
    return f"{head}{gap}: {', '.join(terms) or 'no term differs'}"


def rejection_histogram(counts: dict[str, int]) -> str:
    """Rejected layouts by reason, most frequent first: '902 memory, 280 divisibility'.

    >>> rejection_histogram({"batch": 2, "memory": 5})
    '5 memory, 2 batch'
    """
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


LEAN_STATE: dict[str, tuple[str, str]] = {
    "optimizer_state_dtype": ("bf16", "--optimizer-state"),
    "grad_reduce_dtype": ("bf16", "--grad-reduce"),
}
"""Workload field -> (value, the flag that sets it): settings that shrink the training state
without changing the layout, Adam's moments and the gradient buffer in bf16 (Megatron-LM
``--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`` and bf16
gradient reduction, as NVIDIA's recipes run)."""


def lean_state_hint(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    candidates: CandidateSet,
    capacity_bytes: float,
) -> str:
    """What the closest layout needs with :data:`LEAN_STATE` when that makes it fit and the
    workload does not already say so, for a framework that exports Megatron-LM arguments (the
    precision-aware optimizer is Megatron-LM's); '' otherwise. The figure is the cost model's,
    re-estimated with the settings changed, so the hint is a fact, not a guess."""
    from planner.catalog.frameworks import load_framework
    from planner.cost.step import estimate_memory

    if not candidates.rejections or candidates.rejections[0].reason != "memory":
        return ""
    if load_framework(workload.framework).export_format not in ("megatron", "bridge"):
        return ""
    change = {k: v for k, (v, _) in LEAN_STATE.items() if getattr(workload, k) != v}
    if not change:
        return ""
    lean = workload.model_copy(update=change)
    layout = candidates.rejections[0].layout
    _, memories = estimate_memory(model, lean, layout)
    peak = max(m.total for m in memories)
    if peak > capacity_bytes:
        return ""
    flags = " ".join(f"{LEAN_STATE[k][1]} {v}" for k, v in change.items())
    return f"; with {flags} (bf16 Adam moments and gradients) {layout.short()} needs {peak / GiB:.1f} GiB"


def infeasible_message(
    candidates: CandidateSet, *, model: str, cluster: str, hint: str = ""
) -> str:
    """Why nothing fits: the closest layout's binding limit, and the rejection histogram;
    ``hint`` (:func:`lean_state_hint`) follows the generic advice."""
    counts = rejection_histogram(candidates.rejection_counts)
    if not candidates.rejections:
        return f"no layout of '{model}' on {cluster} to consider"
    slow = [r for r in candidates.rejections if r.reason == "target" and r.excess is not None]
    if slow:
        fastest = min(slow, key=lambda r: r.excess or 0.0)
        return (
            f"no layout of '{model}' on {cluster} meets the step-time target: the fastest that "
            f"fits, {fastest.detail} [{candidates.num_enumerated} layouts rejected: {counts}]"
        )
    closest = candidates.rejections[0]
    if closest.reason == "memory":
        hint = "; try more GPUs, a larger pp or tp, full recompute, or a smaller seq-len" + hint
    else:
        hint = ""
    return (
        f"nothing fits '{model}' on {cluster}: closest {closest.detail}{hint} "
        f"[{candidates.num_enumerated} layouts rejected: {counts}]"
    )


def _pin_rules(
    model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload, fix: dict[str, object]
) -> list[str]:
    """The rules the pinned values break on their own (each a sentence naming the values)."""
    n, out = cluster.num_accelerators, []
    degrees = {k: int(v) for k, v in fix.items() if k in ("tp", "cp", "pp", "dp", "ep", "etp")}  # type: ignore[call-overload]
    for dim in ("tp", "cp", "pp", "dp"):
        if dim in degrees and n % degrees[dim]:
            out.append(f"{dim} ({degrees[dim]}) must divide the {n} accelerators")
    product = 1
    for dim in ("tp", "cp", "pp", "dp"):
        product *= degrees.get(dim, 1)
    if not out and n % product:
        out.append(f"the pinned degrees multiply to {product}, which does not divide {n}")
    tp = degrees.get("tp", 1)
    if rule := tp_heads_rule(model, tp):
        out.append(rule)
    if rule := pp_layers_rule(model, degrees.get("pp", 1)):
        out.append(rule)
    cp = degrees.get("cp", 1)
    if cp > 1 and workload.seq_len // cp < CP_MIN_TOKENS_PER_RANK:
        out.append(
            f"cp ({cp}) leaves fewer than {CP_MIN_TOKENS_PER_RANK} of the {workload.seq_len} "
            "tokens of a sequence per rank"
        )
    for dim in ("ep", "etp"):
        if degrees.get(dim, 1) > 1 and model.moe is None:
            out.append(f"{dim} ({degrees[dim]}) > 1 but model '{model.name}' has no experts")
    if rule := ep_experts_rule(model, degrees.get("ep", 1)):
        out.append(rule)
    return out


def no_candidates_message(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    fix: dict[str, object],
    bounds: dict[str, tuple[int | None, int | None]],
    precisions: list[str],
) -> str:
    """Why --fix / --min / --max left no layout to consider at all (a bad-input message);
    ``precisions``: the formats searched."""
    given = [f"--fix {k}={v}" for k, v in fix.items()]
    for key, (low, high) in bounds.items():
        given += [f"--min {key}={low}"] if low is not None else []
        given += [f"--max {key}={high}"] if high is not None else []
    rules = _pin_rules(model, cluster, workload, fix)
    if "precision" in fix and str(fix["precision"]) not in precisions:
        rules.append(
            f"the precision searched is {' or '.join(precisions)} (--precision), "
            f"not {fix['precision']}"
        )
    reason = "; ".join(rules) or "no combination of the remaining degrees is legal"
    verb = "leaves" if len(given) == 1 else "leave"
    return (
        f"{' '.join(given)} {verb} no layout of '{model.name}' on {cluster.name} "
        f"({cluster.num_accelerators} accelerators) to consider: {reason}"
    )
