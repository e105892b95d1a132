"""Load a cluster-state file (``--cluster-state FILE``) strictly, as every other spec file."""

from __future__ import annotations

from pathlib import Path

from planner.catalog.io import load_mapping, validate_spec
from planner.errors import SpecError
from planner.specs.cluster_state import ClusterState


def load_cluster_state(source: str | Path | ClusterState | dict[str, object]) -> ClusterState:
    """A ClusterState from a YAML/JSON file, a dict of its fields, or itself.

    The file goes through the strict loader of the catalogs (no duplicate keys, no aliases
    bombs, no booleans or text for numbers); every error is one SpecError line naming the
    file and the key.
    """
    if isinstance(source, ClusterState):
        return source
    if isinstance(source, dict):
        return validate_spec(ClusterState, source, where="cluster_state")
    if not isinstance(source, str | Path) or not str(source).strip():
        raise SpecError(
            f"cluster_state {str(source)[:60]!r}: must be a YAML/JSON file, a dict or a "
            "ClusterState"
        )
    path = Path(source)
    return validate_spec(ClusterState, load_mapping(path), where=f"--cluster-state {path}")
