"""Re-planning on migration: the best plan on each cluster, what changed and why, the old layout
ported as is, and the cost, energy and time-to-train figures of each plan.

Every reason is derived from the two plans' memory and time-breakdown numbers: there is no canned
text per hardware pair.
"""

from __future__ import annotations

from pydantic import Field

from planner.errors import InfeasibleError, SpecError
from planner.search import engine
from planner.search.explain import TERM_WORDS, signed_seconds
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.layout import Layout, field_label
from planner.specs.model import ModelSpec
from planner.specs.result import Plan, shared_device_noun
from planner.specs.scenarios import (
    Bottleneck,
    Economics,
    LayoutChange,
    MigrateResult,
    RunLength,
    TrainingRun,
)
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import TrainWorkload
from planner.units import DAY_S, HOUR_S, MWH_J

COMM_TERMS: tuple[str, ...] = ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm")
"""Breakdown keys that are communication (the bubble is idle time, not traffic)."""
CHANGE_FIELDS: tuple[str, ...] = (
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "etp",
    "dp",
    "mbs",
    "recompute",
    "zero",
)
_SPLIT_WHAT: dict[str, tuple[str, str]] = {
    "tp": ("each layer's weights", "fit"),
    "pp": ("the layer stack", "fits"),
    "cp": ("each sequence", "fits"),
    "ep": ("the experts", "fit"),
    "etp": ("each expert's weights", "fit"),
}
_FIELD_TERMS: dict[str, tuple[str, ...]] = {
    "tp": ("tp_comm",),
    "pp": ("pp_bubble", "pp_comm"),
    "vpp": ("pp_bubble", "pp_comm"),
    "cp": ("cp_comm",),
    "ep": ("ep_comm",),
    "etp": ("ep_comm",),
    "dp": ("dp_comm",),
    "mbs": ("pp_bubble", "moe_sync"),
    "zero": ("dp_comm", "optimizer"),
    "recompute": (),
}
_RECOMPUTE_LEVEL = {"none": 0, "selective": 1, "full": 2}


class MigrateOptions(FrozenSpec):
    """What ``layout migrate`` does besides the two searches."""

    fix: dict[str, object] = Field(default_factory=dict)
    """Layout fields pinned in both searches (``--fix``)."""
    from_layout: Layout | None = None
    """The layout in use on the source cluster (``--layout``); None = search the source too."""
    run: RunLength | None = None
    """Token or step count for time-to-train figures; None = skip them."""
    config: SolverConfig = Field(default_factory=SolverConfig)
    """Solver settings of both searches."""


def economics(plan: Plan, cluster: ClusterSpec, run: RunLength | None = None) -> Economics:
    """$ per million tokens and joules per token of ``plan`` on ``cluster``, and time to train.

    $/M tokens = price x GPUs x step time / 3600 / tokens per step x 1e6;
    J/token = TDP x GPUs x step time / tokens per step (accelerators at TDP: an upper bound).
    """
    price = cluster.price_per_gpu_hour_usd
    tdp = cluster.accelerator.tdp_W
    tokens_per_step = plan.tokens_per_s * plan.step_time_s
    gpu_seconds_per_token = plan.num_gpus * plan.step_time_s / tokens_per_step
    training = None
    if run is not None:
        steps = run.num_steps(round(tokens_per_step))
        wall_s = steps * plan.step_time_s
        gpu_hours = plan.num_gpus * wall_s / HOUR_S
        training = TrainingRun(
            tokens=steps * tokens_per_step,
            steps=steps,
            wall_clock_days=wall_s / DAY_S,
            gpu_hours=gpu_hours,
            cost_usd=gpu_hours * price,
            energy_MWh=tdp * plan.num_gpus * wall_s / MWH_J,
        )
    return Economics(
        price_per_gpu_hour_usd=price,
        tdp_W=tdp,
        usd_per_million_tokens=price * gpu_seconds_per_token / HOUR_S * 1e6,
        joules_per_token=tdp * gpu_seconds_per_token,
        run=training,
    )


def bottleneck(plan: Plan) -> Bottleneck | None:
    """The communication term with the most exposed time and its placement link (None if none)."""
    exposed, term = max((plan.breakdown_s.get(t, 0.0), t) for t in COMM_TERMS)
    if exposed <= 0.0:
        return None
    dimension = term.removesuffix("_comm")
    if dimension == "dp":
        dimension = gradient_group(plan)
    entry = plan.placement.get(dimension)
    return Bottleneck(
        term=term,
        dimension=dimension,
        exposed_s=exposed,
        link=entry.link if entry is not None else "no placement recorded",
        within_domain=entry.within_domain if entry is not None else True,
    )


