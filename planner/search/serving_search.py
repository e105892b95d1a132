"""Serving search: enumerate replica layouts (TP, PP, EP, attention DP, replicas), score each at
its operating point, and rank them by a sort of an integer cost (search/rank.py, as training).

The serving objectives map onto the integer cost as:

- ``throughput`` (maximise output tokens/s per GPU): cost = -round(1000 x tokens/s/GPU), i.e. the
  negated throughput in milli-tokens/s (negation keeps the order exact; the sign is undone when
  the objective is reported);
- ``latency`` (minimise the time per output token): cost = TPOT in microseconds;
- ``target_tokens_per_s`` (fewest GPUs that sustain the load): cost = GPUs x 10^9 - round(1000 x
  tokens/s/GPU), i.e. GPUs first, throughput per GPU as the tie-break.

Runners-up are the next cheapest rows with other layouts, and each gets a why-not.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

from planner.catalog.engines import with_default_engine
from planner.cost.serving_time import ServeSetup
from planner.errors import InfeasibleError, SpecError
from planner.search.arguments import check_fix
from planner.search.exhaustive import exhaustive_ranking
from planner.search.rank import rank_rows
from planner.search.serving import (
    ServeMemoryCost,
    check_serve_workload,
    memory_cost,
    memory_detail,
    replicas_for,
    resolve_formats,
    serve_setup,
    serve_violations,
    to_serve_plan,
)
from planner.search.serving_disagg import disaggregate as disaggregated
from planner.search.serving_disagg import role_candidates
from planner.search.serving_pareto import layout_points, pareto_front
from planner.search.serving_point import OperatingPoint, operating_point
from planner.search.space import divisors
from planner.search.table import to_quanta
from planner.specs.cluster import ClusterSpec
from planner.specs.model import ModelSpec
from planner.specs.result import ServeLayout, ServePlan, ServeSearchResult, ServeSolverInfo
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import ServeWorkload
from planner.units import format_seconds

DIMENSIONS: tuple[str, ...] = ("tp", "pp", "ep", "attention_dp", "replicas")
"""Layout fields that tell runners-up apart (each candidate differs in at least one)."""
SERVE_PINNABLE: dict[str, str] = {
    "tp": "tp",
    "pp": "pp",
    "ep": "ep",
    "dp": "replicas",
    "replicas": "replicas",
    "attention_dp": "attention_dp",
}
"""``--fix`` keys accepted in serve mode and the ServeLayout field each pins (dp = replicas)."""
GPU_WEIGHT = 10**9
"""Scale that puts the GPU count ahead of throughput in the fewest-GPUs cost."""


def _attention_dp_choices(model: ModelSpec, tp: int) -> list[int]:
    """Attention DP is offered for MLA and MoE models (where engines implement it)."""
    if model.mla is None and model.moe is None:
        return [1]
    return divisors(tp)


def _ep_choices(model: ModelSpec, tp: int) -> list[int]:
    if model.moe is None:
        return [1]
    return [d for d in divisors(tp) if model.moe.num_experts % d == 0]


def enumerate_serve_layouts(
    model: ModelSpec, cluster: ClusterSpec, workload: ServeWorkload, fix: dict[str, int]
) -> list[ServeLayout]:
    """Every (tp, pp, ep, attention_dp) whose replica size divides the cluster, with as many
    replicas as fit (rules not yet applied); pinned fields take only their pinned value."""
    n = cluster.num_accelerators

    def allowed(name: str, values: list[int]) -> list[int]:
        return [fix[name]] if name in fix else values

    out: list[ServeLayout] = []
    for tp in allowed("tp", divisors(n)):
        for pp in allowed("pp", [d for d in divisors(max(1, n // tp)) if d <= model.num_layers]):
            for ep in allowed("ep", _ep_choices(model, tp)):
                for adp in allowed("attention_dp", _attention_dp_choices(model, tp)):
                    out.append(
                        ServeLayout(
                            tp=tp,
                            pp=pp,
                            ep=ep,
                            attention_dp=adp,
                            replicas=fix.get("replicas", max(1, n // (tp * pp))),
                            precision=workload.precision,
                            kv_precision=workload.kv_precision,
                        )
                    )
    return out


class _Scored:
    """A feasible layout at its operating point (plain holder, internal to the search)."""

    def __init__(
        self, plan: ServePlan, point: OperatingPoint, setup: ServeSetup, mem: ServeMemoryCost
    ) -> None:
        self.plan = plan
        self.point = point
        self.setup = setup
        self.mem = mem


class _Rejected(NamedTuple):
    """Why one layout cannot serve the workload (internal to the search)."""

    reason: str
    """Reason code (``memory``, ``kv_cache``, a rule, a target)."""
    detail: str
    """The sentence naming the limit and the values."""
    shortfall: float = math.inf
    """How far over its limit, relative (0.1 = 10% over); inf when not a matter of degree."""


def _score(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: ServeWorkload,
    layout: ServeLayout,
    *,
    flexible_replicas: bool = True,
) -> _Scored | _Rejected:
    """Plan of one layout, or why it cannot serve the workload. Under a request rate (or a
    token-rate target) the fewest replicas that carry it are used; ``flexible_replicas`` False
    keeps the layout's replicas (pinned)."""
    violations = serve_violations(model, cluster, layout)
    if violations:
        return _Rejected(*violations[0])
    mem = memory_cost(model, cluster, workload, layout)
    if mem.sequences_at_mean < 1 or (mem.sequences < 1 and workload.concurrency is None):
        need = mem.weights + mem.workspace
        shortfall = (
            need / mem.capacity - 1.0
            if need > mem.capacity
            else mem.kv_per_sequence / max(mem.kv_pool, 1.0) - 1.0
        )
        return _Rejected(*memory_detail(layout, mem, cluster, workload.context), shortfall)
    if workload.request_rate is not None:
        return _score_under_rate(model, cluster, workload, layout, mem, flexible_replicas)
    setup = serve_setup(model, cluster, workload, layout)
    point = operating_point(
        setup, workload, max_sequences=mem.sequences, sequences_at_mean=mem.sequences_at_mean
    )
    if isinstance(point, tuple):
        return _Rejected(*point)
    plan = to_serve_plan(setup, cluster, workload, mem, point)
    if workload.target_tokens_per_s is not None:
        per_replica = plan.throughput_tokens_per_s / layout.replicas
        needed = replicas_for(per_replica, workload.target_tokens_per_s)
        if needed > layout.replicas:
            detail = (
                f"{layout.short()}: {needed} replicas ({needed * layout.gpus_per_replica} GPUs) "
                f"needed for {workload.target_tokens_per_s:,.0f} tokens/s, "
                f"{layout.replicas} fit on {cluster.num_accelerators} GPUs"
            )
            return _Rejected("target", detail, needed / layout.replicas - 1.0)
        layout = layout.model_copy(update={"replicas": needed})
        plan = to_serve_plan(
            serve_setup(model, cluster, workload, layout), cluster, workload, mem, point
        )
    return _Scored(plan, point, setup, mem)


