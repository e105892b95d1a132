"""Steady state of a continuous-batching replica: the decode step, the prefill work interleaved
with it, the time per output token, the time to first token and a burst of requests.

A replica decodes B sequences; each decode iteration is pp stage passes of B / pp sequences
and carries decode tokens only. Every OSL iterations B requests finish and B new prompts
(B x ISL tokens) must be prefilled (Little's law for uniform lengths). The engine's token budget
M (``max_batch_tokens``: vLLM ``max_num_batched_tokens``, TensorRT-LLM ``max_num_tokens``,
SGLang ``chunked_prefill_size``) bounds the tokens of one pass:

- **mixed** (chunked prefill rides the decode passes: vLLM V1, TensorRT-LLM in-flight batching,
  SGLang ``--enable-mixed-chunk``): a pass carries B / pp decodes and a chunk of
  c = M - B / pp prompt tokens; the B ISL / c passes that carry a chunk are longer by
  t(decodes + chunk) - t(decodes);
- **separate** (prefill-only passes that pause decoding: SGLang's default, vLLM V0): B ISL / M
  passes of M prompt tokens, each t(chunk).

Every stage processes every chunk, so a cycle of OSL iterations takes
OSL x pp x t_stage(B / pp) + chunks x extra, and the time per output token a sequence sees is
TPOT = t_decode + chunks x extra / OSL (the mean inter-token latency benchmarks report).

With attention data parallelism the budget is per attention-DP rank (TensorRT-LLM and SGLang
schedule each DP rank's requests themselves) and a prompt chunk sits on one rank: the MoE layers
gather every rank's tokens, so the whole iteration waits for the rank that carries the chunk
("the iteration time is dominated by the slowest rank", TensorRT-LLM tech blog 10, ADP Balance
Strategy: round-robin request placement leaves 35% of the throughput on the table). A chunk
then costs the full attention and dense work of c tokens on one GPU in every iteration that
carries one.
"""

from __future__ import annotations

import math

from planner.cost.serving_time import PassLoad, PassTime, ServeSetup, stage_pass_time
from planner.specs.base import FrozenSpec
from planner.specs.workload import ServeWorkload


class SteadyState(FrozenSpec):
    """A replica decoding ``concurrency`` sequences with new prompts replacing finished ones."""

    concurrency: float
    """Sequences decoding (per replica)."""
    context: float
    """Mean context of a decoding sequence (tokens)."""
    decode: PassTime
    """One decode-only iteration (pp stage passes), by term (s)."""
    prefill_per_token_s: float
    """Prefill work interleaved per output token (s)."""
    chunk_tokens: float
    """Prompt tokens one pass carries."""
    prefill_pass_s: float
    """Wall time of one stage pass that carries a prompt chunk (s)."""

    @property
    def tpot_s(self) -> float:
        """Mean time per output token: decode iteration + interleaved prefill (s)."""
        return self.decode.total_s + self.prefill_per_token_s


def micro_batch(concurrency: float, pp: int) -> float:
    """Sequences of one pipeline micro-batch: B / pp, at least one while any decode.

    >>> micro_batch(3, 4), micro_batch(0, 4)
    (1.0, 0.0)
    """
    return max(concurrency / pp, min(concurrency, 1.0))


def chunk_tokens(workload: ServeWorkload, decode_tokens: float) -> float:
    """Prompt tokens one pass (of one attention-DP rank) carries: M - the rank's decodes when
    mixed (at least one), M otherwise.

    >>> chunk_tokens(ServeWorkload(max_batch_tokens=8192), 192.0)
    8000.0
    """
    budget = float(workload.max_batch_tokens)
    if workload.mixed_prefill:
        return max(1.0, budget - decode_tokens)
    return budget


