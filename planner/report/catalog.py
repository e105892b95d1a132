"""Listings of the catalogs and a cluster summary (text or JSON)."""

from __future__ import annotations

import json
from typing import Any

from planner.catalog import (
    load_accelerator,
    load_model,
    load_system,
    model_aliases,
    model_names,
    system_names,
)
from planner.cost.params import active_params, total_params
from planner.report.quote import terminal_lines
from planner.report.width import COLUMNS
from planner.specs.cluster import ClusterSpec
from planner.specs.framework import FrameworkSpec
from planner.topology.metrics import topology_summary
from planner.units import GB


def models_listing(*, as_json: bool) -> str:
    """Catalog models with computed parameter counts and aliases."""
    aliases: dict[str, list[str]] = {}
    for alias, target in model_aliases(as_written=True).items():
        aliases.setdefault(target, []).append(alias)
    rows = []
    for name in model_names():
        m = load_model(name)
        rows.append(
            {
                "name": name,
                "family": m.family,
                "params_B": round(total_params(m) / 1e9, 2),
                "active_params_B": round(active_params(m) / 1e9, 2),
                "layers": m.num_layers,
                "hidden": m.hidden_size,
                "attention": m.attention_kind,
                "moe": None if m.moe is None else f"{m.moe.num_experts}e top-{m.moe.top_k}",
                "max_context": m.max_context,
                "aliases": sorted(aliases.get(name, [])),
                "hub_id": m.hub_id,
            }
        )
    if as_json:
        return json.dumps({"models": rows}, indent=2)
    lines = [
        f"{'model':<18} {'params':>9} {'active':>8} {'layers':>6} {'attn':>4}  {'moe':<12} aliases"
    ]
    for r in rows:
        lines.append(
            f"{r['name']:<18} {r['params_B']:>8.1f}B {r['active_params_B']:>7.1f}B "
            f"{r['layers']:>6} {r['attention']:>4}  {r['moe'] or '-':<12} {' '.join(r['aliases'])}"
        )
    lines += [
        "active: the parameters a token passes through (its top-k routed experts), both",
        "embedding tables counted; vendors differ (gpt-oss's figures leave the input one out)",
    ]
    return terminal_lines(lines)


def _framework_row(f: FrameworkSpec) -> dict[str, Any]:
    """One profile's row of :func:`frameworks_listing` (its JSON keys)."""
    return {
        "framework": f.name,
        "description": f.description,
        "vendors": list(f.vendors),
        "default_on": list(f.default_on),
        "zero_stages": list(f.zero_stages),
        "max_zero_with_pp": f.max_zero_with_pp if f.pipeline else None,
        "tensor_parallel": f.tensor_parallel,
        "pipeline": f.pipeline,
        "interleaved_pipeline": f.interleaved_pipeline,
        "pipeline_schedules": list(f.pipeline_schedules) if f.pipeline else [],
        "context_parallel": list(f.context_parallel),
        "expert_parallel": f.expert_parallel,
        "export_format": f.export_format,
        "export_is_own": f.export_is_own,
        "fitted": f.calibrates,
    }


def frameworks_listing(*, as_json: bool) -> str:
    """The framework profiles (``topologies/frameworks/``): what ``--framework`` takes, where
    each runs, the layouts it can run, and the export format its plans map to (its own, or the
    nearest stack's: ``FrameworkSpec.export_is_own``)."""
    from planner.catalog.frameworks import framework_aliases, framework_names, load_framework

    rows = [_framework_row(load_framework(name)) for name in framework_names()]
    aliases = framework_aliases()
    if as_json:
        return json.dumps({"frameworks": rows, "aliases": aliases}, indent=2)

    def flags(r: dict[str, Any]) -> str:
        marks = [("TP", r["tensor_parallel"]), ("PP", r["pipeline"]),
                 ("VPP", r["interleaved_pipeline"]), ("EP", r["expert_parallel"])]  # fmt: skip
        return " ".join(label for label, on in marks if on) or "-"

    lines = [  # within 100 columns
        f"{'framework':<11} {'runs on':<17} {'ZeRO (PP)':<11} {'parallel':<12} {'export':<11} "
        "context parallel"
    ]
    for r in rows:
        name = r["framework"] + ("*" if r["default_on"] else "")
        vendors = ",".join(r["vendors"]) or "any"
        zero = ",".join(str(z) for z in r["zero_stages"])
        if r["max_zero_with_pp"] is not None:
            zero += f" ({r['max_zero_with_pp']})"
        export = r["export_format"] + ("" if r["export_is_own"] else "~")
        cp = ",".join(r["context_parallel"]) or "-"
        lines.append(f"{name:<11} {vendors:<17} {zero:<11} {flags(r):<12} {export:<11} {cp}")
    lines.append(
        "ZeRO (PP): the stages it runs (the deepest with pipeline parallelism); ~ exports the "
        "nearest stack's format, and says so"
    )
    defaults = [f"{r['framework']} on {'/'.join(r['default_on'])}" for r in rows if r["default_on"]]
    lines.append("* the default where no --framework is given: " + ", ".join(defaults))
    lines.append(
        "also accepted: "
        + ", ".join(f"{alias} ({profile})" for alias, profile in sorted(aliases.items()))
    )
    lines.append(
        "fitted on: "
        + (", ".join(r["framework"] for r in rows if r["fitted"]) or "none")
        + "; the others are predicted through their profiles (topologies/frameworks/)"
    )
    return terminal_lines(lines, width=100)