def _score_under_rate(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: ServeWorkload,
    layout: ServeLayout,
    mem: ServeMemoryCost,
    flexible_replicas: bool,
) -> _Scored | _Rejected:
    """The fewest replicas (at most the layout's) that carry the request rate within the
    targets: more replicas lower each one's load, so feasibility is monotone (binary search)."""

    def attempt(replicas: int) -> OperatingPoint | tuple[str, str] | tuple[str, str, float]:
        sized = layout.model_copy(update={"replicas": replicas})
        setup = serve_setup(model, cluster, workload, sized)
        return operating_point(
            setup,
            workload,
            max_sequences=mem.sequences,
            sequences_at_mean=mem.sequences_at_mean,
            replicas=replicas,
        )

    most = layout.replicas
    best = attempt(most)
    if isinstance(best, tuple):
        return _Rejected(*best)
    low, high = (1, most) if flexible_replicas else (most, most)
    while low < high:
        mid = (low + high) // 2
        if isinstance(attempt(mid), tuple):
            low = mid + 1
        else:
            high = mid
    sized = layout.model_copy(update={"replicas": low})
    point = attempt(low)
    assert not isinstance(point, tuple)
    setup = serve_setup(model, cluster, workload, sized)
    return _Scored(to_serve_plan(setup, cluster, workload, mem, point), point, setup, mem)


