"""Read a Hugging Face ``config.json``'s ``quantization_config``: the format the checkpoint
stores its weights in (and its KV cache, when the checkpoint carries KV scales).

What each ``quant_method`` means (the loaders of Hugging Face transformers, vLLM and SGLang):

- ``fp8`` (DeepSeek-V3/R1: ``fmt: e4m3``, 128 x 128 block scales) and ``fbgemm_fp8`` (Meta's
  Llama 3.1 405B FP8): 8-bit float weights;
- ``compressed-tensors`` (llm-compressor): ``config_groups.*.weights`` gives ``num_bits`` and
  ``type``: 8-bit float -> FP8, 8-bit int -> INT8, 4-bit float in groups of 16 -> NVFP4, of 32
  -> MXFP4; ``kv_cache_scheme`` 8-bit float -> FP8 KV;
- ``modelopt`` (NVIDIA TensorRT Model Optimizer checkpoints): ``quant_algo`` FP8 / NVFP4 /
  ``FP8_BLOCK_SCALES``, ``kv_cache_quant_algo`` FP8 -> FP8 KV;
- ``mxfp4`` (gpt-oss): MXFP4 experts; ``modules_to_not_convert`` lists the attention (and
  router, embeddings, lm_head) left in BF16, so only the experts are quantised.

An FP8 checkpoint implies FP8 weights; for the KV cache it implies nothing by itself (vLLM and
SGLang keep a 16-bit cache unless told ``--kv-cache-dtype fp8`` or the checkpoint carries KV
scales; TensorRT-LLM ModelOpt checkpoints usually carry FP8 KV scales): the planner's serving
default then stores FP8 KV with 8-bit or narrower weights (see
:func:`planner.search.serving.kv_format`). 4-bit integer schemes (AWQ, GPTQ, bitsandbytes)
have no planner format and are refused with a message.
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.catalog.io import short_repr
from planner.errors import SpecError

Fields = dict[str, object]

_MODELOPT_ALGOS = {
    "FP8": "fp8",
    "FP8_BLOCK_SCALES": "fp8",
    "NVFP4": "nvfp4",
    "W8A8_SQ_PER_CHANNEL": "int8",
}
"""ModelOpt ``quant_algo`` -> planner format."""
_SIMPLE_METHODS = {"fp8": "fp8", "fbgemm_fp8": "fp8", "mxfp4": "mxfp4"}
"""``quant_method`` values whose weights format needs no further key."""


def _compressed_tensors_format(scheme: object) -> str | None:
    """Planner format of a compressed-tensors ``weights`` / ``kv_cache_scheme`` block."""
    if not isinstance(scheme, Mapping):
        return None
    bits, kind = scheme.get("num_bits"), scheme.get("type")
    if bits == 8:
        return "fp8" if kind == "float" else "int8"
    if bits == 4 and kind == "float":
        return "nvfp4" if scheme.get("group_size") == 16 else "mxfp4"
    return None


def _compressed_tensors(config: Mapping[str, object], where: str) -> Fields:
    groups = config.get("config_groups")
    formats: set[str] = set()
    if isinstance(groups, Mapping):
        for group in groups.values():
            if isinstance(group, Mapping):
                fmt = _compressed_tensors_format(group.get("weights"))
                if fmt is None:
                    raise SpecError(
                        f"{where}: compressed-tensors weights {short_repr(group.get('weights'))}"
                        " have no planner format (8-bit float or int, 4-bit float)"
                    )
                formats.add(fmt)
    if len(formats) != 1:
        raise SpecError(f"{where}: compressed-tensors config_groups give {len(formats)} formats")
    out: Fields = {"weights": formats.pop()}
    kv = _compressed_tensors_format(config.get("kv_cache_scheme"))
    if kv is not None:
        out["kv_cache"] = kv
    return out


def checkpoint_quantization(config: Mapping[str, object], name: str) -> Fields | None:
    """ModelSpec ``quantization`` fields from ``config['quantization_config']``; None when the
    checkpoint is not quantised. SpecError for a scheme the planner cannot express.

    >>> checkpoint_quantization({"quantization_config": {"quant_method": "fp8",
    ...     "fmt": "e4m3", "weight_block_size": [128, 128]}}, "v3")["weights"]
    'fp8'
    >>> q = checkpoint_quantization({"quantization_config": {"quant_method": "mxfp4",
    ...     "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]}}, "oss")
    >>> q["weights"], q["experts_only"]
    ('mxfp4', True)
    >>> checkpoint_quantization({}, "x") is None
    True
    """
    quant = config.get("quantization_config")
    if quant is None:
        return None
    where = f"{name}: config.json quantization_config"
    if not isinstance(quant, Mapping):
        raise SpecError(f"{where} must be a mapping, got {short_repr(quant)}")
    method = quant.get("quant_method")
    source = f"config.json quantization_config (quant_method={short_repr(method)})"
    if not isinstance(method, str):
        raise SpecError(f"{where}: quant_method must be a text, got {short_repr(method)}")
    if method in _SIMPLE_METHODS:
        out: Fields = {"weights": _SIMPLE_METHODS[method]}
        skipped = quant.get("modules_to_not_convert") or []
        if not isinstance(skipped, list):
            raise SpecError(
                f"{where}: modules_to_not_convert must be a list, got {short_repr(skipped)}"
            )
        if method == "mxfp4" and any("attn" in str(m) for m in skipped):
            out["experts_only"] = True
    elif method == "compressed-tensors":
        out = _compressed_tensors(quant, where)
    elif method == "modelopt":
        algo = quant.get("quant_algo")
        if not isinstance(algo, str) or algo not in _MODELOPT_ALGOS:
            raise SpecError(f"{where}: modelopt quant_algo {short_repr(algo)} is not supported")
        out = {"weights": _MODELOPT_ALGOS[algo]}  # type: ignore[index]
        if quant.get("kv_cache_quant_algo") == "FP8":
            out["kv_cache"] = "fp8"
    else:
        raise SpecError(
            f"{where}: quant_method {short_repr(method)} has no planner weight format "
            "(supported: fp8, fbgemm_fp8, mxfp4, compressed-tensors, modelopt); remove "
            "quantization_config to plan the 16-bit model"
        )
    return {**out, "source": source}
