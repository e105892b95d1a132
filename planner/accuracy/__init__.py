"""Accuracy: the planner's predictions against published training runs (``layout validate``).

Layer: same as ``planner.report`` (uses catalog, specs, search and cost.params; never imported by
them). ``rows`` reads the bundled validation set, ``run`` scores it, ``render`` prints it;
``pairs`` runs ``layout migrate`` (through the Python API) on its published migration pairs.
"""
