"""Analytical cost model: pure functions over specs (layer L3). Never imports networkx or a solver.

Symbol legend (the JAX scaling book's letters, used by every formula docstring here):

=====  ==========================================  =====  =====================================
B      batch (sequences) of one micro-batch         T      sequence length (tokens)
D      hidden size (d_model)                        F      FFN intermediate width
N      query heads                                  K      key/value heads
H      head dimension                               L      transformer layers
V      vocabulary size                              E      routed experts (k: top-k)
m      micro-batches per step per pipeline          v      virtual stages per PP rank (vpp)
n      group size of a collective                   S      message bytes
W      link bandwidth per rank per direction (B/s)  alpha  per-step latency (s)
eta    efficiency (fraction of W or of peak)
=====  ==========================================  =====  =====================================

Parallel degrees are spelled ``tp pp dp cp ep``. Units: seconds, bytes, FLOP.
"""