def systems_listing(*, as_json: bool) -> str:
    """Catalog systems: the ``<system>`` of cluster names."""
    rows = []
    for name in system_names():
        s = load_system(name)
        a = load_accelerator(s.accelerator)
        rows.append(
            {
                "system": name,
                "accelerator": a.name,
                "kind": s.kind,
                "domain_size": s.domain_size,
                "unit_size": s.unit_size,
                "hbm_GB": a.hbm_GB,
                "bf16_TFLOP_per_s": a.peak_TFLOP_per_s["bf16"],
                "scale_up_GB_per_s": s.scale_up.bandwidth_GB_per_s,
                "nic": f"{s.scale_out.nics_per_accelerator:g} x {s.scale_out.nic_Gbps:g} Gb/s",
                "example": f"{name}x{max(s.unit_size, min(s.domain_size, 16))}",
            }
        )
    if as_json:
        return json.dumps({"systems": rows}, indent=2)
    lines = [  # within 100 columns
        f"{'system':<12} {'accel':<9} {'kind':<11} {'domain':>6} {'unit':>4} "
        f"{'HBM GB':>6} {'BF16 TF':>7} {'up GB/s':>7} {'NIC/accel':<15} example"
    ]
    for r in rows:
        lines.append(
            f"{r['system']:<12} {r['accelerator']:<9} {r['kind']:<11} {r['domain_size']:>6} "
            f"{r['unit_size']:>4} {r['hbm_GB']:>6g} {r['bf16_TFLOP_per_s']:>7g} "
            f"{r['scale_up_GB_per_s']:>7g} {r['nic']:<15} {r['example']}"
        )
    lines.append(
        "cluster names: <system>x<N accelerators>, e.g. hgx_b200x16, gb200_nvl72x144, tpu_v5p_8x8x16"
    )
    lines.append(
        "TPUs also by Google Cloud accelerator type: v5p-256 (128 chips), v6e-256, tpu7x-128"
    )
    return terminal_lines(lines)


def cluster_summary(cluster: ClusterSpec, *, as_json: bool) -> str:
    """What a cluster name resolved to, with per-accelerator bandwidths and totals."""
    acc, system, fabric = cluster.accelerator, cluster.system, cluster.fabric
    data = {
        "name": cluster.name,
        "description": cluster.describe(),
        "system": system.name,
        "accelerator": acc.name,
        "num_accelerators": cluster.num_accelerators,
        "num_domains": cluster.num_domains,
        "accelerators_per_domain": cluster.accelerators_per_domain,
        "num_nodes": cluster.num_nodes,
        "slice_shape": cluster.slice_shape,
        "hbm_GB_per_accelerator": acc.hbm_GB,
        "hbm_TB_per_s_per_accelerator": acc.hbm_bandwidth_GB_per_s / 1e3,
        "peak_TFLOP_per_s": {str(k): v for k, v in acc.peak_TFLOP_per_s.items()},
        "scale_up_GB_per_s_per_accelerator": system.scale_up.bandwidth_GB_per_s,
        "scale_out_GB_per_s_per_accelerator": fabric.bytes_per_s_per_accelerator / GB,
        "oversubscription": fabric.oversubscription,
        "rail_optimized": fabric.rail_optimized,
        "total_bf16_PFLOP_per_s": cluster.num_accelerators * acc.peak_TFLOP_per_s["bf16"] / 1e3,
        "total_hbm_TB": cluster.num_accelerators * acc.hbm_GB / 1e3,
        "price_per_gpu_hour_usd": cluster.price_per_gpu_hour_usd,
        "edits": cluster.edits,
        "topology": topology_summary(cluster),
    }
    if as_json:
        return json.dumps(data, indent=2)
    return terminal_lines(cluster_summary_lines(cluster, data), width=COLUMNS)


