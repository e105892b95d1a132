"""Re-plan a training job for a fleet move, then ask what faster NICs would buy on the new fleet.

    python examples/plan_fleet_move.py                         # 70B, hgx_h100x16 -> hgx_b200x16
    python examples/plan_fleet_move.py --model 8B --source hgx_h100x8 --target hgx_b200x8

Prints the layout on each fleet, why each degree changed, the speed-up and the cost per million
tokens, then one line per NIC speed on the target fleet (``planner.migrate`` and
``planner.whatif``, the Python side of ``layout migrate`` and ``layout whatif``).
"""

from __future__ import annotations

import argparse
import os
import sys

import planner
from planner.errors import InfeasibleError, SpecError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="70B")
    parser.add_argument("--source", default="hgx_h100x16")
    parser.add_argument("--target", default="hgx_b200x16")
    parser.add_argument("--nic-gbps", default="400,800", help="NIC speeds to try on the target")
    args = parser.parse_args()

    move = planner.migrate(model=args.model, from_cluster=args.source, to_cluster=args.target)
    print(f"# {move.model}: {args.source} -> {args.target}")
    for name, plan, money in (
        (args.source, move.from_plan, move.from_economics),
        (args.target, move.to_plan, move.to_economics),
    ):
        print(
            f"{name}: {plan.layout.short()}  {plan.step_time_s:.2f} s/step  "
            f"${money.usd_per_million_tokens:.2f} per M tokens"
        )
    for change in move.changes:
        print(f"  {change.reason}")
    print(f"speed-up {move.speedup:.2f}x")

    sweep = planner.whatif(
        model=args.model, cluster=args.target, vary=[f"nic_gbps={args.nic_gbps}"]
    )
    for scenario in sweep.scenarios:
        knob = ", ".join(f"{k}={v}" for k, v in scenario.vary.items())
        if scenario.plan is None or scenario.economics is None:
            print(f"{knob}: no plan ({scenario.error})")
            continue
        print(
            f"{knob}: {scenario.plan.layout.short()}  {scenario.plan.step_time_s:.2f} s/step  "
            f"${scenario.economics.usd_per_million_tokens:.2f} per M tokens"
        )


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except (SpecError, InfeasibleError) as exc:  # bad input or nothing fits: one line, exit 2
        print(f"plan_fleet_move.py: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except BrokenPipeError:  # `... | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        raise SystemExit(0) from None
