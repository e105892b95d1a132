"""A training framework as data: which layouts it can run, how it runs them, what it exports.

The same layout runs differently in Megatron-LM, torchtitan, MaxText and DeepSpeed (DESIGN.md
section 7b): which ZeRO/FSDP stages exist and whether they compose with pipeline parallelism,
whether KV heads may be replicated across tensor-parallel ranks, which context-parallel
algorithms exist, which overlaps happen and how memory is allocated. A profile is one YAML file
in ``topologies/frameworks/`` with a source for each claim; the cost model never branches on a
framework's name: a profile sets the :class:`planner.specs.workload.TrainWorkload` fields its
mechanisms read (``workload``), and the legality rules read the fields below.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from planner.specs.base import FrozenSpec
from planner.specs.formats import NumberFormat
from planner.specs.text import Name, Text

ExportFormat = Literal[
    "megatron",
    "bridge",
    "torchtitan",
    "deepspeed",
    "maxtext",
    "automodel",
    "nanotron",
    "accelerate",
]
"""Export formats a framework maps to (``layout export --format``)."""

CpComm = Literal["p2p", "a2a", "a2a+p2p", "allgather"]
"""Context-parallel attention algorithms: the K/V ring of point-to-point sends (Megatron-LM
``--cp-comm-type p2p``, ring attention), all-to-all of heads (DeepSpeed-Ulysses, ``a2a``), the
hierarchical mix (``a2a+p2p``: all-to-all inside a domain, ring across), and an all-gather of
K/V before attention (``allgather``; Llama 3's and MaxText's context parallelism)."""
CP_COMMS: tuple[str, ...] = ("p2p", "a2a", "a2a+p2p", "allgather")
"""The names of :data:`CpComm`, in order."""

PipelineSchedule = Literal["1f1b", "zero_bubble", "gpipe", "dualpipe"]
"""Pipeline schedules (``TrainWorkload.pipeline_schedule``): 1F1B, interleaved when vpp > 1
(Narayanan et al. SC'21); ``zero_bubble``, 1F1B with each backward split into its input and
weight gradients and the weight gradients deferred into the drain (ZB-H1, Qi et al., "Zero
Bubble Pipeline Parallelism", ICLR 2024, arXiv 2401.10241); ``gpipe``, every micro-batch's
forward before the backwards (Huang et al., "GPipe", NeurIPS 2019), the bubble of 1F1B and every
micro-batch's activations in flight; DualPipe (DeepSeek-V3, arXiv 2412.19437 section 3.2.1)."""

CpImpl = Literal["te", "pytorch"]
"""Context-parallel attention implementations: Transformer Engine's (``te``) and PyTorch's
``context_parallel`` (``pytorch``); see ``TrainWorkload.cp_impl``."""


class FrameworkSpec(FrozenSpec):
    """A training framework profile (``topologies/frameworks/<name>.yaml``)."""

    name: Name
    """Profile name, as ``--framework`` spells it (``megatron``, ``torchtitan``...)."""
    description: Text
    """What the profile stands for (framework, version range, recipe)."""
    export_format: ExportFormat
    """The export format a plan made with this profile maps to."""
    export_is_own: bool = True
    """The export format is this framework's own. False where it is the nearest format of
    another stack (HAI-LLM, closed, exports Megatron-LM's arguments): the export then says the
    plan was scored for another framework, as it does for a plan exported to any other
    format."""
    zero_stages: tuple[int, ...] = Field(min_length=1)
    """ZeRO / FSDP stages the framework implements (0 plain data parallel, 1 sharded optimizer
    state, 2 + sharded gradients, 3 + sharded parameters: FSDP)."""
    max_zero_with_pp: int = Field(ge=0, le=3)
    """Highest ZeRO stage that composes with pipeline parallelism (DeepSpeed's pipeline engine
    takes ZeRO-1 at most; torchtitan runs FSDP2 inside pipeline stages)."""
    tensor_parallel: bool = True
    """Tensor parallelism exists."""
    pipeline: bool = True
    """Pipeline parallelism exists."""
    interleaved_pipeline: bool = True
    """Virtual pipeline stages (interleaved 1F1B or an equivalent looped schedule) exist."""
    pipeline_schedules: tuple[PipelineSchedule, ...] = ("1f1b",)
    """Pipeline schedules the framework runs (:data:`PipelineSchedule`); a pipelined layout under
    any other is refused. Its ``workload`` default, when it sets one, is among them."""
    context_parallel: tuple[CpComm, ...] = ()
    """Context-parallel algorithms the framework offers, the default first; empty = no CP."""
    expert_parallel: bool = True
    """Expert parallelism exists."""
    expert_parallel_ranks: Literal["dp", "dp_cp_tp"] = "dp_cp_tp"
    """The ranks expert parallelism is carved from: ``dp_cp_tp``, any of the data, context and
    tensor-parallel ones (Megatron-Core's MoE parallel folding: ep x etp divides dp x cp x tp);
    ``dp``, the data-parallel ranks alone (ep divides dp: MaxText's expert mesh axis, which
    shards the batch of the other layers)."""
    expert_tensor_parallel_default: Literal["one", "tp", "tp_without_ep", "tp_only"] = "one"
    """The expert tensor-parallel size (``etp``) of an MoE layout that states none (an estimate,
    a layout file; a search chooses etp itself), and the sizes the framework can run: ``one``,
    experts are not split over the tensor-parallel ranks, any etp the layout rules allow may
    be asked for; ``tp``, the tensor-parallel size, likewise any (Megatron-LM:
    ``--expert-tensor-parallel-size`` defaults to ``--tensor-model-parallel-size``);
    ``tp_without_ep``, the tensor-parallel size without expert parallelism and 1 with it, and
    only 1 or tp (torchtitan: experts take the TP plan when ep is 1, and expert parallelism
    borrows the TP ranks otherwise); ``tp_only``, the tensor-parallel size and no other
    (MaxText: the expert kernels' mlp axis is sharded over the tensor mesh axis).
    :func:`planner.catalog.frameworks.default_etp`, :func:`planner.search.rules.expert_tp_rule`."""
    activation_offload: Literal["none", "layers", "all"] = "none"
    """How the framework offloads saved activations to host memory, for a search that offloads
    as needed (``SolverConfig.offload_as_needed``): ``none``; ``layers``, whole layers and fewer
    than all of them, without pipeline parallelism or recomputation (Megatron-LM
    ``--cpu-offloading-num-layers``); ``all``, every saved tensor (MaxText's offload remat
    policy). A workload may still give any share (``activation_offload_fraction``)."""
    pipeline_split: Literal["any", "cost", "even"] = "any"
    """Who places the layers on pipeline stages: ``any``, the user (Megatron-LM's first/last
    stage layer counts or layout string, torchtitan's per-stage modules), so the planner's even
    split or its CP-SAT split can be run; ``cost``, the framework itself, by a cost rule the
    planner reproduces (:func:`planner.cost.partition.cost_balanced_split`, Nanotron) and
    neither splits otherwise nor searches a split; ``even``, the framework itself, as evenly as
    the layers allow, taking no list of boundaries (DeepSpeed's PipelineModule), so the planner
    scores the even split and searches none."""
    pipeline_equal_stages: bool = False
    """Every pipeline chunk runs the same stack of layers (MaxText: one layers module vmapped
    over the stage axis), so pp x vpp must divide the layers; with ``pipeline_split`` even."""
    moe_tensor_parallel: bool = True
    """Tensor parallelism runs on an MoE model's layers. NeMo AutoModel's custom MoE models
    keep attention and the router replicated under TP, refuse sequence parallelism and start
    only from a complete pretrained checkpoint, so its profile runs them at tp 1."""
    tp_beyond_kv_heads: bool = False
    """Tensor parallelism may exceed the KV heads, each rank holding a replica of the KV head
    its query heads share (GSPMD sharding; Megatron-LM and torchtitan split KV heads and need tp
    to divide them)."""
    training_precisions: tuple[NumberFormat, ...] = (
        NumberFormat.BF16,
        NumberFormat.FP8,
        NumberFormat.MXFP8,
        NumberFormat.NVFP4,
        NumberFormat.MXFP4,
    )
    """Training formats the framework has a recipe for: bf16 mixed precision and its 8- and
    4-bit GEMM recipes (Transformer Engine's FP8, MXFP8 and NVFP4 for the Megatron-based
    stacks; int8 only where a profile lists it, MaxText's AQT)."""
    vendors: tuple[Name, ...] = ()
    """Accelerator vendors it runs on (:attr:`planner.specs.hardware.AcceleratorSpec.vendor`,
    matched case-insensitively); empty = any. A vendor no profile lists (hardware added as a
    YAML file) is not restricted: the planner knows nothing to refuse there."""
    default_on: tuple[Name, ...] = ()
    """Vendors on which it is the profile used when no framework is named (``--framework``
    absent): Megatron-LM on NVIDIA and AMD GPUs, MaxText on Google's TPUs."""
    calibrates: bool = False
    """Its validation rows fit the accelerator efficiency factors (``layout calibrate --fit``).
    The other profiles' rows are never fitted: they are predicted through the profile, so they
    test its mechanisms out of sample instead of bending the accelerator's factors toward one
    framework's overheads."""
    workload: dict[str, Any] = Field(default_factory=dict)
    """TrainWorkload fields this framework sets unless the user sets them (its defaults: which
    overlaps run, the gradient dtype, the loss kernel, the MoE dispatcher's host sync, how
    ZeRO-3 prefetches, the allocator's overhead...)."""
    sources: dict[str, Text]
    """Where each claim comes from (repository + file + commit, documentation, paper)."""

    @field_validator("zero_stages")
    @classmethod
    def _stages(cls, stages: tuple[int, ...]) -> tuple[int, ...]:
        if any(s not in (0, 1, 2, 3) for s in stages) or len(set(stages)) != len(stages):
            raise ValueError(f"zero_stages {list(stages)}: each of 0-3, once")
        return tuple(sorted(stages))

    @model_validator(mode="after")
    def _consistent(self) -> FrameworkSpec:
        if "workload" in self.workload or "framework" in self.workload:
            raise ValueError("workload defaults may not set 'framework' or nest a workload")
        if not self.pipeline and self.interleaved_pipeline:
            raise ValueError("interleaved_pipeline needs pipeline")
        schedule = self.workload.get("pipeline_schedule", "1f1b")
        if schedule not in self.pipeline_schedules:
            raise ValueError(
                f"workload pipeline_schedule {schedule!r} is not among pipeline_schedules "
                f"{list(self.pipeline_schedules)}"
            )
        return self

    @property
    def default_cp_comm(self) -> str | None:
        """The context-parallel algorithm used unless another is asked for (None: no CP)."""
        return self.context_parallel[0] if self.context_parallel else None
