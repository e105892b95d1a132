"""How a layout's layers fall on its pipeline stages, when not split evenly."""

from __future__ import annotations

from pydantic import NonNegativeInt

from planner.specs.base import FrozenSpec


class PipelineSplit(FrozenSpec):
    """An explicit assignment of layers to pipeline stages (the CP-SAT partition of
    :mod:`planner.search.solve.stages`); without one the cost model splits the layers evenly
    (:func:`planner.cost.memory.stage_layers`).

    Model chunks are listed in layer order: with pp ranks and vpp virtual stages per rank there
    are pp x vpp chunks, and chunk c runs on rank c mod pp (Megatron-LM's interleaved order,
    ``--pipeline-model-parallel-layout``). The first chunk also holds the embedding and the last
    the output layer and loss.
    """

    chunk_layers: tuple[NonNegativeInt, ...]
    """Decoder layers of each chunk, in layer order; they sum to the model's layers."""
    recompute_layers: tuple[NonNegativeInt, ...] | None = None
    """With full recomputation, how many of each chunk's first layers recompute their forward in
    the backward pass (Megatron's block method, per chunk); None = the layout's setting as the
    even split applies it (every layer, or the workload's ``recompute_num_layers``)."""
    mtp_chunk: NonNegativeInt | None = None
    """Chunk holding the multi-token-prediction modules (workload ``mtp_num_layers``; after every
    decoder layer, in the last virtual stage of its rank); None = the last chunk."""

    @property
    def num_chunks(self) -> int:
        """Model chunks (pp x vpp)."""
        return len(self.chunk_layers)