def gradient_group(plan: Plan) -> str:
    """The placement entry of the groups ``dp_comm`` is priced on whose link is slowest: the
    dense gradients reduce over ``dp_cp`` (dp x cp ranks) where the placement has it, else over
    ``dp``, with hybrid sharding over ``dp_shard`` then ``dp_replicate``; a MoE layout's routed
    experts over ``edp``. A layout without context parallelism keeps ``dp``; one of DP 1 and CP 8
    has nothing on ``dp`` and everything on ``dp_cp``."""
    dense = ["dp_cp" if "dp_cp" in plan.placement else "dp"]
    if "dp_shard" in plan.placement:  # hybrid sharding: inside the shard, then across replicas
        dense = ["dp_shard", "dp_replicate"]
    candidates = (*dense, "edp")
    groups = [g for g in candidates if g in plan.placement and plan.placement[g].size > 1]
    if not groups:
        return dense[0]
    return min(groups, key=lambda g: plan.placement[g].bandwidth_GB_per_s)


def _term_deltas(terms: tuple[str, ...], before: Plan, after: Plan) -> str:
    parts = []
    for term in terms:
        delta = after.breakdown_s.get(term, 0.0) - before.breakdown_s.get(term, 0.0)
        if abs(delta) >= 1e-6:
            parts.append(f"{TERM_WORDS.get(term, term)} {signed_seconds(delta)}")
    return ", ".join(parts)


def _state_gib(plan: Plan) -> float:
    mem = plan.memory
    return mem.weights_gib + mem.grads_gib + mem.optimizer_gib


def _peak(plan: Plan) -> str:
    return f"{plan.memory.peak_gib:.0f} of {plan.memory.capacity_gib:.0f} GiB"


def _ways(n: int, noun: str = "GPU") -> str:
    return f"on one {noun}" if n == 1 else f"split {n} ways"


def _split_clause(field: str, old: int, new: int, before: Plan, after: Plan) -> str:
    what, verb = _SPLIT_WHAT[field]
    noun = shared_device_noun((before, after))
    head = f"{what} now {verb} {_ways(new, noun)}" if new < old else f"{what} now split {new} ways"
    if field == "cp":  # the sequence splits the activations; the model state stays whole
        held = f"activations {after.memory.activations_gib:.0f} GiB per {noun} (was "
        held += f"{before.memory.activations_gib:.0f})"
    else:
        held = f"model state {_state_gib(after):.0f} GiB per {noun} (was {_state_gib(before):.0f})"
    return f"{head} (was {_ways(old, noun)}): {held}, peak {_peak(after)} (was {_peak(before)})"


def _memory_clause(field: str, old: object, new: object, before: Plan, after: Plan) -> str:
    if field in _SPLIT_WHAT:
        return _split_clause(field, int(old), int(new), before, after)  # type: ignore[call-overload]
    noun = shared_device_noun((before, after))
    if field == "dp":
        return (
            f"the replicas that fill {after.num_gpus} {after.device_noun}s at TP x PP x CP = "
            f"{_model_parallel(after.layout)} (was {before.num_gpus} at "
            f"{_model_parallel(before.layout)})"
        )
    if field == "vpp":
        if after.layout.pp == 1:
            return "interleaving needs a pipeline and PP is now 1"
        return f"{new} model chunks per pipeline rank (was {old})"
    if field == "zero":
        mem, was = after.memory, before.memory
        return (
            f"optimizer state {mem.optimizer_gib:.0f} GiB and grads {mem.grads_gib:.0f} GiB per "
            f"{noun} (was {was.optimizer_gib:.0f} and {was.grads_gib:.0f}), peak {_peak(after)}"
        )
    act, was_act = after.memory.activations_gib, before.memory.activations_gib
    if field == "recompute":
        less = _RECOMPUTE_LEVEL[str(new)] < _RECOMPUTE_LEVEL[str(old)]
        verb = "now fit with less recomputation" if less else "need more recomputation to fit"
        return f"activations of {act:.0f} GiB {verb} (was {was_act:.0f} GiB), peak {_peak(after)}"
    size = "larger micro-batches now fit" if int(new) > int(old) else "smaller micro-batches to fit"  # type: ignore[call-overload]
    return f"{size}: activations {act:.0f} GiB per {noun} (was {was_act:.0f}), peak {_peak(after)}"


def _model_parallel(layout: Layout) -> int:
    return layout.tp * layout.pp * layout.cp


def change_reason(
    field: str, before: Plan, after: Plan, *, terms: tuple[str, ...] | None = None
) -> str:
    """One line: why ``field`` differs between the source and target plans (from their numbers).

    ``terms``: the breakdown terms whose change to quote (default: those ``field`` drives).
    """
    old_value, new_value = getattr(before.layout, field), getattr(after.layout, field)
    clause = _memory_clause(field, old_value, new_value, before, after)
    deltas = _term_deltas(_FIELD_TERMS[field] if terms is None else terms, before, after)
    return f"{field_label(field)} {old_value} -> {new_value}: {clause}" + (
        f"; {deltas}" if deltas else ""
    )


