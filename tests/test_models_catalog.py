"""The model catalog: every ``models/*.yaml`` is a valid ModelSpec named after its file, and the
parameter counts computed from its architecture match the published ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.cost.params import active_params, total_params
from planner.specs.model import ModelSpec

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
MODEL_FILES = sorted(p for p in MODELS_DIR.glob("*.yaml") if not p.name.startswith("_"))
"""Catalog entries (``_aliases.yaml`` and other ``_`` files are not models)."""

EXPECTED_MODELS = {
    "llama3.1-8b",
    "llama3.1-70b",
    "llama3.1-405b",
    "llama2-70b",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "deepseek-v3",
    "gpt-oss-120b",
    "gpt-oss-20b",
    "qwen3-235b-a22b",
    "qwen3-30b-a3b",
    "nemotron4-340b",
    "gpt3-175b",
    "deepseek-v2",
    "deepseek-v2-lite",
    "llama2-7b",
    "llama2-13b",
    "llama3-8b",
    "llama3-70b",
    "qwen2.5-72b",
    "mistral-7b",
}

TOLERANCE = 0.01
"""Computed counts must be within 1% of the published ones, except as listed below."""

COARSE_PUBLISHED: dict[tuple[str, str], tuple[float, str]] = {
    ("llama2-70b", "total"): (
        0.015,
        "'70B' is the size class; the checkpoint holds 68,976,648,192 (pinned below)",
    ),
    ("deepseek-v3", "active"): (
        0.015,
        "37.55B published as '37B' (36.63B without the input embedding)",
    ),
    ("qwen3-30b-a3b", "active"): (
        0.017,
        "3.353B published as '3.3B'; its 30.5B total, 29.9B non-embedding match",
    ),
    ("llama2-7b", "total"): (
        0.04,
        "'7B' is the size class; the architecture holds 6.74B (4096 x 32 layers, vocab 32000)",
    ),
    ("mistral-7b", "total"): (0.04, "7.24B published as '7 billion'"),
    ("kimi-k2", "total"): (
        0.03,
        "1,026.4B published as '1 trillion' (report abstract, model card)",
    ),
    ("kimi-k2", "active"): (
        0.03,
        "32.86B published as '32 billion' (31.69B without the input embedding)",
    ),
    ("deepseek-v2-lite", "active"): (
        0.025,
        "2.45B without the input embedding published as '2.4B' (2.66B with it)",
    ),
}
"""(model, count) -> (relative bound, why): published figures rounded more coarsely than 1%.
Each was checked by hand: the architecture matches the config.json and the checkpoint."""

ACTIVE_EXCLUDES_INPUT_EMBEDDING = {"gpt-oss-120b", "gpt-oss-20b", "deepseek-v2", "deepseek-v2-lite"}
"""Publishers whose 'active parameters' leave out the input embedding table (a lookup, not a
matmul): the gpt-oss card's 5.13B / 3.61B are exactly that, and DeepSeek-V2's 21B and
V2-Lite's 2.4B match without it (20.85B, 2.45B) and not with it (21.38B, 2.66B). Mixtral, Qwen
and DeepSeek-V3 count every embedding matrix; ``active_params`` does too."""


def _load(path: Path) -> ModelSpec:
    return ModelSpec.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def _within(name: str, kind: str, computed: float, published: float) -> None:
    bound = COARSE_PUBLISHED.get((name, kind), (TOLERANCE, ""))[0]
    error = computed / published - 1
    assert abs(error) <= bound, (
        f"{name} {kind}: computed {computed:.3f}B vs published {published}B ({error:+.2%})"
    )


def test_catalog_holds_the_expected_models() -> None:
    assert {p.stem for p in MODEL_FILES} >= EXPECTED_MODELS


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_entry_validates_and_is_named_after_its_file(path: Path) -> None:
    spec = _load(path)
    assert spec.name == path.stem
    assert spec.family and spec.source
    assert spec.published is not None and spec.published.source
    assert (spec.published.active_params_B is not None) == (spec.moe is not None)


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_total_matches_published(path: Path) -> None:
    spec = _load(path)
    assert spec.published is not None
    _within(spec.name, "total", total_params(spec) / 1e9, spec.published.total_params_B)


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_active_matches_published(path: Path) -> None:
    spec = _load(path)
    assert spec.published is not None
    if spec.moe is None:
        assert active_params(spec) == total_params(spec)
        return
    assert spec.published.active_params_B is not None
    active = active_params(spec)
    if spec.name in ACTIVE_EXCLUDES_INPUT_EMBEDDING:
        active -= spec.vocab_size * spec.hidden_size
    _within(spec.name, "active", active / 1e9, spec.published.active_params_B)


def test_coarse_exceptions_are_still_needed() -> None:
    """Every entry of COARSE_PUBLISHED is really more than 1% off (else drop it)."""
    for name, kind in COARSE_PUBLISHED:
        spec = _load(MODELS_DIR / f"{name}.yaml")
        assert spec.published is not None
        computed = total_params(spec) if kind == "total" else active_params(spec)
        published = (
            spec.published.total_params_B if kind == "total" else (spec.published.active_params_B)
        )
        assert published is not None
        assert abs(computed / 1e9 / published - 1) > TOLERANCE


def _dense_gqa(d: int, layers: int, kv_dim: int, f: int, v: int) -> int:
    """Hand count of a Llama-style model: untied V x D twice, per layer q and o D^2, k and v
    D x kv_dim, SwiGLU 3 D F, two RMSNorms; a final RMSNorm."""
    per_layer = 2 * d * d + 2 * d * kv_dim + 3 * d * f + 2 * d
    return 2 * v * d + layers * per_layer + d


def _gpt3(d: int, layers: int, v: int, context: int) -> int:
    """Hand count of GPT-3: tied V x D, learned positions, per layer 12 D^2 weights and 13 D
    biases/norm vectors (qkv 3D, out D, fc 4D, proj D, two LayerNorms 4D), final LayerNorm."""
    return v * d + context * d + layers * (12 * d * d + 13 * d) + 2 * d


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("llama3.1-8b", 8_030_261_248),
        ("llama3.1-70b", 70_553_706_496),
        ("llama2-70b", 68_976_648_192),
        ("mixtral-8x7b", 46_702_792_704),
        ("gpt-oss-120b", 116_829_156_672),
        ("deepseek-v3", 671_026_419_200),
        ("gpt3-175b", 174_604_259_328),
    ],
)
def test_exact_total(name: str, expected: int) -> None:
    """Exact counts, each the checkpoint's tensor total (DeepSeek-V3 without its MTP module;
    GPT-3, never released, by the hand count below)."""
    assert total_params(_load(MODELS_DIR / f"{name}.yaml")) == expected


def test_hand_counts_agree_with_the_exact_totals() -> None:
    assert _dense_gqa(4096, 32, 1024, 14336, 128256) == 8_030_261_248
    assert _dense_gqa(8192, 80, 1024, 28672, 128256) == 70_553_706_496
    assert _dense_gqa(8192, 80, 1024, 28672, 32000) == 68_976_648_192
    assert _gpt3(12288, 96, 50257, 2048) == 174_604_259_328


def test_exact_active_counts() -> None:
    mixtral = _load(MODELS_DIR / "mixtral-8x7b.yaml")
    expert = 3 * 4096 * 14336
    assert active_params(mixtral) == total_params(mixtral) - 32 * 6 * expert
    gpt_oss = _load(MODELS_DIR / "gpt-oss-120b.yaml")
    assert active_params(gpt_oss) - 201088 * 2880 == 5_132_849_472


# --- Hugging Face hub ids --------------------------------------------------------------------


def test_hub_ids_are_unique_and_name_their_source() -> None:
    """Each ``hub_id`` belongs to one entry and is the repository its ``source`` cites."""
    seen: dict[str, str] = {}
    for path in MODEL_FILES:
        spec = _load(path)
        if spec.hub_id is None:
            continue
        assert spec.hub_id.lower() not in seen, (spec.name, seen.get(spec.hub_id.lower()))
        seen[spec.hub_id.lower()] = spec.name
        assert f"huggingface.co/{spec.hub_id}/" in spec.source, spec.name
    assert seen["meta-llama/llama-3.1-8b"] == "llama3.1-8b"


@pytest.mark.parametrize(
    "text",
    [
        "meta-llama/Llama-3.1-70B",
        "META-LLAMA/llama-3.1-70b",
        "https://huggingface.co/meta-llama/Llama-3.1-70B",
        "hf.co/meta-llama/Llama-3.1-70B/",
    ],
)
def test_a_hub_id_names_its_catalog_model(text: str) -> None:
    from planner.catalog import load_model

    assert load_model(text).name == "llama3.1-70b"


def test_an_unknown_hub_id_says_what_to_pass() -> None:
    from planner.catalog import load_model
    from planner.errors import SpecError

    with pytest.raises(SpecError) as caught:
        load_model("meta-llama/Llama-3.1-70B-Instruct")
    message = str(caught.value)
    assert "\n" not in message
    assert "did you mean 'meta-llama/Llama-3.1-70B'" in message
    assert "config.json" in message


def test_a_malformed_hub_id_is_refused() -> None:
    from pydantic import ValidationError

    data = yaml.safe_load(MODEL_FILES[0].read_text())
    with pytest.raises(ValidationError, match="hub id"):
        ModelSpec.model_validate({**data, "hub_id": "no-slash"})


@pytest.mark.parametrize("text", ["./ckpt/llama", "ckpt/a/b", "/no/such/model"])
def test_a_missing_path_is_not_read_as_a_hub_id(text: str) -> None:
    from planner.catalog import load_model
    from planner.errors import SpecError

    with pytest.raises(SpecError, match="does not exist"):
        load_model(text)


def test_a_router_bias_of_either_kind_is_e_values_a_layer() -> None:
    """A gate bias (gpt-oss) and an aux-loss-free selection bias (DeepSeek-V3) are each E values
    a MoE layer: swapping one for the other keeps the count, a router with both counts 2E."""
    gpt_oss = _load(MODELS_DIR / "gpt-oss-20b.yaml")
    moe = gpt_oss.moe
    assert moe is not None and moe.router_bias and not moe.router_expert_bias
    swapped = moe.model_copy(update={"router_bias": False, "router_expert_bias": True})
    assert total_params(gpt_oss.model_copy(update={"moe": swapped})) == total_params(gpt_oss)
    both = moe.model_copy(update={"router_expert_bias": True})
    extra = total_params(gpt_oss.model_copy(update={"moe": both})) - total_params(gpt_oss)
    assert extra == gpt_oss.num_layers * moe.num_experts  # 24 layers x 32 experts