def steady_state(
    setup: ServeSetup, workload: ServeWorkload, concurrency: float, *, context: float | None = None
) -> SteadyState:
    """The steady state at ``concurrency`` (module docstring); ``context`` defaults to the mean
    ISL + OSL / 2."""
    pp, adp = setup.layout.pp, setup.layout.attention_dp
    ctx = context if context is not None else workload.prompt_len + workload.output_len / 2
    micro = micro_batch(concurrency, pp)
    # loads built without validation: a frontier prices thousands (floats from the model)
    decoding = PassLoad.model_construct(decode_sequences=float(micro), context=float(ctx))
    decode_pass = stage_pass_time(setup, decoding)
    per_rank = micro_batch(micro, adp)
    chunk = min(chunk_tokens(workload, per_rank), concurrency * workload.prompt_len or 1.0)
    with_chunk = PassLoad.model_construct(
        decode_sequences=float(micro) if workload.mixed_prefill else 0.0,
        context=float(ctx),
        prefill_tokens=float(chunk),
        prompt_len=workload.prompt_len,
        prompt_on_one_rank=True,
    )
    chunk_pass = stage_pass_time(setup, with_chunk).total_s
    extra = chunk_pass - decode_pass.total_s if workload.mixed_prefill else chunk_pass
    chunks = concurrency * workload.prompt_len / chunk
    return SteadyState(
        concurrency=concurrency,
        context=ctx,
        decode=decode_pass.scaled(pp),
        prefill_per_token_s=max(0.0, chunks * extra / workload.output_len),
        chunk_tokens=chunk,
        prefill_pass_s=chunk_pass,
    )


def ttft_service_s(setup: ServeSetup, workload: ServeWorkload, state: SteadyState) -> float:
    """Time to first token of a prompt admitted without queueing: half of the pass in progress
    (schedulers admit at iteration boundaries, Yu et al., "Orca", OSDI'22), then its
    ceil(ISL / c) chunks and pp - 1 more stage passes, each carrying the running decodes when
    prefill is mixed.

    TTFT grows with the running batch: each pass also streams the weights and the running KV.
    """
    pp = setup.layout.pp
    micro = micro_batch(state.concurrency, pp)
    per_rank = micro_batch(micro, setup.layout.attention_dp)
    chunk = min(chunk_tokens(workload, per_rank), workload.prompt_len)
    chunks = math.ceil(workload.prompt_len / chunk)
    load = PassLoad.model_construct(
        decode_sequences=float(micro) if workload.mixed_prefill else 0.0,
        context=float(state.context),
        prefill_tokens=workload.prompt_len / chunks,
        prompt_len=workload.prompt_len,
        prompt_on_one_rank=True,
    )
    wait = 0.5 * state.decode.total_s / pp if state.concurrency > 0 else 0.0
    return wait + (chunks + pp - 1) * stage_pass_time(setup, load).total_s


def prefill_service_s(workload: ServeWorkload, state: SteadyState) -> float:
    """Engine time one prompt takes from the token budget: ISL / c passes that carry a chunk,
    each ``prefill_pass_s`` long (the service time of the prefill queue,
    :mod:`planner.cost.serving_queue`)."""
    return workload.prompt_len / state.chunk_tokens * state.prefill_pass_s


def idle_prefill_s(setup: ServeSetup, workload: ServeWorkload) -> float:
    """Prefill of one prompt on an idle replica (s)."""
    idle = steady_state(setup, workload, 0.0, context=1.0)
    return ttft_service_s(setup, workload, idle)


def burst_ttft_mean_s(
    setup: ServeSetup, workload: ServeWorkload, batch: int, num_requests: int
) -> float:
    """Mean TTFT of ``num_requests`` identical requests issued at once and served in waves of
    ``batch``: wave w starts after w full waves; inside a wave the prompts are prefilled in
    order in chunks of M tokens, so request i's first token comes after ceil((i + 1) ISL / M)
    prefill passes (+ pp - 1). A wave lasts its prefill plus OSL decode iterations."""
    if batch <= 0 or num_requests <= 0:
        return 0.0
    lay = setup.layout
    budget = workload.max_batch_tokens * lay.attention_dp
    prompts = PassLoad(
        decode_sequences=0.0,
        context=1.0,
        prefill_tokens=min(budget, batch * workload.prompt_len),
        prompt_len=workload.prompt_len,
    )
    pass_s = stage_pass_time(setup, prompts).total_s
    state = steady_state(setup, workload, batch)
    prefill_passes = math.ceil(batch * workload.prompt_len / budget)
    wave_s = (prefill_passes + lay.pp - 1) * pass_s + workload.output_len * state.decode.total_s
    total = 0.0
    for i in range(num_requests):
        wave, slot = divmod(i, batch)
        first = math.ceil((slot + 1) * workload.prompt_len / budget) + lay.pp - 1
        total += wave * wave_s + first * pass_s
    return total / num_requests
