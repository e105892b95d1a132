"""Terminal rendering of serving plans and searches: pure functions of result models -> text."""

from __future__ import annotations

from planner.report.quote import terminal_lines, terminal_text
from planner.report.text import band_text, breakdown_line
from planner.report.width import COLUMNS
from planner.search.explain import rejection_histogram
from planner.specs.result import ServePlan, ServeSearchResult
from planner.units import KiB, format_seconds

_TERMS = ("linear", "attention", "tp_comm", "ep_comm", "pp_comm", "overhead")


def _band(plan: ServePlan) -> str:
    return band_text(plan.uncertainty_pct, plan.uncertainty_level)


def serve_plan_lines(plan: ServePlan) -> list[str]:
    """Headline, capacity, latency and the decode-step breakdown of one serving plan."""
    lay, mem = plan.layout, plan.memory
    lines = [
        f"cluster    : {plan.cluster_description}",
        f"model      : {plan.model}   weights {lay.precision}, KV {lay.kv_precision}, "
        f"compute {plan.compute_precision}",
        f"layout     : {lay.short()}  ({plan.num_gpus} GPUs, {lay.gpus_per_replica} per replica)",
        f"throughput : {plan.throughput_tokens_per_s_per_gpu:,.0f} output tokens/s/GPU{_band(plan)}, "
        f"{plan.throughput_tokens_per_s:,.0f} tokens/s in all",
        f"concurrency: {plan.concurrency} sequences per replica (limited by "
        f"{plan.concurrency_limit}; KV cache holds {plan.max_concurrent_sequences} at full context)",
        f"latency    : {format_seconds(plan.decode_step_s)} per output token "
        f"({plan.decode_tokens_per_s_per_sequence:,.1f} tokens/s per sequence), "
        f"TTFT {format_seconds(plan.ttft_s)} (idle prefill {format_seconds(plan.prefill_s)}); "
        f"batch-1 bandwidth ceiling {plan.batch1_ceiling_tokens_per_s:,.0f} tokens/s",
        f"memory/GPU : weights {mem.weights_gib:.1f} GiB + workspace {mem.workspace_gib:.1f} GiB "
        f"+ KV cache {mem.kv_cache_gib:.1f} GiB of {mem.capacity_gib:.1f} GiB usable "
        f"({mem.hbm_gib:.1f} GiB HBM)",
        f"KV cache   : {plan.kv_bytes_per_token / KiB:,.1f} KiB per token "
        f"({plan.kv_bytes_per_token_per_gpu / KiB:,.1f} KiB per GPU, x{plan.kv_replication:g} "
        f"replication); {plan.kv_cache_tokens:,} tokens per replica"
        + ("" if plan.fits else "  DOES NOT FIT"),
        "decode step:",
    ]
    total = plan.decode_step_s or 1.0
    for key in _TERMS:
        value = plan.breakdown_s.get(key, 0.0)
        if value > 0:
            lines.append(breakdown_line(key, value, total))
    for dim, entry in plan.placement.items():
        if entry.size > 1 and dim != "replicas":
            where = "inside one domain" if entry.within_domain else "across domains"
            lines.append(
                f"  {dim:<12} {entry.size:>4} x stride {entry.stride:<4} {where}: {entry.link}"
            )
    lines += [f"warning    : {w}" for w in plan.warnings]
    return [terminal_text(line) for line in lines]  # names come from user files: one line each


def serve_search_text(result: ServeSearchResult) -> str:
    """The full terminal answer of ``layout search --mode serve``."""
    lines = serve_plan_lines(result.best)
    if result.alternatives:
        lines.append("runners-up:")
        for i, alt in enumerate(result.alternatives, start=2):
            lines.append(f"  {i}. {alt.layout.short():<30} {alt.why_not}")
    rejected = rejection_histogram(result.rejections)
    lines.append(
        f"search     : {result.num_candidates} layouts, {result.num_feasible} feasible"
        + (f", rejected: {rejected}" if rejected else "")
        + f"; {result.solver.objective}; {result.solver.name} {result.solver.status} "
        f"in {result.search_time_s:.2f} s"
    )
    return terminal_lines(lines, width=COLUMNS)


def serve_estimate_text(plan: ServePlan) -> str:
    """The terminal answer of ``layout estimate --mode serve``."""
    return terminal_lines(serve_plan_lines(plan), width=COLUMNS)
