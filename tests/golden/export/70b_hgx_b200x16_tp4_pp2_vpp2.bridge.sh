# Megatron-Bridge run_recipe.py ConfigContainer overrides; names checked against NVIDIA-NeMo/Megatron-Bridge v0.6.0 (51885cf)
# plan: llama3.1-70b on hgx_b200x16: TP4 PP2 VPP2 DP2 mbs1 selective zero1 bf16 (16 GPUs)
# use with the model's recipe, e.g.: torchrun ... scripts/training/run_recipe.py --recipe <model>_pretrain_config "${BRIDGE_OVERRIDES[@]}"
# the recipe sets the architecture; these set the layout, batch, precision, overlaps and RoPE the prediction assumes
BRIDGE_OVERRIDES=(
  model.tensor_model_parallel_size=4
  model.pipeline_model_parallel_size=2
  model.context_parallel_size=1
  model.sequence_parallel=true
  model.virtual_pipeline_model_parallel_size=2
  train.micro_batch_size=1
  train.global_batch_size=512
  dataset.seq_length=8192
  model.seq_length=8192
  model.recompute_granularity=selective
  ddp.use_distributed_optimizer=true
  optimizer.use_distributed_optimizer=true
  ddp.grad_reduce_in_fp32=true
  mixed_precision=bf16_mixed
  comm_overlap.tp_comm_overlap=true
  ddp.overlap_grad_reduce=true
  ddp.overlap_param_gather=true
  model.attention_backend=fused
  model.cross_entropy_loss_fusion=true
  model.cross_entropy_fusion_impl=te
  model.rotary_base=500000
  model.rope_scaling=true
  model.rope_scaling_factor=8
)
