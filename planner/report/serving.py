"""Terminal rendering of serving plans and searches: pure functions of result models -> text.

Everything is said in words a reader knows (no JSON field names), with units, the targets
echoed against what the plan achieves, and plurals that agree with their numbers."""

from __future__ import annotations

from planner.report.quote import terminal_lines, terminal_text
from planner.report.text import band_text, plural
from planner.report.width import COLUMNS
from planner.specs.result import DisaggregatedPlan, ServePlan, ServeSearchResult, TargetCheck
from planner.units import KiB, format_seconds

TERM_WORDS: dict[str, str] = {
    "linear": "GEMMs (weights streamed)",
    "attention": "attention (KV read)",
    "tp_comm": "tensor-parallel comm",
    "ep_comm": "expert dispatch/combine",
    "pp_comm": "pipeline sends",
    "overhead": "fixed kernel costs",
    "elementwise": "norms/activations via HBM",
    "prefill": "prompt chunks interleaved",
    "engine": "engine overheads",
}
"""Breakdown keys of ServePlan.breakdown_s in words, in display order."""
LIMIT_WORDS: dict[str, str] = {
    "kv_cache": "the KV cache",
    "max_batch_tokens": "the token budget per pass",
    "requested": "the requested concurrency",
    "tpot": "the TPOT target",
    "ttft": "the TTFT target",
    "e2e": "the end-to-end latency target",
    "request_rate": "the offered request rate",
    "offered_load": "the offered request rate",
}
"""ServePlan.concurrency_limit codes in words."""
PLACEMENT_WORDS: dict[str, str] = {
    "tp": "tensor-parallel group",
    "pp": "pipeline stages",
    "ep": "expert-parallel group",
    "attention_dp": "attention data-parallel ranks",
}
"""Placement dimensions in words."""
TARGET_WORDS = {"tpot": "TPOT", "ttft": "TTFT", "e2e": "end-to-end"}


def ms(seconds: float) -> str:
    """Milliseconds with three significant figures: 22.2, 1,229, 0.853.

    >>> ms(0.0222), ms(1.2291), ms(0.000853)
    ('22.2', '1,229', '0.853')
    """
    value = seconds * 1e3
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if value < 1 else f"{value:.1f}"


def target_text(check: TargetCheck) -> str:
    """A target against what is achieved: ``TPOT 22.2 <= 50 ms``.

    >>> target_text(TargetCheck(name="tpot", target_ms=50, achieved_ms=22.2, met=True))
    'TPOT 22.2 <= 50 ms'
    >>> target_text(TargetCheck(name="ttft", percentile=90, target_ms=200, achieved_ms=310,
    ...                         met=False))
    'TTFT p90 310 > 200 ms (missed)'
    """
    name = TARGET_WORDS[check.name] + ("" if check.percentile is None else f" p{check.percentile}")
    sign = "<=" if check.met else ">"
    tail = "" if check.met else " (missed)"
    return f"{name} {ms(check.achieved_ms / 1e3)} {sign} {check.target_ms:g} ms{tail}"


def _band(plan: ServePlan) -> str:
    return band_text(plan.uncertainty_pct, plan.uncertainty_level)


def _placement_lines(plan: ServePlan) -> list[str]:
    """The placement header: where each parallel group of a replica lands."""
    lines = []
    for dim, entry in plan.placement.items():
        if entry.size <= 1 or dim == "replicas":
            continue
        where = "inside one scale-up domain" if entry.within_domain else "across domains"
        lines.append(f"  {PLACEMENT_WORDS.get(dim, dim)} of {entry.size} {where}: {entry.link}")
    if not lines:
        lines.append(f"  each replica on one {plan.device_noun}: no parallel groups")
    return ["placement  :", *lines]


def _latency_lines(plan: ServePlan) -> list[str]:
    lines = [
        f"latency    : TPOT {ms(plan.decode_step_s)} ms mean "
        f"({plan.decode_tokens_per_s_per_sequence:,.1f} tokens/s per sequence); decode "
        f"iteration {ms(plan.decode_iteration_s)} ms, HBM floor {ms(plan.decode_hbm_floor_s)} ms; "
        f"batch-1 bandwidth ceiling {plan.batch1_ceiling_tokens_per_s:,.0f} tokens/s",
    ]
    lat = plan.latency
    if lat is None:
        return lines
    load = (
        f"at {lat.request_rate_per_s:g} requests/s offered"
        if lat.request_rate_per_s is not None
        else "joining the running batch, no queue"
    )
    lines.append(
        f"requests   : {load}: TTFT p50 {ms(lat.ttft_p50_s)} / p90 {ms(lat.ttft_p90_s)} ms, "
        f"end-to-end p50 {format_seconds(lat.e2e_p50_s)} / p90 {format_seconds(lat.e2e_p90_s)}; "
        f"idle prefill {ms(plan.prefill_s)} ms; capacity {lat.max_request_rate_per_s:,.2f} "
        "requests/s"
    )
    return lines


def _engine_lines(plan: ServePlan) -> list[str]:
    """The engine profile that priced the plan and its two overheads."""
    if plan.engine is None:
        return []
    from planner.catalog.engines import load_engine

    spec = load_engine(plan.engine.profile)
    basis = (
        f"fitted on {plural(len(spec.fitted_on), 'published run')}"
        if spec.has_rows
        else "no published run: another engine's fit"
    )
    return [
        f"engine     : {spec.name}, {spec.layer_overhead_us:g} us per layer + "
        f"{spec.sequence_overhead_us:g} us per request each iteration ({basis})"
    ]


