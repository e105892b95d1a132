"""Argument types, shared flag groups and parsing helpers of the ``layout`` CLI."""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from fractions import Fraction
from typing import NoReturn

from planner.cli.outputs import wrote

EXIT_BAD_INPUT = 2


_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}


class _OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2, and takes every flag
    only as spelled in full: argparse's prefix matching would read ``layout search --zero 1``
    as ``--zero-shard-group 1``, silently another setting, and a prefix that is unique today
    turns ambiguous when a flag is added (:func:`unknown_flags_message` names the flag meant)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        from planner.errors import one_line  # control characters in an argument stay inert

        sys.stderr.write(f"{self.prog}: error: {one_line(message)}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def _shown(text: str, limit: int = 40) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters (an argument of 5,000 digits
    is named, not printed).

    >>> _shown("12"), _shown("9" * 50)
    ("'12'", "'9999999999999999999999999999999999999...'")
    """
    return f"'{text}'" if len(text) <= limit else f"'{text[: limit - 3]}...'"


def _cut(text: str, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters for a message (no quotes: ``--fix tp=999...``).

    >>> _cut("tp=" + "9" * 60)
    'tp=9999999999999999999999999999999999...'
    """
    return text if len(text) <= limit else text[: limit - 3] + "..."


def unknown_flags_message(sub: argparse.ArgumentParser, extras: list[str]) -> str:
    """The error for command-line words ``sub`` (one subcommand's parser) does not take: each
    named, and for a flag, what was probably meant: a layout field given as a flag where the
    command pins it with ``--fix`` (``--tp 2`` -> ``--fix tp=2``), or the full spelling of a
    cut-short flag (abbreviations are refused, :class:`_OneLineParser`).

    >>> p = _OneLineParser(prog="layout search")
    >>> _ = p.add_argument("--fix"), p.add_argument("--ep-overlap", action="store_true")
    >>> unknown_flags_message(p, ["--tp", "2"])
    "unrecognized arguments: --tp 2 (pin a layout field with --fix: --fix tp=2; 'layout \
estimate' takes --tp)"
    >>> unknown_flags_message(p, ["--ep-over"])
    'unrecognized arguments: --ep-over (flags are spelled in full: did you mean --ep-overlap?)'
    >>> e = _OneLineParser(prog="layout estimate")
    >>> _ = e.add_argument("--tp"), e.add_argument("--pp")
    >>> unknown_flags_message(e, ["--fix", "tp=2,pp=4"])
    'unrecognized arguments: --fix tp=2,pp=4 (this command takes the layout as flags: --tp 2 --pp 4)'
    """
    from planner.search.space import PINNABLE  # the layout fields --fix pins; only on error

    options = [name for action in sub._actions for name in action.option_strings]
    hints: list[str] = []
    for i, token in enumerate(extras):
        name, equals, value = token.partition("=")
        if not name.startswith("--"):
            continue
        field = name[2:].lower()
        if not equals and i + 1 < len(extras) and not extras[i + 1].startswith("-"):
            value = extras[i + 1]  # the flag's value as the next word
        if name == "--fix" and "--tp" in options:  # estimate takes the layout as flags
            pairs = [p.partition("=") for p in value.split(",") if p.strip()]
            flags = " ".join(f"--{k.strip().lower()} {_cut(v.strip(), 20)}" for k, _, v in pairs)
            hints.append(f"this command takes the layout as flags: {flags or '--tp N'}")
            continue
        if field in PINNABLE and "--fix" in options:
            pin = f"{field}={_cut(value, 20) if value else 'N'}"
            hints.append(
                f"pin a layout field with --fix: --fix {pin}; 'layout estimate' takes {name}"
            )
            continue
        longer = [o for o in options if o.startswith(name) and o != name]
        if len(longer) == 1:
            hints.append(f"flags are spelled in full: did you mean {longer[0]}?")
        elif longer:
            hints.append(f"flags are spelled in full: {name} could be {', '.join(longer)}")
    shown = _cut(" ".join(extras), 80)
    return f"unrecognized arguments: {shown}" + (f" ({'; '.join(hints)})" if hints else "")


def positive_int(text: str) -> int:
    """An integer >= 1, with an optional K/M/B/T suffix (``16M`` = 16,000,000) or power of ten
    (``15e12``).

    >>> positive_int("15T"), positive_int("15e12"), positive_int("1.5E3")
    (15000000000000, 15000000000000, 1500)
    """
    match = re.fullmatch(
        r"\s*([0-9]{1,300}(?:\.[0-9]{1,30})?)(?:[eE]\+?([0-9]{1,2}))?\s*([KMBGT]?)\s*",
        text,
        flags=re.I,
    )
    if not match:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a positive whole number")
    digits, power = match.group(1), int(match.group(2) or 0)
    scale = _SUFFIX[match.group(3).upper()]
    # exact: float() would round 9.0000000000000000001 to 9
    value = Fraction(digits) * 10**power * scale
    if value.denominator != 1 or value < 1:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a positive whole number")
    return int(value)


def batch_tokens(text: str) -> int:
    """Tokens per step; K/M/G suffixes are binary as batch sizes are quoted in ML papers
    (Llama 3's "16M tokens" = 2,048 sequences x 8,192 = 16,777,216)."""
    match = re.fullmatch(r"\s*([0-9]{1,300})\s*([KMG]?)\s*", text, flags=re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a positive whole number of tokens")
    from planner.units import BINARY_PREFIX  # imported here: the CLI loads no library up front

    value = int(match.group(1)) * BINARY_PREFIX.get(match.group(2).upper(), 1)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a positive whole number of tokens")
    return value


def sequence_tokens(text: str) -> int:
    """Tokens of one sequence, context or prompt: a positive whole number, where a K, M or G
    suffix is binary as context lengths are quoted ("8K" = 8,192, "128K" = 131,072, Llama 3.1's
    window; a decimal 8,000 would be a length no model or kernel tiles); anything else as
    :func:`positive_int` reads it.

    >>> sequence_tokens("8K"), sequence_tokens("128k"), sequence_tokens("1M"), sequence_tokens("1.5K")
    (8192, 131072, 1048576, 1536)
    >>> sequence_tokens("4096"), sequence_tokens("4e3")
    (4096, 4000)
    """
    match = re.fullmatch(
        r"\s*([0-9]{1,300}(?:\.[0-9]{1,30})?)\s*([KMG])\s*", text, flags=re.IGNORECASE
    )
    if match is None:
        return positive_int(text)
    from planner.units import BINARY_PREFIX  # as batch_tokens

    value = Fraction(match.group(1)) * BINARY_PREFIX[match.group(2).upper()]
    if value.denominator != 1:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is not a whole number of tokens (K, M and G are binary: 8K = 8192)"
        )
    if value < 1:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a positive whole number")
    return int(value)


_FLOAT = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")
"""A number in ASCII digits (float() would also read '٣٠', '３０' and '1_0', which the integer
flags refuse)."""


