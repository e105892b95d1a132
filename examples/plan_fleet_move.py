"""Re-plan a training job for a fleet move, then ask what faster NICs would buy on the new fleet.

    python examples/plan_fleet_move.py                         # 70B, hgx_h100x32 -> hgx_b200x32
    python examples/plan_fleet_move.py --model 8B --source hgx_h100x8 --target hgx_b200x8
    python examples/plan_fleet_move.py --report move.html --report nics.html

Prints the layout on each fleet, why each degree changed, the speed-up and the cost per million
tokens, then one line per NIC speed on the target fleet (``planner.migrate`` and
``planner.whatif``, the Python side of ``layout migrate`` and ``layout whatif``); with two
``--report`` files, writes the move's report and the NIC sweep's (``planner.render_report``:
HTML pages with charts, or Markdown for a ``.md`` name) to show the team.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import planner
from planner.errors import run_script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="70B")
    parser.add_argument("--source", default="hgx_h100x32")
    parser.add_argument("--target", default="hgx_b200x32")
    parser.add_argument("--nic-gbps", default="400,800", help="NIC speeds to try on the target")
    parser.add_argument(
        "--report", action="append", default=[], metavar="FILE",
        help="the move's report, then the sweep's (.html or .md); give both or none",
    )  # fmt: skip
    args = parser.parse_args()
    if args.report and len(args.report) != 2:
        parser.error("--report takes two files: the move's report, then the NIC sweep's")

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
    for result, path in zip((move, sweep), args.report, strict=False):
        kind = "markdown" if path.lower().endswith(".md") else "html"
        Path(path).write_text(planner.render_report(result, format=kind), encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    run_script(main)  # one line and exit 2 on bad input; exit 0 when a reader leaves (| head)
