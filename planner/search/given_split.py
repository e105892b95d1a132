"""Pipeline splits the user gives, in Megatron-LM's spellings: the layer layout string
(``--pipeline-model-parallel-layout``), uneven first and last stages
(``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``) and the
embedding and loss counted as layers (``--account-for-embedding-in-pipeline-split`` /
``--account-for-loss-in-pipeline-split``). Each becomes the :class:`PipelineSplit` the cost
model scores, so that a published run is predicted on the split it ran (``layout estimate``).

The rules are Megatron-LM's, read in its code (NVIDIA/Megatron-LM, megatron/core/transformer/
pipeline_parallel_layer_layout.py ``PipelineParallelLayerLayout``; transformer_block.py
``get_num_layers_to_build``): a string Megatron-LM refuses is refused here with the rule it
breaks, one line, and a string it takes gives the layers it builds.
"""

from __future__ import annotations

import re

from planner.errors import SpecError
from planner.specs.pipeline import PipelineSplit

LAYER_CHARS = {"E": "embedding", "t": "decoder layer", "m": "MTP layer", "L": "loss"}
"""The layout string's layer characters (``parse_str_to_list``'s ``char2layer_type``)."""
MAX_LAYOUT_CHARS = 100_000
"""Longest layout a string may unroll to (characters): a pipeline of 10,000 chunks of a few
layers each is far inside it, and a repeat count that would unroll past it is refused before
it is unrolled."""
_GROUP = re.compile(r"\(([^)]+)\)\*(\d+)")
_REPEAT = re.compile(r"(.)\*(\d+)")


def _unroll(pattern: re.Pattern[str], text: str, what: str) -> str:
    """``text`` with every match of ``pattern`` (a part, then ``*n``) replaced by n copies of
    the part, as Megatron-LM's ``re.sub`` does, refusing what would unroll past
    :data:`MAX_LAYOUT_CHARS`."""
    size = len(text)
    for match in pattern.finditer(text):
        # a count of 8 digits or more unrolls past the limit whatever it repeats: it is not
        # converted (int() of a digit string thousands long is refused or slow)
        count = int(match.group(2)) if len(match.group(2)) < 8 else MAX_LAYOUT_CHARS + 1
        size += len(match.group(1)) * count - len(match.group(0))
        if size > MAX_LAYOUT_CHARS:
            raise SpecError(
                f"pipeline layout: {what} {match.group(0)[:40]!r} unrolls to more than "
                f"{MAX_LAYOUT_CHARS:,} characters"
            )
    return pattern.sub(lambda m: m.group(1) * int(m.group(2)), text)


def layout_stages(text: str) -> list[str]:
    """The layer characters of each stage of a layout string, in its order: commas dropped,
    ``( ... )*n`` groups then ``x*n`` repeats unrolled, stages ``|`` apart.

    >>> layout_stages("Et*2|(t*2|)*2,tmL")
    ['Ett', 'tt', 'tt', 'tmL']
    """
    flat = _unroll(_REPEAT, _unroll(_GROUP, text.replace(",", ""), "group"), "repeat")
    stages = flat.split("|")
    for stage in stages:
        for char in stage:
            if char not in LAYER_CHARS:
                raise SpecError(
                    f"pipeline layout {text[:60]!r}: invalid character {char!r} (layers are "
                    + ", ".join(f"{c} {name}" for c, name in LAYER_CHARS.items())
                    + "; ( )*n repeats a group, x*n a layer, | ends a stage, commas are dropped)"
                )
    return stages


