"""Self-calibration on the local accelerator: ``layout calibrate --measure`` (layer L5, beside
:mod:`planner.accuracy`).

Measures GEMM, attention, HBM and collective throughput with PyTorch (the optional ``calibrate``
extra), fits the accelerator's efficiency factors with the cost model's own functions
(:mod:`planner.measure.fit`) and writes a calibration overlay with a ``measurements`` block that
``--calibration FILE`` applies (docs/calibration.md). PyTorch is imported inside functions only:
importing this package never needs it.
"""
