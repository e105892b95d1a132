"""Rank placement files (``--placement FILE``): where every global rank runs and which group it
belongs to in every parallel dimension, a hostfile with the launcher's device order, and the check
that TP and EP groups stay inside one scale-up (NVLink / NVL72 / ICI) domain when the plan says so.

Ranks follow the planner's order (TP innermost, then CP, DP, PP outermost; EP inside DP x CP),
which is Megatron-LM's default ``tp-cp-ep-dp-pp`` and torchtitan's mesh order. Rank r runs on
node ``r // gpus_per_node`` as local rank ``r % gpus_per_node`` on GPU ``r % gpus_per_node``, as
torchrun assigns them. A plan on part of the cluster sits on the regular sub-cluster it was
scored on (``gb200_nvl72x144 --gpus 128``: 64 GPUs of each rack). With a cluster state
(``--cluster-state``) the ranks go where the CP-SAT placement put them
(:mod:`planner.search.placement`): host ``node<i>`` is the cluster's node i, a node's ranks are
consecutive, its local ranks count from 0 and ``gpu`` is the physical GPU (the
CUDA_VISIBLE_DEVICES order the hostfile gives).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from pydantic import NonNegativeInt

from planner.errors import InternalError, SpecError
from planner.report.quote import comment_text
from planner.search.state import plan_positions
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.cluster_state import ClusterState
from planner.specs.result import Plan
from planner.topology import rank_table

PLACEMENT_SCHEMA_VERSION = "1.0"
"""Version of the placement record shape (major.minor; minor bumps are additive)."""
DIMENSIONS = ("tp", "cp", "dp", "pp", "ep")
"""Parallel dimensions with a group column, innermost first (EP last: it lives inside DP x CP)."""
NVLINK_DIMENSIONS = ("tp", "ep")
"""Dimensions whose groups must stay inside one scale-up domain when the plan says they do."""


class PlacementRecord(FrozenSpec):
    """One global rank: where it runs and its group in every parallel dimension."""

    schema_version: str = PLACEMENT_SCHEMA_VERSION
    """Version of this record shape."""
    rank: NonNegativeInt
    """Global rank (torchrun's RANK)."""
    node: NonNegativeInt
    """Node (host) index, 0-based (torchrun's node rank)."""
    host: str
    """Placeholder host name ``node<i>``; the launcher maps it to a real host."""
    local_rank: NonNegativeInt
    """Rank within the node (torchrun's LOCAL_RANK)."""
    gpu: NonNegativeInt
    """Local GPU index the rank uses (its position in CUDA_VISIBLE_DEVICES)."""
    domain: NonNegativeInt
    """Scale-up domain (NVLink domain, NVL72 rack, TPU slice) index."""
    tp_group: NonNegativeInt
    """Tensor-parallel group index."""
    tp_index: NonNegativeInt
    """Position in the tensor-parallel group (TP rank)."""
    cp_group: NonNegativeInt
    """Context-parallel group index."""
    cp_index: NonNegativeInt
    """Position in the context-parallel group."""
    dp_group: NonNegativeInt
    """Data-parallel group index."""
    dp_index: NonNegativeInt
    """Position in the data-parallel group (DP rank)."""
    pp_group: NonNegativeInt
    """Pipeline group index."""
    pp_index: NonNegativeInt
    """Pipeline stage of the rank."""
    ep_group: NonNegativeInt
    """Expert-parallel group index."""
    ep_index: NonNegativeInt
    """Position in the expert-parallel group."""


def placement_records(
    plan: Plan, cluster: ClusterSpec, *, state: ClusterState | None = None
) -> list[PlacementRecord]:
    """One record per global rank of ``plan`` on ``cluster``: on the accelerators the CP-SAT
    placement chose under ``state``, else on the regular sub-cluster the plan was scored on
    (a 128-GPU plan on two 72-GPU racks: 64 in each, so no TP16 group straddles).

    >>> import planner
    >>> plan = planner.estimate(model="70B", cluster="hgx_b200x16", layout={"tp": 8, "pp": 2})
    >>> rows = placement_records(plan, planner.load_cluster("hgx_b200x16"))
    >>> rows[9].node, rows[9].gpu, rows[9].tp_group, rows[9].tp_index, rows[9].pp_index
    (1, 1, 1, 1, 1)
    """
    if state is None and plan.cluster_state is not None:
        raise SpecError(
            f"the plan was placed on a cluster state ({plan.cluster_state.state}); pass the same "
            "state (--cluster-state) to write its ranks"
        )
    records = []
    seen: dict[int, int] = {}
    for row in rank_table(cluster, plan.layout, plan_positions(plan, cluster, state)):
        fields = {key: value for key, value in row.items() if key != "local"}
        local_rank = seen.get(row["node"], 0)
        seen[row["node"]] = local_rank + 1
        records.append(
            PlacementRecord(
                host=f"node{row['node']}", local_rank=local_rank, gpu=row["local"], **fields
            )
        )
    return records


def check_domains(plan: Plan, records: list[PlacementRecord]) -> list[str]:
    """Per dimension, how many groups stay inside one scale-up domain; raises InternalError
    when a TP or EP group leaves its domain although the plan says it stays inside."""
    lines = []
    for dim in DIMENSIONS:
        domains: dict[int, set[int]] = {}
        for record in records:
            domains.setdefault(getattr(record, f"{dim}_group"), set()).add(record.domain)
        inside = sum(len(found) == 1 for found in domains.values())
        entry = plan.placement.get(dim)
        claimed = entry is not None and entry.within_domain
        lines.append(f"{dim}: {inside} of {len(domains)} group(s) inside one scale-up domain")
        if dim in NVLINK_DIMENSIONS and claimed and inside < len(domains):
            raise InternalError(
                f"placement: the plan puts {dim} groups inside one scale-up domain, but "
                f"{len(domains) - inside} of {len(domains)} span several"
            )
    return lines


def placement_csv(records: list[PlacementRecord]) -> str:
    """The records as CSV with a header row."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(PlacementRecord.model_fields), lineterminator="\n")
    writer.writeheader()
    for record in records:
        writer.writerow(record.model_dump())
    return out.getvalue()


def placement_jsonl(records: list[PlacementRecord]) -> str:
    """The records as JSON lines, one rank per line."""
    return "".join(record.model_dump_json() + "\n" for record in records)


def hostfile(plan: Plan, records: list[PlacementRecord]) -> str:
    """An MPI/DeepSpeed-style hostfile (``host slots=N``, nodes in rank order) with the
    CUDA_VISIBLE_DEVICES order each node uses as a comment."""
    slots: dict[str, list[int]] = {}
    for record in records:
        slots.setdefault(record.host, []).append(record.gpu)
    lines = [
        "# "
        + comment_text(
            f"{plan.model} on {plan.cluster}: {plan.layout.short()} ({plan.num_gpus} ranks)"
        ),
        "# ranks fill the nodes in the order of their lines, slots ranks each (local ranks from"
        " 0 in CUDA_VISIBLE_DEVICES order); replace nodeN by hosts",
    ]
    for host, gpus in slots.items():
        devices = ",".join(str(gpu) for gpu in gpus)
        lines.append(f"# {host}: CUDA_VISIBLE_DEVICES={devices}")
    lines += [f"{host} slots={len(gpus)}" for host, gpus in slots.items()]
    return "\n".join(lines) + "\n"


def placement_files(
    path: str | Path, plan: Plan, cluster: ClusterSpec, *, state: ClusterState | None = None
) -> dict[Path, str]:
    """What ``--placement PATH`` writes: the per-rank table (CSV when PATH ends in ``.csv``,
    else JSON lines) and :func:`hostfile_path` (``PATH.hostfile``: ``ranks.csv`` and
    ``ranks.jsonl`` get hostfiles of their own); after checking the domains. ``state``: the
    ranks go where the CP-SAT placement on the free accelerators put them."""
    target = Path(path)
    if target.suffix == ".hostfile":
        raise SpecError(f"--placement {target}: use a .csv or .jsonl name (the hostfile is added)")
    records = placement_records(plan, cluster, state=state)
    check_domains(plan, records)
    table = placement_csv(records) if target.suffix == ".csv" else placement_jsonl(records)
    return {target: table, hostfile_path(target): hostfile(plan, records)}


def hostfile_path(path: str | Path) -> Path:
    """The hostfile written beside the placement table ``path``: its whole name plus
    ``.hostfile``, so that a CSV and a JSON-lines table of one stem do not share one.

    >>> hostfile_path("out/ranks.csv").as_posix(), hostfile_path("ranks.jsonl").name
    ('out/ranks.csv.hostfile', 'ranks.jsonl.hostfile')
    """
    target = Path(path)
    return target.with_name(target.name + ".hostfile")
