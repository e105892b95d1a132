"""Load ``layout pack`` inputs strictly: job files and mixed pools (their paths resolved
relative to the file that names them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from planner.catalog.cluster_state import load_cluster_state
from planner.catalog.clusters import load_cluster
from planner.catalog.io import load_mapping, path_exists, validate_spec
from planner.catalog.store import load_model
from planner.errors import SpecError
from planner.specs.cluster import ClusterEdits, ClusterSpec
from planner.specs.cluster_state import ClusterState
from planner.specs.fleet import MAX_JOBS, JobFile, PoolFile
from planner.specs.model import ModelSpec
from planner.specs.workload import ServeWorkload, TrainWorkload

FILE_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Job:
    """A job file, loaded: its name, model and workload as specs."""

    name: str
    """Job name (the file's ``name`` or stem)."""
    spec: JobFile
    """The file as validated."""
    model: ModelSpec
    """Its model."""
    workload: TrainWorkload | ServeWorkload
    """Its workload (train or serve)."""


@dataclass(frozen=True)
class Partition:
    """One partition of a pool (a plain cluster is a pool of one)."""

    name: str
    """Partition name."""
    cluster: ClusterSpec
    """Its cluster."""
    state: ClusterState | None
    """Its cluster state (None = all free)."""


def _beside(text: str, base: Path) -> str | Path:
    """``text`` as a path beside ``base`` when it names a file there, else as given."""
    candidate = base.parent / text
    if text.lower().endswith(FILE_SUFFIXES) or path_exists(candidate):
        return candidate
    return text


def load_job(path: str | Path) -> Job:
    """A job file: model, mode, workload and a weight or a target (SpecError naming the file
    and key)."""
    path = Path(path)
    where = f"--job {path}"
    spec = validate_spec(JobFile, load_mapping(path), where=where)
    model = load_model(_beside(spec.model, path))
    fields = dict(spec.workload)
    if spec.mode == "serve":
        if "target_tokens_per_s" in fields:
            raise SpecError(
                f"{where}: workload.target_tokens_per_s: give the job's target as "
                "target.tokens_per_s"
            )
        workload: TrainWorkload | ServeWorkload = validate_spec(
            ServeWorkload, {"mode": "serve", **fields}, where=f"{where}: workload"
        )
    else:
        workload = validate_spec(TrainWorkload, fields, where=f"{where}: workload")
    return Job(name=spec.name or path.stem, spec=spec, model=model, workload=workload)


def load_jobs(paths: list[str | Path]) -> list[Job]:
    """Every job file, names unique; SpecError on the first bad one."""
    if not paths:
        raise SpecError("pack needs at least one --job FILE")
    if len(paths) > MAX_JOBS:
        raise SpecError(f"{len(paths)} jobs: pack takes at most {MAX_JOBS}")
    jobs = [load_job(p) for p in paths]
    seen: dict[str, str] = {}
    for path, job in zip(paths, jobs, strict=True):
        if job.name in seen:
            raise SpecError(
                f"--job {path}: job name '{job.name}' is also the name of --job {seen[job.name]}"
            )
        seen[job.name] = str(path)
    return jobs


def load_pool(
    source: str | Path | ClusterSpec,
    *,
    state: str | Path | ClusterState | None = None,
    edits: ClusterEdits | None = None,
) -> tuple[str, list[Partition]]:
    """(pool name, partitions) of a cluster name, a cluster YAML, or a pool YAML (a mapping
    with ``partitions``). ``state`` applies to a single cluster; a pool gives each partition's
    own."""
    if isinstance(source, ClusterSpec):
        return source.name, [Partition(source.name, source, _state(state))]
    path = Path(str(source))
    if path.suffix.lower() in FILE_SUFFIXES and path_exists(path):
        data = load_mapping(path)
        if "partitions" in data:
            if state is not None:
                raise SpecError(
                    f"--cluster-state does not apply to pool '{path}': give each partition "
                    "its cluster_state"
                )
            pool = validate_spec(PoolFile, data, where=str(path))
            parts = []
            for entry in pool.partitions:
                cluster = load_cluster(_beside(entry.cluster, path), edits)
                part_state = (
                    load_cluster_state(_beside(entry.cluster_state, path))
                    if entry.cluster_state
                    else None
                )
                parts.append(Partition(entry.name or cluster.name, cluster, part_state))
            names = [p.name for p in parts]
            duplicate = next((n for n in names if names.count(n) > 1), None)
            if duplicate:
                raise SpecError(f"{path}: partition name '{duplicate}' is given twice")
            return pool.name, parts
    cluster = load_cluster(source, edits)
    return cluster.name, [Partition(cluster.name, cluster, _state(state))]


def _state(state: str | Path | ClusterState | None) -> ClusterState | None:
    return None if state is None else load_cluster_state(state)