def _row(label: str, value: object) -> str:
    return f"  {label:<24} {value}"


def cluster_summary_lines(cluster: ClusterSpec, data: dict[str, Any]) -> list[str]:
    """``layout show`` as text: the JSON's figures in sections, with units, one per line."""
    acc, system, fabric = cluster.accelerator, cluster.system, cluster.fabric
    topo: dict[str, Any] = data["topology"]
    peaks = ", ".join(f"{k} {v:,g}" for k, v in data["peak_TFLOP_per_s"].items())
    shape = (
        "" if cluster.slice_shape is None else ", slice " + "x".join(map(str, cluster.slice_shape))
    )
    nodes = ", ".join(f"{v:,} {k}" for k, v in topo["nodes"].items())
    domain = f"{system.domain_size}-accelerator domain, {system.unit_size}-accelerator unit"
    spread = (
        f"{cluster.num_accelerators:,} in {cluster.num_domains:,} domain(s) of "
        f"{cluster.accelerators_per_domain}{shape}, {cluster.num_nodes:,} node(s)"
    )
    lines = [
        f"cluster : {cluster.describe()}",
        _row("system", f"{system.name} ({system.kind}, {domain})"),
        _row("accelerators", spread),
        "accelerator:",
        _row("name", acc.name),
        _row("HBM", f"{acc.hbm_GB:g} GB, {acc.hbm_bandwidth_GB_per_s / 1e3:g} TB/s"),
        _row("dense peak, TFLOP/s", peaks),
        _row("price", f"${cluster.price_per_gpu_hour_usd:g} per accelerator-hour"),
        "network (per accelerator, per direction):",
    ]
    for tier in topo["tiers"]:
        link = f"{tier['GB_per_s_per_accelerator']:,g} GB/s over {tier['kind']}"
        detail = f"{tier['latency_us']:g} us, efficiency {tier['efficiency']:g}"
        lines.append(_row(str(tier["tier"]).replace("_", "-"), f"{link}, {detail}"))
    wiring = f"{topo['wiring']}, {fabric.oversubscription:g}:1 oversubscription"
    units = f"{topo['planes']} plane(s), {topo['num_scalable_units']} scalable unit(s)"
    lines.append(_row("wiring", f"{wiring}, {units}"))
    if topo["spine"]:
        lines.append(_row("spine", topo["spine"]))
    ring = topo["ring_in_domain_GB_per_s_per_accelerator"]
    lines.append(_row("ring inside a domain", f"{ring:,.1f} GB/s"))
    if topo["ring_across_domains_bottleneck"]:
        lines.append(_row("ring across domains", topo["ring_across_domains_bottleneck"]))
    halves = (
        f"scale-up {topo['bisection_scale_up_GB_per_s']:,.0f}, "
        f"scale-out {topo['bisection_scale_out_GB_per_s']:,.0f}"
    )
    hops = ", ".join(f"{k.replace('_', '-')} {v}" for k, v in topo["diameter_hops"].items())
    lines += [
        _row("bisection", f"{topo['bisection_GB_per_s']:,.0f} GB/s ({halves})"),
        _row("diameter", f"{hops} hops"),
        _row("graph", f"{nodes}; {topo['num_links']:,} links"),
    ]
    if topo["torus_wraparound"]:
        wrap = ", ".join("yes" if w else "no" for w in topo["torus_wraparound"])
        lines.append(_row("torus wrap-around", f"{wrap} (per axis)"))
    lines += [
        "totals:",
        _row("BF16 dense peak", f"{data['total_bf16_PFLOP_per_s']:,.1f} PFLOP/s"),
        _row("HBM", f"{data['total_hbm_TB']:,.1f} TB"),
    ]
    return lines
