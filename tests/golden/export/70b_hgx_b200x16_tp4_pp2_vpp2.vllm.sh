# vllm serve arguments; names checked against vllm-project/vllm 99d7eb5 (v0.11 line)
# plan: llama3.1-70b on hgx_b200x16: TP4 PP2 VPP2 DP2 mbs1 selective zero1 bf16
# note: best effort from a training plan (TP4 PP2 VPP2 DP2 mbs1 selective zero1 bf16): TP and PP are the training layout's; a serving search (planner.serve_search) sizes them for latency and KV cache
# note: run 2 replicas of 8 GPU(s) behind a load balancer (this command starts one)
vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 4 --pipeline-parallel-size 2 --max-model-len 8192 --dtype bfloat16 --kv-cache-dtype auto