def positive_float(text: str) -> float:
    """A finite number > 0, written with the digits 0-9."""
    if not _FLOAT.fullmatch(text):
        word = text.strip().lower().lstrip("+-")
        if word in ("inf", "infinity", "nan"):
            raise argparse.ArgumentTypeError(f"{_shown(text)} must be a finite number > 0")
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is not a number (digits 0-9, e.g. 30 or 2.5e3)"
        )
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be a finite number > 0")
    return value


NEVER = 0
"""``--host-sync-interval never``, as the parser returns it (the workload's None)."""


def _sync_interval(text: str) -> int:
    """``--host-sync-interval``: a whole number of steps from 1 to 100,000, or never (0).

    >>> _sync_interval("10"), _sync_interval("never")
    (10, 0)
    """
    if text.strip().lower() == "never":
        return NEVER
    from planner.specs.workload import MAX_HOST_SYNC_INTERVAL

    value = positive_int(text)
    if value > MAX_HOST_SYNC_INTERVAL:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} must be from 1 to {MAX_HOST_SYNC_INTERVAL:,} steps"
        )
    return value


AUTO = "auto"
"""``--activation-offload auto``, as the parser returns it."""


def offload_share(text: str) -> float | str:
    """``--activation-offload``: a share from 0 to 1 (:func:`fraction`) or auto."""
    if text.strip().lower() == AUTO:
        return AUTO
    return fraction(text)


def _share(text: str, upper: float, example: str) -> float:
    """A share from 0 to ``upper`` inclusive, written with the digits 0-9."""
    if not _FLOAT.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is not a number (digits 0-9: a share from 0 to {upper:g}, "
            f"e.g. {example})"
        )
    value = float(text)
    if not 0.0 <= value <= upper:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be a share from 0 to {upper:g}")
    return value


def fraction(text: str) -> float:
    """A share from 0 to 1 inclusive (``--activation-offload 0.5``).

    >>> fraction("0.25")
    0.25
    """
    return _share(text, 1.0, "0.5")


def headroom_share(text: str) -> float:
    """``--memory-headroom``: the share of usable memory a search leaves free, from 0 to
    ``planner.specs.solver_config.MAX_MEMORY_HEADROOM`` (``SolverConfig.memory_headroom``).

    >>> headroom_share("0.1"), headroom_share("0")
    (0.1, 0.0)
    """
    from planner.specs.solver_config import MAX_MEMORY_HEADROOM

    return _share(text, MAX_MEMORY_HEADROOM, "0.05")


def ranged(parse: Callable[[str], float], name: str) -> Callable[[str], float]:
    """The argument type ``parse`` (positive_int, positive_float, batch_tokens) that also
    refuses a value outside the plausible range of ``name`` (planner.limits.RANGES), stating
    the range: ``--seq-len 1e300`` is an error, not a 300-digit figure in a later message."""

    def check(text: str) -> float:
        from planner.limits import in_range, rule

        value = parse(text)
        if not in_range(name, value):
            raise argparse.ArgumentTypeError(f"{_shown(text)} must be {rule(name)}")
        return value

    check.__name__ = f"{parse.__name__}_{name}"
    return check


DEFAULT_TIME_LIMIT_S = 10.0
"""``--time-limit`` default (SolverConfig.time_limit_s's default, checked by a test; kept here so
that building the parser imports no spec module)."""
MAX_TIME_LIMIT_S = 3600.0
"""Largest --time-limit (SolverConfig.time_limit_s's bound, checked by the same test)."""


def time_limit(text: str) -> float:
    """Seconds for one solve: a finite number > 0 and at most an hour."""
    value = positive_float(text)
    if value > MAX_TIME_LIMIT_S:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} s exceeds the {MAX_TIME_LIMIT_S:g} s limit"
        )
    return value


MAX_SWEEP_UNITS = 10_000_000
"""Largest --split-sweep (SolverConfig.split_sweep_budget's bound)."""


def sweep_units(text: str) -> int:
    """Work units for the split sweep (SolverConfig.split_sweep_budget): 0 up to
    :data:`MAX_SWEEP_UNITS`.

    >>> sweep_units("0"), sweep_units("5000")
    (0, 5000)
    """
    digits = text.strip()
    if not re.fullmatch(r"[0-9]+", digits):
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be a whole number >= 0")
    digits = digits.lstrip("0") or "0"
    too_long = len(digits) > len(str(MAX_SWEEP_UNITS))  # no int() of thousands of digits
    if too_long or int(digits) > MAX_SWEEP_UNITS:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} exceeds the {MAX_SWEEP_UNITS:,}-unit limit"
        )
    return int(digits)


