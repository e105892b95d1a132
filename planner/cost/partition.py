"""What one pipeline rank holds: its decoder layers (the even split, or an explicit
:class:`~planner.specs.pipeline.PipelineSplit`), which of them recompute in full, and the
embedding, output layer, loss and multi-token-prediction (MTP) modules.

Every per-stage term of the cost model (:mod:`planner.cost.stage`) reads a rank through
:func:`stage_contents`, so an explicit split is scored by the same formulas as the even one.
An MTP module's transformer layer is counted as one more layer of the model's last layer's kind
(``range(L - 1, L)`` in ``layers``), so its time, memory and parameters come from the per-layer
tables like any other layer's.
"""

from __future__ import annotations

from typing import NamedTuple

from planner.cost.memory import stage_layers
from planner.errors import InternalError
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.workload import TrainWorkload


class StageContents(NamedTuple):
    """What one pipeline rank holds."""

    layers: tuple[range, ...]
    """Decoder-layer index ranges (its chunks', then one ``range(L - 1, L)`` per MTP module)."""
    recomputed: tuple[range, ...] | None
    """Layers that recompute in full (within ``layers``; empty unless the layout recomputes in
    full); None = the layout's rule (:func:`planner.cost.memory.recomputed_fraction`), as the
    even split applies it."""
    first: bool
    """Holds the input embedding."""
    last: bool
    """Holds the final norm, the output layer and the loss."""
    mtp: int
    """Multi-token-prediction modules held."""
    output_weights: bool
    """Holds a copy of the output projection (the last rank, and a rank holding MTP modules)."""

    @property
    def num_layers(self) -> int:
        """Transformer layers held, MTP layers included."""
        return sum(len(r) for r in self.layers)

    @property
    def num_heads(self) -> int:
        """Passes of the output layer and loss per micro-batch (main head + MTP heads)."""
        return int(self.last) + self.mtp

    @property
    def num_recomputed(self) -> int:
        """Layers recomputed in full, when explicit (0 otherwise)."""
        return sum(len(r) for r in self.recomputed or ())


def stage_contents(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    stage: int,
    split: PipelineSplit | None = None,
) -> StageContents:
    """What rank ``stage`` of ``layout``'s pipeline holds, under ``split`` or the even split
    (:func:`planner.cost.memory.stage_layers`; MTP modules on the last rank, as Megatron-LM
    places them by default).

    >>> from planner.cost.params import _tiny
    >>> from planner.specs.pipeline import PipelineSplit
    >>> w = TrainWorkload()
    >>> stage_contents(_tiny(), w, Layout(pp=2), 0).layers
    (range(0, 1),)
    >>> c = stage_contents(_tiny(), w, Layout(pp=2), 1, PipelineSplit(chunk_layers=(0, 2)))
    >>> c.layers, c.last, c.first
    ((range(0, 2),), True, False)
    """
    last = stage == layout.pp - 1
    mtp_layer = (range(model.num_layers - 1, model.num_layers),)
    if split is None:
        mtp = workload.mtp_num_layers if last else 0
        layers = (stage_layers(model, layout.pp, stage),) + mtp_layer * mtp
        return StageContents(layers, None, stage == 0, last, mtp, last)
    # the rank's chunks, in order (the MTP modules ride on a rank's last chunk)
    parts = [
        chunk_contents(model, workload, layout, c, split)
        for c in range(stage, split.num_chunks, layout.pp)
    ]
    recomputed: tuple[range, ...] | None = None
    if parts[0].recomputed is not None:  # () unless full recomputation: see chunk_contents
        recomputed = tuple(r for p in parts for r in p.recomputed or ())
    mtp = sum(p.mtp for p in parts)
    return StageContents(
        tuple(r for p in parts for r in p.layers), recomputed, stage == 0, last, mtp,
        last or mtp > 0,
    )  # fmt: skip