def objective_cost(plan: ServePlan, workload: ServeWorkload) -> int:
    """The integer cost the ranking sorts by for this plan (see the module docstring)."""
    throughput = round(1000 * plan.throughput_tokens_per_s_per_gpu)
    if workload.request_rate is not None and plan.latency is not None:
        e2e_us = min(GPU_WEIGHT - 1, round(plan.latency.e2e_p90_s * 1e6))
        return plan.num_gpus * GPU_WEIGHT + e2e_us
    if workload.target_tokens_per_s is not None:
        return plan.num_gpus * GPU_WEIGHT - throughput
    if workload.objective == "latency":
        return to_quanta([plan.decode_step_s])[0]
    return -throughput


def objective_words(workload: ServeWorkload, noun: str = "GPU") -> str:
    """The objective, in words; ``noun`` names one accelerator (``AcceleratorSpec.device_noun``).

    >>> objective_words(ServeWorkload(), "chip")
    'most output tokens/s per chip'
    """
    if workload.request_rate is not None:
        return f"fewest {noun}s for {workload.request_rate:g} requests/s, then lowest p90 latency"
    if workload.target_tokens_per_s is not None:
        return f"min {noun}s for {workload.target_tokens_per_s:,.0f} tokens/s"
    if workload.objective == "latency":
        return "shortest time per output token"
    return f"most output tokens/s per {noun}"


def objective_value(plan: ServePlan, workload: ServeWorkload) -> float:
    """The best plan's objective in the unit :func:`objective_words` names."""
    if workload.target_tokens_per_s is not None or workload.request_rate is not None:
        return float(plan.num_gpus)
    if workload.objective == "latency":
        return plan.decode_step_s
    return plan.throughput_tokens_per_s_per_gpu


def _rank(costs: list[int], plans: list[ServePlan], config: SolverConfig) -> tuple[list[int], str]:
    """The best ``config.top`` plans with distinct layouts: a sort of the integer costs (numpy,
    search/rank.py; the pure-Python exhaustive_ranking with ``--solver exhaustive``)."""
    structures = [tuple(getattr(p.layout, d) for d in DIMENSIONS) for p in plans]
    top = min(config.top, len(plans))
    if config.solver == "exhaustive":
        return exhaustive_ranking(costs, structures, top), "OPTIMAL"
    return rank_rows(costs, structures, top), "OPTIMAL"


def _dim_name(dim: str) -> str:
    return {"attention_dp": "DP-attention", "replicas": "replicas"}.get(dim, dim.upper())


_LIMIT_WORDS = {
    "kv_cache": "the KV cache",
    "max_batch_tokens": "the token budget",
    "requested": "the requested concurrency",
    "request_rate": "the request rate",
}
_TERM_WORDS = {
    "linear": "GEMMs",
    "attention": "attention",
    "tp_comm": "TP comm",
    "ep_comm": "EP comm",
    "pp_comm": "PP sends",
    "overhead": "fixed costs",
    "elementwise": "norm/activation traffic",
    "prefill": "interleaved prefill",
    "engine": "engine overheads",
}