def _add_cluster_edits(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster edits (what-if knobs)")
    g.add_argument("--nic-gbps", type=positive_float, help="NIC line rate, Gb/s")
    g.add_argument("--nics-per-gpu", type=positive_float, help="scale-out NICs per accelerator")
    g.add_argument(
        "--oversubscription", type=positive_float, help="spine taper, e.g. 2 for 2:1 (>= 1)"
    )
    g.add_argument(
        "--rail-optimized",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="rail-optimized (default from the system) or top-of-rack wiring",
    )
    g.add_argument("--domain-size", type=positive_int, help="accelerators per scale-up domain")
    g.add_argument("--price-per-gpu-hour", type=positive_float, help="USD per accelerator-hour")
    g.add_argument(
        "--hbm-gb",
        type=positive_float,
        help="HBM per accelerator, GB as on the spec sheet (1-4096)",
    )
    g.add_argument("--hbm-tbps", type=positive_float, help="HBM bandwidth, TB/s (0.1-100)")
    g.add_argument(
        "--power-cap-w",
        type=positive_float,
        help="power limit per accelerator, W (nvidia-smi -pl; 25%%-100%% of TDP): lowers the "
        "FLOP/s peaks, and energy uses it",
    )


def _add_workload(
    p: argparse.ArgumentParser, *, cluster: bool = True, required: bool = True
) -> None:
    p.add_argument(
        "--model",
        required=required,
        help="catalog name, alias (70B), HF hub id, YAML, HF config.json or its folder",
    )
    if cluster:  # migrate names two clusters instead (--from, --to)
        p.add_argument(
            "--cluster", required=required, help="<system>x<N> (hgx_b200x16), TPU slice, or YAML"
        )
    p.add_argument(
        "--seq-len",
        type=ranged(sequence_tokens, "seq_len"),
        default=8192,
        help="tokens per sequence (default 8192; K and M are binary: 8K = 8192)",
    )
    batch = p.add_mutually_exclusive_group()
    batch.add_argument(
        "--global-batch", type=ranged(positive_int, "global_batch"),
        help="sequences per step (default 512)",
    )  # fmt: skip
    batch.add_argument(
        "--global-batch-tokens",
        type=ranged(batch_tokens, "global_batch_tokens"),
        help="tokens per step; K/M/G are binary: 16M = 2048 x 8192",
    )
    p.add_argument(
        "--precision",
        default=DEFAULT_PRECISION,
        help="bf16 | fp8 | mxfp8 | nvfp4 | mxfp4 (default bf16; serve: the checkpoint's)",
    )
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    _add_framework(p)
    if not cluster:
        return
    p.add_argument(
        "--calibration",
        metavar="FILE",
        help="calibration overlay for the cluster's accelerator (layout calibrate --measure)",
    )
    _add_cluster_edits(p)


def _add_framework(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("framework settings (training; Megatron-LM names)")
    g.add_argument(
        "--framework",
        metavar="NAME",
        help="training framework profile: megatron (default on GPUs), torchtitan, maxtext "
        "(default on TPUs), deepspeed (topologies/frameworks/): which layouts are legal, which "
        "overlaps run, how memory is allocated, which accelerators it runs on; the settings "
        "below override it. Other names run a profile "
        "(topologies/frameworks/_aliases.yaml): nemo, megatron-bridge and megatron-lm are "
        "megatron; the plan records the profile's name",
    )
    g.add_argument(
        "--cp-comm",
        choices=CP_COMM_CHOICES,
        help="context-parallel algorithm: p2p ring, a2a (Ulysses), a2a+p2p, allgather "
        "(default: the framework's)",
    )
    g.add_argument(
        "--cp-impl",
        choices=CP_IMPL_CHOICES,
        help="context-parallel attention: te (Transformer Engine: ring forms merge each step "
        "in fused kernels) or pytorch (PyTorch's context_parallel, torchtitan: ring steps "
        "merged in eager fp32 ops under every form) (default: the framework's)",
    )
    g.add_argument(
        "--recompute-modules",
        metavar="M,M",
        help="what selective recompute recomputes: core_attn (default), layernorm, moe_act, "
        "mla_up_proj, mlp, shared_experts, moe",
    )
    g.add_argument(
        "--recompute-num-layers",
        type=ranged(positive_int, "recompute_num_layers"),
        metavar="N",
        help="with full recompute: only the first N layers of each pipeline chunk (block method)",
    )
    g.add_argument(
        "--saved-tensors",
        metavar="T,T",
        help="selective recomputation as a save list instead of --recompute-modules: each layer "
        "keeps its input and these outputs and recomputes the rest (MaxText remat_policy custom, "
        "JAX save_only_these_names): q, k, v, context, out, mlp_gate, mlp_up, mlp_down, or none "
        "(the whole layer) [the framework profile's]",
    )
    g.add_argument(
        "--activation-offload",
        type=offload_share,
        metavar="F|auto",
        help="share of the saved activations copied to host memory in the forward and back for "
        "the backward, over the host link (Megatron-LM --cpu-offloading-num-layers N as N/L; "
        "MaxText's offload remat tensors): less device memory, host-link time where the copies "
        "outlast the compute. auto (search, export): a layout that fits only so offloads the "
        "smallest share its framework can express (host DRAM is not checked: the plan's "
        "warning gives what it holds) [0]",
    )
    g.add_argument(
        "--moe-dispatcher",
        choices=MOE_DISPATCHER_CHOICES,
        help=(
            "MoE token dispatch: NCCL all-to-all, one copy per token and expert (default), or "
            "deduplicating (DeepEP, HybridEP): a token once to each rank, and each remote "
            "NVLink domain, that holds any of its experts"
        ),
    )
    g.add_argument(
        "--ep-overlap",
        action="store_true",
        help="overlap the EP all-to-all with another micro-batch (--overlap-moe-expert-parallel-comm)",
    )
    g.add_argument(
        "--moe-cuda-graphs",
        action="store_true",
        help=(
            "MoE layers captured whole in CUDA graphs on capacity-padded shapes, as "
            "full-iteration graphs do: no per-layer host sync (graphing only the router and "
            "preprocessing leaves it)"
        ),
    )
    g.add_argument(
        "--expert-load-imbalance",
        type=ranged(positive_float, "expert_load_imbalance"),
        metavar="X",
        help="MoE, dropless routing: tokens on the busiest expert rank over the balanced share; "
        "its grouped GEMMs and all-to-all pace the layer. 1 = perfectly balanced, as NVIDIA's "
        "MoE benchmarks force (--moe-router-force-load-balancing) and as the fit's rows ran; "
        "real routing is typically 1.1-1.5 [1]",
    )
    g.add_argument(
        "--moe-capacity-factor",
        type=ranged(positive_float, "moe_capacity_factor"),
        metavar="X",
        help="MoE with capacity-padded experts (GShard, Switch; XLA's static shapes): every "
        "expert runs X times its balanced share, overflow dropped, whatever the routing "
        "[dropless]",
    )
    g.add_argument(
        "--moe-expert-compute",
        choices=("grouped", "einsum"),
        help="MoE: how the routed experts run: grouped GEMMs over the tokens each expert got "
        "(Megatron-LM, torchtitan, MaxText sparse_matmul) or GShard's one-hot dispatch and "
        "combine einsums into capacity slots (MaxText sparse_matmul false; needs "
        "--moe-capacity-factor), which add about 2 x seq x top_k x capacity x hidden FLOPs per "
        "token each [the profile's: grouped; einsum under DeepSpeed]",
    )
    g.add_argument(
        "--grad-reduce",
        choices=("fp32", "bf16"),
        help="gradient reduction dtype (default fp32; NVIDIA's recipes use bf16)",
    )
    g.add_argument(
        "--optimizer-state",
        choices=("fp32", "bf16"),
        help="dtype of Adam's two moments (default fp32; bf16: Megatron-LM "
        "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16, 8 instead "
        "of 12 bytes per parameter with the fp32 master copy)",
    )
    g.add_argument(
        "--fp8-param-gather",
        action="store_true",
        help="with an 8-bit precision and ZeRO >= 1, all-gather the parameters in FP8 "
        "(Megatron-LM --fp8-param-gather, torchao's FSDP float8 all-gather): half the gather "
        "bytes; NVIDIA's FP8 recipes set it",
    )
    g.add_argument(
        "--fused-grouped-mlp",
        action="store_true",
        help="run the MoE experts as Transformer Engine's fused grouped MLP (Megatron-LM "
        "--use-transformer-engine-op-fuser with NVTE_CUTEDSL_FUSED_GROUPED_MLP=1: activation, "
        "bias, probabilities and cast in the grouped GEMMs' epilogues), which applies to MoE "
        "models in mxfp8 or nvfp4 on compute capability 10.x GPUs (B200, GB200, B300, GB300)",
    )
    g.add_argument(
        "--ddp-bucket-size",
        type=ranged(positive_int, "ddp_bucket_params"),
        metavar="N",
        help="parameters per gradient bucket when the data-parallel reduction overlaps the "
        "backward, each bucket a collective paying its latency (Megatron-LM --ddp-bucket-size) "
        "[Megatron-Core's max(40M, 1M x dp x cp)]",
    )
    g.add_argument(
        "--zero-shard-group",
        type=ranged(positive_int, "zero_shard_group"),
        metavar="N",
        help="hybrid sharding (HSDP; torchtitan's data_parallel_shard_degree, MaxText's fsdp "
        "axis): the ZeRO shard spans N consecutive data-parallel ranks and the groups "
        "all-reduce their gradient shards [one shard over all dp x cp ranks]",
    )
    g.add_argument(
        "--reshard-after-forward",
        choices=("default", "always", "never"),
        help="ZeRO-3: free each layer's gathered parameters after its forward and gather them "
        "again for the backward (always), keep them to the backward (never; Llama 3's layout), "
        "or always except under pipeline parallelism (default: FSDP2's) [the profile's]",
    )
    g.add_argument(
        "--fsdp-gather-unit",
        choices=("layer", "weight"),
        help="ZeRO-3: what one all-gather brings in, a layer's parameters (FSDP, DeepSpeed) or one "
        "weight tensor (XLA: MaxText, AXLearn, Pax), so whether two layers or two of the largest "
        "weights are gathered at once [the profile's]",
    )
    g.add_argument(
        "--fsdp-buffer-copies",
        choices=("on", "off"),
        help="ZeRO-2/3: the compute stream copies each all-gather's output into the parameters "
        "and waits while the gradients are copied into the reduce buffer (PyTorch FSDP2's "
        "fully_shard: on), or the parameters are views of the gathered buffer (FSDP1, "
        "Megatron-FSDP, DeepSpeed, XLA: off) [the profile's]",
    )
    g.add_argument(
        "--weight-cast",
        choices=("per_step", "per_call"),
        help="8- and 4-bit recipes: the weights cast once per step and reused by its "
        "micro-batches (Transformer Engine) or quantized again in every GEMM call (MaxText's "
        "AQT: forward, recomputed forward, input gradient) [the profile's]",
    )
    g.add_argument(
        "--fp8-casts",
        choices=("fused", "tensorwise", "rowwise"),
        help="fp8: how GEMM operands are quantized: fused into Transformer Engine's kernels "
        "(one pass per input, cast-transposes in the backward), or torchao's dynamic scaling "
        "(a scale pass before each cast, output gradients cast in the backward, operand layout "
        "copies for the scaled GEMMs: torchtitan's tensorwise; rowwise also casts the weights "
        "on every call and gathers them in bf16) [the profile's]",
    )
    g.add_argument(
        "--host-sync-interval",
        type=_sync_interval,
        metavar="N|never",
        help="steps between the training loop's host synchronisations, each costing the fitted "
        "per-step sync (1: Megatron-LM reads the gradient norm every step; torchtitan's "
        "metrics.log_freq; never: XLA) [the profile's]",
    )
    g.add_argument(
        "--elementwise",
        choices=("fused", "eager"),
        help="norms, RoPE and activations as fused kernels (Transformer Engine, torch.compile: "
        "torchtitan's [compile] enable, XLA) or eager PyTorch op by op [the profile's: eager "
        "for torchtitan, fused elsewhere]",
    )
    g.add_argument(
        "--attention-kernel",
        choices=("vendor", "flash2", "unfused"),
        help="attention: the vendor's fused kernel (cuDNN / FlashAttention-3, CK, Pallas), "
        "FlashAttention-2 (PyTorch SDPA's flash backend), or unfused (score GEMMs and softmax "
        "through HBM, 2021-22 Megatron) [the profile's]",
    )
    g.add_argument(
        "--cross-entropy",
        choices=("te", "native", "unfused"),
        help="loss: one fused kernel on the bf16 logits (te), Megatron-LM's jit-fused native "
        "passes, or the plain vocab-parallel loss with fp32 copies (unfused; torchtitan's) "
        "[the profile's]",
    )
    g.add_argument(
        "--no-sequence-parallel",
        action="store_true",
        help="TP without sequence parallelism: norms and their activations replicated per rank",
    )
    overlap = g.add_mutually_exclusive_group()
    overlap.add_argument(
        "--no-tp-overlap",
        action="store_true",
        help="TP collectives not pipelined with their GEMMs (no --tp-comm-overlap)",
    )
    overlap.add_argument(
        "--tp-overlap",
        action="store_true",
        help="TP collectives pipelined with their GEMMs where the profile leaves them in line "
        "(torchtitan's enable_async_tensor_parallel, which needs sequence parallelism and "
        "torch.compile) [the profile's]",
    )
    g.add_argument(
        "--dp-overlap",
        choices=("on", "off"),
        help="data-parallel gradient reduction overlapped with the backward in buckets (on; "
        "Megatron-LM --overlap-grad-reduce) or after it, exposed (off: DeepSpeed's default below "
        "ZeRO-3 and its pipeline engine); default: the framework profile's",
    )
    g.add_argument(
        "--mtp-num-layers",
        type=positive_int,
        metavar="N",
        help="multi-token-prediction modules trained with the model (DeepSeek-V3: 1)",
    )
    g.add_argument(
        "--pipeline-schedule",
        choices=("1f1b", "zero-bubble", "gpipe", "dualpipe"),
        help="pipeline schedule: 1F1B (interleaved with --vpp > 1), zero bubble (ZB-H1: weight "
        "gradients deferred into the drain; torchtitan's InterleavedZeroBubble, vpp >= 2), "
        "GPipe (every micro-batch's activations held: MaxText's pipeline) or DualPipe "
        "(DeepSeek's HAI-LLM) [the profile's]",
    )


def _add_time_limit(p: argparse.ArgumentParser) -> None:
    """``--time-limit``: each CP-SAT solve's limit (SolverConfig.time_limit_s), counted in
    CP-SAT's deterministic work (planner.search.solve.cpsat.configured_solver)."""
    p.add_argument(
        "--time-limit",
        type=time_limit,
        default=DEFAULT_TIME_LIMIT_S,
        help=f"CP-SAT limit per solve, s of deterministic work (default {DEFAULT_TIME_LIMIT_S:g})",
    )


def _add_stage_split(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--stage-split",
        choices=STAGE_SPLITS,
        default="cp-sat",
        help="layers per pipeline stage: CP-SAT with one recompute count for every chunk "
        "(default; Megatron's block method), CP-SAT with a count per stage, or the even split",
    )


def _add_given_split(p: argparse.ArgumentParser) -> None:
    """Megatron-LM's pipeline split flags, spelled as Megatron-LM spells them (estimate only:
    the split a published run used; planner.search.given_split)."""
    g = p.add_argument_group(
        "a given pipeline split (training estimate; Megatron-LM names, instead of --stage-split)"
    )
    g.add_argument(
        "--pipeline-model-parallel-layout",
        metavar="LAYOUT",
        help="layers per stage, pp x vpp stages in layer order: E embedding, t decoder layer, "
        "m MTP layer, L loss, | between stages, x*n and (...)*n repeat (Et*4|(t*4|)*14tmL)",
    )
    for end in ("first", "last"):
        g.add_argument(
            f"--decoder-{end}-pipeline-num-layers",
            type=int,
            metavar="N",
            help=f"decoder layers on the {end} pipeline rank (the others share the rest)",
        )
    for part in ("embedding", "loss"):
        g.add_argument(
            f"--account-for-{part}-in-pipeline-split",
            action="store_true",
            help=f"the {part} takes a layer's slot in the even split",
        )


def given_split_flags(args: argparse.Namespace) -> dict[str, object] | None:
    """The given split flags that were set (None: none)."""
    from planner.search.given_split import SPLIT_FLAGS

    given = {
        k: getattr(args, k) for k in SPLIT_FLAGS if getattr(args, k, None) not in (None, False)
    }
    return given or None


STAGE_SPLITS: tuple[str, ...] = ("cp-sat", "per-stage", "even")
"""``--stage-split`` choices (SolverConfig.stage_split and stage_recompute)."""


def stage_split_fields(choice: str) -> dict[str, str]:
    """SolverConfig fields of a ``--stage-split`` choice.

    >>> stage_split_fields("per-stage")
    {'stage_split': 'cp-sat', 'stage_recompute': 'per_stage'}
    """
    if choice == "even":
        return {"stage_split": "even"}
    recompute = "per_stage" if choice == "per-stage" else "block"
    return {"stage_split": "cp-sat", "stage_recompute": recompute}


def _framework(args: argparse.Namespace) -> dict[str, object]:
    """TrainWorkload fields from the framework-settings flags (only those given)."""
    from planner.errors import SpecError
    from planner.specs.workload import RECOMPUTE_MODULES, moe_framework_fields

    out: dict[str, object] = {}
    if getattr(args, "framework", None) is not None:
        out["framework"] = args.framework
    if getattr(args, "cp_comm", None) is not None:
        out["cp_comm"] = args.cp_comm
    if getattr(args, "cp_impl", None) is not None:
        out["cp_impl"] = args.cp_impl
    if getattr(args, "recompute_modules", None) is not None:
        modules = tuple(m.strip() for m in args.recompute_modules.split(",") if m.strip())
        unknown = [m for m in modules if m not in RECOMPUTE_MODULES]
        if unknown or not modules:
            raise SpecError(
                f"--recompute-modules {_shown(args.recompute_modules)}: each must be one of "
                f"{', '.join(RECOMPUTE_MODULES)}"
            )
        out["recompute_modules"] = modules
    if getattr(args, "saved_tensors", None) is not None:
        out["saved_tensors"] = _saved_tensors(args)
    if getattr(args, "recompute_num_layers", None) is not None:
        out["recompute_num_layers"] = args.recompute_num_layers
    offload = getattr(args, "activation_offload", None)
    if offload is not None and offload != AUTO:  # a stated share, 0 included: no offload search
        out["activation_offload_fraction"] = offload
    out.update(
        moe_framework_fields(
            moe_dispatcher=getattr(args, "moe_dispatcher", None),
            ep_overlap=True if getattr(args, "ep_overlap", False) else None,
            moe_cuda_graphs=True if getattr(args, "moe_cuda_graphs", False) else None,
        )
    )
    if getattr(args, "expert_load_imbalance", None) is not None:
        out["expert_load_imbalance"] = args.expert_load_imbalance
    if getattr(args, "moe_capacity_factor", None) is not None:
        out["moe_capacity_factor"] = args.moe_capacity_factor
    if getattr(args, "moe_expert_compute", None):
        out["moe_expert_compute"] = args.moe_expert_compute
    if getattr(args, "grad_reduce", None):
        out["grad_reduce_dtype"] = args.grad_reduce
    if getattr(args, "optimizer_state", None):
        out["optimizer_state_dtype"] = args.optimizer_state
    if getattr(args, "fp8_param_gather", False):
        out["fp8_param_gather"] = True
    if getattr(args, "fused_grouped_mlp", False):
        out["fused_grouped_mlp"] = True
    if getattr(args, "host_sync_interval", None) is not None:
        out["host_sync_interval"] = (
            None if args.host_sync_interval == NEVER else args.host_sync_interval
        )
    if getattr(args, "zero_shard_group", None) is not None:
        out["zero_shard_group"] = args.zero_shard_group
    if getattr(args, "ddp_bucket_size", None) is not None:
        out["ddp_bucket_params"] = args.ddp_bucket_size
    if getattr(args, "reshard_after_forward", None):
        out["reshard_after_forward"] = args.reshard_after_forward
    if getattr(args, "fsdp_gather_unit", None):
        out["fsdp_gather_unit"] = args.fsdp_gather_unit
    if getattr(args, "fsdp_buffer_copies", None):
        out["fsdp2_buffer_copies"] = args.fsdp_buffer_copies == "on"
    if getattr(args, "weight_cast", None):
        out["weight_cast"] = args.weight_cast
    if getattr(args, "fp8_casts", None):
        out["fp8_casts"] = args.fp8_casts
    if getattr(args, "elementwise", None):
        out["fused_elementwise"] = args.elementwise == "fused"
    if getattr(args, "attention_kernel", None):
        out["flash_attention"] = args.attention_kernel != "unfused"
        if args.attention_kernel != "unfused":
            out["attention_kernel"] = args.attention_kernel
    if getattr(args, "cross_entropy", None):
        out["cross_entropy"] = args.cross_entropy
    if getattr(args, "no_sequence_parallel", False):
        out["sequence_parallel"] = False
    if getattr(args, "no_tp_overlap", False):
        out["tp_comm_overlap"] = False
    if getattr(args, "tp_overlap", False):
        out["tp_comm_overlap"] = True
    if getattr(args, "dp_overlap", None):
        out["dp_comm_overlap"] = args.dp_overlap == "on"
    if getattr(args, "mtp_num_layers", None) is not None:
        out["mtp_num_layers"] = args.mtp_num_layers
    if getattr(args, "pipeline_schedule", None):
        out["pipeline_schedule"] = args.pipeline_schedule.replace("-", "_")
    return out


def _saved_tensors(args: argparse.Namespace) -> tuple[str, ...]:
    """``--saved-tensors``: the names, in order, or none for the empty save list; given with
    ``--recompute-modules`` it is an error (a save list replaces the recompute modules)."""
    from planner.errors import SpecError
    from planner.specs.workload import SAVED_TENSORS

    text = args.saved_tensors
    if getattr(args, "recompute_modules", None) is not None:
        raise SpecError(
            "--saved-tensors and --recompute-modules both say what selective recomputation "
            "keeps: give one (a save list keeps what it names, recompute modules drop theirs)"
        )
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    if names == ("none",):
        return ()
    unknown = [t for t in names if t not in SAVED_TENSORS]
    if unknown or not names:
        raise SpecError(
            f"--saved-tensors {_shown(text)}: each must be one of {', '.join(SAVED_TENSORS)}, "
            "or none alone"
        )
    if len(set(names)) != len(names):
        raise SpecError(f"--saved-tensors {_shown(text)}: a tensor is listed twice")
    return names


class _Default(str):
    """A flag's default value, told apart from the same text given by the user."""

    __slots__ = ()


DEFAULT_PRECISION = _Default("bf16")
"""``--precision`` when not given: bf16 for training; serving then follows the checkpoint."""


def typed(value: object) -> bool:
    """Whether a flag's value came from the command line (not its default)."""
    return value is not None and not isinstance(value, _Default)


def _add_serve(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("serving (--mode serve)")
    g.add_argument("--mode", choices=("train", "serve"), default="train", help="default train")
    g.add_argument(
        "--context",
        type=ranged(sequence_tokens, "context"),
        help="KV tokens per sequence (default: prompt + output)",
    )
    g.add_argument(
        "--prompt-len",
        type=ranged(sequence_tokens, "prompt_len"),
        help="prompt tokens (default 1024)",
    )
    g.add_argument(
        "--output-len",
        type=ranged(sequence_tokens, "output_len"),
        help="output tokens (default 1024)",
    )
    g.add_argument(
        "--concurrency",
        type=ranged(positive_int, "concurrency"),
        help="sequences per replica (default: max)",
    )
    g.add_argument("--kv-precision", help="KV-cache format (default: follows the weights)")
    g.add_argument("--compute-precision", help="GEMM format (default: the weights' if native)")
    g.add_argument(
        "--tpot-ms", type=ranged(positive_float, "tpot_ms"), help="time per output token target, ms"
    )
    g.add_argument(
        "--ttft-ms", type=ranged(positive_float, "ttft_ms"), help="time to first token target, ms"
    )
    g.add_argument(
        "--target-tokens-per-s",
        type=ranged(positive_float, "target_tokens_per_s"),
        help="fewest GPUs for this load",
    )
    g.add_argument("--kv-cache-fraction", type=positive_float,
                   help="share of free memory for KV (default 0.9)")  # fmt: skip
    g.add_argument("--request-rate", type=positive_float,
                   help="Poisson arrivals, requests/s to the deployment (default: saturated)")  # fmt: skip
    g.add_argument("--max-num-tokens", type=sequence_tokens,
                   help="engine token budget per forward pass (default 8192)")  # fmt: skip
    g.add_argument("--e2e-ms", type=positive_float, help="end-to-end latency target, ms")
    g.add_argument("--slo-percentile", type=int, choices=(50, 90),
                   help="percentile the TTFT and end-to-end targets apply to (default 90)")  # fmt: skip
    g.add_argument("--routing-skew", type=float,
                   help="MoE: Zipf exponent of expert popularity (default 0 = uniform)")  # fmt: skip
    g.add_argument("--serving-engine", metavar="NAME",
                   help="engine profile for its host time per iteration: tensorrt-llm (default "
                   "on NVIDIA GPUs), vllm (default on AMD GPUs and TPUs), sglang "
                   "(topologies/engines/)")  # fmt: skip


def _add_run_length(p: argparse.ArgumentParser) -> None:
    run = p.add_mutually_exclusive_group()
    run.add_argument(
        "--tokens", type=positive_int, help="time to train this many tokens (15T = 15e12)"
    )
    run.add_argument("--steps", type=positive_int, help="time to train this many steps")


def _add_placement(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--placement",
        metavar="FILE",
        help="write the rank placement: FILE (.csv, else JSON lines) and FILE.hostfile "
        "(ranks.csv -> ranks.csv.hostfile)",
    )
    p.add_argument(
        "--cluster-state",
        metavar="FILE",
        help="YAML of GPUs/nodes down or taken and slow nodes: plan on what is free, placed "
        "by CP-SAT (training)",
    )


def _edits(args: argparse.Namespace) -> dict[str, object]:
    from planner.specs.cluster import ClusterEdits

    return {k: getattr(args, k) for k in ClusterEdits.model_fields if getattr(args, k) is not None}


def _cluster(args: argparse.Namespace) -> object:
    from planner.api import load_cluster

    cluster = load_cluster(args.cluster, edits=_edits(args))
    if getattr(args, "calibration", None):
        from planner.catalog import apply_cluster_calibration

        cluster = apply_cluster_calibration(cluster, args.calibration)
    return cluster


def _cluster_state(args: argparse.Namespace) -> object:
    """The ClusterState of --cluster-state (None when not given)."""
    if not getattr(args, "cluster_state", None):
        return None
    from planner.catalog.cluster_state import load_cluster_state

    return load_cluster_state(args.cluster_state)


def _workload(args: argparse.Namespace) -> dict[str, object]:
    from planner.errors import SpecError

    auto = args.command == "search" and args.precision.lower() == "auto"
    precision = "bf16" if auto else _precision(args.precision)
    workload: dict[str, object] = {"seq_len": args.seq_len, "precision": precision}
    if args.global_batch_tokens is not None:
        if args.global_batch_tokens % args.seq_len:
            raise SpecError(
                f"--global-batch-tokens {args.global_batch_tokens} is not a whole number "
                f"of {args.seq_len}-token sequences"
            )
        workload["global_batch"] = sequences = args.global_batch_tokens // args.seq_len
        from planner.limits import in_range, rule

        if not in_range("global_batch", sequences):
            raise SpecError(
                f"--global-batch-tokens {args.global_batch_tokens} is {sequences:,} sequences "
                f"of {args.seq_len} tokens: the global batch must be {rule('global_batch')}"
            )
    elif args.global_batch is not None:
        workload["global_batch"] = args.global_batch
    workload.update(_framework(args))
    if workload.get("fp8_param_gather") and not auto:
        from planner.specs.formats import EIGHT_BIT_PARAM_FORMATS

        eight_bit = [str(f) for f in EIGHT_BIT_PARAM_FORMATS]
        if precision not in eight_bit:
            raise SpecError(
                f"--fp8-param-gather: parameters are gathered in 8 bits only with --precision "
                f"{' or '.join(eight_bit)} (or auto), not {precision}"
            )
    if workload.get("fused_grouped_mlp"):
        _check_fused_grouped_mlp(args, precision, searched=auto)
    return workload


def _check_fused_grouped_mlp(args: argparse.Namespace, precision: str, *, searched: bool) -> None:
    """``--fused-grouped-mlp`` where it cannot run is one line: a dense model, an accelerator
    without compute capability 10.x (the cluster's, unless ``whatif`` varies it; ``migrate``'s
    two are checked by the search), and a pinned precision other than mxfp8 or nvfp4
    (``--precision auto`` and ``--vary precision`` are not refused: the cost model applies it
    to the block-scaled formats only)."""
    from planner.errors import SpecError
    from planner.search.rules import fused_grouped_mlp_format_rule, fused_grouped_mlp_rule
    from planner.specs.workload import TrainWorkload

    what = "--fused-grouped-mlp: Transformer Engine's fused grouped MLP"
    knobs = _varied_knobs(args)
    if getattr(args, "model", None) and getattr(args, "cluster", None):
        from planner.api import load_model

        model = load_model(args.model)
        acc = _cluster(args).accelerator  # type: ignore[attr-defined]
        why = fused_grouped_mlp_rule(model, acc)
        if why and (model.moe is None or not knobs & {"system", "accelerator"}):
            raise SpecError(f"{what} {why}")
    if searched or "precision" in knobs:
        return
    workload = TrainWorkload(fused_grouped_mlp=True, precision=precision)
    why = fused_grouped_mlp_format_rule(workload, "--precision")
    if why:
        raise SpecError(f"{what} {why}")


def _varied_knobs(args: argparse.Namespace) -> set[str]:
    """The knobs ``whatif --vary`` sweeps (none for the other commands)."""
    from planner.search.whatif import split_vary

    return {split_vary(text)[0] for text in getattr(args, "vary", None) or []}


def _auto_precisions(args: argparse.Namespace) -> list[str]:
    """--precision auto: bf16 and the 8-bit training formats the accelerator runs (FP4 training
    is opt-in: ask for nvfp4 or mxfp4 by name)."""
    acc = _cluster(args).accelerator  # type: ignore[attr-defined]
    return [f for f in ("bf16", "fp8", "mxfp8") if acc.supports(f)]


def _split_pairs(items: list[str]) -> list[str]:
    """The ``KEY=VALUE`` pairs of a repeatable flag's items, an item that lists several
    (``--fix tp=2,pp=16``) taken as the pairs it lists when every comma-separated part names a
    key; an item whose parts do not (``--fix tp=2,4``) stays whole, to get its own error.

    >>> _split_pairs(["tp=2,pp=16", "mbs=1", "tp=2,4"])
    ['tp=2', 'pp=16', 'mbs=1', 'tp=2,4']
    """
    out: list[str] = []
    for item in items:
        parts = item.split(",")
        if len(parts) > 1 and all("=" in part for part in parts):
            out.extend(part.strip() for part in parts)
        else:
            out.append(item)
    return out


def _key_value(flag: str, item: str, allowed: tuple[str, ...]) -> tuple[str, str]:
    """``KEY=VALUE`` of a repeatable flag, KEY lower-cased and one of ``allowed``."""
    from planner.errors import SpecError

    key, sep, value = item.partition("=")
    key = key.strip().lower()
    if not sep or key not in allowed:
        raise SpecError(
            f"{flag} {_shown(item)} must be KEY=VALUE with KEY one of {', '.join(allowed)}"
        )
    return key, value


def _parse_bounds(mins: list[str], maxs: list[str]) -> dict[str, tuple[int | None, int | None]]:
    from planner.errors import SpecError
    from planner.search.arguments import BOUNDABLE

    bounds: dict[str, list[int | None]] = {}
    for flag, items, side in (("--min", mins, 0), ("--max", maxs, 1)):
        given: dict[str, str] = {}
        for item in _split_pairs(items):
            key, value = _key_value(flag, item, BOUNDABLE)
            _once(flag, key, value, given)
            number = _layout_number(flag, key, value, "a whole number")
            bounds.setdefault(key, [None, None])[side] = number
    for key, (low, high) in bounds.items():
        if low is not None and high is not None and low > high:
            raise SpecError(f"--min {key}={low} exceeds --max {key}={high}")
    return {k: (v[0], v[1]) for k, v in bounds.items()}


def _once(flag: str, key: str, value: str, given: dict[str, str]) -> None:
    """A field named twice by one flag is an error, not 'the last one wins'."""
    from planner.errors import SpecError

    if key in given:
        raise SpecError(
            f"{flag} {key} is given twice ({key}={_cut(given[key])} and {key}={_cut(value)}): "
            "give it once"
        )
    given[key] = value


def _precision(text: str) -> str:
    from planner.search.arguments import training_precision

    return training_precision(text)


def _parse_fix(items: list[str], *, serve: bool = False) -> dict[str, object]:
    """The --fix pins: training layout fields, or with ``serve`` the serving ones (tp, pp, ep,
    dp = replicas, attention_dp); a field of the other mode is named as such."""
    from planner.errors import SpecError
    from planner.search.arguments import pin_value
    from planner.search.serving_search import SERVE_PINNABLE
    from planner.search.space import PINNABLE

    allowed, other = (tuple(SERVE_PINNABLE), PINNABLE) if serve else (PINNABLE, ())
    out: dict[str, object] = {}
    given: dict[str, str] = {}
    for item in _split_pairs(items):
        key = item.partition("=")[0].strip().lower()
        if "=" in item and key in other and key not in allowed:
            raise SpecError(
                f"--fix {key}: {key} is a training field; it does not apply to --mode serve "
                f"(serving pins {', '.join(allowed)})"
            )
        key, value = _key_value("--fix", item, allowed)
        if serve:
            field = SERVE_PINNABLE[key]  # dp is an alias of replicas
            if field in given:
                raise SpecError(
                    f"--fix {_cut(given[field])} and --fix {key}={_cut(value)} both pin "
                    f"{field}: give it once"
                )
            given[field] = f"{key}={value}"
            out[key] = _layout_number("--fix", key, value, "a positive whole number")
            continue
        _once("--fix", key, value, given)
        if key == "recompute":
            out[key] = pin_value(f"--fix {key}={_cut(value)}", key, value)
            continue
        if key == "precision":
            out[key] = _precision(value)
            continue
        out[key] = _layout_number("--fix", key, value, "a positive whole number")
    return out


def _layout_number(flag: str, key: str, value: str, what: str) -> int:
    """The integer of ``flag key=value`` for a layout degree (positive) or ZeRO stage (0-3);
    a one-line SpecError naming the flag otherwise (``what``: the words for a degree). The text
    is parsed here, the range checked by planner.search.arguments (shared with the API)."""
    from planner.errors import SpecError
    from planner.search.arguments import layout_number

    try:
        if key == "zero":  # int() would read '٢' or '2_0' too
            if not re.fullmatch(r"\s*[0-9]{1,9}\s*", value):
                raise ValueError(value)
            number = int(value)
        else:
            number = positive_int(value)
    except (argparse.ArgumentTypeError, ValueError):
        rule = "0, 1, 2 or 3" if key == "zero" else what
        raise SpecError(f"{flag} {key}={_cut(value)}: must be {rule}") from None
    return layout_number(f"{flag} {key}={_cut(value)}", key, number, what)


def _parse_prices(items: list[str]) -> dict[str, float]:
    from planner.errors import SpecError

    prices: dict[str, float] = {}
    given: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if sep and name.strip():
            _once("--price", name.strip(), value.strip(), given)
        try:
            prices[name.strip()] = positive_float(value.strip().lstrip("$").removesuffix("/h"))
        except argparse.ArgumentTypeError:
            sep = ""
        if not sep or not name.strip():
            raise SpecError(
                f"--price {_shown(item)} must be CLUSTER=USD_PER_GPU_HOUR, e.g. hgx_b200=4.5"
            )
    return prices


def given(args: argparse.Namespace) -> dict[str, str]:
    """The flags given on the command line: destination -> flag (planner.cli.given_flags)."""
    return getattr(args, "given", None) or {}


SERVE_ONLY: tuple[str, ...] = (
    "context", "prompt_len", "output_len", "concurrency", "kv_precision", "compute_precision",
    "tpot_ms", "ttft_ms", "target_tokens_per_s", "kv_cache_fraction", "attention_dp",
    "request_rate", "max_num_tokens", "e2e_ms", "slo_percentile", "routing_skew", "pareto",
    "disaggregate", "serving_engine",
)  # fmt: skip
"""Flags (destinations) that only serving reads."""
TRAIN_ONLY: tuple[str, ...] = (
    "seq_len", "global_batch", "global_batch_tokens", "recompute", "zero", "vpp", "cp", "etp",
    "mbs", "recompute_modules", "recompute_num_layers", "moe_dispatcher", "ep_overlap",
    "moe_cuda_graphs", "grad_reduce", "optimizer_state", "fp8_param_gather", "fused_grouped_mlp",
    "expert_load_imbalance", "moe_capacity_factor", "moe_expert_compute", "saved_tensors",
    "activation_offload", "elementwise", "attention_kernel", "cross_entropy",
    "zero_shard_group", "ddp_bucket_size", "reshard_after_forward", "fsdp_gather_unit",
    "fsdp_buffer_copies",
    "weight_cast", "fp8_casts", "host_sync_interval", "no_sequence_parallel", "no_tp_overlap",
    "tp_overlap", "framework", "cp_comm", "cp_impl", "mtp_num_layers", "pipeline_schedule",
    "stage_split",
    "target_step_time", "cluster_state", "pipeline_model_parallel_layout",
    "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
    "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
)  # fmt: skip
"""Flags (destinations) that only training reads: --mode serve would ignore them."""
_SERVE_HINTS = {
    "cluster_state": " ('layout pack' packs serving jobs on a cluster)",
    "seq_len": " (the KV length per sequence is --context)",
    "global_batch": " (the load is --concurrency or --target-tokens-per-s)",
    "global_batch_tokens": " (the load is --concurrency or --target-tokens-per-s)",
}


def _check_train_flags(args: argparse.Namespace) -> None:
    """Serving flags without --mode serve are a mistake, not something to ignore."""
    from planner.errors import SpecError

    flags = given(args)
    if getattr(args, "objective", None) == "latency":
        raise SpecError("--objective latency needs --mode serve (training minimises time)")
    for dest in SERVE_ONLY:
        unset = (None, False, [])  # --report's default is [], --disaggregate's False
        if dest in flags or (dest != "attention_dp" and getattr(args, dest, None) not in unset):
            flag = flags.get(dest, "--" + dest.replace("_", "-"))
            raise SpecError(f"{flag} is a serving flag: it needs --mode serve (the mode is train)")
    if getattr(args, "attention_dp", 1) != 1:
        raise SpecError("--attention-dp is a serving flag: it needs --mode serve")


def _check_serve_flags(args: argparse.Namespace) -> None:
    """Training flags with --mode serve are a mistake: serving would ignore them."""
    from planner.errors import SpecError

    flags = given(args)
    for dest in TRAIN_ONLY:
        if dest in flags:
            raise SpecError(
                f"{flags[dest]} is a training flag: it does not apply to --mode serve"
                f"{_SERVE_HINTS.get(dest, '')}"
            )
    if getattr(args, "objective", "time") in ("cost", "energy"):
        raise SpecError(
            f"--objective {args.objective} is a training objective: --mode serve ranks by "
            "throughput per GPU (time, the default) or latency"
        )


def _serve_workload(args: argparse.Namespace) -> dict[str, object]:
    from planner.catalog.store import suggest
    from planner.errors import SpecError
    from planner.specs.formats import NumberFormat

    names = [str(f) for f in NumberFormat]
    formats = ("precision", "kv_precision", "compute_precision")
    for key, text in ((k, getattr(args, k)) for k in formats if typed(getattr(args, k))):
        if text.lower() not in names:
            flag = "--" + key.replace("_", "-")
            raise SpecError(
                f"unknown {flag} {_shown(text)}{suggest(text, names)} ({', '.join(names)})"
            )
    flags = ("prompt_len", "output_len", "concurrency", "tpot_ms", "ttft_ms")
    flags += ("target_tokens_per_s", "kv_cache_fraction", "context", "request_rate", "e2e_ms")
    flags += ("slo_percentile", "routing_skew")
    out: dict[str, object] = {k: getattr(args, k) for k in flags if getattr(args, k) is not None}
    if args.max_num_tokens is not None:
        out["max_batch_tokens"] = args.max_num_tokens
    if typed(getattr(args, "serving_engine", None)):
        from planner.catalog.engines import load_engine

        out["engine"] = load_engine(args.serving_engine).name
    out.update({k: getattr(args, k).lower() for k in formats if typed(getattr(args, k))})
    if args.context is None and (args.prompt_len or args.output_len):
        out["context"] = (args.prompt_len or 1024) + (args.output_len or 1024)
    if getattr(args, "objective", "time") == "latency":
        out["objective"] = "latency"
    return out


def _write_text(target: str, text: str) -> None:
    from planner.cli.outputs import write_text_atomic

    write_text_atomic(target, text)


def _write_placement(args: argparse.Namespace, plan: object) -> None:
    """--placement FILE: the per-rank table and the hostfile, after the NVLink-domain check."""
    if not getattr(args, "placement", None):
        return
    from planner.cli.outputs import write_text_atomic
    from planner.errors import SpecError
    from planner.report.placement_file import placement_files
    from planner.specs.result import Plan

    if not isinstance(plan, Plan):
        raise SpecError("--placement needs a training plan")
    args.cluster = args.cluster or plan.cluster
    state = _cluster_state(args)
    files = placement_files(args.placement, plan, _cluster(args), state=state)  # type: ignore[arg-type]
    for target, text in files.items():
        write_text_atomic(target, text)
        wrote(args.command, target)


MOE_DISPATCHER_CHOICES = ("alltoall", "deepep", "hybridep")
"""``--moe-dispatcher`` choices (planner.specs.workload.MOE_DISPATCHERS, checked by a test; kept
here so that building the parser imports nothing heavy)."""
CP_COMM_CHOICES = ("p2p", "a2a", "a2a+p2p", "allgather")
"""``--cp-comm`` choices (planner.specs.framework.CP_COMMS, checked by a test; kept literal so
that building the parser imports no spec module)."""
CP_IMPL_CHOICES = ("te", "pytorch")
"""``--cp-impl`` choices (planner.specs.framework.CpImpl, checked by a test)."""


WHATIF_MAX_SCENARIOS = 256
"""``whatif --max-scenarios`` default (planner.search.whatif.DEFAULT_MAX_SCENARIOS, checked by a
test; kept here so that building the parser imports nothing heavy)."""
WHATIF_MAX_SCENARIOS_LIMIT = 100_000
"""The highest ``whatif --max-scenarios`` (planner.search.whatif.MAX_SCENARIOS_LIMIT)."""


EXPORT_FORMATS = (
    "megatron",
    "bridge",
    "torchtitan",
    "deepspeed",
    "maxtext",
    "automodel",
    "nanotron",
    "accelerate",
    "vllm",
    "sglang",
)
"""``layout export --format`` choices (planner.report.export.FORMATS, checked by a test)."""


SCHEMA_KINDS = (
    "all",
    "search",
    "plan",
    "serve-search",
    "serve-plan",
    "migrate",
    "whatif",
    "validate",
    "validate-serving",
    "export",
    "placement",
    "pack",
)
"""``layout schema --kind`` choices (planner.report.schema.OUTPUTS, checked by a test)."""
