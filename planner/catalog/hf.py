"""Import a Hugging Face ``config.json`` as a :class:`~planner.specs.model.ModelSpec`.

One mapping function per ``model_type`` family turns the config's keys into ModelSpec fields;
:data:`_FAMILIES` dispatches on ``model_type``. Keys the spec does not model (rms_norm_eps,
...) are ignored; ``quantization_config`` sets the model's checkpoint format
(:mod:`planner.catalog.hf_quant`). Every problem (unknown ``model_type``, a
missing or mistyped key, an architecture the spec cannot express, a spec that does not
validate) raises :class:`~planner.errors.SpecError` with a one-line message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from planner.catalog.hf_quant import checkpoint_quantization
from planner.catalog.io import short_repr, validate_spec
from planner.errors import SpecError
from planner.specs.model import SIZE_LIMITS, ModelSpec
from planner.specs.text import MAX_NAME_CHARS, is_name_char

Config = Mapping[str, object]
Fields = dict[str, object]

_GATED = {
    "silu": "swiglu",
    "swish": "swiglu",
    "gelu": "geglu",
    "gelu_new": "geglu",
    "gelu_pytorch_tanh": "geglu",
}
"""hidden_act -> ModelSpec activation for gated (gate/up/down) FFNs."""
_PLAIN = {
    "relu2": "relu2",
    "relu": "relu",
    "gelu": "gelu",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
}
"""hidden_act -> ModelSpec activation for plain (up/down) FFNs."""
_DROPOUT_KEYS = (
    "attention_dropout",
    "hidden_dropout",
    "resid_pdrop",
    "embd_pdrop",
    "emb_pdrop",
    "attn_pdrop",
    "residual_dropout",
    "embedding_dropout",
)
"""Config keys holding a training dropout probability."""


def model_from_hf_config(config: Config, *, name: str) -> ModelSpec:
    """Build a ModelSpec named ``name`` from a parsed Hugging Face ``config.json``.

    >>> spec = model_from_hf_config({"model_type": "llama", "hidden_size": 64,
    ...     "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
    ...     "vocab_size": 1000, "max_position_embeddings": 2048}, name="tiny")
    >>> spec.head_dim, spec.num_kv_heads, spec.ffn_activation
    (16, 4, 'swiglu')
    """
    name = hf_model_name(name)
    model_type = config.get("model_type")
    family, read_as = _family_of(config, name)
    try:
        _check_layer_count(config)
        config = _legacy_rope(config)
        fields = _FAMILIES[family](config)
        if fields.get("position_embedding", "rope") == "rope":
            fields["rope_attention_factor"] = _yarn_attention_factor(config, name)
            head_dim = fields.get("head_dim")
            fields.update(_rope(config, name, head_dim if isinstance(head_dim, int) else 0))
    except SpecError as exc:  # every refusal names the model, as the others do
        text = str(exc)
        raise SpecError(text if text.startswith(f"{name}:") else f"{name}: {text}") from None
    fields.update(
        name=name,
        family=family,
        source=f"Hugging Face config.json (model_type={model_type}{read_as})",
        dropout=_dropout(config),
    )
    quantization = checkpoint_quantization(config, name)
    if quantization is not None:
        fields["quantization"] = quantization
    return validate_spec(ModelSpec, fields, where=f"{name} (from config.json)")


NON_ATTENTION_LAYERS: dict[str, str] = {
    "qwen3_next": "Gated DeltaNet linear-attention layers",
    "qwen3_5": "Gated DeltaNet linear-attention layers",
    "qwen3_5_text": "Gated DeltaNet linear-attention layers",
    "qwen3_5_moe": "Gated DeltaNet linear-attention layers",
    "qwen3_5_moe_text": "Gated DeltaNet linear-attention layers",
    "kimi_linear": "Kimi Delta Attention linear-attention layers",
    "minimax": "lightning (linear) attention layers",
    "jamba": "Mamba state-space layers",
    "bamba": "Mamba-2 state-space layers",
    "granitemoehybrid": "Mamba-2 state-space layers",
    "nemotron_h": "Mamba-2 state-space layers",
    "falcon_h1": "Mamba-2 state-space heads",
    "zamba2": "Mamba-2 state-space layers",
    "mamba": "Mamba state-space layers",
    "mamba2": "Mamba-2 state-space layers",
    "rwkv": "RWKV recurrent layers",
    "recurrent_gemma": "RG-LRU recurrent layers",
    "lfm2": "short-convolution layers",
}
"""Known ``model_type`` values whose networks mix in layers the planner cannot cost (linear
attention, state-space or recurrent blocks, short convolutions): their refusal says why."""


def _family_of(config: Config, name: str) -> tuple[str, str]:
    """The :data:`_FAMILIES` key that maps ``config``, and how it was chosen ('' when by its
    ``model_type``). A ``model_type`` the importer does not know is read by the config's
    ``architectures`` when they name classes of one known family (:data:`_ARCHITECTURES`): a
    model that ships its own ``model_type`` for a standard network (Kimi K2's ``kimi_k2`` is a
    ``DeepseekV3ForCausalLM``) maps as that network, and the model's source says so. Anything
    else is a one-line refusal naming what is supported.

    >>> _family_of({"model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"]}, "k")
    ('deepseek_v3', ', read as deepseek_v3 by its architectures DeepseekV3ForCausalLM')
    >>> _family_of({"model_type": "llama"}, "m")
    ('llama', '')
    """
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in _FAMILIES:
        return model_type, ""
    listed = config.get("architectures")
    classes = [a for a in listed if isinstance(a, str)] if isinstance(listed, list) else []
    if isinstance(listed, list) and len(classes) < len(listed):
        classes = []  # an entry that is no class name: nothing to read the network by
    if isinstance(model_type, str) and model_type in NON_ATTENTION_LAYERS:
        classes = []  # its own layers, whatever classes it names: not read as another network
    families = {_ARCHITECTURES.get(a) for a in classes}
    every_known = bool(classes) and None not in families
    if every_known and len(families) == 1:
        family = str(families.pop())
        return family, f", read as {family} by its architectures {', '.join(classes)}"
    problem = (
        "config.json has no model_type"
        if model_type is None
        else f"config.json model_type {short_repr(model_type)} is not supported"
    )
    if isinstance(model_type, str) and model_type in NON_ATTENTION_LAYERS:
        problem += (
            f" (its {NON_ATTENTION_LAYERS[model_type]} are not softmax-attention transformer "
            "layers, the only kind the cost model prices)"
        )
    if every_known:
        problem += f" and its architectures {short_repr(listed)} name more than one network"
    elif listed is not None:
        problem += f" and its architectures {short_repr(listed)} are not all networks it knows"
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    raise SpecError(f"{name}: {problem}; supported model_type values: {supported}")


def hf_model_name(name: str) -> str:
    """A valid model name (:func:`planner.specs.text.check_name`) from the folder or file name a
    ``config.json`` was found under: characters a name may not hold (controls, shell and markup
    characters) become ``_``, leading dashes and blanks go, the name is cut at MAX_NAME_CHARS;
    ``hf-model`` when nothing is left.

    >>> hf_model_name("Llama-3.1-8B"), hf_model_name("x\\n$(touch y)"), hf_model_name("--")
    ('Llama-3.1-8B', 'x__(touch y)', 'hf-model')
    """
    cleaned = "".join(c if is_name_char(c) else "_" for c in name).strip().lstrip("-").strip()
    return cleaned[:MAX_NAME_CHARS].rstrip() or "hf-model"


def yarn_attention_factor(
    scale: float, mscale: float | None = None, mscale_all_dim: float | None = None
) -> float:
    """YaRN's attention (concentration) factor for a context extension ``scale`` = s, to 4
    places: m(s, mscale) / m(s, mscale_all_dim) when both are given (DeepSeek-V3: 1), else
    m(s) with m(s, c) = 0.1 c ln(s) + 1 for s > 1, 1 otherwise (Peng et al. 2023, arXiv
    2309.00071, eq. 22; Hugging Face ``_compute_yarn_parameters``, Megatron-LM
    ``_yarn_get_concentration_factor``).

    >>> yarn_attention_factor(32.0)  # gpt-oss
    1.3466
    >>> yarn_attention_factor(40.0, 1.0, 1.0)  # DeepSeek-V3
    1.0
    """

    def m(c: float = 1.0) -> float:
        return 1.0 if scale <= 1.0 else 0.1 * c * math.log(scale) + 1.0

    if mscale is not None and mscale_all_dim is not None:
        denominator = m(mscale_all_dim)
        if not denominator > 0.0:  # 0.1 c ln(s) + 1 <= 0: no attention factor, not a number
            raise SpecError(
                f"config.json rope_scaling mscale_all_dim {mscale_all_dim:g} with factor "
                f"{scale:g} gives a YaRN scale of {denominator:.4g}; it must be > 0"
            )
        return round(m(mscale) / denominator, 4)
    return round(m(), 4)


LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
"""The keys a family reads its layer count from (transformers' and the first GPT-2, Falcon and
DBRX spellings)."""


def _check_layer_count(config: Config) -> None:
    """SpecError for a layer count above what ModelSpec accepts (SIZE_LIMITS), before any family
    builds a per-layer list from it: a config.json with 10^30 layers is refused at once rather
    than enumerated.

    >>> _check_layer_count({"num_hidden_layers": 80})
    >>> _check_layer_count({"n_layer": 10**9})
    Traceback (most recent call last):
    ...
    planner.errors.SpecError: config.json n_layer (1000000000) exceeds the 16,384 layers the planner accepts
    """
    limit = SIZE_LIMITS["num_layers"]
    for key in LAYER_COUNT_KEYS:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            raise SpecError(
                f"config.json {key} ({short_repr(value)}) exceeds the {limit:,} layers the "
                "planner accepts"
            )


ROPE_PARAMETER_LAYER = "full_attention"
"""The layer type whose entry of a per-layer-type ``rope_parameters`` the model's RoPE is read
from: the global layers, where a context extension applies (local layers' own base changes
their frequencies, not what a step costs)."""

_ROPE_PARAMETER_OWN_KEYS = ("rope_theta", "partial_rotary_factor", "mrope_section",
                            "mrope_interleaved")  # fmt: skip
"""``rope_parameters`` keys that are not scaling settings: the base and the rotated share (read
as ``rope_theta`` and ``partial_rotary_factor``), and multimodal RoPE's split of the rotated
dimensions over time, height and width (Qwen2-VL's M-RoPE: the same rotations, so the same
cost)."""


def _legacy_rope(config: Config) -> Config:
    """``config`` with transformers v5's ``rope_parameters`` read into the keys the families
    read (``rope_theta``, ``partial_rotary_factor``, ``rope_scaling``): configs saved by
    transformers 5 carry ``{"rope_type": ..., "rope_theta": ..., "factor": ...}`` there and no
    top-level ``rope_theta`` or ``rope_scaling``, which would otherwise read as RoPE at base
    10,000 without scaling. A per-layer-type mapping (``{"full_attention": {...},
    "sliding_attention": {...}}``) is read from its :data:`ROPE_PARAMETER_LAYER` entry, else
    from its one distinct entry. A value that contradicts a top-level key is refused rather than
    one of them silently kept.

    >>> _legacy_rope({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6,
    ...     "factor": 4.0, "original_max_position_embeddings": 32768}})["rope_scaling"]
    {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 32768}
    >>> _legacy_rope({"rope_parameters": {"full_attention": {"rope_theta": 1e6},
    ...     "sliding_attention": {"rope_theta": 1e4}}})["rope_theta"]
    1000000.0
    """
    given = config.get("rope_parameters")
    if given is None:
        return config
    if not isinstance(given, Mapping):
        raise SpecError(f"config.json rope_parameters must be an object, got {short_repr(given)}")
    params: Mapping[str, object] = given
    flat = any(key in given for key in ("rope_type", "type", "rope_theta", "factor"))
    if given and not flat and all(isinstance(v, Mapping) for v in given.values()):  # per layer
        distinct = {repr(sorted(v.items())): v for v in given.values()}  # type: ignore[union-attr]
        if ROPE_PARAMETER_LAYER in given:
            params = given[ROPE_PARAMETER_LAYER]  # type: ignore[assignment]
        elif len(distinct) == 1:
            params = next(iter(distinct.values()))
        else:
            raise SpecError(
                f"config.json rope_parameters gives layer types {sorted(given)} different RoPE "
                f"and none is {ROPE_PARAMETER_LAYER!r}: the spec has one RoPE for every layer"
            )
    out = dict(config)
    for key in ("rope_theta", "partial_rotary_factor"):
        value = params.get(key)
        if value is None:
            continue
        if config.get(key) is not None and config[key] != value:
            raise SpecError(
                f"config.json {key} {short_repr(config[key])} contradicts rope_parameters."
                f"{key} {short_repr(value)}: give one of them"
            )
        out[key] = value
    kind = params.get("rope_type") or params.get("type")
    if kind is not None and kind != "default":
        scaling = {k: v for k, v in params.items() if k not in _ROPE_PARAMETER_OWN_KEYS}
        if config.get("rope_scaling") is not None and config["rope_scaling"] != scaling:
            raise SpecError(
                "config.json rope_scaling contradicts rope_parameters: give one of them"
            )
        out["rope_scaling"] = scaling
    return out


def _yarn_attention_factor(config: Config, name: str) -> float:
    """:func:`yarn_attention_factor` from ``rope_scaling`` (1 without YaRN; its
    ``attention_factor`` when the config gives one).

    >>> _yarn_attention_factor({"rope_scaling": {"rope_type": "yarn", "factor": 32.0}}, "m")
    1.3466
    """
    scaling = config.get("rope_scaling")
    if scaling is None:
        return 1.0
    if not isinstance(scaling, Mapping):
        raise SpecError(
            f"{name}: config.json rope_scaling must be an object, got {short_repr(scaling)}"
        )
    if (scaling.get("rope_type") or scaling.get("type")) != "yarn":
        return 1.0
    if scaling.get("attention_factor") is not None:
        return _yarn_number(scaling, "attention_factor", name)  # type: ignore[return-value]
    factor = _yarn_number(scaling, "factor", name)
    return yarn_attention_factor(
        1.0 if factor is None else factor,
        _yarn_number(scaling, "mscale", name),
        _yarn_number(scaling, "mscale_all_dim", name),
    )


YARN_RANGES: dict[str, tuple[float, float]] = {
    "factor": (1.0, 1024.0),
    "attention_factor": (0.01, 100.0),
    "mscale": (-1000.0, 1000.0),
    "mscale_all_dim": (-1000.0, 1000.0),
}
"""Plausible range of each YaRN number in ``rope_scaling``: the context extension factor s is
at least 1 (published configs: 4-40); mscale and mscale_all_dim are the 0.1 x c in YaRN's
``0.1 c ln(s) + 1`` (published: 0.707-1)."""


def _yarn_number(scaling: Mapping[str, object], key: str, name: str) -> float | None:
    """The number ``rope_scaling[key]`` (None when absent or null): an int or a float, never a
    boolean or text (``factor: true`` is not 1), within :data:`YARN_RANGES`."""
    value = scaling.get(key)
    if value is None:
        return None
    low, high = YARN_RANGES[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(
            f"{name}: config.json rope_scaling {key} must be a number, got {short_repr(value)}"
        )
    if not low <= value <= high:  # a NaN fails this too
        raise SpecError(
            f"{name}: config.json rope_scaling {key} {short_repr(value)} must be from {low:g} "
            f"to {high:g}"
        )
    return float(value)


_ROPE_KINDS = {
    "llama3": "llama3",
    "yarn": "yarn",
    "linear": "linear",
    "longrope": "longrope",
    "su": "longrope",
}
"""config.json ``rope_scaling`` type -> RopeScaling.kind (``rope_type``, or ``type`` in older
configs; the first Phi-3 long-context configs called LongRoPE ``su``)."""
_ROPE_KEYS = {
    "factor": "factor",
    "original_max_position_embeddings": "original_context",
    "low_freq_factor": "low_freq_factor",
    "high_freq_factor": "high_freq_factor",
    "beta_fast": "beta_fast",
    "beta_slow": "beta_slow",
    "mscale": "mscale",
    "mscale_all_dim": "mscale_all_dim",
    "truncate": "truncate",
}
"""config.json ``rope_scaling`` key -> RopeScaling field (the others, such as
``attention_factor``, are read by :func:`_yarn_attention_factor` or not modelled)."""


def _rope(config: Config, name: str, head_dim: int = 0) -> Fields:
    """``rope_theta``, ``rope_scaling`` and ``partial_rotary_factor`` as ModelSpec fields
    (the spec's defaults when absent; a scaling type the spec has no name for is an error).
    HunYuan's NTK-alpha scaling (type ``dynamic`` with an ``alpha``) is a fixed base of a
    ``head_dim``-wide head (:func:`_ntk_alpha_theta`), kept as ``rope_theta``.

    >>> _rope({"rope_theta": 5e5, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
    ...        "original_max_position_embeddings": 8192}}, "m")["rope_scaling"]
    {'kind': 'llama3', 'factor': 8.0, 'original_context': 8192}
    """
    out: Fields = {}
    if config.get("rope_theta") is not None:
        out["rope_theta"] = config["rope_theta"]
    if config.get("partial_rotary_factor") is not None:
        out["rotary_fraction"] = config["partial_rotary_factor"]
    scaling = config.get("rope_scaling")
    if scaling is None:
        return out
    if not isinstance(scaling, Mapping):
        raise SpecError(
            f"{name}: config.json rope_scaling must be an object, got {short_repr(scaling)}"
        )
    kind = scaling.get("rope_type") or scaling.get("type")
    if kind in ("default", "mrope"):  # plain RoPE; Qwen2-VL's "mrope" only splits its rotations
        return out  # over time, height and width (transformers reads it as "default")
    if kind == "dynamic" and scaling.get("alpha") is not None:
        return {**out, "rope_theta": _ntk_alpha_theta(config, scaling, head_dim)}
    if not isinstance(kind, str) or kind not in _ROPE_KINDS:
        raise SpecError(
            f"{name}: config.json rope_scaling type {short_repr(kind)} is not supported "
            f"(one of: {', '.join(_ROPE_KINDS)}, or null)"
        )
    fields: Fields = {"kind": _ROPE_KINDS[str(kind)]}
    fields.update({field: scaling[key] for key, field in _ROPE_KEYS.items() if key in scaling})
    if fields["kind"] == "longrope":
        fields.update(_longrope_extension(config, scaling, name))
    out["rope_scaling"] = fields
    return out


def _ntk_alpha_theta(config: Config, scaling: Mapping[str, object], head_dim: int) -> float:
    """The RoPE base of HunYuan's NTK-alpha scaling (``rope_scaling`` type ``dynamic`` with an
    ``alpha``): theta x alpha^(H / (H - 2)) for a head of H dimensions, the same at every
    position within the context (transformers' HunYuan rotary embeddings build their
    frequencies from it; llama.cpp folds it into the base the same way), so it is the model's
    ``rope_theta`` and no scaling.

    >>> round(_ntk_alpha_theta({"rope_theta": 10000.0}, {"alpha": 1000.0}, 128))
    11158840
    """
    if head_dim <= 2:
        raise SpecError(f"config.json NTK-alpha RoPE needs a head_dim above 2, got {head_dim}")
    alpha = _positive_float(scaling, "alpha", 1.0)
    return _positive_float(config, "rope_theta", 10000.0) * alpha ** (head_dim / (head_dim - 2))


def _longrope_extension(config: Config, scaling: Mapping[str, object], name: str) -> Fields:
    """LongRoPE's pre-training context and extension factor: Phi-3 writes the pre-training
    context as a top-level ``original_max_position_embeddings`` (Phi-3.5-MoE inside
    ``rope_scaling`` too) and no factor, which transformers' ``_compute_longrope_parameters``
    takes as ``max_position_embeddings`` / that context. The attention factor LongRoPE derives
    (or ``long_mscale``) multiplies the cos and sin tables (transformers' Phi-3 rotary
    embedding), so it adds no pass and is not kept.

    >>> _longrope_extension({"max_position_embeddings": 131072,
    ...     "original_max_position_embeddings": 4096}, {"type": "longrope"}, "m")
    {'original_context': 4096, 'factor': 32.0}
    """
    key = "original_max_position_embeddings"
    source = config if config.get(key) is not None else scaling
    if source.get(key) is None:
        raise SpecError(f"{name}: config.json with LongRoPE scaling lacks {key!r}")
    original = _positive_int(source, key)
    out: Fields = {"original_context": original}
    if scaling.get("factor") is None or config.get(key) is not None:
        out["factor"] = max(1.0, _int(config, "max_position_embeddings") / original)
    return out


# --- typed key access ---------------------------------------------------------------------


def _int(config: Config, key: str) -> int:
    """The required integer ``key``."""
    if config.get(key) is None:
        raise SpecError(
            f"config.json (model_type={short_repr(config.get('model_type'))}) lacks {key!r}"
        )
    return _as_int(config, key)


def _positive_int(config: Config, key: str) -> int:
    """The required integer ``key``, which must be at least 1 (a divisor, a count of heads)."""
    value = _int(config, key)
    if value < 1:
        raise SpecError(
            f"config.json key {key!r} must be a positive integer, got {short_repr(value)}"
        )
    return value


def _opt_int(config: Config, key: str, default: int) -> int:
    """The integer ``key``, or ``default`` when it is absent or null."""
    return default if config.get(key) is None else _as_int(config, key)


def _as_int(config: Config, key: str) -> int:
    """``config[key]`` as an int (integral floats accepted, booleans rejected)."""
    value = config[key]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"config.json key {key!r} must be an integer, got {short_repr(value)}")
    return value


def _bool(config: Config, key: str, default: bool) -> bool:
    """The boolean ``key``, or ``default`` when it is absent or null."""
    value = config.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise SpecError(f"config.json key {key!r} must be true or false, got {short_repr(value)}")
    return value


def _positive_float(config: Config, key: str, default: float) -> float:
    """The finite positive number ``key`` (an int or a float, never a boolean or text), or
    ``default`` when it is absent or null."""
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise SpecError(
            f"config.json key {key!r} must be a positive number, got {short_repr(value)}"
        )
    return float(value)


def _alias(config: Config, *keys: str) -> str:
    """The first of ``keys`` the config gives (not null): a key the configuration class reads
    under more than one name (GPT-NeoX's ``partial_rotary_factor`` or the released configs'
    ``rotary_pct``, the ``n_head`` and ``n_layer`` of the first Falcon configs) is read under
    either; the first key when none is given, so that a refusal names it.

    >>> _alias({"n_head": 71}, "num_attention_heads", "n_head"), _alias({}, "n_embd", "hidden_size")
    ('n_head', 'n_embd')
    """
    return next((key for key in keys if config.get(key) is not None), keys[0])


def _heads_divide(hidden: int, heads: int, hidden_key: str, heads_key: str) -> int:
    """The head width ``hidden`` // ``heads`` of a family that has no ``head_dim`` key, when the
    heads divide the width (else SpecError: the configuration class refuses it too)."""
    if hidden % heads:
        raise SpecError(
            f"config.json {hidden_key} {hidden} is not a multiple of {heads_key} {heads}"
        )
    return hidden // heads


def _activation(config: Config, key: str, default: str, table: Mapping[str, str]) -> str:
    """Map the activation name in ``key`` through ``table`` (gated or plain FFN)."""
    act = config.get(key, default)
    if not isinstance(act, str) or act not in table:
        raise SpecError(
            f"config.json {key} {short_repr(act)} is not supported here; use one of {', '.join(table)}"
        )
    return table[act]


def _dropout(config: Config) -> bool:
    """True when any training dropout probability in the config is above zero."""
    values = (config.get(key) for key in _DROPOUT_KEYS)
    return any(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in values)


# --- shared pieces ----------------------------------------------------------------------------


def _attention(config: Config) -> Fields:
    """Width, depth, heads (GQA: num_key_value_heads, default all), head_dim, vocab, context."""
    hidden, heads = _int(config, "hidden_size"), _int(config, "num_attention_heads")
    if heads > 0 and config.get("head_dim") is None and hidden % heads:
        raise SpecError(
            f"config.json lacks 'head_dim' and hidden_size {hidden} is not a "
            f"multiple of num_attention_heads {heads}"
        )
    return {
        "hidden_size": hidden,
        "num_layers": _int(config, "num_hidden_layers"),
        "num_attention_heads": heads,
        "num_kv_heads": _opt_int(config, "num_key_value_heads", heads),
        "head_dim": _opt_int(config, "head_dim", hidden // heads if heads > 0 else 0),
        "vocab_size": _int(config, "vocab_size"),
        "max_context": _int(config, "max_position_embeddings"),
        "tied_embeddings": _bool(config, "tie_word_embeddings", False),
    }


def _layer_types_sliding(config: Config) -> Fields | None:
    """Sliding-window fields from an explicit ``layer_types`` list, or None when absent."""
    layer_types = config.get("layer_types")
    if layer_types is None:
        return None
    if not isinstance(layer_types, list):
        raise SpecError(f"config.json layer_types must be a list, got {short_repr(layer_types)}")
    count = sum(1 for kind in layer_types if kind == "sliding_attention")
    if not count:
        return {"sliding_window": None, "num_sliding_window_layers": 0}
    return {"sliding_window": _int(config, "sliding_window"), "num_sliding_window_layers": count}


def _all_layers_sliding(config: Config) -> Fields:
    """Mistral/Mixtral: a non-null ``sliding_window`` applies to every layer."""
    found = _layer_types_sliding(config)
    if found is not None:
        return found
    if config.get("sliding_window") is None:
        return {"sliding_window": None, "num_sliding_window_layers": 0}
    return {
        "sliding_window": _int(config, "sliding_window"),
        "num_sliding_window_layers": _int(config, "num_hidden_layers"),
    }


def _qwen_sliding(config: Config, *, switch: bool = True) -> Fields:
    """Qwen2/3: with ``use_sliding_window``, layers from ``max_window_layers`` on slide (with no
    ``switch``, dots.llm1's, whenever ``sliding_window`` is set)."""
    found = _layer_types_sliding(config)
    if found is not None:
        return found
    switched_off = switch and not _bool(config, "use_sliding_window", False)
    if switched_off or config.get("sliding_window") is None:
        return {"sliding_window": None, "num_sliding_window_layers": 0}
    layers = _int(config, "num_hidden_layers")
    count = max(0, layers - _int(config, "max_window_layers"))
    return {
        "sliding_window": _int(config, "sliding_window") if count else None,
        "num_sliding_window_layers": count,
    }


def _biases(config: Config) -> Fields:
    """Llama-style ``attention_bias`` (q, k, v and o projections) and ``mlp_bias``."""
    attention_bias = _bool(config, "attention_bias", False)
    return {
        "attention_bias": attention_bias,
        "attention_output_bias": attention_bias,
        "mlp_bias": _bool(config, "mlp_bias", False),
    }


def _use_bias(config: Config, default: bool) -> Fields:
    """One ``use_bias`` switch for the biases of every projection, q, k, v, o and the MLP's
    (StarCoder2, ERNIE 4.5); ``default`` when the key is absent."""
    use_bias = _bool(config, "use_bias", default)
    return {"attention_bias": use_bias, "attention_output_bias": use_bias, "mlp_bias": use_bias}


def _fused_shared_expert(count: int, expert_width: int) -> Fields:
    """MoE fields of ``count`` shared experts that the checkpoint holds as one always-on MLP
    ``count`` routed experts wide (GLM-4.5's ``n_shared_experts``, ERNIE 4.5's
    ``moe_num_shared_experts``): one shared expert of width ``count`` x ``expert_width``, the same
    weights as ``count`` experts of the routed width.

    >>> _fused_shared_expert(2, 1536)
    {'num_shared_experts': 1, 'shared_expert_ffn_hidden_size': 3072}
    """
    return {
        "num_shared_experts": 1 if count else 0,
        "shared_expert_ffn_hidden_size": count * expert_width,
    }


def _gated(config: Config, ffn_hidden_size: int) -> Fields:
    """An RMSNorm/RoPE decoder whose dense FFN layers (if any) are gated, of the given width."""
    return {
        **_attention(config),
        "ffn_hidden_size": ffn_hidden_size,
        "ffn_activation": _activation(config, "hidden_act", "silu", _GATED),
        "position_embedding": "rope",
        "norm": "rmsnorm",
    }


# --- one mapping per family -------------------------------------------------------------------


def _llama(config: Config) -> Fields:
    """LlamaForCausalLM: GQA, SwiGLU, RMSNorm, RoPE; optional q/k/v/o and MLP biases."""
    return {**_gated(config, _int(config, "intermediate_size")), **_biases(config)}


def _mistral(config: Config) -> Fields:
    """MistralForCausalLM: Llama without biases; ``sliding_window`` on every layer."""
    return {**_gated(config, _int(config, "intermediate_size")), **_all_layers_sliding(config)}


def _phi3(config: Config) -> Fields:
    """Phi3ForCausalLM: Llama's layer with q, k and v fused in one ``qkv_proj`` and gate and
    up in one ``gate_up_proj`` (the same weights, so the same count), SwiGLU, RMSNorm, no
    biases; a non-null ``sliding_window`` on every layer, as Mistral."""
    return {**_gated(config, _int(config, "intermediate_size")), **_all_layers_sliding(config)}


def _olmo2(config: Config) -> Fields:
    """Olmo2ForCausalLM: Llama's projections and SwiGLU, RMSNorm on the queries and keys, and
    the two norms of a layer after attention and after the MLP instead of before them (the same
    count). OLMo 2 normalises the whole q and k projections where the spec counts one head's
    width (``qk_norm``, Qwen3's): (q_dim + kv_dim - 2 head_dim) weights a layer, 0.004% of
    OLMo 2 7B, are left out."""
    return {**_gated(config, _int(config, "intermediate_size")), **_biases(config), "qk_norm": True}


def _routed_experts(config: Config, count_key: str = "num_local_experts") -> Fields:
    """MoE fields of a Mixtral-style block: ``count_key`` experts of width
    ``intermediate_size``, top ``num_experts_per_tok``, no shared expert."""
    return {
        "num_experts": _int(config, count_key),
        "top_k": _int(config, "num_experts_per_tok"),
        "expert_ffn_hidden_size": _int(config, "intermediate_size"),
    }


def _mixtral(config: Config) -> Fields:
    """MixtralForCausalLM: every FFN is ``num_local_experts`` experts, top
    ``num_experts_per_tok``, each of width ``intermediate_size``; no shared expert."""
    return {**_gated(config, 0), **_all_layers_sliding(config), "moe": _routed_experts(config)}


def _qwen2(config: Config) -> Fields:
    """Qwen2ForCausalLM: biases on q, k and v (not on o); optional sliding window."""
    return {
        **_gated(config, _int(config, "intermediate_size")),
        "attention_bias": True,
        "attention_output_bias": False,
        **_qwen_sliding(config),
    }


def _qwen3(config: Config) -> Fields:
    """Qwen3ForCausalLM: per-head q/k RMSNorm, ``attention_bias`` on q/k/v/o, explicit head_dim."""
    return _qwen3_layers(config, _int(config, "intermediate_size"))


def _qwen3_layers(config: Config, ffn_hidden_size: int) -> Fields:
    """Qwen3 attention (q/k norm, optional q/k/v/o bias); dense FFN width ``ffn_hidden_size``."""
    attention_bias = _bool(config, "attention_bias", False)
    return {
        **_gated(config, ffn_hidden_size),
        "attention_bias": attention_bias,
        "attention_output_bias": attention_bias,
        "qk_norm": True,
        **_qwen_sliding(config),
    }


def _qwen3_moe(config: Config) -> Fields:
    """Qwen3MoeForCausalLM: Qwen3 attention; MoE FFNs (``num_experts``, top
    ``num_experts_per_tok``, width ``moe_intermediate_size``) on every layer except leading
    ``mlp_only_layers``, on every ``decoder_sparse_step``-th layer (``MoESpec.layer_step``)."""
    moe, ffn_hidden_size = _qwen_moe_layers(config)
    return {**_qwen3_layers(config, ffn_hidden_size), "moe": moe}


def _qwen_moe_layers(config: Config) -> tuple[Fields, int]:
    """Qwen2/3-MoE's routed experts (``num_experts``, top ``num_experts_per_tok``, width
    ``moe_intermediate_size``) on every ``decoder_sparse_step``-th layer past the leading
    ``mlp_only_layers``, their top-k weights renormalised when ``norm_topk_prob`` (Qwen2MoeConfig
    and Qwen3MoeConfig default false; Qwen3's released configs set true), and the dense FFN width
    the other layers take (``intermediate_size``; 0 when every layer is MoE)."""
    dense = _leading_layers(config, "mlp_only_layers")
    step = 1
    if config.get("decoder_sparse_step") is not None:
        step = _positive_int(config, "decoder_sparse_step")
    moe: Fields = {
        "num_experts": _int(config, "num_experts"),
        "top_k": _int(config, "num_experts_per_tok"),
        "expert_ffn_hidden_size": _int(config, "moe_intermediate_size"),
        "first_dense_layers": dense,
        "layer_step": step,
        "router_topk_norm": _bool(config, "norm_topk_prob", False),
    }
    width = _int(config, "intermediate_size") if dense or step > 1 else 0
    return moe, width


def _required(config: Config, key: str, why: str) -> None:
    """SpecError unless ``config`` gives ``key``: where the configuration class's default for it
    has changed between transformers releases, a config that leaves it out does not say which
    the checkpoint was built with (``why`` says so), so it is asked for rather than guessed."""
    if config.get(key) is None:
        raise SpecError(f"config.json lacks {key!r}: {why}; write it out")


def _qwen2_vl_text(config: Config) -> Fields:
    """Qwen2-VL's and Qwen2.5-VL's language model (Qwen2VLTextConfig / Qwen2_5_VLTextConfig,
    model_type ``qwen2_vl_text`` / ``qwen2_5_vl_text``): Qwen2's layer (:func:`_qwen2`: biases on
    q, k and v, a sliding window only with ``use_sliding_window``), its M-RoPE a RoPE whose
    rotated dimensions are split over time, height and width (``mrope_section``; rope type
    "mrope" reads as plain RoPE, as transformers reads it), at base ``rope_theta`` (the classes'
    default 1,000,000, where Qwen2Config's is 10,000)."""
    return {**_qwen2(config), "rope_theta": 1000000.0}  # _rope keeps a given rope_theta


def _qwen3_vl_text(config: Config) -> Fields:
    """Qwen3-VL's language model (Qwen3VLTextConfig, model_type ``qwen3_vl_text``, the
    ``text_config`` of a ``qwen3_vl`` checkpoint): Qwen3's layer (:func:`_qwen3`: q/k RMSNorm,
    ``attention_bias`` on q/k/v/o, SwiGLU) without a sliding window, its M-RoPE a RoPE whose
    rotated dimensions are split over time, height and width (``mrope_section``: the same
    rotations, read by :func:`_legacy_rope`). ``head_dim`` is required: Qwen3VLTextConfig's
    default was 128 in its first releases and hidden_size / heads later."""
    _required(config, "head_dim", "Qwen3VLTextConfig's default differs between releases")
    unslid = {**config, "use_sliding_window": False}
    fields = _qwen3_layers(unslid, _int(config, "intermediate_size"))
    return {**fields, "sliding_window": None, "num_sliding_window_layers": 0}


def _qwen3_vl_moe_text(config: Config) -> Fields:
    """Qwen3-VL-MoE's language model (Qwen3VLMoeTextConfig, model_type ``qwen3_vl_moe_text``):
    Qwen3-MoE's layers (:func:`_qwen3_moe`) without a sliding window (the class sets none),
    the top-k weights always renormalised (transformers' Qwen3VLMoeTextTopKRouter divides them
    by their sum; the class has no ``norm_topk_prob``: "all the models use norm_topk_prob").
    ``tie_word_embeddings`` is required: Qwen3VLMoeTextConfig's default is true where
    Qwen3VLTextConfig's and Qwen3MoeConfig's are false, and has not always been."""
    why = "Qwen3VLMoeTextConfig's default differs from its siblings' and between releases"
    _required(config, "tie_word_embeddings", why)
    fields = _qwen3_moe({**config, "use_sliding_window": False, "norm_topk_prob": True})
    return {**fields, "sliding_window": None, "num_sliding_window_layers": 0}


def _leading_layers(config: Config, key: str) -> int:
    """Length of the layer-index list ``key`` when it is 0, 1, ..., k-1 (else SpecError)."""
    layers = config.get(key) or []
    if not isinstance(layers, list) or layers != list(range(len(layers))):
        raise SpecError(
            f"config.json {key} {short_repr(layers)} cannot be expressed: ModelSpec only "
            "has leading dense layers (0, 1, ..., k-1)"
        )
    return len(layers)


def _deepseek_v3(config: Config) -> Fields:
    """DeepseekV3ForCausalLM: :func:`_deepseek`, its router by default DeepSeek-V3's
    (:data:`DEEPSEEK_V3_ROUTER`)."""
    return _deepseek(config, DEEPSEEK_V3_ROUTER)


def _deepseek_v2(config: Config) -> Fields:
    """DeepseekV2ForCausalLM: :func:`_deepseek`, its router by default DeepSeek-V2's
    (:data:`DEEPSEEK_V2_ROUTER`)."""
    return _deepseek(config, DEEPSEEK_V2_ROUTER)


DEEPSEEK_V3_ROUTER = ("sigmoid", "noaux_tc", 2.5, True)
"""(``scoring_func``, ``topk_method``, ``routed_scaling_factor``, ``norm_topk_prob``) a
DeepSeek-V3 config.json leaves out means: the defaults of DeepSeek-V3's own
configuration_deepseek.py (hub remote code: sigmoid, noaux_tc, 2.5, true); transformers'
DeepseekV3Config defaults routed_scaling_factor to 2.5 and norm_topk_prob to true, and its
DeepseekV3TopkRouter always takes the sigmoid and the selection bias."""
DEEPSEEK_V2_ROUTER = ("softmax", "greedy", 1.0, False)
"""The same for DeepSeek-V2: transformers' DeepseekV2Config (topk_method ``greedy``,
routed_scaling_factor 1.0, norm_topk_prob false; no scoring_func, its router a softmax)."""
TOPK_METHODS: tuple[str, ...] = ("greedy", "group_limited_greedy", "noaux_tc")
"""The DeepSeek ``topk_method`` values: ``greedy`` (top-k of all experts), V2's
``group_limited_greedy`` (from ``topk_group`` of ``n_group`` groups) and V3's ``noaux_tc``
(group-limited, on the scores plus the aux-loss-free selection bias)."""
SCORING_FUNCS: tuple[str, ...] = ("softmax", "sigmoid")
"""The ``scoring_func`` values (MoESpec.router_score)."""


def _deepseek(config: Config, router: tuple[str, str, float, bool]) -> Fields:
    """DeepSeek-V2/V3's network, whose config.json keys are the same: MLA attention (V2-Lite has
    no query compression, ``q_lora_rank`` null), ``first_k_dense_replace`` dense layers, then
    DeepSeekMoE (routed + shared experts), routed as :func:`_deepseek_router` reads it (its
    defaults ``router``)."""
    if _opt_int(config, "moe_layer_freq", 1) != 1:
        raise SpecError(
            "config.json moe_layer_freq != 1 cannot be expressed: ModelSpec only "
            "has leading dense layers"
        )
    nope, rope = _int(config, "qk_nope_head_dim"), _int(config, "qk_rope_head_dim")
    mla = {
        "q_lora_rank": _opt_int(config, "q_lora_rank", 0),
        "kv_lora_rank": _int(config, "kv_lora_rank"),
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": nope,
        "v_head_dim": _int(config, "v_head_dim"),
    }
    moe, dense_width = _deepseek_moe_layers(config, fused_shared=False)
    moe |= _deepseek_router(config, router)
    heads = _int(config, "num_attention_heads")
    return {
        **_gated(config, dense_width),
        "num_kv_heads": heads,
        "head_dim": nope + rope,
        "attention_bias": _bool(config, "attention_bias", False),
        "mla": mla,
        "moe": moe,
    }


def _deepseek_moe_layers(config: Config, *, fused_shared: bool) -> tuple[Fields, int]:
    """DeepSeek's MoE layout, which GLM-4.5 and dots.llm1 keep: ``first_k_dense_replace`` dense
    layers, then MoE FFNs of ``n_routed_experts`` experts of width ``moe_intermediate_size``, top
    ``num_experts_per_tok``, and ``n_shared_experts`` shared experts (DeepseekV3MoE holds them as
    one MLP that many experts wide: :func:`_fused_shared_expert` when ``fused_shared``, else as
    that many experts of the routed width, the same weights); the router is each family's. With
    them, the width of the dense layers (``intermediate_size``; 0 when every layer is MoE)."""
    first = _opt_int(config, "first_k_dense_replace", 0)
    width = _int(config, "moe_intermediate_size")
    shared = _opt_int(config, "n_shared_experts", 0)
    moe: Fields = {
        "num_experts": _int(config, "n_routed_experts"),
        "top_k": _int(config, "num_experts_per_tok"),
        "expert_ffn_hidden_size": width,
        "first_dense_layers": first,
        **(
            _fused_shared_expert(shared, width)
            if fused_shared
            else {"num_shared_experts": shared, "shared_expert_ffn_hidden_size": width}
        ),
    }
    return moe, _int(config, "intermediate_size") if first else 0


def _deepseek_router(config: Config, defaults: tuple[str, str, float, bool]) -> Fields:
    """A DeepSeek router's MoESpec fields: the score function (``scoring_func``), the
    aux-loss-free per-expert selection bias of ``topk_method: noaux_tc`` (the checkpoint's
    ``e_score_correction_bias``; DeepSeek-V3 arXiv 2412.19437 section 2.1.2), the factor on the
    routed experts' weights (``routed_scaling_factor``), and the groups
    (:func:`_group_limited_routing`); ``defaults`` for the keys a config leaves out. A
    ``scoring_func`` or ``topk_method`` other than those known is a SpecError.

    >>> router = _deepseek_router(
    ...     {"scoring_func": "softmax", "topk_method": "greedy"}, DEEPSEEK_V3_ROUTER
    ... )
    >>> router["router_score"], router["router_expert_bias"], router["router_topk_norm"]
    ('softmax', False, True)
    """
    score_default, method_default, scale_default, norm_default = defaults
    method = _choice(config, "topk_method", method_default, TOPK_METHODS)
    return {
        "router_score": _choice(config, "scoring_func", score_default, SCORING_FUNCS),
        "router_expert_bias": method == "noaux_tc",
        "router_topk_norm": _bool(config, "norm_topk_prob", norm_default),
        "router_topk_scale": _positive_float(config, "routed_scaling_factor", scale_default),
        **_group_limited_routing(config, method),
    }


def _choice(config: Config, key: str, default: str, known: tuple[str, ...]) -> str:
    """The text ``key``, one of ``known`` (``default`` when absent or null), else SpecError."""
    value = config.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or value not in known:
        raise SpecError(
            f"config.json {key} {short_repr(value)} is not supported (one of: {', '.join(known)})"
        )
    return value


def _group_limited_routing(config: Config, method: str) -> Fields:
    """Group-limited routing of a DeepSeek-style router whose ``topk_method`` is ``method``:
    ``n_group`` groups of consecutive experts, a token's experts from ``topk_group`` of them
    (transformers' DeepseekV3TopkRouter and DeepSeek-V2's ``group_limited_greedy``); V2's plain
    ``greedy`` ignores the groups, and a config without ``n_group`` has none.

    >>> _group_limited_routing({"n_group": 8, "topk_group": 4}, "noaux_tc")
    {'router_num_groups': 8, 'router_group_topk': 4}
    >>> _group_limited_routing({"n_group": 8, "topk_group": 3}, "greedy")
    {}
    """
    groups = _opt_int(config, "n_group", 1)
    if groups <= 1 or method == "greedy":
        return {}
    return {
        "router_num_groups": groups,
        "router_group_topk": _opt_int(config, "topk_group", groups),
    }


def _gpt_oss(config: Config) -> Fields:
    """GptOssForCausalLM: MoE on every layer (biased experts, a router whose gate projection has
    a bias, softmax over its top-k logits, clamped SwiGLU),
    biased q/k/v/o, attention sinks; sliding window on the ``layer_types`` that say so
    (HF default when absent: the even layers)."""
    top_k_key = (
        "experts_per_token"
        if config.get("experts_per_token") is not None
        else "num_experts_per_tok"
    )
    moe = {
        "num_experts": _int(config, "num_local_experts"),
        "top_k": _int(config, top_k_key),
        "expert_ffn_hidden_size": _int(config, "intermediate_size"),
        "router_bias": True,  # GptOssTopKRouter's own bias; softmax over the top-k logits
    }
    sliding = _layer_types_sliding(config) or {
        "sliding_window": _int(config, "sliding_window"),
        "num_sliding_window_layers": (_int(config, "num_hidden_layers") + 1) // 2,
    }
    return {
        **_attention(config),
        "ffn_hidden_size": 0,
        "ffn_activation": "swiglu_oai",
        "position_embedding": "rope",
        "norm": "rmsnorm",
        "attention_bias": True,
        "attention_output_bias": True,
        "mlp_bias": True,
        "attention_sinks": True,
        "moe": moe,
        **sliding,
    }


def _gpt2(config: Config) -> Fields:
    """GPT2LMHeadModel: MHA, GELU MLP of ``n_inner`` (default 4 * n_embd), LayerNorm, biases
    everywhere, learned positions (``n_positions``), tied embeddings unless said otherwise."""
    hidden, heads = _int(config, "n_embd"), _positive_int(config, "n_head")
    return {
        "hidden_size": hidden,
        "num_layers": _int(config, "n_layer"),
        "num_attention_heads": heads,
        "num_kv_heads": heads,
        "head_dim": _heads_divide(hidden, heads, "n_embd", "n_head"),
        "ffn_hidden_size": _opt_int(config, "n_inner", 4 * hidden),
        "ffn_activation": _activation(config, "activation_function", "gelu_new", _PLAIN),
        "vocab_size": _int(config, "vocab_size"),
        "tied_embeddings": _bool(config, "tie_word_embeddings", True),
        "max_context": _int(config, "n_positions"),
        "position_embedding": "learned",
        "norm": "layernorm",
        "attention_bias": True,
        "attention_output_bias": True,
        "mlp_bias": True,
    }


def _gemma_layers(config: Config) -> Fields:
    """What Gemma 1, 2 and 3 share: GeGLU (``hidden_activation``, else ``hidden_act``; the
    reference MLP runs the tanh GELU whatever it says), RMSNorm, RoPE, an explicit head_dim and
    the embedding tied to the output layer unless ``tie_word_embeddings`` says otherwise
    (``GemmaConfig`` and its successors default it to true; the released config.json files
    leave it out)."""
    act_key = "hidden_activation" if config.get("hidden_activation") is not None else "hidden_act"
    return {
        **_attention(config),
        "ffn_hidden_size": _int(config, "intermediate_size"),
        "ffn_activation": _activation(config, act_key, "gelu_pytorch_tanh", _GATED),
        "position_embedding": "rope",
        "norm": "rmsnorm",
        "tied_embeddings": _bool(config, "tie_word_embeddings", True),
        **_biases(config),
    }


def _gemma(config: Config) -> Fields:
    """GemmaForCausalLM (Gemma 1, arXiv 2403.08295): MHA or MQA, GeGLU, RMSNorm, tied
    embeddings."""
    return _gemma_layers(config)


def _gemma2(config: Config) -> Fields:
    """Gemma2ForCausalLM (arXiv 2408.00118): Gemma with a norm after each sub-block as well as
    before (``post_norms``) and local sliding-window attention on every other layer, the even
    ones (Hugging Face ``Gemma2DecoderLayer``: ``not bool(layer_idx % 2)``) unless
    ``layer_types`` lists them. The soft-capping of the attention logits and of the output
    logits is elementwise work inside kernels the planner already prices, and not modelled."""
    sliding = _layer_types_sliding(config) or {
        "sliding_window": _int(config, "sliding_window"),
        "num_sliding_window_layers": (_int(config, "num_hidden_layers") + 1) // 2,
    }
    return {**_gemma_layers(config), "post_norms": True, **sliding}


def _gemma3_text(config: Config) -> Fields:
    """Gemma3ForCausalLM (arXiv 2503.19786): Gemma 2's layer with per-head q/k RMSNorm, and
    ``sliding_window_pattern`` - 1 local layers for every global one (layer i is global when
    (i + 1) is a multiple of the pattern), unless ``layer_types`` lists them."""
    return {
        **_gemma_layers(config),
        "post_norms": True,
        "qk_norm": True,
        **_pattern_sliding(config),
    }


def _pattern_sliding(config: Config, default_pattern: int | None = None) -> Fields:
    """Sliding-window fields of a model with ``sliding_window_pattern`` - 1 local layers for
    every global one (layer i is global when (i + 1) is a multiple of the pattern: Gemma 3,
    Cohere 2; OLMo 3 fixes the pattern at ``default_pattern`` 4 and writes no key for it),
    unless ``layer_types`` lists them.

    >>> _pattern_sliding({"num_hidden_layers": 32, "sliding_window_pattern": 4,
    ...                   "sliding_window": 4096})
    {'sliding_window': 4096, 'num_sliding_window_layers': 24}
    """
    sliding = _layer_types_sliding(config)
    if sliding is not None:
        return sliding
    layers = _int(config, "num_hidden_layers")
    if default_pattern is not None and config.get("sliding_window_pattern") is None:
        pattern = default_pattern
    else:
        pattern = _positive_int(config, "sliding_window_pattern")
    count = layers - layers // pattern
    return {
        "sliding_window": _int(config, "sliding_window") if count else None,
        "num_sliding_window_layers": count,
    }


def _qwen2_moe(config: Config) -> Fields:
    """Qwen2MoeForCausalLM (Qwen1.5-MoE, Qwen2-57B-A14B): Qwen2 attention (biases on q, k and
    v), MoE on every ``decoder_sparse_step``-th layer except leading ``mlp_only_layers``:
    ``num_experts`` routed experts of width ``moe_intermediate_size``, top
    ``num_experts_per_tok``, and one shared expert of width ``shared_expert_intermediate_size``
    on every token. The shared expert's sigmoid gate (D weights per layer) is not counted."""
    moe, ffn_hidden_size = _qwen_moe_layers(config)
    shared = _opt_int(config, "shared_expert_intermediate_size", 0)
    moe |= {"num_shared_experts": 1 if shared else 0, "shared_expert_ffn_hidden_size": shared}
    return {
        **_gated(config, ffn_hidden_size),
        "attention_bias": True,
        "attention_output_bias": False,
        **_qwen_sliding(config),
        "moe": moe,
    }


def _glm4_moe(config: Config) -> Fields:
    """Glm4MoeForCausalLM (GLM-4.5, GLM-4.5-Air): GQA with biases on q, k and v (not o), an
    explicit head_dim (N x H may exceed D), optional per-head q/k RMSNorm (``use_qk_norm``),
    partial RoPE, ``first_k_dense_replace`` dense layers, then MoE with one shared expert of
    ``n_shared_experts`` x the expert width and DeepSeek-V3's router (transformers'
    Glm4MoeTopkRouter is its DeepseekV3TopkRouter: sigmoid scores, the aux-loss-free selection
    bias ``e_score_correction_bias``, whatever the config says) scaled by
    ``routed_scaling_factor`` (Glm4MoeConfig's default 1.0; GLM-4.5 2.5, GLM-4.5-Air 1.0). The
    multi-token-prediction layer the checkpoint holds (``num_nextn_predict_layers``) is planned
    only when asked (``--mtp-num-layers``), as for DeepSeek-V3."""
    moe, dense_width = _deepseek_moe_layers(config, fused_shared=True)
    moe |= {
        "router_score": "sigmoid",
        "router_expert_bias": True,
        "router_topk_norm": _bool(config, "norm_topk_prob", True),
        "router_topk_scale": _positive_float(config, "routed_scaling_factor", 1.0),
    }
    return {
        **_gated(config, dense_width),
        "attention_bias": _bool(config, "attention_bias", False),
        "attention_output_bias": False,
        "qk_norm": _bool(config, "use_qk_norm", False),
        "moe": moe,
    }


def _llama4_text(config: Config) -> Fields:
    """Llama4ForCausalLM (Llama 4 Scout and Maverick, their ``text_config``): GQA with an
    explicit head_dim; every ``interleave_moe_layer_step``-th layer is MoE (``num_local_experts``
    of width ``intermediate_size``, top ``num_experts_per_tok``, plus one shared expert of the same
    width), the others dense of width ``intermediate_size_mlp`` (Maverick alternates); the layers
    that apply RoPE (``no_rope_layers`` 1; by default all but every ``no_rope_layer_interval``-th,
    4) attend within chunks of ``attention_chunk_size`` tokens, the others (NoPE) to the whole
    sequence. ``use_qk_norm`` is a weightless L2 norm: no parameters, and its elementwise pass
    is not priced. The router takes the top-k logits and weighs each chosen expert by its
    sigmoid (transformers' Llama4Router)."""
    layers = _int(config, "num_hidden_layers")
    step = _positive_int(config, "interleave_moe_layer_step")
    explicit = config.get("moe_layers")
    if explicit is not None and explicit != [i for i in range(layers) if (i + 1) % step == 0]:
        raise SpecError(
            f"config.json moe_layers {short_repr(explicit)} cannot be expressed: ModelSpec puts "
            "MoE on every interleave_moe_layer_step-th layer"
        )
    chunked = _rope_layer_count(config, layers)
    width = _int(config, "intermediate_size")
    moe = {
        "num_experts": _int(config, "num_local_experts"),
        "top_k": _int(config, "num_experts_per_tok"),
        "expert_ffn_hidden_size": width,
        "num_shared_experts": 1,
        "layer_step": step,
        "router_score": "sigmoid",
    }
    chunk = config.get("attention_chunk_size")
    local: Fields = {"sliding_window": None, "num_sliding_window_layers": 0}
    if chunk is not None and chunked:
        local = {
            "sliding_window": _positive_int(config, "attention_chunk_size"),
            "num_sliding_window_layers": chunked,
            "local_attention": "chunked",
        }
    return {
        **_gated(config, _int(config, "intermediate_size_mlp") if step > 1 else 0),
        **_biases(config),
        **local,
        "moe": moe,
    }


def _rope_layer_count(config: Config, layers: int) -> int:
    """How many of the ``layers`` layers apply RoPE, the others being NoPE layers (no positional
    embedding: Llama 4, SmolLM3): ``no_rope_layers`` lists one flag per layer (1 = RoPE); without
    it every ``no_rope_layer_interval``-th layer (default 4) is NoPE.

    >>> _rope_layer_count({}, 36), _rope_layer_count({"no_rope_layers": [1, 0, 1]}, 3)
    (27, 2)
    """
    rope_layers = config.get("no_rope_layers")
    if rope_layers is None:
        interval = 4
        if config.get("no_rope_layer_interval") is not None:
            interval = _positive_int(config, "no_rope_layer_interval")
        return sum(1 for i in range(layers) if (i + 1) % interval)
    if isinstance(rope_layers, list) and len(rope_layers) == layers:
        return sum(1 for flag in rope_layers if flag)
    raise SpecError(
        f"config.json no_rope_layers must list one 0/1 flag per layer, got {short_repr(rope_layers)}"
    )


def _multimodal_wrapper(text_type: str) -> Callable[[Config], Fields]:
    """The mapping of a multimodal wrapper config (Gemma3ForConditionalGeneration,
    Llama4ForConditionalGeneration, Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3-VL-MoE, Mistral 3):
    the language model sits in ``text_config`` beside a vision tower (Qwen2-VL's first releases:
    its keys at the top level), and (Gemma 3's) leaves many keys to its
    class's defaults. The planner plans the decoder only, so it asks for that decoder's own,
    complete config."""

    def refuse(config: Config) -> Fields:
        if config.get("text_config") is None and config.get("hidden_size") is not None:
            raise SpecError(  # Qwen2-VL's first releases: the language model's keys at the top
                f"config.json model_type {short_repr(config.get('model_type'))} is the "
                f"multimodal wrapper, its language model's keys at the top level: save it with "
                f"model_type {text_type}; the vision encoder is not planned"
            )
        raise SpecError(
            f"config.json model_type {short_repr(config.get('model_type'))} is the multimodal "
            f"wrapper: save its text_config, every key written out (head_dim, vocab_size, ...; "
            f"the wrapper's tie_word_embeddings where the text_config has none), as a "
            f"{text_type} config.json; the vision encoder is not planned"
        )

    return refuse


def _nemotron(config: Config) -> Fields:
    """NemotronForCausalLM: GQA, plain squared-ReLU MLP, LayerNorm (1p, with bias), partial
    RoPE (no parameters, so ignored); optional biases; head_dim from head_dim or kv_channels."""
    fields = _attention(config)
    if config.get("head_dim") is None and config.get("kv_channels") is not None:
        fields["head_dim"] = _int(config, "kv_channels")
    return {
        **fields,
        "ffn_hidden_size": _int(config, "intermediate_size"),
        "ffn_activation": _activation(config, "hidden_act", "relu2", _PLAIN),
        "position_embedding": "rope",
        "norm": "layernorm",
        **_biases(config),
    }


def _olmoe(config: Config) -> Fields:
    """OlmoeForCausalLM (OLMoE, arXiv 2409.02060): Llama's attention with RMSNorm on the whole
    q and k projections (``qk_norm``, counted one head wide as for OLMo 2), norms before each
    sub-block, and a MoE FFN on every layer: ``num_experts`` SwiGLU experts of width
    ``intermediate_size``, top ``num_experts_per_tok``, no shared expert, the top-k softmax
    weights renormalised only with ``norm_topk_prob`` (OlmoeConfig's default and the released
    config: false). ``clip_qkv`` clamps the projections in place: no parameter, and its
    elementwise pass is not priced."""
    moe = {
        **_routed_experts(config, "num_experts"),
        "router_topk_norm": _bool(config, "norm_topk_prob", False),
    }
    return {**_gated(config, 0), **_biases(config), "qk_norm": True, "moe": moe}


def _granite(config: Config) -> Fields:
    """GraniteForCausalLM (IBM Granite 3 dense): Llama's layer. Its ``embedding_multiplier``,
    ``attention_multiplier``, ``residual_multiplier`` and ``logits_scaling`` scale activations
    by constants: no parameter, and (fused into the kernels they follow) no pass priced."""
    return _llama(config)


def _granitemoe(config: Config) -> Fields:
    """GraniteMoeForCausalLM (IBM Granite 3.0 / 3.1 MoE): Granite's attention and scaling
    constants, and a MoE FFN on every layer: ``num_local_experts`` SwiGLU experts of width
    ``intermediate_size``, top ``num_experts_per_tok``, no shared expert."""
    return {**_gated(config, 0), **_biases(config), "moe": _routed_experts(config)}


def _phimoe(config: Config) -> Fields:
    """PhimoeForCausalLM (Phi-3.5-MoE, arXiv 2404.14219): GQA with biases on q, k, v and o
    (``attention_bias``), LayerNorm with bias, and a MoE FFN on every layer:
    ``num_local_experts`` SwiGLU experts of width ``intermediate_size``, top
    ``num_experts_per_tok``, no shared expert; a non-null ``sliding_window`` on every layer (the
    released config's equals its context: no window in effect). The output layer's bias
    (``lm_head_bias``, V weights) is not counted. Its LongRoPE scaling is read by
    :func:`_rope`."""
    moe = _routed_experts(config)
    attention_bias = _bool(config, "attention_bias", False)
    return {
        **_gated(config, 0),
        "norm": "layernorm",
        "attention_bias": attention_bias,
        "attention_output_bias": attention_bias,
        **_all_layers_sliding(config),
        "moe": moe,
    }


def _starcoder2(config: Config) -> Fields:
    """Starcoder2ForCausalLM (StarCoder2, arXiv 2402.19173): GQA, a plain MLP (``c_fc`` and
    ``c_proj``; ``hidden_act``, default the tanh GELU), LayerNorm with bias, RoPE, biases on
    every projection when ``use_bias`` (default true), a non-null ``sliding_window`` on every
    layer, and the embedding tied to the output layer unless ``tie_word_embeddings`` says
    otherwise (Starcoder2Config leaves it at PretrainedConfig's true; the released config.json
    files leave it out)."""
    return {
        **_attention(config),
        "tied_embeddings": _bool(config, "tie_word_embeddings", True),
        "ffn_hidden_size": _int(config, "intermediate_size"),
        "ffn_activation": _activation(config, "hidden_act", "gelu_pytorch_tanh", _PLAIN),
        "position_embedding": "rope",
        "norm": "layernorm",
        **_use_bias(config, True),
        **_all_layers_sliding(config),
    }


def _cohere(config: Config) -> Fields:
    """CohereForCausalLM (Command R, Command R+): attention and a SwiGLU MLP side by side on
    one LayerNorm's output (``parallel_block``), GQA, RoPE, optional per-head q/k LayerNorm
    (``use_qk_norm``, Command R+), biases only with ``attention_bias``, the embedding tied to
    the output layer unless ``tie_word_embeddings`` says otherwise (CohereConfig defaults it to
    true). Cohere's LayerNorm has no bias where the spec's counts one: D weights a norm, 0.0003%
    of Command R. ``logit_scale`` multiplies the logits by a constant: not priced."""
    return {
        **_gated(config, _int(config, "intermediate_size")),
        **_biases(config),
        "norm": "layernorm",
        "parallel_block": True,
        "qk_norm": _bool(config, "use_qk_norm", False),
        "tied_embeddings": _bool(config, "tie_word_embeddings", True),
    }


def _cohere2(config: Config) -> Fields:
    """Cohere2ForCausalLM (Command R7B, Command A): Cohere's parallel layer with sliding-window
    attention on ``sliding_window_pattern`` - 1 of every ``sliding_window_pattern`` layers
    (:func:`_pattern_sliding`, or ``layer_types``); the global layers use no positional
    embedding, which changes no count here."""
    return {**_cohere(config), **_pattern_sliding(config)}


def _olmo3(config: Config) -> Fields:
    """Olmo3ForCausalLM (OLMo 3, arXiv 2512.13961): OLMo 2's layer (:func:`_olmo2`: the two norms
    after attention and after the MLP, RMSNorm on the whole q and k projections, of which one head's
    width is counted: (q_dim + kv_dim - 2 head_dim) weights a layer, 0.003% of Olmo 3 7B, are left
    out) with sliding-window attention on three layers of every four: layer i is global when
    (i + 1) is a multiple of 4 (Olmo3Config's default ``layer_types``), unless ``layer_types``
    lists them. Its YaRN scaling applies to the global layers only (transformers' Olmo3Model),
    which changes no count."""
    return {**_olmo2(config), **_pattern_sliding(config, default_pattern=4)}


def _smollm3(config: Config) -> Fields:
    """SmolLM3ForCausalLM (SmolLM3): Llama's layer (optional ``attention_bias`` and ``mlp_bias``)
    with no positional embedding on every ``no_rope_layer_interval``-th layer (default 4), or on
    the layers ``no_rope_layers`` flags 0 (:func:`_rope_layer_count`): a NoPE layer has the same
    weights, so the count is Llama's. The embedding is tied to the output layer unless
    ``tie_word_embeddings`` says otherwise (SmolLM3Config defaults it to true). With
    ``use_sliding_window`` and a ``sliding_window`` the NoPE layers slide (SmolLM3Config's
    ``layer_types``), unless ``layer_types`` lists them; the released configs slide none."""
    sliding = _layer_types_sliding(config)
    if sliding is None:
        layers = _int(config, "num_hidden_layers")
        nope = layers - _rope_layer_count(config, layers)
        slides = (
            _bool(config, "use_sliding_window", False) and config.get("sliding_window") is not None
        )
        sliding = {
            "sliding_window": _int(config, "sliding_window") if slides and nope else None,
            "num_sliding_window_layers": nope if slides else 0,
        }
    return {
        **_llama(config),
        "tied_embeddings": _bool(config, "tie_word_embeddings", True),
        **sliding,
    }


def _glm4(config: Config) -> Fields:
    """Glm4ForCausalLM (GLM-4-0414 dense: GLM-4-9B-0414, GLM-4-32B-0414): GQA with an explicit
    head_dim, biases on q, k and v (``attention_bias``, default true) and none on o or the MLP,
    SwiGLU with gate and up fused in one ``gate_up_proj`` (the same weights), and a norm after
    each sub-block as well as before it (``post_self_attn_layernorm`` and ``post_mlp_layernorm``:
    ``post_norms``, Gemma 2's four norms a layer). RoPE turns ``partial_rotary_factor`` of each
    head (Glm4Config's 0.5 when the key is absent), in interleaved pairs: no count changes."""
    return {
        **_gated(config, _int(config, "intermediate_size")),
        "attention_bias": _bool(config, "attention_bias", True),
        "attention_output_bias": False,
        "post_norms": True,
        "rotary_fraction": 0.5,  # _rope replaces it with the config's partial_rotary_factor
    }


def _seed_oss(config: Config) -> Fields:
    """SeedOssForCausalLM (ByteDance Seed-OSS-36B): Llama's GQA and SwiGLU with an explicit
    head_dim; biases on q, k and v with ``attention_bias`` (SeedOssConfig's default true), on o
    with ``attention_out_bias`` (default false) and on the MLP with ``mlp_bias`` (default false).
    ``residual_dropout`` drops each sub-block's output in training (:func:`_dropout`)."""
    return {
        **_gated(config, _int(config, "intermediate_size")),
        "attention_bias": _bool(config, "attention_bias", True),
        "attention_output_bias": _bool(config, "attention_out_bias", False),
        "mlp_bias": _bool(config, "mlp_bias", False),
    }


def _ernie4_5(config: Config) -> Fields:
    """Ernie4_5ForCausalLM (ERNIE-4.5-0.3B): :func:`_ernie4_5_layers` with a dense SwiGLU MLP of
    width ``intermediate_size`` on every layer."""
    return _ernie4_5_layers(config, _int(config, "intermediate_size"))


def _ernie4_5_layers(config: Config, ffn_hidden_size: int) -> Fields:
    """What ERNIE 4.5's dense and MoE models share: Llama's GQA with an explicit head_dim (N x H
    may differ from D: 16 x 128 over 1024 in ERNIE-4.5-0.3B), biases on every projection with
    ``use_bias`` (default false), RoPE on interleaved pairs (no count changes), and the embedding
    tied to the output layer unless ``tie_word_embeddings`` says otherwise (both config classes
    default it to true); dense FFN layers of width ``ffn_hidden_size``."""
    return {
        **_gated(config, ffn_hidden_size),
        **_use_bias(config, False),
        "tied_embeddings": _bool(config, "tie_word_embeddings", True),
    }


def _ernie4_5_moe(config: Config) -> Fields:
    """Ernie4_5_MoeForCausalLM (ERNIE-4.5-21B-A3B, ERNIE-4.5-300B-A47B): ERNIE 4.5's attention
    (:func:`_ernie4_5_layers`); layer i is MoE when ``moe_layer_start_index`` <= i <=
    ``moe_layer_end_index`` (-1: the last layer) and (i + 1) is a multiple of
    ``moe_layer_interval``, the others dense of width ``intermediate_size``. A MoE FFN holds
    ``moe_num_experts`` SwiGLU experts of width ``moe_intermediate_size``, top ``moe_k``, chosen by
    softmax scores plus the aux-loss-free per-expert selection bias
    (``moe_statics.e_score_correction_bias``: ``router_expert_bias``; transformers'
    Ernie4_5_MoeSparseMoeBlock weighs the experts by the unbiased softmax), and
    ``moe_num_shared_experts`` (default 2) as one shared MLP that many experts
    wide (:func:`_fused_shared_expert`). Dense layers after the last MoE layer cannot be expressed
    (the spec's MoE layers run to the end). With ``use_bias`` the output layer has a bias too (V
    weights, not counted). The checkpoint's multi-token-prediction weights (``mtp``) are not part
    of the Hugging Face model, which skips them on load, and are not counted."""
    layers = _int(config, "num_hidden_layers")
    start = _opt_int(config, "moe_layer_start_index", 1)
    end = _opt_int(config, "moe_layer_end_index", -1)
    last = layers - 1 if end == -1 else end
    step = 1
    if config.get("moe_layer_interval") is not None:
        step = _positive_int(config, "moe_layer_interval")
    moe_layers = [i for i in range(layers) if (i + 1) % step == 0 and start <= i <= last]
    if moe_layers != [i for i in range(max(start, 0), layers) if (i + 1) % step == 0]:
        raise SpecError(
            f"config.json moe_layer_end_index {end} of {layers} layers cannot be expressed: "
            "ModelSpec's MoE layers run to the last layer"
        )
    expert_width = _int(config, "moe_intermediate_size")
    moe = {
        "num_experts": _int(config, "moe_num_experts"),
        "top_k": _int(config, "moe_k"),
        "expert_ffn_hidden_size": expert_width,
        **_fused_shared_expert(_opt_int(config, "moe_num_shared_experts", 2), expert_width),
        "first_dense_layers": start,
        "layer_step": step,
        "router_expert_bias": True,
    }
    dense = len(moe_layers) < layers
    return {
        **_ernie4_5_layers(config, _int(config, "intermediate_size") if dense else 0),
        "moe": moe,
    }


def _minimax_m2(config: Config) -> Fields:
    """MiniMaxM2ForCausalLM (MiniMax-M2): softmax attention on every layer (GQA, an explicit
    head_dim, no biases) with RMSNorm on the whole q and k projections (FlexOlmo's, of which one
    head's width is counted, as for OLMo 2: (q_dim + kv_dim - 2 head_dim) weights a layer, 0.0002%
    of MiniMax-M2, are left out), RoPE on ``rotary_dim`` of each head's dimensions (or
    ``partial_rotary_factor``), and a MoE FFN on every layer: ``num_local_experts`` SwiGLU experts
    of width ``intermediate_size``, top ``num_experts_per_tok``, chosen by ``scoring_func`` scores
    (default sigmoid, the only one transformers' MiniMaxM2TopKRouter has) plus, with
    ``use_routing_bias`` (default true), the aux-loss-free per-expert selection bias
    (``e_score_correction_bias``: ``router_expert_bias``), no shared expert. An
    ``attn_type_list`` that marks a layer other than 1 (MiniMax-Text-01's lightning attention,
    refused as ``minimax``) is refused. The multi-token-prediction modules of the release
    (``num_mtp_modules``) are not part of the Hugging Face model and are not counted."""
    kinds = config.get("attn_type_list")
    if kinds is not None and (not isinstance(kinds, list) or any(kind != 1 for kind in kinds)):
        raise SpecError(
            f"config.json attn_type_list {short_repr(kinds)} marks layers that are not softmax "
            "attention (1); lightning (linear) attention layers are not priced"
        )
    fields: Fields = {
        **_gated(config, 0),
        "qk_norm": True,
        "moe": {
            **_routed_experts(config),
            "router_score": _choice(config, "scoring_func", "sigmoid", SCORING_FUNCS),
            "router_expert_bias": _bool(config, "use_routing_bias", True),
        },
    }
    head_dim = fields["head_dim"]
    if config.get("rotary_dim") is not None and isinstance(head_dim, int) and head_dim > 0:
        fields["rotary_fraction"] = _positive_int(config, "rotary_dim") / head_dim
    return fields


def _llama_attention_biases(config: Config) -> Fields:
    """Llama's ``attention_bias`` on q, k, v and o, and no MLP bias whatever ``mlp_bias`` says
    (HunYuan's and Apertus's MLPs build their projections without one)."""
    return {**_biases(config), "mlp_bias": False}


def _hunyuan_layers(config: Config, ffn_hidden_size: int) -> Fields:
    """What HunYuan's dense and MoE models share (transformers' HunYuanDenseV1 and HunYuanMoEV1):
    Llama's GQA and SwiGLU, biases only on the attention projections
    (:func:`_llama_attention_biases`), an explicit head_dim (``head_dim``, or the
    ``attention_head_dim`` of the remote-code configs), and a per-head RMSNorm on the queries
    and keys after RoPE (``query_layernorm``, ``key_layernorm``: ``qk_norm``; transformers builds
    them whatever ``use_qk_norm`` says, vLLM only with it, which the released configs set).
    The NTK-alpha RoPE of the released configs is read by :func:`_rope`. Cross-layer attention
    (``use_cla``: layers that reuse an earlier layer's keys and values and have no k or v
    projection of their own) cannot be expressed."""
    if _bool(config, "use_cla", False):
        raise SpecError(
            "config.json use_cla true cannot be expressed: cross-layer attention shares keys and "
            "values between layers, and ModelSpec's layers each project their own"
        )
    fields = {
        **_gated(config, ffn_hidden_size),
        **_llama_attention_biases(config),
        "qk_norm": _bool(config, "use_qk_norm", True),
    }
    if config.get("head_dim") is None and config.get("attention_head_dim") is not None:
        fields["head_dim"] = _positive_int(config, "attention_head_dim")
    return fields


def _hunyuan_v1_dense(config: Config) -> Fields:
    """HunYuanDenseV1ForCausalLM (Hunyuan-0.5B to 7B, Hunyuan-MT, Hy-MT2): :func:`_hunyuan_layers`
    with a dense MLP of width ``intermediate_size`` on every layer; the embedding is tied to the
    output layer only when ``tie_word_embeddings`` says so (HunYuanDenseV1Config's default is
    false; the released configs set true)."""
    return _hunyuan_layers(config, _int(config, "intermediate_size"))


def _hunyuan_v1_moe(config: Config) -> Fields:
    """HunYuanMoEV1ForCausalLM (Hunyuan-A13B): :func:`_hunyuan_layers` with a MoE FFN on every
    layer: ``num_experts`` SwiGLU experts of width ``moe_intermediate_size`` (else
    ``intermediate_size``), top ``moe_topk``, chosen by softmax scores with no bias of any kind
    (the gate ``wg`` is a plain D x E matrix) and their top-k weights renormalised (transformers'
    HunYuanMoEV1Moe; vLLM for top-k > 1), and, with ``use_mixed_mlp_moe`` (which the released
    config sets; transformers always builds it), ``num_shared_expert`` shared experts held as one
    ``shared_mlp`` that many times ``intermediate_size`` wide (:func:`_fused_shared_expert`). The
    remote-code configs write these four keys as one value per layer
    (:func:`_per_layer_int`); layers that differ cannot be expressed."""
    layers = _int(config, "num_hidden_layers")
    width = _int(config, "intermediate_size")
    shared = 0
    if _bool(config, "use_mixed_mlp_moe", True):
        shared = _per_layer_int(config, "num_shared_expert", 1, layers)
    moe = {
        "num_experts": _per_layer_int(config, "num_experts", 1, layers),
        "top_k": _per_layer_int(config, "moe_topk", 1, layers),
        "expert_ffn_hidden_size": _per_layer_int(config, "moe_intermediate_size", width, layers),
        **_fused_shared_expert(shared, width),
    }
    return {**_hunyuan_layers(config, 0), "moe": moe}


def _per_layer_int(config: Config, key: str, default: int, layers: int) -> int:
    """The integer ``key`` (``default`` when absent or null), or the one value a list of one entry
    per layer repeats (HunYuan's ``moe_topk``, ``num_experts``, ...); a list of another length,
    or whose entries differ, is a SpecError: ModelSpec's MoE layers are all alike.

    >>> _per_layer_int({"moe_topk": [8, 8]}, "moe_topk", 1, 2), _per_layer_int({}, "k", 1, 2)
    (8, 1)
    """
    value = config.get(key)
    if not isinstance(value, list):
        return _opt_int(config, key, default)
    if len(value) != layers or any(entry != value[0] for entry in value):
        raise SpecError(
            f"config.json {key} {short_repr(value)} cannot be expressed: ModelSpec's MoE layers "
            f"are all alike (one value, or a list of the same value for each of the {layers} layers)"
        )
    return _opt_int({key: value[0] if value else None}, key, default)


def _exaone4(config: Config) -> Fields:
    """Exaone4ForCausalLM (EXAONE 4.0, arXiv 2507.11407): GQA with an explicit head_dim and no
    biases, a per-head RMSNorm on the queries and keys (``qk_norm``), SwiGLU, and OLMo 2's two
    norms of a layer after attention and after the MLP instead of before them ("QK-Reorder-Norm":
    the same count, so no ``post_norms``); sliding-window attention on the layers
    :func:`_exaone4_sliding` reads, the global ones using no positional embedding (which
    changes no count)."""
    return {
        **_gated(config, _int(config, "intermediate_size")),
        "qk_norm": True,
        **_exaone4_sliding(config),
    }


def _exaone4_sliding(config: Config) -> Fields:
    """EXAONE 4.0's local layers: those ``layer_types`` lists; else none without a
    ``sliding_window`` (EXAONE-4.0-1.2B); else ``sliding_window_pattern`` - 1 of every
    ``sliding_window_pattern`` (Exaone4Config's default 4: three local layers to one global,
    :func:`_pattern_sliding`), or, when the pattern is a text of ``L`` (local) and ``G`` (global),
    layer i as its (i mod length)-th letter says, the last layer always global.

    >>> _exaone4_sliding({"num_hidden_layers": 8, "sliding_window": 4096,
    ...                   "sliding_window_pattern": "LLLG"})
    {'sliding_window': 4096, 'num_sliding_window_layers': 6}
    """
    found = _layer_types_sliding(config)
    if found is not None:
        return found
    if config.get("sliding_window") is None:
        return {"sliding_window": None, "num_sliding_window_layers": 0}
    pattern = config.get("sliding_window_pattern")
    if not isinstance(pattern, str):
        return _pattern_sliding(config, default_pattern=4)
    if not pattern or set(pattern) - {"L", "G"}:
        raise SpecError(
            f"config.json sliding_window_pattern {short_repr(pattern)} must be a text of L "
            "(local) and G (global) letters, or a whole number"
        )
    layers = _int(config, "num_hidden_layers")
    count = sum(1 for i in range(layers - 1) if pattern[i % len(pattern)] == "L")
    return {
        "sliding_window": _int(config, "sliding_window") if count else None,
        "num_sliding_window_layers": count,
    }


DOTS1_ROUTER = ("sigmoid", "noaux_tc", 1.0, False)
"""(``scoring_func``, ``topk_method``, ``routed_scaling_factor``, ``norm_topk_prob``) a dots.llm1
config.json leaves out means: transformers' Dots1TopkRouter is DeepSeek-V3's (sigmoid scores,
the aux-loss-free selection bias ``e_score_correction_bias``) and Dots1Config defaults
routed_scaling_factor to 1.0 and norm_topk_prob to false."""


def _dots1(config: Config) -> Fields:
    """Dots1ForCausalLM (rednote dots.llm1, arXiv 2506.05767): Qwen3's attention (GQA or MHA,
    per-head q/k RMSNorm, ``attention_bias`` on q, k, v and o; :func:`_qwen3_layers`), not MLA,
    with DeepSeek-V3's FFN: ``first_k_dense_replace`` dense layers of width
    ``intermediate_size``, then MoE with ``n_routed_experts`` SwiGLU experts of width
    ``moe_intermediate_size``, top ``num_experts_per_tok``, ``n_shared_experts`` shared experts
    held as one MLP that many experts wide (:func:`_fused_shared_expert`), and DeepSeek-V3's
    router read as :func:`_deepseek_router` reads it (defaults :data:`DOTS1_ROUTER`; no groups
    without ``n_group``). Layer i slides when ``sliding_window`` is set and i is at least
    ``max_window_layers`` (Dots1Config has no ``use_sliding_window`` switch), unless
    ``layer_types`` lists them."""
    moe, dense_width = _deepseek_moe_layers(config, fused_shared=True)
    moe |= _deepseek_router(config, DOTS1_ROUTER)
    return {
        **_qwen3_layers(config, dense_width),
        **_qwen_sliding(config, switch=False),
        "moe": moe,
    }


def _apertus(config: Config) -> Fields:
    """ApertusForCausalLM (Swiss AI Apertus): Llama's GQA attention (``attention_bias`` on q, k,
    v and o) with a per-head RMSNorm on the queries and keys (``qk_norm``), the two norms of a
    layer before attention and the MLP, and a plain (up, down) MLP without biases, as Nemotron's.
    Its activation, ``hidden_act`` (ApertusConfig's default ``xielu``), maps only to a plain
    activation ModelSpec has (:data:`_PLAIN`): xIELU, the released models' activation, is a
    piecewise function with learned coefficients in every layer that none of ModelSpec's
    activations computes, so those configs are refused."""
    if config.get("hidden_act", "xielu") == "xielu":
        raise SpecError(
            "config.json hidden_act 'xielu' cannot be expressed: xIELU (a piecewise activation "
            "with learned coefficients in each layer) is none of ModelSpec's activations"
        )
    return {
        **_attention(config),
        "ffn_hidden_size": _int(config, "intermediate_size"),
        "ffn_activation": _activation(config, "hidden_act", "xielu", _PLAIN),
        "position_embedding": "rope",
        "norm": "rmsnorm",
        **_llama_attention_biases(config),
        "qk_norm": True,
    }


def _gpt_neox(config: Config) -> Fields:
    """GPTNeoXForCausalLM (GPT-NeoX-20B, arXiv 2204.06745; Pythia, arXiv 2304.01373): MHA with
    q, k and v fused in one ``query_key_value`` (the same weights), biases on it and on ``dense``
    with ``attention_bias`` (GPTNeoXConfig's default true) and always on the plain MLP
    (``hidden_act``, default ``gelu``), LayerNorm with bias, RoPE on ``partial_rotary_factor`` (the
    released configs' ``rotary_pct``; default 0.25) of each head at base ``rope_theta``
    (``rotary_emb_base``; default 10,000), and an output layer of its own unless
    ``tie_word_embeddings`` (default false). With ``use_parallel_residual`` (default true) a layer
    adds attention and MLP to the residual at once, x + attn(ln1(x)) + mlp(ln2(x)):
    ``parallel_block``, whose one norm leaves out the second LayerNorm (2D weights a layer, 0.003%
    of Pythia-12B, and an elementwise pass); without it the two sub-blocks run in sequence."""
    rotary_key = _alias(config, "partial_rotary_factor", "rotary_pct")
    theta_key = _alias(config, "rope_theta", "rotary_emb_base")
    attention_bias = _bool(config, "attention_bias", True)
    hidden, heads = _int(config, "hidden_size"), _positive_int(config, "num_attention_heads")
    return {
        **_attention(config),
        "num_kv_heads": heads,
        "head_dim": _heads_divide(hidden, heads, "hidden_size", "num_attention_heads"),
        "ffn_hidden_size": _int(config, "intermediate_size"),
        "ffn_activation": _activation(config, "hidden_act", "gelu", _PLAIN),
        "position_embedding": "rope",
        "rotary_fraction": _positive_float(config, rotary_key, 0.25),
        "rope_theta": _positive_float(config, theta_key, 10000.0),
        "norm": "layernorm",
        "parallel_block": _bool(config, "use_parallel_residual", True),
        "attention_bias": attention_bias,
        "attention_output_bias": attention_bias,
        "mlp_bias": True,
    }


def _falcon(config: Config) -> Fields:
    """FalconForCausalLM (Falcon-7B, 40B, 180B; Falcon 2; arXiv 2311.16867). q, k and v fused in
    one ``query_key_value``, a plain MLP of ``ffn_hidden_size`` (FalconConfig's default 4 x
    ``hidden_size``; the 2023 releases leave it out) with ``activation`` (default ``gelu``),
    biases on every projection with ``bias`` (default false), LayerNorm with bias, ALiBi with
    ``alibi`` (default false) else RoPE, a context of ``max_position_embeddings`` (default 2048;
    the 2023 releases leave it out), and the embedding tied to the output layer unless
    ``tie_word_embeddings`` says otherwise (default true). The first releases' keys are read too:
    ``n_embed`` (before ``hidden_size``, as FalconConfig does), ``n_head``, ``n_layer``,
    ``n_head_kv``.

    With ``new_decoder_architecture`` (40B, 180B) the heads form ``num_kv_heads`` groups (GQA;
    default one per head) and the layer is always parallel (``parallel_attn`` is ignored, as
    FalconConfig documents); with ``num_ln_in_parallel_attn`` 2 (the default there) attention and
    MLP read two LayerNorms of the same input, which ``parallel_block``'s one norm counts once:
    2D weights a layer (0.002% of Falcon-40B) and an elementwise pass are left out. The 7B form
    has one key and value head with ``multi_query`` (default true), else one per head, and a
    parallel layer with one LayerNorm with ``parallel_attn`` (default true), else a sequential
    layer with two."""
    hidden_key = "n_embed" if config.get("n_embed") is not None else "hidden_size"
    heads_key = _alias(config, "num_attention_heads", "n_head")
    hidden, heads = _int(config, hidden_key), _positive_int(config, heads_key)
    new_architecture = _bool(config, "new_decoder_architecture", False)
    if new_architecture:
        kv_heads = _opt_int(config, _alias(config, "num_kv_heads", "n_head_kv"), heads)
    else:
        kv_heads = 1 if _bool(config, "multi_query", True) else heads
    bias = _bool(config, "bias", False)
    return {
        "hidden_size": hidden,
        "num_layers": _int(config, _alias(config, "num_hidden_layers", "n_layer")),
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": _heads_divide(hidden, heads, hidden_key, heads_key),
        "ffn_hidden_size": _opt_int(config, "ffn_hidden_size", 4 * hidden),
        "ffn_activation": _activation(config, "activation", "gelu", _PLAIN),
        "vocab_size": _int(config, "vocab_size"),
        "tied_embeddings": _bool(config, "tie_word_embeddings", True),
        "max_context": _opt_int(config, "max_position_embeddings", 2048),
        "position_embedding": "alibi" if _bool(config, "alibi", False) else "rope",
        "norm": "layernorm",
        "parallel_block": new_architecture or _bool(config, "parallel_attn", True),
        "attention_bias": bias,
        "attention_output_bias": bias,
        "mlp_bias": bias,
    }


_GPT_BIGCODE_ALIASES = {
    "n_embd": "hidden_size",
    "n_head": "num_attention_heads",
    "n_layer": "num_hidden_layers",
    "n_positions": "max_position_embeddings",
}
"""GPTBigCodeConfig's ``attribute_map``: each of its keys (GPT-2's) and the name it also
answers to."""


def _gpt_bigcode(config: Config) -> Fields:
    """GPTBigCodeForCausalLM (SantaCoder, arXiv 2301.03988; StarCoder, arXiv 2305.06161): GPT-2's
    layer (:func:`_gpt2`: LayerNorm, biases everywhere, a plain MLP of ``n_inner``, default 4 x
    ``n_embd``, learned positions over ``n_positions``, the embedding tied to the output layer
    unless ``tie_word_embeddings`` says otherwise) with one key and value head shared by every
    query head when ``multi_query`` (GPTBigCodeConfig's default true), and the tanh GELU
    (``activation_function``, default ``gelu_pytorch_tanh``). The keys are read under the names
    of the class's ``attribute_map`` too (``hidden_size`` for ``n_embd``, ...)."""
    aliased = {
        key: config[alias]
        for key, alias in _GPT_BIGCODE_ALIASES.items()
        if config.get(key) is None and config.get(alias) is not None
    }
    fields = _gpt2({**config, **aliased})
    if _bool(config, "multi_query", True):
        fields["num_kv_heads"] = 1
    activation = _activation(config, "activation_function", "gelu_pytorch_tanh", _PLAIN)
    return {**fields, "ffn_activation": activation}


def _phi(config: Config) -> Fields:
    """PhiForCausalLM (phi-1, phi-1.5, phi-2): attention and a plain MLP (``hidden_act``, default
    ``gelu_new``) side by side on one LayerNorm's output (``parallel_block``), biases on q, k, v,
    ``dense`` and the MLP, MHA unless ``num_key_value_heads``, RoPE on ``partial_rotary_factor``
    of each head (PhiConfig's default 0.5; phi-2 0.4), and an output layer of its own unless
    ``tie_word_embeddings`` (default false). That output layer has a bias too: V values (0.002%
    of phi-2) not counted. ``qk_layernorm`` (default false) normalises each head's queries and
    keys with a LayerNorm after the projections; ModelSpec's ``qk_norm`` is that per-head pass
    over q and k with RMSNorm's scale weights, so it is read as ``qk_norm`` and the LayerNorms'
    biases, 2 x head_dim weights a layer, are left out."""
    return {
        **_attention(config),
        "ffn_hidden_size": _int(config, "intermediate_size"),
        "ffn_activation": _activation(config, "hidden_act", "gelu_new", _PLAIN),
        "position_embedding": "rope",
        "rotary_fraction": 0.5,  # _rope replaces it with the config's partial_rotary_factor
        "norm": "layernorm",
        "parallel_block": True,
        "attention_bias": True,
        "attention_output_bias": True,
        "mlp_bias": True,
        "qk_norm": _bool(config, "qk_layernorm", False),
    }


def _nested(config: Config, key: str) -> Fields:
    """The object ``key`` (DBRX's ``attn_config`` and ``ffn_config``) with each of its keys named
    ``key.inner`` beside the config's model_type, so that the typed readers name a key in full;
    an empty object when absent or null (its class's defaults), a SpecError when not an object.

    >>> _nested({"model_type": "dbrx", "attn_config": {"kv_n_heads": 8}}, "attn_config")
    {'model_type': 'dbrx', 'attn_config.kv_n_heads': 8}
    """
    value = config.get(key)
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise SpecError(f"config.json {key} must be an object, got {short_repr(value)}")
    return {"model_type": config.get("model_type"), **{f"{key}.{k}": v for k, v in value.items()}}


def _dbrx(config: Config) -> Fields:
    """DbrxForCausalLM (DBRX): GQA with ``attn_config.kv_n_heads`` key and value heads
    (DbrxAttentionConfig's default 1) and RoPE at ``attn_config.rope_theta`` (default 10,000), q,
    k and v fused in one ``Wqkv``; no biases anywhere; and a MoE FFN on every layer:
    ``ffn_config.moe_num_experts`` GLU experts of width ``ffn_config.ffn_hidden_size``, top
    ``ffn_config.moe_top_k``, whose activation is ``ffn_config.ffn_act_fn``'s ``name`` (default
    silu: SwiGLU), no shared expert. The router (transformers' DbrxRouter) takes the softmax over
    every expert, keeps the top k and divides them by their p-norm, p =
    ``moe_normalize_expert_weights`` (DbrxFFNConfig's default 1: renormalised to sum to one,
    ``router_topk_norm``; null: kept as they are); another p is no router ModelSpec has and is
    refused. The output layer is the embedding's own (DbrxConfig refuses tied embeddings).
    DBRX's LayerNorms have no bias where the spec's counts one: D weights a norm, 0.0004% of
    DBRX. ``attn_config.clip_qkv`` clamps the projections in place and
    ``ffn_config.moe_jitter_eps`` scales the router's input by noise in training: no parameter,
    and their elementwise passes are not priced."""
    attn, ffn = _nested(config, "attn_config"), _nested(config, "ffn_config")
    if _bool(config, "tie_word_embeddings", False):
        raise SpecError(
            "config.json tie_word_embeddings true cannot be expressed: DBRX has no tied "
            "embeddings (DbrxConfig refuses them)"
        )
    act = ffn.get("ffn_config.ffn_act_fn")
    if act is not None and not isinstance(act, Mapping):
        raise SpecError(
            f"config.json ffn_config.ffn_act_fn must be an object, got {short_repr(act)}"
        )
    name = {"ffn_config.ffn_act_fn.name": (act or {}).get("name", "silu")}
    hidden, heads = _int(config, "d_model"), _positive_int(config, "n_heads")
    moe = {
        "num_experts": _int(ffn, "ffn_config.moe_num_experts"),
        "top_k": _int(ffn, "ffn_config.moe_top_k"),
        "expert_ffn_hidden_size": _int(ffn, "ffn_config.ffn_hidden_size"),
        "router_score": "softmax",
        "router_topk_norm": _dbrx_topk_norm(ffn),
    }
    return {
        "hidden_size": hidden,
        "num_layers": _int(config, "n_layers"),
        "num_attention_heads": heads,
        "num_kv_heads": _opt_int(attn, "attn_config.kv_n_heads", 1),
        "head_dim": _heads_divide(hidden, heads, "d_model", "n_heads"),
        "ffn_hidden_size": 0,
        "ffn_activation": _activation(name, "ffn_config.ffn_act_fn.name", "silu", _GATED),
        "vocab_size": _int(config, "vocab_size"),
        "tied_embeddings": False,
        "max_context": _int(config, "max_seq_len"),
        "position_embedding": "rope",
        "rope_theta": _positive_float(attn, "attn_config.rope_theta", 10000.0),
        "norm": "layernorm",
        "moe": moe,
    }


def _dbrx_topk_norm(ffn: Config) -> bool:
    """Whether DBRX's router renormalises its top-k weights to sum to one: its
    ``moe_normalize_expert_weights`` p divides them by their p-norm, the sum for p = 1
    (DbrxFFNConfig's default, when the key is absent); null divides by nothing.

    >>> _dbrx_topk_norm({}), _dbrx_topk_norm({"ffn_config.moe_normalize_expert_weights": None})
    (True, False)
    """
    key = "ffn_config.moe_normalize_expert_weights"
    if key not in ffn:
        return True
    value = ffn[key]
    if value is None:
        return False
    if isinstance(value, bool) or not isinstance(value, int | float) or value != 1:
        raise SpecError(
            f"config.json {key} {short_repr(value)} cannot be expressed: ModelSpec's router "
            "divides its top-k weights by their sum (1) or by nothing (null), not by another "
            "p-norm"
        )
    return True


_FAMILIES: dict[str, Callable[[Config], Fields]] = {
    "llama": _llama,
    "llama4": _multimodal_wrapper("llama4_text"),
    "llama4_text": _llama4_text,
    "mistral": _mistral,
    "olmo2": _olmo2,
    "phi3": _phi3,
    "mixtral": _mixtral,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v2": _deepseek_v2,
    "deepseek_v3": _deepseek_v3,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gemma3": _multimodal_wrapper("gemma3_text"),
    "gemma3_text": _gemma3_text,
    "qwen2_moe": _qwen2_moe,
    "glm4_moe": _glm4_moe,
    "gpt_oss": _gpt_oss,
    "gpt2": _gpt2,
    "nemotron": _nemotron,
    "olmoe": _olmoe,
    "phimoe": _phimoe,
    "granite": _granite,
    "granitemoe": _granitemoe,
    "starcoder2": _starcoder2,
    "cohere": _cohere,
    "cohere2": _cohere2,
    "olmo3": _olmo3,
    "smollm3": _smollm3,
    "glm4": _glm4,
    "seed_oss": _seed_oss,
    "ernie4_5": _ernie4_5,
    "ernie4_5_moe": _ernie4_5_moe,
    "minimax_m2": _minimax_m2,
    "hunyuan_v1_dense": _hunyuan_v1_dense,
    "hunyuan_v1_moe": _hunyuan_v1_moe,
    "exaone4": _exaone4,
    "dots1": _dots1,
    "apertus": _apertus,
    "qwen2_vl": _multimodal_wrapper("qwen2_vl_text"),
    "qwen2_vl_text": _qwen2_vl_text,
    "qwen2_5_vl": _multimodal_wrapper("qwen2_5_vl_text"),
    "qwen2_5_vl_text": _qwen2_vl_text,
    "qwen3_vl": _multimodal_wrapper("qwen3_vl_text"),
    "qwen3_vl_text": _qwen3_vl_text,
    "qwen3_vl_moe": _multimodal_wrapper("qwen3_vl_moe_text"),
    "qwen3_vl_moe_text": _qwen3_vl_moe_text,
    "mistral3": _multimodal_wrapper("mistral"),
    "gpt_neox": _gpt_neox,
    "falcon": _falcon,
    "gpt_bigcode": _gpt_bigcode,
    "phi": _phi,
    "dbrx": _dbrx,
}
"""model_type -> the function mapping that family's config.json to ModelSpec fields."""

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_FAMILIES))
"""The ``model_type`` values :func:`model_from_hf_config` accepts."""

_ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "Llama4ForCausalLM": "llama4_text",
    "Llama4ForConditionalGeneration": "llama4",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Olmo2ForCausalLM": "olmo2",
    "Phi3ForCausalLM": "phi3",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "GemmaForCausalLM": "gemma",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text",
    "Gemma3ForConditionalGeneration": "gemma3",
    "Glm4MoeForCausalLM": "glm4_moe",
    "GptOssForCausalLM": "gpt_oss",
    "GPT2LMHeadModel": "gpt2",
    "NemotronForCausalLM": "nemotron",
    "OlmoeForCausalLM": "olmoe",
    "PhimoeForCausalLM": "phimoe",
    "PhiMoEForCausalLM": "phimoe",
    "GraniteForCausalLM": "granite",
    "GraniteMoeForCausalLM": "granitemoe",
    "Starcoder2ForCausalLM": "starcoder2",
    "CohereForCausalLM": "cohere",
    "Cohere2ForCausalLM": "cohere2",
    "Olmo3ForCausalLM": "olmo3",
    "SmolLM3ForCausalLM": "smollm3",
    "Glm4ForCausalLM": "glm4",
    "SeedOssForCausalLM": "seed_oss",
    "Ernie4_5ForCausalLM": "ernie4_5",
    "Ernie4_5_ForCausalLM": "ernie4_5",
    "Ernie4_5_MoeForCausalLM": "ernie4_5_moe",
    "MiniMaxM2ForCausalLM": "minimax_m2",
    "HunYuanDenseV1ForCausalLM": "hunyuan_v1_dense",
    "HunYuanMoEV1ForCausalLM": "hunyuan_v1_moe",
    "Exaone4ForCausalLM": "exaone4",
    "Dots1ForCausalLM": "dots1",
    "ApertusForCausalLM": "apertus",
    "Qwen2VLForConditionalGeneration": "qwen2_vl",
    "Qwen2_5_VLForConditionalGeneration": "qwen2_5_vl",
    "Qwen3VLForConditionalGeneration": "qwen3_vl",
    "Qwen3VLMoeForConditionalGeneration": "qwen3_vl_moe",
    "Mistral3ForConditionalGeneration": "mistral3",
    "GPTNeoXForCausalLM": "gpt_neox",
    "FalconForCausalLM": "falcon",
    "GPTBigCodeForCausalLM": "gpt_bigcode",
    "PhiForCausalLM": "phi",
    "DbrxForCausalLM": "dbrx",
}
"""transformers' model class (a config's ``architectures``) -> the :data:`_FAMILIES` key of the
network it builds: how a config whose own ``model_type`` is not known here is read
(:func:`_family_of`)."""