def layout_changes(before: Plan, after: Plan) -> list[LayoutChange]:
    """Each changed layout field with its one-line reason (each time term quoted once)."""
    out: list[LayoutChange] = []
    quoted: set[str] = set()
    for field in CHANGE_FIELDS:
        old_value, new_value = getattr(before.layout, field), getattr(after.layout, field)
        if old_value == new_value:
            continue
        terms = tuple(t for t in _FIELD_TERMS[field] if t not in quoted)
        quoted.update(terms)
        out.append(
            LayoutChange(
                field=field,
                from_value=str(old_value),
                to_value=str(new_value),
                reason=change_reason(field, before, after, terms=terms),
            )
        )
    old_share, new_share = before.offload_share, after.offload_share
    if old_share != new_share:  # a search offloads where a layout fits only so
        deltas = _term_deltas(("offload",), before, after)
        act, was = after.memory.activations_gib, before.memory.activations_gib
        out.append(
            LayoutChange(
                field="activation_offload",
                from_value=f"{100 * old_share:.0f}%",
                to_value=f"{100 * new_share:.0f}%",
                reason=(
                    f"activation offload {100 * old_share:.0f}% -> {100 * new_share:.0f}%: saved "
                    f"activations {act:.0f} GiB per {shared_device_noun((before, after))} on the device (was "
                    f"{was:.0f}), the rest in "
                    f"host memory, peak {_peak(after)}" + (f"; {deltas}" if deltas else "")
                ),
            )
        )
    return out


def port_layout(
    model: ModelSpec, target: ClusterSpec, workload: TrainWorkload, layout: Layout
) -> tuple[Plan | None, str]:
    """The source layout on the target (dp rescaled to its GPU count), or None and why not."""
    model_parallel = _model_parallel(layout)
    if target.num_accelerators % model_parallel:
        return None, (
            f"not legal on {target.name}: TP x PP x CP = {model_parallel} does not divide its "
            f"{target.num_accelerators} {target.accelerator.device_noun}s"
        )
    ported = layout.model_copy(update={"dp": target.num_accelerators // model_parallel})
    try:
        plan = engine.estimate(model, target, workload, ported)
    except SpecError as exc:
        return None, f"{ported.short()} is not legal on {target.name}: {exc}"
    if not plan.fits:
        why = engine.not_fitting_message(plan, model, target, workload)
        return plan, f"{ported.short()} does not fit on {target.name}: {why}"
    return plan, ""


def _best(model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload, *, side: str,
          options: MigrateOptions) -> Plan:  # fmt: skip
    try:
        return engine.search(
            model, cluster, workload, fix=dict(options.fix), config=options.config
        ).best
    except InfeasibleError as exc:
        raise InfeasibleError(f"on the {side} cluster: {exc}") from None


def _source_plan(
    model: ModelSpec, source: ClusterSpec, workload: TrainWorkload, options: MigrateOptions
) -> Plan:
    if options.from_layout is None:
        return _best(model, source, workload, side="source", options=options)
    plan = engine.estimate(model, source, workload, options.from_layout)
    if not plan.fits:
        why = engine.not_fitting_message(plan, model, source, workload)
        raise InfeasibleError(f"the given layout does not fit on {source.name}: {why}")
    return plan


def _ported_note(ported: Plan | None, note: str, source_plan: Plan, target_plan: Plan) -> str:
    if note or ported is None:
        return note
    gap = 100.0 * (target_plan.tokens_per_s / ported.tokens_per_s - 1.0)
    return (
        f"porting {ported.layout.short()} as is runs {ported.tokens_per_s / source_plan.tokens_per_s:.2f}x "
        f"the source; the re-planned layout is {gap:.0f}% faster than the port"
    )


def migrate(
    model: ModelSpec,
    source: ClusterSpec,
    target: ClusterSpec,
    workload: TrainWorkload,
    *,
    options: MigrateOptions | None = None,
    target_workload: TrainWorkload | None = None,
) -> MigrateResult:
    """Re-plan ``model`` from ``source`` to ``target``; InfeasibleError names the side that fails.
    ``target_workload``: the step on the target when it runs another framework (the target
    vendor's default where the user named none: MaxText on a TPU); default ``workload``."""
    options = options or MigrateOptions()
    there = target_workload or workload
    before = _source_plan(model, source, workload, options)
    after = _best(model, target, there, side="target", options=options)
    ported, note = port_layout(model, target, there, before.layout)
    ported_speedup = None
    if ported is not None and ported.fits:
        ported_speedup = ported.tokens_per_s / before.tokens_per_s
    return MigrateResult(
        model=model.name,
        workload=workload,
        from_plan=before,
        to_plan=after,
        from_economics=economics(before, source, options.run),
        to_economics=economics(after, target, options.run),
        speedup=after.tokens_per_s / before.tokens_per_s,
        changes=layout_changes(before, after),
        old_layout_on_new=ported,
        old_layout_speedup=ported_speedup,
        old_layout_note=_ported_note(ported, note, before, after),
    )
