# python -m sglang.launch_server arguments; names checked against sgl-project/sglang 001067f
# plan: llama3.1-70b on hgx_b200x16: TP4 PP2 VPP2 DP2 mbs1 selective zero1 bf16
# note: best effort from a training plan (TP4 PP2 VPP2 DP2 mbs1 selective zero1 bf16): TP and PP are the training layout's; a serving search (planner.serve_search) sizes them for latency and KV cache
# note: run 2 replicas of 8 GPU(s) behind a load balancer (this command starts one)
python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B --tp-size 4 --pp-size 2 --context-length 8192 --dtype bfloat16 --kv-cache-dtype auto