def chunk_contents(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    chunk: int,
    split: PipelineSplit | None = None,
) -> StageContents:
    """What model chunk ``chunk`` of an interleaved pipeline holds (chunk c of pp x vpp runs on
    rank c mod pp): its layers under ``split``, or the even split of the layers over the
    pp x vpp chunks (:func:`planner.cost.memory.stage_layers`, as the plan lists its chunks);
    the embedding with chunk 0, the output layer, loss and MTP modules with the last chunk (or
    ``split.mtp_chunk``).

    >>> from planner.cost.params import _tiny
    >>> w, layout = TrainWorkload(), Layout(pp=2, vpp=2)
    >>> [chunk_contents(_tiny(), w, layout, c).layers for c in range(4)]  # 2 layers, 4 chunks
    [(range(0, 0),), (range(0, 1),), (range(1, 2),), (range(2, 2),)]
    >>> c = chunk_contents(_tiny(), w, layout, 3, PipelineSplit(chunk_layers=(0, 1, 0, 1)))
    >>> c.layers, c.last, c.first
    ((range(1, 2),), True, False)
    """
    chunks = layout.pp * layout.vpp
    last = chunk == chunks - 1
    mtp_layer = (range(model.num_layers - 1, model.num_layers),)
    if split is None:
        mtp = workload.mtp_num_layers if last else 0
        layers = (stage_layers(model, chunks, chunk),) + mtp_layer * mtp
        return StageContents(layers, None, chunk == 0, last, mtp, last)
    check_split(model, layout, split)
    start = sum(split.chunk_layers[:chunk])
    span = range(start, start + split.chunk_layers[chunk])
    mtp_chunk = chunks - 1 if split.mtp_chunk is None else split.mtp_chunk
    mtp = workload.mtp_num_layers if chunk == mtp_chunk else 0
    recomputed: tuple[range, ...] | None = None
    if layout.recompute is not Recompute.FULL:
        recomputed = ()  # only full recomputation drops a layer's activations
    elif split.recompute_layers is not None or workload.recompute_num_layers is not None:
        # the chunk's first layers (the split's count, else the block method's N: a chunk of
        # fewer than N layers recomputes all of them, not N), and its MTP modules whatever the
        # count: Megatron-LM checkpoints an MTP layer whenever the granularity is full
        # (MultiTokenPredictionLayer._checkpointed_forward), as the rule's share does
        count = (
            split.recompute_layers[chunk]
            if split.recompute_layers is not None
            else workload.recompute_num_layers
        )
        recomputed = (range(start, start + min(count or 0, len(span))),)
        recomputed += mtp_layer * mtp
    return StageContents(
        (span,) + mtp_layer * mtp, recomputed, chunk == 0, last, mtp, last or mtp > 0
    )


def check_split(model: ModelSpec, layout: Layout, split: PipelineSplit) -> None:
    """InternalError unless ``split`` has pp x vpp chunks, sums to the model's layers and
    recomputes no more layers than a chunk has."""
    if split.num_chunks != layout.pp * layout.vpp or sum(split.chunk_layers) != model.num_layers:
        raise InternalError(
            f"pipeline split {list(split.chunk_layers)} does not fit {layout.pp} x {layout.vpp} "
            f"chunks of {model.num_layers} layers"
        )
    recompute = split.recompute_layers
    if recompute is not None and (
        len(recompute) != split.num_chunks
        or any(r > n for r, n in zip(recompute, split.chunk_layers, strict=True))
    ):
        raise InternalError(f"recompute layers {list(recompute)} exceed the chunks' layers")
    if split.mtp_chunk is not None and split.mtp_chunk >= split.num_chunks:
        raise InternalError(f"MTP chunk {split.mtp_chunk} of {split.num_chunks} chunks")


def cost_balanced_split(model: ModelSpec, pp: int) -> PipelineSplit | None:
    """Nanotron's own placement of a dense model's layers on ``pp`` pipeline ranks (the
    framework places them; a user cannot). Each decoder layer costs 4 x heads x head_dim x
    hidden + 3 x ffn x hidden, the LM head (the last block, on the last rank) vocab x hidden,
    everything else nothing; the blocks are walked in order and rank r is closed after the
    block whose cumulative cost passes total x (r + 1) / pp (huggingface/nanotron
    ``src/nanotron/models/base.py`` ``build_model``, ``models/llama.py``
    ``get_block_compute_costs``). A large vocabulary thus moves layers off the last rank.
    None for an MoE model (not Nanotron's Llama blocks), or when the rule would leave a rank
    without a layer or put the head before the last rank.

    >>> from planner.catalog import load_model
    >>> m = load_model("8B").model_copy(update={"num_layers": 16, "hidden_size": 2048,
    ...     "num_attention_heads": 32, "num_kv_heads": 32, "head_dim": 64,
    ...     "ffn_hidden_size": 8192, "vocab_size": 131072})
    >>> cost_balanced_split(m, 2).chunk_layers  # layer 67.1M, head 268.4M = 4 layers; total 20
    (11, 5)

    Rank 0 closes only once its cumulative cost passes 10 layers' worth, so it takes 11 and
    rank 1 the other 5 with the head (9): the even split's last rank held 8 + 4 = 12.
    """
    if model.moe is not None or pp < 2:
        return None
    d = model.hidden_size
    layer = 4 * model.num_attention_heads * model.head_dim * d + 3 * model.ffn_hidden_size * d
    costs = [float(layer)] * model.num_layers + [float(model.vocab_size * d)]
    total = sum(costs)
    counts = [0] * pp
    rank, cumulative = 0, 0.0
    for index, cost in enumerate(costs):
        if rank >= pp:
            return None
        cumulative += cost
        if index < model.num_layers:
            counts[rank] += 1
        elif rank != pp - 1:
            return None  # the head would land before the last rank
        if cumulative > total * (rank + 1) / pp:
            rank += 1
    if any(c == 0 for c in counts):
        return None
    return PipelineSplit(chunk_layers=tuple(counts))
