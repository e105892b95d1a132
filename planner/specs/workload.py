"""What the user wants to run: a training job or a serving deployment."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt

from planner.specs.base import FrozenSpec
from planner.specs.formats import NumberFormat


class TrainWorkload(FrozenSpec):
    """A pre-training (or fine-tuning) step."""

    mode: Literal["train"] = "train"
    """Training."""
    seq_len: PositiveInt = 8192
    """Tokens per sequence T."""
    global_batch: PositiveInt = 512
    """Sequences per optimizer step (global batch size)."""
    precision: NumberFormat = NumberFormat.BF16
    """Format of the GEMM inputs of the transformer's linear layers (attention runs in bf16;
    master weights and optimizer state stay fp32)."""

    flash_attention: bool = True
    """Fused (flash) attention: scores are neither stored nor written to HBM. False models the
    unfused path of 2021-22 Megatron (batched score GEMMs over the full square, softmax and
    dropout through HBM, scores stored: Korthikanti et al.'s 5 a s^2 b term)."""
    expert_load_imbalance: float = Field(default=1.0, ge=1.0, le=8.0)
    """MoE only: tokens on the busiest expert rank over the mean (1 = perfectly balanced, as
    NVIDIA's MoE benchmarks force; real routing is typically 1.1-1.5)."""

    @property
    def tokens_per_step(self) -> int:
        """Tokens per optimizer step (global_batch x seq_len)."""
        return self.global_batch * self.seq_len


class ServeWorkload(FrozenSpec):
    """A serving deployment (its cost model arrives with serving mode)."""

    mode: Literal["serve"] = "serve"
    """Serving."""
    context: PositiveInt = 8192
    """Context length each sequence must hold (tokens)."""
    prompt_len: PositiveInt = 1024
    """Prompt tokens per request."""
    output_len: PositiveInt = 1024
    """Generated tokens per request."""
    precision: NumberFormat = NumberFormat.BF16
    """Weight format."""
    kv_precision: NumberFormat = NumberFormat.BF16
    """KV-cache format."""
