"""The throughput/latency frontier of a serving search: output tokens/s per GPU against output
tokens/s per user, over every feasible layout and batch size.

Each scored layout is evaluated at batches of 1, 2, 4, ... up to the largest its KV cache and
token budget hold (the steady state of :mod:`planner.cost.serving_cycle`, latency targets not
applied, so the frontier shows what a tighter or looser target would buy). A point is kept when
no other point is at least as good on both axes and better on one (a Pareto frontier; sorted
by tokens/s per user, the per-GPU throughput then only falls).
"""

from __future__ import annotations

from planner.cost.serving_cycle import steady_state, ttft_service_s
from planner.cost.serving_time import ServeSetup
from planner.specs.result import ParetoPoint
from planner.specs.workload import ServeWorkload


def batch_ladder(largest: int) -> list[int]:
    """1, 2, 4, ... below ``largest``, then ``largest`` itself.

    >>> batch_ladder(1), batch_ladder(12)
    ([1], [1, 2, 4, 8, 12])
    """
    out, b = [], 1
    while b < largest:
        out.append(b)
        b *= 2
    return [*out, max(1, largest)]


def layout_points(
    setup: ServeSetup, workload: ServeWorkload, largest: int, extra: tuple[int, ...] = ()
) -> list[ParetoPoint]:
    """The ladder of batch sizes of one layout, and the ``extra`` batches (the chosen plan's,
    so that its operating point is on the frontier when nothing beats it), each as a
    frontier candidate."""
    lay = setup.layout
    points = []
    for batch in sorted({*batch_ladder(largest), *(b for b in extra if 1 <= b <= largest)}):
        state = steady_state(setup, workload, batch)
        tpot = state.tpot_s
        points.append(
            ParetoPoint(
                layout=lay,
                concurrency=batch,
                tokens_per_s_per_gpu=batch / tpot / lay.gpus_per_replica,
                tokens_per_s_per_user=1.0 / tpot,
                tpot_s=tpot,
                ttft_s=ttft_service_s(setup, workload, state),
            )
        )
    return points


def pareto_front(points: list[ParetoPoint]) -> list[ParetoPoint]:
    """The non-dominated points, fastest per user first (ties: higher per GPU first).

    >>> from planner.specs.result import ServeLayout
    >>> def p(gpu, user):
    ...     return ParetoPoint(layout=ServeLayout(), concurrency=1, tokens_per_s_per_gpu=gpu,
    ...                        tokens_per_s_per_user=user, tpot_s=1 / user, ttft_s=0.1)
    >>> [(q.tokens_per_s_per_gpu, q.tokens_per_s_per_user)
    ...  for q in pareto_front([p(10, 5), p(8, 4), p(20, 2), p(5, 9)])]
    [(5.0, 9.0), (10.0, 5.0), (20.0, 2.0)]
    """
    ordered = sorted(points, key=lambda q: (-q.tokens_per_s_per_user, -q.tokens_per_s_per_gpu))
    front: list[ParetoPoint] = []
    for point in ordered:
        if not front or point.tokens_per_s_per_gpu > front[-1].tokens_per_s_per_gpu:
            front.append(point)
    return front


def pareto_csv(points: list[ParetoPoint]) -> str:
    """The frontier as CSV (header + one row per point; layouts as ``TP8 PP1 EP8 ...``).

    >>> from planner.specs.result import ServeLayout
    >>> row = ParetoPoint(layout=ServeLayout(tp=2), concurrency=8, tokens_per_s_per_gpu=100.0,
    ...                   tokens_per_s_per_user=25.0, tpot_s=0.04, ttft_s=0.2)
    >>> print(pareto_csv([row]), end="")
    layout,tp,pp,ep,attention_dp,concurrency,tokens_per_s_per_gpu,tokens_per_s_per_user,tpot_ms,ttft_ms
    TP2 PP1,2,1,1,1,8,100.0,25.0,40.0,200.0
    """
    header = "layout,tp,pp,ep,attention_dp,concurrency,tokens_per_s_per_gpu,"
    header += "tokens_per_s_per_user,tpot_ms,ttft_ms"
    lines = [header]
    for q in points:
        lay = q.layout
        name = lay.short().split(" x")[0]
        lines.append(
            f"{name},{lay.tp},{lay.pp},{lay.ep},{lay.attention_dp},{q.concurrency},"
            f"{q.tokens_per_s_per_gpu:.1f},{q.tokens_per_s_per_user:.1f},"
            f"{q.tpot_s * 1e3:.1f},{q.ttft_s * 1e3:.1f}"
        )
    return "\n".join(lines) + "\n"
