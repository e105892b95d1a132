"""What every export needs: the plan, the specs it was made for, and the shared arithmetic.

An :class:`ExportJob` is a scored plan plus the model, cluster and workload it was scored on
(a saved plan JSON does not carry the workload, so :func:`load_plan_file` and the CLI rebuild it
from ``--seq-len`` and the plan's tokens per step). Each format module turns a job into an
:class:`ExportResult`: the file or command text, the argument list, and the notes that say what
the framework cannot express and which setting was chosen instead.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from pydantic import BaseModel, Field

from planner.catalog.io import (
    STDIN_NAME,
    describe_value_error,
    no_duplicate_keys,
    read_stdin_text,
    read_text,
    short_repr,
)
from planner.errors import SpecError
from planner.report.quote import comment_text, printable, shell_word
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.result import SCHEMA_VERSION, Plan, SearchResult, ServePlan, ServeSearchResult
from planner.specs.workload import DEFAULT_RECOMPUTE_MODULES, ServeWorkload, TrainWorkload
from planner.units import run_length

EXPORT_SCHEMA_VERSION = "1.3"
"""Version of the ``layout export --json`` shape (major.minor; minor bumps are additive): 1.1 added
``env``, 1.2 the ``automodel`` and ``nanotron`` formats, 1.3 ``accelerate``."""

_HF_URL = re.compile(r"https?://huggingface\.co/(\w[\w.-]*/\w[\w.-]*)")
"""A Hugging Face model URL; the id's parts start with a word character, so the id can never
read as a command-line flag where it becomes an argument (``vllm serve <id>``)."""


class ExportResult(FrozenSpec):
    """One plan rendered for one framework (``layout export --json``)."""

    schema_version: str = EXPORT_SCHEMA_VERSION
    """Version of this JSON shape (major.minor; minor bumps are additive)."""
    format: str
    """Export format (megatron, bridge, torchtitan, deepspeed, maxtext, automodel and nanotron
    (schema 1.2), accelerate (schema 1.3), vllm, sglang)."""
    framework: str
    """The framework and entry point the output is for."""
    framework_version: str
    """Release or commit whose argument parser / config schema the names were checked against."""
    text: str
    """The output as written to stdout: a shell fragment, TOML, JSON, YAML or a command line."""
    args: list[str]
    """The arguments alone, in order (command-line formats and overrides); [] for config files."""
    notes: list[str]
    """What the framework cannot express and the nearest setting chosen; also in ``text`` as
    comments where the format has comments."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables the run needs (name -> value), set before the framework starts:
    also in ``text`` as ``export NAME=VALUE`` lines where the format is a shell fragment
    (schema 1.1)."""


@dataclass
class ExportJob:
    """A plan and what it was made for."""

    plan: Plan | ServePlan
    model: ModelSpec
    cluster: ClusterSpec
    workload: TrainWorkload | ServeWorkload
    notes: list[str] = field(default_factory=list)
    expressed: set[str] = field(default_factory=set)
    """Settings of :mod:`planner.report.export.assumed` the current render has set (or said in
    a note of its own)."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables the render needs set (:attr:`ExportResult.env`)."""
    origin: list[str] = field(default_factory=list)
    """Notes on how the plan was made for this export (every render repeats them first)."""

    def express(self, *keys: str) -> None:
        """Record that the render set these settings (planner.report.export.assumed keys)."""
        self.expressed.update(keys)

    def set_env(self, name: str, value: str) -> None:
        """Record an environment variable the run needs (:attr:`ExportResult.env`)."""
        self.env[name] = value

    def note(self, message: str) -> None:
        """Record what the framework cannot express (once), as one printable line: notes hold
        model names and are printed on stderr and as comments."""
        message = printable(message)
        if message not in self.notes:
            self.notes.append(message)

    @property
    def gpus_per_node(self) -> int:
        """Accelerators one host runs (torchrun's --nproc-per-node)."""
        system = self.cluster.system
        return min(system.accelerators_per_node, self.cluster.accelerators_per_domain)

    @property
    def num_nodes(self) -> int:
        """Hosts the plan uses."""
        return -(-self.plan.num_gpus // self.gpus_per_node)

    @property
    def tp_overlap_runs(self) -> bool:
        """Whether the plan's TP collectives overlap their GEMMs, as its prediction priced them:
        the workload's ``tp_comm_overlap`` at TP > 1, on TP groups inside one scale-up domain
        (:func:`planner.cost.stage.tp_overlap_reaches`; across domains they run in line, and
        :meth:`note_tp_overlap_off` says so where the flag is left off)."""
        plan, workload = self.train
        entry = plan.placement.get("tp")
        inside = entry is None or entry.within_domain
        return workload.tp_comm_overlap and plan.layout.tp > 1 and inside

    def note_tp_overlap_off(self, setting: str) -> bool:
        """Say why ``setting`` (the framework's TP-overlap switch) is off although the workload
        asks for the overlap: the TP groups cross scale-up domains. Whether it said so."""
        plan, workload = self.train
        if not workload.tp_comm_overlap or plan.layout.tp == 1 or self.tp_overlap_runs:
            return False
        self.note(
            f"{setting} left off: TP {plan.layout.tp}'s groups span scale-up domains, "
            "where the overlap cannot map its peers' buffers (it needs one NVLink or ICI "
            "domain); the prediction prices the TP collectives in line"
        )
        return True

    @property
    def train(self) -> tuple[Plan, TrainWorkload]:
        """The training plan and workload (SpecError for a serving plan)."""
        if isinstance(self.plan, Plan) and isinstance(self.workload, TrainWorkload):
            return self.plan, self.workload
        raise SpecError("this export format needs a training plan, not a serving plan")

    @property
    def num_microbatches(self) -> int:
        """Micro-batches per data-parallel replica per step (gradient-accumulation steps)."""
        plan, workload = self.train
        return workload.global_batch // (plan.layout.mbs * plan.layout.dp)

    @property
    def hf_model_id(self) -> str | None:
        """``org/name``: the model's ``hub_id``, else the id of a Hugging Face URL its source
        starts with (a user's model YAML), else None."""
        if self.model.hub_id is not None:
            return self.model.hub_id  # HUB_ID: each part starts with a letter or digit
        match = _HF_URL.match(self.model.source.strip())
        return match.group(1) if match else None


def check_batch(job: ExportJob) -> None:
    """A training plan's global batch must split into whole micro-batches on every replica."""
    if not isinstance(job.plan, Plan) or not isinstance(job.workload, TrainWorkload):
        return
    layout, batch = job.plan.layout, job.workload.global_batch
    if batch % (layout.mbs * layout.dp):
        raise SpecError(
            f"global batch ({batch}) is not a multiple of mbs x dp "
            f"({layout.mbs} x {layout.dp}); export needs whole micro-batches"
        )


def workload_for_plan(
    plan: Plan, *, seq_len: int, global_batch: int | None = None
) -> TrainWorkload:
    """The training workload a saved plan was scored on: its tokens per step (tokens/s x step
    time) divided by ``seq_len`` must be a whole number of sequences (and equal
    ``global_batch`` when given)."""
    tokens = plan.tokens_per_s * plan.step_time_s
    if not math.isfinite(tokens):  # a hand-edited plan: tokens/s x step time overflows
        raise SpecError(
            f"the plan's tokens/s ({plan.tokens_per_s:.3g}) x step time ({plan.step_time_s:.3g} s) "
            "is not a finite number of tokens"
        )
    sequences = round(tokens / seq_len)
    if sequences < 1 or abs(sequences * seq_len - tokens) > 1e-6 * tokens:
        raise SpecError(
            f"the plan processes {tokens:,.0f} tokens per step, not a whole number of "
            f"{seq_len}-token sequences; pass the --seq-len the plan was made with"
        )
    if global_batch is not None and global_batch != sequences:
        raise SpecError(
            f"--global-batch {global_batch} x --seq-len {seq_len} does not match the plan's "
            f"{tokens:,.0f} tokens per step ({sequences} sequences)"
        )
    return TrainWorkload(seq_len=seq_len, global_batch=sequences, precision=plan.layout.precision)


def load_plan_file(path: str | Path) -> Plan | ServePlan:
    """The best plan of a saved ``search --json`` or an ``estimate --json`` file (training or
    serving); ``-`` reads it from standard input.

    A newer major ``schema_version`` is refused; a newer minor one is read, ignoring the fields
    this version does not know (minor bumps only add fields).
    """
    if str(path) == STDIN_NAME:  # piped in: layout search --json | layout export --plan -
        text, target = read_stdin_text("--plan"), Path("<stdin>")
    else:
        target = Path(path)
        text = read_text(target)  # size limit, UTF-8, a regular file (not a directory or FIFO)
    try:
        data = json.loads(text, object_pairs_hook=no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise SpecError(f"plan '{target}' is not JSON: {exc}") from None
    except RecursionError:
        raise SpecError(f"plan '{target}' is not a plan: its JSON is nested too deeply") from None
    except ValueError as exc:  # a key given twice, or a number past 4,300 digits
        raise SpecError(f"plan '{target}' is not a plan: {describe_value_error(exc)}") from None
    if not isinstance(data, dict) or not ({"best", "layout"} & set(data)):
        raise SpecError(f"'{target}' is not a saved 'layout search --json' or 'estimate --json'")
    version = str(data.get("schema_version", ""))
    major, supported = version.split(".")[0], SCHEMA_VERSION.split(".")[0]
    if not (major.isascii() and major.isdigit()) or len(major) > 6 or int(major) > int(supported):
        raise SpecError(
            f"plan '{target}' has schema_version {short_repr(version)}; this layout reads "
            f"{supported}.x: upgrade layout to read it"
        )
    serve = data.get("mode") == "serve"
    kinds: dict[tuple[bool, bool], type[BaseModel]] = {
        (False, False): Plan,
        (False, True): SearchResult,
        (True, False): ServePlan,
        (True, True): ServeSearchResult,
    }
    kind = kinds[(serve, "best" in data)]
    try:
        parsed = kind.model_validate(known_fields(kind, data))
    except ValueError as exc:
        raise SpecError(f"plan '{target}' is not a valid plan: {_first_error(exc)}") from None
    best = getattr(parsed, "best", parsed)
    assert isinstance(best, Plan | ServePlan)
    return best


def known_fields(model: type[BaseModel], data: Any) -> Any:
    """``data`` without the keys ``model`` (and its nested models) does not declare."""
    if not isinstance(data, dict):
        return data
    out = {}
    for name, info in model.model_fields.items():
        if name in data:
            out[name] = _known_value(info.annotation, data[name])
    return out


def _known_value(annotation: Any, value: Any) -> Any:
    inner = _model_in(annotation)
    if inner is None:
        return value
    if isinstance(value, list):
        return [known_fields(inner, item) for item in value]
    if isinstance(value, dict) and "dict[" in str(annotation):
        return {key: known_fields(inner, item) for key, item in value.items()}
    return known_fields(inner, value)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside ``Model``, ``list[Model]``, ``dict[str, Model]`` or
    ``Model | None``, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where}: {first.get('msg', '')}"
    return str(exc).splitlines()[0]


def training_header(
    job: ExportJob, checked: list[str], usage: list[str], count: str | None = None
) -> list[str]:
    """The comment lines that open a training export: what its names were checked against
    (``checked``), the plan (model, cluster, layout and ``count``, by default its GPUs), how to
    use the output (``usage``) and every note."""
    plan = job.train[0]
    shown = count if count is not None else f"{plan.num_gpus} GPUs"
    return [
        *checked,
        f"plan: {plan.model} on {plan.cluster}: {plan.layout.short()} ({shown})",
        *usage,
        *(f"note: {note}" for note in job.notes),
    ]


def env_lines(job: ExportJob) -> list[str]:
    """The job's environment variables as shell ``export NAME=VALUE`` lines, in the order set."""
    return [f"export {name}={shell_word(value)}" for name, value in job.env.items()]


def comment_block(lines: list[str], prefix: str = "# ") -> list[str]:
    """Lines as comments, one comment line per line: control characters in a line (a newline
    in a model name) are escaped, so nothing after them can leave the comment."""
    return [f"{prefix}{comment_text(line)}".rstrip() for line in lines]


def llama_style_decoder(model: ModelSpec) -> bool:
    """Whether the model's decoder layers are Llama's as the Llama-shaped configs of other
    frameworks describe them (MaxText's llama2 / mixtral blocks, Nanotron's LlamaConfig): RMSNorm
    before attention and MLP, rotary positions, no MLA, no parallel block, no sliding window, no
    post-norms."""
    return (
        model.norm == "rmsnorm" and model.position_embedding == "rope" and model.mla is None
        and not model.parallel_block and model.sliding_window is None and not model.post_norms
    )  # fmt: skip


def layer_counts(model: ModelSpec, num_chunks: int) -> list[int]:
    """Transformer layers per pipeline chunk in layer order, as the planner splits them:
    as even as possible, the remainder on the middle chunks (which hold neither the embedding
    nor the logits); see :func:`planner.cost.memory.stage_layers`.

    >>> from planner.catalog import load_model
    >>> layer_counts(load_model("405B"), 16)
    [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7]
    """
    from planner.cost.memory import stage_layers

    return [len(stage_layers(model, num_chunks, i)) for i in range(num_chunks)]


def pipeline_split(job: ExportJob) -> tuple[str, list[int]]:
    """How the plan's layers fall on pipeline chunks (pp x vpp, layer order): the plan's
    ``pipeline_stages`` (its optimised split) or the planner's even split; ``even``,
    ``first_last`` (only the first and last stage differ, vpp = 1, MTP, if any, on the last)
    or ``custom``."""
    plan, layout = job.train[0], job.train[0].layout
    stages = plan.pipeline_stages
    if len(stages) == layout.pp * layout.vpp:
        counts = [s.num_layers for s in stages]
    else:  # a plan saved before pipeline_stages
        counts = layer_counts(job.model, layout.pp * layout.vpp)
    mtp_chunk = mtp_layers(job)[1]
    if len(set(counts)) == 1 and mtp_chunk in (None, len(counts) - 1):
        return "even", counts
    if layout.vpp == 1 and len(set(counts[1:-1])) <= 1 and mtp_chunk in (None, len(counts) - 1):
        return "first_last", counts
    return "custom", counts


def mtp_layers(job: ExportJob) -> tuple[int, int | None]:
    """(MTP modules, the chunk holding them or None): from the plan's stages, else the
    workload."""
    plan = job.train[0]
    for stage in plan.pipeline_stages:
        if stage.mtp_layers:
            return stage.mtp_layers, stage.stage
    count = job.train[1].mtp_num_layers
    return count, (plan.layout.pp * plan.layout.vpp - 1 if count else None)


def split_note(job: ExportJob, counts: list[int]) -> None:
    """Say how the layers are placed: the optimised split (CP-SAT's or the recurrence's), the
    framework's own split, or the planner's even split when they do not split evenly."""
    plan = job.train[0]
    chunks = plan.layout.pp * plan.layout.vpp
    if plan.pipeline_split is not None and plan.pipeline_split.method == "framework":
        job.note(
            f"{job.model.num_layers} layers over pp x vpp = {chunks} chunks: set to the split "
            f"the plan's framework makes itself, [{run_length(counts)}] (pipeline_split: framework)"
        )
        return
    if plan.pipeline_split is not None and plan.pipeline_split.method == "given":
        job.note(
            f"{job.model.num_layers} layers over pp x vpp = {chunks} chunks: set to the split "
            f"the plan was estimated with, [{run_length(counts)}] (pipeline_split: given)"
        )
        return
    optimised = plan.pipeline_split.optimised if plan.pipeline_split is not None else None
    if optimised:
        job.note(
            f"{job.model.num_layers} layers over pp x vpp = {chunks} chunks: set to "
            f"{optimised} [{run_length(counts)}] (layout search: pipeline_stages)"
        )
        return
    job.note(
        f"{job.model.num_layers} layers do not split evenly over pp x vpp = {chunks} chunks; "
        f"set to the planner's split [{run_length(counts)}] (remainder on the middle stages)"
    )


def split_recompute_settings(job: ExportJob) -> RecomputeSettings:
    """:func:`recompute_settings` for the plan, with the per-chunk counts of an optimised split:
    one count N for every chunk (min(N, layers) each) is Megatron's block method; none at all
    drops recomputation; per-stage counts cannot be spelled (one ``--recompute-num-layers``
    for every chunk), so the largest is set, which recomputes more (slower, less memory) and
    is noted."""
    plan, workload = job.train
    layout = plan.layout
    settings = recompute_settings(layout, workload)
    optimised = plan.pipeline_split.optimised if plan.pipeline_split is not None else None
    if layout.recompute is not Recompute.FULL or not optimised or not plan.pipeline_stages:
        return settings
    layers = [s.num_layers for s in plan.pipeline_stages]
    redo = [s.recompute_layers for s in plan.pipeline_stages]
    if not any(redo):
        job.note(f"{optimised} recomputes no layer: recomputation is off")
        return RecomputeSettings(None, None, None, None)
    pairs = list(zip(redo, layers, strict=True))
    block = [n for n in range(max(layers) + 1) if all(r == min(n, c) for r, c in pairs)]
    if not block:
        job.note(
            f"per-stage recompute counts {redo} (first layers of each chunk) cannot be spelled "
            f"in Megatron-LM: set to {max(redo)} for every chunk, which recomputes more"
        )
    return RecomputeSettings("full", None, "block", block[0] if block else max(redo))


EP_OVERLAP_FIELDS: tuple[tuple[str, str], ...] = (
    ("overlap_moe_expert_parallel_comm", "true"),
    ("delay_wgrad_compute", "true"),
)
"""Megatron ModelParallelConfig fields of the EP all-to-all overlap (``ep_comm_overlap``)."""


def moe_execution_fields(job: ExportJob) -> list[tuple[str, str]]:
    """Megatron TransformerConfig (field, value) pairs for the MoE execution the cost model
    assumed: grouped expert GEMMs (Megatron's default is one GEMM per expert) and the dispatcher
    (its default is allgather): the all-to-all, or for deduplicated dispatch the flex dispatcher
    with DeepEP (notes that HybridEP is modelled alike). ``"true"`` marks a switch."""
    fields = [("moe_grouped_gemm", "true")]
    if job.train[1].moe_dispatch_dedup:
        fields += [("moe_token_dispatcher_type", "flex"), ("moe_flex_dispatcher_backend", "deepep")]
        job.note("deduplicated dispatch exported as DeepEP; HybridEP (hybridep) is modelled alike")
    else:
        fields.append(("moe_token_dispatcher_type", "alltoall"))
    return fields


class RecomputeSettings(NamedTuple):
    """Megatron-LM's recomputation settings for a layout (None = not set)."""

    granularity: str | None
    """``selective`` or ``full``; None without recomputation."""
    modules: tuple[str, ...] | None
    """``--recompute-modules`` when selective and not Megatron's default."""
    method: str | None
    """``block`` (the first ``num_layers`` of each stage) or ``uniform`` with full granularity."""
    num_layers: int | None
    """``--recompute-num-layers`` with full granularity (1 for uniform)."""


def recompute_settings(layout: Layout, workload: TrainWorkload) -> RecomputeSettings:
    """The recompute settings both Megatron-LM and Megatron-Bridge spell (their own syntax)."""
    if layout.recompute is Recompute.SELECTIVE:
        custom = workload.recompute_modules != DEFAULT_RECOMPUTE_MODULES
        return RecomputeSettings(
            "selective", workload.recompute_modules if custom else None, None, None
        )
    if layout.recompute is Recompute.FULL and workload.recompute_num_layers is not None:
        return RecomputeSettings("full", None, "block", workload.recompute_num_layers)
    if layout.recompute is Recompute.FULL:
        return RecomputeSettings("full", None, "uniform", 1)
    return RecomputeSettings(None, None, None, None)


class YamlConfigDumper(yaml.SafeDumper):
    """YAML as framework config files are written: sections in block style, a list of names (a
    pipeline chunk's modules) on one flow-style line; a string with a line break or another
    unprintable character double-quoted, escaped on one line (a model's repository id comes
    from a user's file)."""


def _escaped_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = None if value.isprintable() else '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _list_in_flow(dumper: yaml.SafeDumper, items: list[object]) -> yaml.Node:
    flow = all(not isinstance(item, dict | list) for item in items)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=flow)


YamlConfigDumper.add_representer(list, _list_in_flow)
YamlConfigDumper.add_representer(str, _escaped_str)


def yaml_sections_result(
    job: ExportJob,
    sections: dict[str, Any],
    *,
    format: str,
    framework: tuple[str, str],
    checked: str,
    usage: list[str],
) -> ExportResult:
    """A training export that is YAML config sections (AutoModel's, Nanotron's): the training
    header as comments (``checked``: what the names were checked against; ``usage``: how to
    merge them), then the sections; ``framework`` is (name, version)."""
    header = training_header(job, [checked], usage)
    text = yaml.dump(sections, Dumper=YamlConfigDumper, sort_keys=False, width=100)
    return ExportResult(
        format=format,
        framework=framework[0],
        framework_version=framework[1],
        text="\n".join(comment_block(header)) + "\n" + text,
        args=[],
        notes=list(job.notes),
    )
