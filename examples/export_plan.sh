#!/usr/bin/env bash
# Search once, save the plan, export it for every framework and write the rank placement.
#
#   bash examples/export_plan.sh [MODEL] [CLUSTER] [OUTDIR]      # default 70B hgx_b200x16
#
# Writes OUTDIR/plan.json (layout search --json), megatron.sh, bridge.sh, torchtitan.toml,
# deepspeed.json, maxtext.yaml, automodel.yaml, nanotron.yaml, accelerate.yaml, vllm.sh,
# sglang.sh, ranks.csv and ranks.csv.hostfile; the notes on what each framework cannot express go
# to stderr. Set LAYOUT to the layout executable if not on PATH.
set -euo pipefail
model=${1:-70B}
cluster=${2:-hgx_b200x16}
out=${3:-layout-export}
layout=${LAYOUT:-layout}
mkdir -p "$out"
"$layout" search --model "$model" --cluster "$cluster" --json > "$out/plan.json"
for format in megatron bridge vllm sglang; do
  "$layout" export --format "$format" --plan "$out/plan.json" > "$out/$format.sh"
done
"$layout" export --format torchtitan --plan "$out/plan.json" > "$out/torchtitan.toml"
"$layout" export --format maxtext --plan "$out/plan.json" > "$out/maxtext.yaml"
"$layout" export --format automodel --plan "$out/plan.json" > "$out/automodel.yaml"
"$layout" export --format nanotron --plan "$out/plan.json" > "$out/nanotron.yaml"
"$layout" export --format accelerate --plan "$out/plan.json" > "$out/accelerate.yaml"
"$layout" export --format deepspeed --plan "$out/plan.json" --placement "$out/ranks.csv" \
  > "$out/deepspeed.json"
echo "wrote $out: plan.json, 10 exports, ranks.csv, ranks.csv.hostfile"