def serve_plan_lines(plan: ServePlan) -> list[str]:
    """Headline, placement, latency, targets, capacity and the per-token breakdown."""
    lay, mem = plan.layout, plan.memory
    noun = plan.device_noun
    limit = LIMIT_WORDS.get(plan.concurrency_limit, plan.concurrency_limit)
    lines = [
        f"cluster    : {plan.cluster_description}",
        f"model      : {plan.model}   weights {lay.precision}, KV {lay.kv_precision}, "
        f"compute {plan.compute_precision}",
        f"layout     : {lay.short()}  ({plural(plan.num_gpus, noun)}, "
        f"{lay.gpus_per_replica} per replica)",
        *_engine_lines(plan),
        *_placement_lines(plan),
        f"throughput : {plan.throughput_tokens_per_s_per_gpu:,.0f} output tokens/s/{noun}"
        f"{_band(plan)}, "
        f"{plan.throughput_tokens_per_s:,.0f} tokens/s in all",
        f"concurrency: {plural(plan.concurrency, 'sequence')} per replica, limited by {limit} "
        f"(the KV cache holds {plural(plan.max_concurrent_sequences, 'sequence')} at full "
        f"context; decode at a mean context of {plan.context_tokens:,.0f} tokens)",
        *_latency_lines(plan),
    ]
    if plan.targets:
        lines.append("targets    : " + "; ".join(target_text(t) for t in plan.targets))
    lines += [
        f"{'memory/' + noun:<11}: weights {mem.weights_gib:.1f} GiB + workspace {mem.workspace_gib:.1f} GiB "
        f"+ KV cache {mem.kv_cache_gib:.1f} GiB of {mem.capacity_gib:.1f} GiB usable "
        f"({mem.hbm_gib:.1f} GiB HBM)",
        f"KV cache   : {plan.kv_bytes_per_token / KiB:,.1f} KiB per token "
        f"({plan.kv_bytes_per_token_per_gpu / KiB:,.1f} KiB per {noun}, x{plan.kv_replication:g} "
        f"replication); {plan.kv_cache_tokens:,} tokens per replica"
        + ("" if plan.fits else "  DOES NOT FIT"),
        "per output token:",
    ]
    total = plan.decode_step_s or 1.0
    for key, words in TERM_WORDS.items():
        value = plan.breakdown_s.get(key, 0.0)
        if value > 0:
            lines.append(f"  {words:<27} {format_seconds(value):>10}  {100 * value / total:5.1f}%")
    lines += [f"warning    : {w}" for w in plan.warnings]
    return [terminal_text(line) for line in lines]  # names come from user files: one line each


def disaggregated_lines(split: DisaggregatedPlan, noun: str = "GPU") -> list[str]:
    """The prefill/decode split against the aggregated plan (``noun``: the plan's word for one
    accelerator, ``ServePlan.device_noun``)."""
    pre, dec = split.prefill, split.decode
    return [
        f"disaggregated: {pre.instances}P{dec.instances}D on {plural(split.num_gpus, noun)}: "
        f"{plural(pre.instances, 'prefill instance')} of {pre.layout.short().split(' x')[0]} + "
        f"{plural(dec.instances, 'decode instance')} of {dec.layout.short().split(' x')[0]} "
        f"({dec.concurrency} sequences each)",
        f"  {split.throughput_tokens_per_s_per_gpu:,.0f} output tokens/s/{noun} vs "
        f"{split.aggregated_tokens_per_s_per_gpu:,.0f} aggregated; TTFT {ms(split.ttft_s)} ms "
        f"(KV transfer {ms(split.kv_transfer_s)} ms over {split.kv_link}), TPOT "
        f"{ms(split.tpot_s)} ms",
        f"  {split.verdict}",
    ]


def serve_search_text(result: ServeSearchResult) -> str:
    """The full terminal answer of ``layout search --mode serve``."""
    from planner.search.serving_search import reason_histogram

    lines = serve_plan_lines(result.best)
    noun = result.best.device_noun
    if result.alternatives:
        lines.append("runners-up:")
        for i, alt in enumerate(result.alternatives, start=2):
            lines.append(f"  {i}. {alt.layout.short():<30} {alt.why_not}")
    if result.pareto:
        ends = result.pareto[0], result.pareto[-1]
        lines.append(
            f"frontier   : {plural(len(result.pareto), 'point')} from "
            f"{ends[0].tokens_per_s_per_user:,.0f} tokens/s per user at "
            f"{ends[0].tokens_per_s_per_gpu:,.0f} per {noun} to "
            f"{ends[1].tokens_per_s_per_user:,.0f} per user at "
            f"{ends[1].tokens_per_s_per_gpu:,.0f} per {noun} (--pareto FILE.csv)"
        )
    if result.disaggregated is not None:
        lines += disaggregated_lines(result.disaggregated, noun)
    rejected = reason_histogram(result.rejections)
    lines.append(
        f"search     : {plural(result.num_candidates, 'layout')}, {result.num_feasible} feasible"
        + (f", rejected: {rejected}" if rejected else "")
        + f"; {result.solver.objective}; {result.solver.name} {result.solver.status} "
        f"in {result.search_time_s:.2f} s"
    )
    return terminal_lines([terminal_text(line) for line in lines], width=COLUMNS)


def serve_estimate_text(plan: ServePlan) -> str:
    """The terminal answer of ``layout estimate --mode serve``."""
    return terminal_lines(serve_plan_lines(plan), width=COLUMNS)