def why_not_serve(alt: ServePlan, best: ServePlan, workload: ServeWorkload) -> str:
    """One sentence: how the runner-up compares on the objective, and why."""
    changes = [
        f"{_dim_name(d)} {getattr(alt.layout, d)} (vs {getattr(best.layout, d)})"
        for d in DIMENSIONS
        if getattr(alt.layout, d) != getattr(best.layout, d)
    ]
    head = ", ".join(changes) or "same degrees"
    if workload.target_tokens_per_s is not None and alt.num_gpus != best.num_gpus:
        lead = f"{alt.num_gpus} {best.device_noun}s (vs {best.num_gpus})"
    elif workload.objective == "latency" and workload.target_tokens_per_s is None:
        lead = f"{format_seconds(alt.decode_step_s)} per token (vs {format_seconds(best.decode_step_s)})"
    else:
        ratio = alt.throughput_tokens_per_s_per_gpu / best.throughput_tokens_per_s_per_gpu - 1
        lead = (
            f"{alt.throughput_tokens_per_s_per_gpu:,.0f} tokens/s/{best.device_noun} "
            f"({100 * ratio:+.0f}%)"
        )
    diffs = sorted(
        ((alt.breakdown_s[k] - best.breakdown_s.get(k, 0.0), k) for k in alt.breakdown_s),
        reverse=True,
    )
    worse = [f"{_TERM_WORDS.get(k, k)} +{format_seconds(d)}" for d, k in diffs if d > 1e-6][:2]
    step = f"; step {format_seconds(alt.decode_step_s)}" + (
        f" ({', '.join(worse)})" if worse else ""
    )
    limit = _LIMIT_WORDS.get(alt.concurrency_limit, f"the {alt.concurrency_limit.upper()} target")
    return (
        f"{head}: {lead}; {alt.concurrency} sequence{'s' if alt.concurrency != 1 else ''} per "
        f"replica (vs {best.concurrency}, limited by {limit}){step}"
    )


def serve_search(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: ServeWorkload,
    *,
    fix: dict[str, object] | None = None,
    config: SolverConfig | None = None,
    disaggregate: bool = False,
) -> ServeSearchResult:
    """Best serving layout and runners-up, the throughput/latency frontier and (with
    ``disaggregate``) the best prefill/decode split. InfeasibleError names the binding limit."""
    start = time.perf_counter()
    config = config or SolverConfig()
    workload = resolve_formats(model, with_default_engine(workload, cluster.accelerator.vendor))
    check_serve_workload(model, cluster, workload)
    pins = _serve_pins(fix)
    layouts = enumerate_serve_layouts(model, cluster, workload, pins)
    scored: list[_Scored] = []
    rejected: list[_Rejected] = []
    flexible = "replicas" not in pins
    for layout in layouts:
        outcome = _score(model, cluster, workload, layout, flexible_replicas=flexible)
        (scored.append(outcome) if isinstance(outcome, _Scored) else rejected.append(outcome))
    counts: dict[str, int] = {}
    for rejection in rejected:
        counts[rejection.reason] = counts.get(rejection.reason, 0) + 1
    if not scored:
        raise InfeasibleError(_infeasible_message(model, cluster, rejected, counts))
    plans = [s.plan for s in scored]
    costs = [objective_cost(p, workload) for p in plans]
    chosen, status = _rank(costs, plans, config)
    best = plans[chosen[0]]
    alternatives = [
        plans[i].model_copy(update={"why_not": why_not_serve(plans[i], best, workload)})
        for i in chosen[1:]
    ]
    frontier = pareto_front(
        [
            point
            for s in scored
            for point in layout_points(
                s.setup,
                workload,
                _largest_batch(s, workload),
                (best.concurrency,) if s.plan is best else (),
            )
        ]
    )
    split = None
    if disaggregate:
        roles = role_candidates(model, cluster, workload, layouts)
        split = disaggregated(cluster, workload, roles, best)
    return ServeSearchResult(
        best=best,
        alternatives=alternatives,
        search_time_s=time.perf_counter() - start,
        num_candidates=len(layouts),
        num_feasible=len(scored),
        rejections=counts,
        solver=ServeSolverInfo(
            name="exhaustive" if config.solver == "exhaustive" else "sort",
            status=status,
            objective=objective_words(workload, cluster.accelerator.device_noun),
            objective_value=objective_value(best, workload),
        ),
        pareto=frontier,
        disaggregated=split,
    )


def _largest_batch(scored: _Scored, workload: ServeWorkload) -> int:
    """The largest batch of a layout's frontier ladder: the requested concurrency, else what
    its KV cache and token budget hold."""
    if workload.concurrency is not None:
        return workload.concurrency
    return max(1, min(scored.mem.sequences, workload.max_batch_tokens * scored.setup.layout.pp))


