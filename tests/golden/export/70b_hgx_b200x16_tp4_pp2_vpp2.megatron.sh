# Megatron-LM pretrain_gpt.py arguments; names checked against NVIDIA/Megatron-LM core_v0.19.0 (5be9626)
# plan: llama3.1-70b on hgx_b200x16: TP4 PP2 VPP2 DP2 mbs1 selective zero1 bf16 (16 GPUs = 2 node(s) x 8)
# run: torchrun --nnodes ... --nproc-per-node ... pretrain_gpt.py "${MEGATRON_ARGS[@]}"
MEGATRON_ARGS=(
  # parallelism (rank order tp-cp-ep-dp-pp, Megatron's default)
  --tensor-model-parallel-size 4
  --pipeline-model-parallel-size 2
  --sequence-parallel
  --num-virtual-stages-per-pipeline-rank 2
  # batch: 256 micro-batches per replica per step
  --micro-batch-size 1
  --global-batch-size 512
  --seq-length 8192
  --max-position-embeddings 131072
  # recompute selective, ZeRO-1, bf16
  --recompute-granularity selective
  --use-distributed-optimizer
  --bf16
  --accumulate-allreduce-grads-in-fp32
  # overlap, kernels and graphs the prediction assumes
  --tp-comm-overlap
  --overlap-grad-reduce
  --overlap-param-gather
  --attention-backend fused
  --cross-entropy-loss-fusion
  --cross-entropy-fusion-impl te
  # model: llama3.1-70b (https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json)
  --num-layers 80
  --hidden-size 8192
  --num-attention-heads 64
  --kv-channels 128
  --normalization RMSNorm
  --position-embedding-type rope
  --attention-dropout 0.0
  --hidden-dropout 0.0
  --ffn-hidden-size 28672
  --group-query-attention
  --num-query-groups 8
  --untie-embeddings-and-output-weights
  --swiglu
  --disable-bias-linear
  --rotary-base 500000
  --use-rope-scaling
  --rope-scaling-factor 8
  # data: synthetic tokens; use --data-path and a real tokenizer for training
  --mock-data
  --tokenizer-type NullTokenizer
  --vocab-size 128256
  --train-iters 100
  --lr 1.0e-4
)