def split_from_layout(text: str, *, pp: int, num_layers: int, mtp_layers: int) -> PipelineSplit:
    """The split a ``--pipeline-model-parallel-layout`` string gives: pp x vpp stages in layer
    order, stage i on rank i mod pp (vpp = stages / pp); the embedding first and the loss last,
    once each; ``num_layers`` decoder layers; ``mtp_layers`` MTP layers after every decoder
    layer, all in one stage, the last virtual stage of its rank.

    >>> split_from_layout("Et*4|(t*4|)*14tmL", pp=16, num_layers=61, mtp_layers=1).chunk_layers[:3]
    (4, 4, 4)
    >>> split_from_layout("Et*3|t*3|t*2|t*2L", pp=2, num_layers=10, mtp_layers=0).chunk_layers
    (3, 3, 2, 2)
    """
    stages = layout_stages(text)
    shown = repr(text[:60])
    if len(stages) % pp:
        raise SpecError(
            f"pipeline layout {shown}: {len(stages)} stages do not divide over pp {pp} ranks "
            "(the layout lists pp x vpp stages)"
        )
    flat = "".join(stages)
    rules = [
        (flat[:1] == "E" and flat.count("E") == 1, "the embedding E must come first, once"),
        (flat[-1:] == "L" and flat.count("L") == 1, "the loss L must come last, once"),
        (
            flat.count("t") == num_layers,
            f"it has {flat.count('t')} decoder layers t, the model {num_layers}",
        ),
        (
            flat.count("m") == mtp_layers,
            f"it has {flat.count('m')} MTP layers m, the workload {mtp_layers} (--mtp-num-layers)",
        ),
        ("m" not in flat or "t" not in flat[flat.index("m") :], "decoder layers t come before m"),
    ]
    for holds, why in rules:
        if not holds:
            raise SpecError(f"pipeline layout {shown}: {why}")
    if "E" not in stages[0] or "L" not in stages[-1]:  # an empty stage before E or after L
        raise SpecError(
            f"pipeline layout {shown}: the planner places the embedding in the first stage and "
            "the loss in the last; a stage before E or after L cannot be scored"
        )
    holding = [i for i, stage in enumerate(stages) if "m" in stage]
    vpp = len(stages) // pp
    if len(holding) > 1 or (holding and holding[0] // pp != vpp - 1):
        raise SpecError(
            f"pipeline layout {shown}: the MTP layers must all sit in one stage, the last "
            "virtual stage of its rank"
        )
    return PipelineSplit(
        chunk_layers=tuple(stage.count("t") for stage in stages),
        mtp_chunk=holding[0] if holding else None,
    )


def split_from_first_last(
    *, pp: int, vpp: int, num_layers: int, first: int | None, last: int | None
) -> PipelineSplit:
    """The split of ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-
    layers``: the first (last) rank holds ``first`` (``last``) layers, the other ranks share the
    rest evenly, and each rank's layers divide evenly over its vpp chunks; Megatron-LM refuses
    a rest or a rank's count that does not divide.

    >>> split_from_first_last(pp=4, vpp=1, num_layers=30, first=6, last=8).chunk_layers
    (6, 8, 8, 8)
    >>> split_from_first_last(pp=2, vpp=2, num_layers=10, first=4, last=None).chunk_layers
    (2, 3, 2, 3)
    """
    if pp < 2:
        raise SpecError("--decoder-first/last-pipeline-num-layers need pp > 1")
    rest, left = num_layers, pp
    for count in (first, last):
        if count is not None:
            rest, left = rest - count, left - 1
    if rest < 0 or (left == 0 and rest) or (left and rest % left):
        raise SpecError(
            f"--decoder-first/last-pipeline-num-layers {first}/{last}: the other {left} ranks "
            f"cannot share the remaining {rest} of {num_layers} layers evenly"
        )
    per_rank = [rest // left if left else 0] * pp
    if first is not None:
        per_rank[0] = first
    if last is not None:
        per_rank[-1] = last
    for rank, count in enumerate(per_rank):
        if count % vpp:
            raise SpecError(
                f"--decoder-first/last-pipeline-num-layers: rank {rank}'s {count} layers do not "
                f"divide over its vpp {vpp} chunks"
            )
    return PipelineSplit(chunk_layers=tuple(per_rank[c % pp] // vpp for c in range(pp * vpp)))


def split_from_accounting(
    *, pp: int, vpp: int, num_layers: int, embedding: bool, loss: bool
) -> PipelineSplit:
    """The split of ``--account-for-embedding-in-pipeline-split`` / ``--account-for-loss-in-
    pipeline-split``: the embedding and the loss each take a layer's slot, the slots divide
    evenly over the pp x vpp chunks, and the first (last) chunk builds one decoder layer fewer.

    >>> split_from_accounting(pp=8, vpp=1, num_layers=94, embedding=True, loss=True).chunk_layers
    (11, 12, 12, 12, 12, 12, 12, 11)
    """
    slots = num_layers + int(embedding) + int(loss)
    chunks = pp * vpp
    if slots % chunks:
        raise SpecError(
            f"--account-for-embedding/loss-in-pipeline-split: {slots} slots ({num_layers} layers"
            f"{' + embedding' if embedding else ''}{' + loss' if loss else ''}) do not divide "
            f"over pp x vpp = {chunks} chunks"
        )
    counts = [slots // chunks] * chunks
    counts[0] -= int(embedding)
    counts[-1] -= int(loss)
    if min(counts) < 0:
        raise SpecError("--account-for-embedding/loss-in-pipeline-split: a chunk has no slot")
    return PipelineSplit(chunk_layers=tuple(counts))


SPLIT_FLAGS: tuple[str, ...] = (
    "pipeline_model_parallel_layout",
    "decoder_first_pipeline_num_layers",
    "decoder_last_pipeline_num_layers",
    "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split",
)
"""Megatron-LM's split settings, by their argument names (``--pipeline-model-parallel-layout``
...), as ``layout estimate`` and ``planner.api.estimate(pipeline_split={...})`` take them."""


def split_from_flags(
    flags: dict[str, object], *, pp: int, vpp: int, num_layers: int, mtp_layers: int
) -> PipelineSplit | None:
    """The split Megatron-LM's settings in ``flags`` (:data:`SPLIT_FLAGS`; None, False or
    absent = not set) give a layout of ``pp`` x ``vpp`` chunks; None when none is set. The
    layout string stands alone, and the uneven first and last stages do not combine with the
    embedding and loss counted as layers (Megatron-LM refuses both pairs)."""
    unknown = sorted(set(flags) - set(SPLIT_FLAGS))
    if unknown:
        raise SpecError(
            f"unknown pipeline split setting '{unknown[0]}'; known: " + ", ".join(SPLIT_FLAGS)
        )
    given = {k: v for k, v in flags.items() if v is not None and v is not False}
    if not given:
        return None
    text = given.get("pipeline_model_parallel_layout")
    if text is not None:
        if len(given) > 1:
            raise SpecError(
                "--pipeline-model-parallel-layout sets every stage; it does not combine with "
                + ", ".join(
                    "--" + k.replace("_", "-")
                    for k in given
                    if k != "pipeline_model_parallel_layout"
                )
            )
        if not isinstance(text, str):
            raise SpecError("--pipeline-model-parallel-layout must be a string")
        split = split_from_layout(text, pp=pp, num_layers=num_layers, mtp_layers=mtp_layers)
        if split.num_chunks != pp * vpp:
            raise SpecError(
                f"pipeline layout {text[:60]!r}: {split.num_chunks} stages are pp {pp} x vpp "
                f"{split.num_chunks // pp}, the layout's vpp is {vpp} (give --vpp "
                f"{split.num_chunks // pp})"
            )
        return split
    first, last = (given.get(f"decoder_{k}_pipeline_num_layers") for k in ("first", "last"))
    embedding = bool(given.get("account_for_embedding_in_pipeline_split"))
    loss = bool(given.get("account_for_loss_in_pipeline_split"))
    for name, value in (("first", first), ("last", last)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise SpecError(f"--decoder-{name}-pipeline-num-layers must be a whole number >= 0")
    if first is not None or last is not None:
        if embedding or loss:
            raise SpecError(
                "--decoder-first/last-pipeline-num-layers do not combine with "
                "--account-for-embedding/loss-in-pipeline-split (Megatron-LM refuses both)"
            )
        split = split_from_first_last(
            pp=pp,
            vpp=vpp,
            num_layers=num_layers,
            first=first,
            last=last,  # type: ignore[arg-type]
        )
    else:
        split = split_from_accounting(
            pp=pp, vpp=vpp, num_layers=num_layers, embedding=embedding, loss=loss
        )
    return split  # MTP modules, if any, on the last chunk (PipelineSplit.mtp_chunk None)