_REASON_ORDER = (
    "target",
    "request_rate",
    "tpot",
    "ttft",
    "e2e",
    "kv_cache",
    "memory",
    "degrees",
    "divisibility",
)
"""The closest-to-feasible reasons first: the binding limit a user can act on."""
REASON_WORDS: dict[str, str] = {
    "target": "the token-rate target",
    "request_rate": "the request rate",
    "tpot": "the TPOT target",
    "ttft": "the TTFT target",
    "e2e": "the end-to-end latency target",
    "kv_cache": "the KV cache",
    "memory": "GPU memory",
    "degrees": "the GPU count",
    "divisibility": "a divisibility rule",
}
"""Each rejection reason in words (messages and histograms name no internal codes)."""


HISTOGRAM_WORDS: dict[str, str] = {
    "target": "short of the token-rate target",
    "request_rate": "short of the request rate",
    "tpot": "over the TPOT target",
    "ttft": "over the TTFT target",
    "e2e": "over the end-to-end latency target",
    "kv_cache": "short of KV cache",
    "memory": "out of GPU memory",
    "degrees": "needing more GPUs than the cluster has",
    "divisibility": "breaking a divisibility rule",
}
"""Each rejection reason as a histogram phrase ("3 over the TPOT target")."""


def reason_histogram(counts: dict[str, int]) -> str:
    """Rejections by reason in words, most frequent first.

    >>> reason_histogram({"tpot": 3, "kv_cache": 1})
    '3 over the TPOT target, 1 short of KV cache'
    """
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{n:,} {HISTOGRAM_WORDS.get(r, r)}" for r, n in ordered)


def _infeasible_message(
    model: ModelSpec, cluster: ClusterSpec, rejected: list[_Rejected], counts: dict[str, int]
) -> str:
    """The binding limit: the first reason in _REASON_ORDER, and of its layouts the one closest
    to fitting (smallest relative shortfall), so the message names what nearly works."""
    if not rejected:
        return f"no serving layout of '{model.name}' on {cluster.name} to consider"
    closest = min(
        rejected,
        key=lambda r: (
            _REASON_ORDER.index(r.reason) if r.reason in _REASON_ORDER else 99,
            r.shortfall,
        ),
    )
    total = sum(counts.values())
    return (
        f"nothing serves '{model.name}' on {cluster.name}: "
        f"{REASON_WORDS.get(closest.reason, closest.reason)} binds; closest layout "
        f"{closest.detail} [{total:,} layout{'s' if total != 1 else ''} rejected: "
        f"{reason_histogram(counts)}]"
    )


def _serve_pins(fix: object) -> dict[str, int]:
    """The ServeLayout fields ``fix`` pins (dp = replicas), each a positive whole number."""
    pins = check_fix(fix, pinnable=tuple(SERVE_PINNABLE), mode=" in serve mode")
    if "dp" in pins and "replicas" in pins:  # one field twice: neither may win silently
        raise SpecError(
            f"fix dp={pins['dp']}: dp is an alias of replicas (given as {pins['replicas']}); "
            "give one of them"
        )
    return {SERVE_PINNABLE[key]: value for key, value in pins.items()}  # type: ignore[misc]


def serve_estimate(
    model: ModelSpec, cluster: ClusterSpec, workload: ServeWorkload, layout: ServeLayout
) -> ServePlan:
    """Score one given serving layout. SpecError when it breaks a rule; InfeasibleError when it
    cannot hold its weights or one sequence, or misses a target at batch 1."""
    workload = resolve_formats(model, with_default_engine(workload, cluster.accelerator.vendor))
    check_serve_workload(model, cluster, workload)
    layout = layout.model_copy(
        update={"precision": workload.precision, "kv_precision": workload.kv_precision}
    )
    violations = serve_violations(model, cluster, layout)
    if violations:
        raise SpecError("; ".join(detail for _, detail in violations))
    outcome = _score(model, cluster, workload, layout, flexible_replicas=False)
    if not isinstance(outcome, _Scored):
        raise InfeasibleError(f"{outcome[0]}: {outcome[1]}")
    return outcome.plan
