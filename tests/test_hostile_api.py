"""Hostile input to the Python API (issue 17): every bad argument is one SpecError line.

One table of cases (function, arguments, expected error, words of its message): a wrong type,
a value out of range, an unknown key and an argument that would be ignored, for every public
function of planner.api. Each asserts the exception is exactly SpecError or InfeasibleError (not
a bare ValueError, TypeError or pydantic ValidationError), that its message is one line and that
it names the offending value and the rule. The messages follow the scheme stated in the
planner.api docstring (``fix tp='two': must be a positive whole number``). A hypothesis property
then fuzzes ``fix``, ``bounds``, ``top`` and ``gpus`` with arbitrary JSON-like values.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import api
from planner.errors import InfeasibleError, PlannerError, SpecError
from planner.search.arguments import BOUNDABLE, MAX_LAYOUT_NUMBER
from planner.search.serving_search import SERVE_PINNABLE
from planner.search.space import PINNABLE
from planner.specs.layout import Layout
from planner.specs.result import Plan, SearchResult, ServeLayout, ServePlan, ServeSearchResult
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import ServeWorkload, TrainWorkload

SMALL = {"model": "8B", "cluster": "hgx_h100x8"}
"""A model and cluster that search in a few milliseconds."""
PLAN, RESULT, SERVE_PLAN, SERVE_RESULT = "<plan>", "<result>", "<serve plan>", "<serve result>"
"""Stand-ins in the table for plans made once per session (see :func:`_fixtures`)."""


@cache
def _fixtures() -> dict[str, object]:
    """A training plan, a search result and a serving plan of 8B on hgx_h100x8."""
    serve = api.serve_search(**SMALL, top=1)
    return {
        PLAN: api.estimate(**SMALL, layout={"tp": 2}),
        RESULT: api.search(**SMALL, top=2),
        SERVE_PLAN: serve.best,
        SERVE_RESULT: serve,
    }


def _resolve(value: object) -> object:
    return _fixtures().get(value, value) if isinstance(value, str) else value


@dataclass(frozen=True)
class Case:
    """One call: ``function(*args, **kwargs)`` raises ``error`` whose message has ``expect``."""

    id: str
    function: str
    kwargs: dict[str, Any]
    expect: tuple[str, ...]
    error: type[PlannerError] = SpecError
    args: tuple[Any, ...] = field(default=())


def _s(id: str, expect: tuple[str, ...], **kwargs: Any) -> Case:
    """A ``search`` case on the small model and cluster."""
    return Case(id, "search", {**SMALL, **kwargs}, expect)


def _serve(id: str, expect: tuple[str, ...], **kwargs: Any) -> Case:
    return Case(id, "serve_search", {**SMALL, **kwargs}, expect)


def _est(id: str, expect: tuple[str, ...], **kwargs: Any) -> Case:
    return Case(id, "estimate", {**SMALL, **kwargs}, expect)


def _sest(id: str, expect: tuple[str, ...], **kwargs: Any) -> Case:
    return Case(id, "serve_estimate", {**SMALL, **kwargs}, expect)


def _mig(id: str, expect: tuple[str, ...], **kwargs: Any) -> Case:
    base = {"model": "8B", "from_cluster": "hgx_h100x8", "to_cluster": "hgx_b200x8"}
    return Case(id, "migrate", {**base, **kwargs}, expect)


WHOLE = "must be a positive whole number"
# fmt: off
CASES: list[Case] = [
    # --- search: fix ------------------------------------------------------------------------
    _s("fix-text", ("fix tp='two'", WHOLE), fix={"tp": "two"}),
    _s("fix-float", ("fix tp=2.5", WHOLE), fix={"tp": 2.5}),
    _s("fix-whole-float", ("fix tp=2.0", WHOLE), fix={"tp": 2.0}),
    _s("fix-numeric-text", ("fix tp='2'", WHOLE), fix={"tp": "2"}),
    _s("fix-bool", ("fix pp=True", WHOLE), fix={"pp": True}),
    _s("fix-none", ("fix dp=None", WHOLE), fix={"dp": None}),
    _s("fix-list-value", ("fix mbs=[1]", WHOLE), fix={"mbs": [1]}),
    _s("fix-zero-tp", ("fix tp=0", WHOLE), fix={"tp": 0}),
    _s("fix-negative", ("fix cp=-2", WHOLE), fix={"cp": -2}),
    _s("fix-huge", ("fix tp=", "at most 16,777,216"), fix={"tp": 10**30}),
    _s("fix-zero-stage", ("fix zero=5", "0, 1, 2 or 3"), fix={"zero": 5}),
    _s("fix-zero-text", ("fix zero='1'", "0, 1, 2 or 3"), fix={"zero": "1"}),
    _s("fix-zero-bool", ("fix zero=False", "0, 1, 2 or 3"), fix={"zero": False}),
    _s("fix-recompute", ("fix recompute='max'", "none, selective or full"),
       fix={"recompute": "max"}),
    _s("fix-recompute-int", ("fix recompute=2", "none, selective or full"),
       fix={"recompute": 2}),
    _s("fix-precision", ("fix precision='fp9'", "unknown training precision", "bf16"),
       fix={"precision": "fp9"}),
    _s("fix-precision-int", ("fix precision=8", "unknown training precision"),
       fix={"precision": 8}),
    # a layout field as a keyword argument names the argument that takes it
    _s("layout-field-as-keyword", ("unknown argument 'zero'", "fix={'zero': ...}"), zero=1),
    _est("estimate-layout-field-as-keyword", ("unknown argument 'pp'", "layout={'pp': ...}"),
         layout={"tp": 1}, pp=2),
    # dp left to fill the cluster when tp x pp x cp does not divide it, or exceeds it (on 8 GPUs)
    _est("estimate-dp-cannot-fill", ("no dp fills it: tp x pp x cp = 3 does not divide 8",
                                     "a cluster of 6 or 9"), layout={"cp": 3}),
    _est("estimate-degrees-beyond-cluster", ("no dp fills it: tp x pp x cp = 16 is more than 8",),
         layout={"tp": 8, "pp": 2}),
    _s("fix-unknown-key", ("fix bogus=1", "cannot pin 'bogus'", "pinnable: tp"),
       fix={"bogus": 1}),
    _s("fix-serve-key", ("fix replicas=2", "cannot pin 'replicas'"), fix={"replicas": 2}),
    _s("fix-int-key", ("fix 1=2", "cannot pin 1"), fix={1: 2}),
    _s("fix-upper-key", ("fix TP=2", "cannot pin 'TP'"), fix={"TP": 2}),
    _s("fix-list", ("fix [1]", "must be a dict"), fix=[1]),
    _s("fix-text-arg", ("fix 'tp=2'", "must be a dict"), fix="tp=2"),
    # --- search: bounds ---------------------------------------------------------------------
    _s("bounds-int", ("bounds tp=3", "(low, high) pair"), bounds={"tp": 3}),
    _s("bounds-triple", ("bounds tp=(1, 2, 3)", "(low, high) pair"), bounds={"tp": (1, 2, 3)}),
    _s("bounds-text-pair", ("bounds tp='12'", "(low, high) pair"), bounds={"tp": "12"}),
    _s("bounds-text-side", ("bounds pp=('1', 4)", "positive whole numbers"),
       bounds={"pp": ("1", 4)}),
    _s("bounds-float-side", ("bounds pp=(1, 4.5)", "positive whole numbers"),
       bounds={"pp": (1, 4.5)}),
    _s("bounds-zero-degree", ("bounds tp=(0, 2)", "positive whole numbers"),
       bounds={"tp": (0, 2)}),
    _s("bounds-zero-stage", ("bounds zero=(None, 7)", "0, 1, 2 or 3"),
       bounds={"zero": (None, 7)}),
    _s("bounds-reversed", ("bounds tp=(8, 2)", "the low 8 exceeds the high 2"),
       bounds={"tp": (8, 2)}),
    _s("bounds-unknown-key", ("bounds bogus=(1, 2)", "cannot bound 'bogus'", "one of tp"),
       bounds={"bogus": (1, 2)}),
    _s("bounds-precision-key", ("cannot bound 'precision'",), bounds={"precision": (1, 2)}),
    _s("bounds-list", ("bounds [('tp', 1)]", "must be a dict"), bounds=[("tp", 1)]),
    # --- search: top, gpus, precisions, config, workload, model, cluster --------------------
    _s("top-negative", ("top -1", WHOLE), top=-1),
    _s("top-zero", ("top 0", WHOLE), top=0),
    _s("top-bool", ("top True", WHOLE), top=True),
    _s("top-text", ("top '5'", WHOLE), top="5"),
    _s("top-float", ("top 2.0", WHOLE), top=2.0),
    _s("gpus-negative", ("gpus -8", WHOLE), gpus=-8),
    _s("gpus-zero", ("gpus 0", WHOLE), gpus=0),
    _s("gpus-text", ("gpus '8'", WHOLE), gpus="8"),
    _s("gpus-bool", ("gpus True", WHOLE), gpus=True),
    _s("gpus-float", ("gpus 8.0", WHOLE), gpus=8.0),
    _s("gpus-over-cluster", ("--gpus 16", "exceeds the 8 accelerators of hgx_h100x8"), gpus=16),
    _s("gpus-illegal-size", ("--gpus 3", "not a legal size"), gpus=3),
    _s("precisions-unknown", ("precisions 'fp9'", "unknown training precision", "fp8"),
       precisions=["fp9"]),
    _s("precisions-text", ("precisions 'bf16'", "must be a list"), precisions="bf16"),
    _s("precisions-int", ("precisions 16", "unknown training precision"), precisions=[16]),
    _s("precisions-dict", ("precisions {'bf16': 1}", "must be a list"),
       precisions={"bf16": 1}),
    _s("config-text", ("config 'fast'", "SolverConfig"), config="fast"),
    _s("config-int", ("config 3", "SolverConfig"), config=3),
    _s("config-dict-bad", ("config: solver",), config={"solver": "magic"}),
    _s("config-dict-unknown", ("config: bogus: unknown key",), config={"bogus": 1}),
    _s("workload-list", ("workload [1, 2]", "TrainWorkload", "got list"), workload=[1, 2]),
    _s("workload-text", ("workload 'bf16'", "TrainWorkload"), workload="bf16"),
    _s("workload-serve", ("workload <ServeWorkload>", "TrainWorkload", "got ServeWorkload"),
       workload=ServeWorkload()),
    _s("workload-unknown", ("workload: bogus: unknown key",), workload={"bogus": 1}),
    _s("workload-seq-text", ("workload: seq_len",), workload={"seq_len": "long"}),
    Case("model-int", "search", {"model": 42, "cluster": "hgx_h100x8"},
         ("model 42", "catalog name", "got int")),
    Case("model-none", "search", {"model": None, "cluster": "hgx_h100x8"}, ("model None",)),
    Case("model-unknown", "search", {"model": "99Z", "cluster": "hgx_h100x8"},
         ("unknown model '99Z'",)),
    Case("cluster-none", "search", {"model": "8B", "cluster": None},
         ("cluster None", "ClusterSpec", "got NoneType")),
    Case("cluster-int", "search", {"model": "8B", "cluster": 8}, ("cluster 8",)),
    Case("cluster-list", "search", {"model": "8B", "cluster": ["hgx_h100x8"]},
         ("cluster ['hgx_h100x8']",)),
    # --- estimate -----------------------------------------------------------------------------
    _est("layout-text", ("layout 'tp=2'", "Layout or a dict", "got str"), layout="tp=2"),
    _est("layout-list", ("layout [1, 2]", "Layout or a dict"), layout=[1, 2]),
    _est("layout-none", ("layout None", "Layout or a dict"), layout=None),
    _est("layout-value-text", ("layout: tp", "'two'"), layout={"tp": "two"}),
    _est("layout-value-huge", ("layout: tp", "at most 16,777,216"), layout={"tp": 10**5000}),
    _est("layout-unknown", ("layout: bogus: unknown key",), layout={"tp": 2, "bogus": 1}),
    _est("layout-rule", ("tp (3) must divide",), layout={"tp": 3}),
    _est("layout-precision-ignored", ("layout precision='fp8'", "differs from the workload"),
         layout={"tp": 2, "precision": "fp8"}),
    _est("estimate-workload", ("workload (1,)", "TrainWorkload"), layout={"tp": 2},
         workload=(1,)),
    _est("layout-object-precision-ignored", ("layout precision='fp8'", "differs from the workload"),
         layout=Layout(tp=2, dp=4, precision="fp8")),
    # --- serving ------------------------------------------------------------------------------
    _serve("serve-fix-text", ("fix tp='a'", WHOLE), fix={"tp": "a"}),
    _serve("serve-fix-zero", ("fix replicas=0", WHOLE), fix={"replicas": 0}),
    _serve("serve-fix-train-key", ("fix mbs=2", "cannot pin 'mbs' in serve mode", "pinnable"),
           fix={"mbs": 2}),
    _serve("serve-fix-list", ("fix [('tp', 2)]", "must be a dict"), fix=[("tp", 2)]),
    _serve("serve-top-bool", ("top False", WHOLE), top=False),
    _serve("serve-top-negative", ("top -3", WHOLE), top=-3),
    _serve("serve-config", ("config 'fast'",), config="fast"),
    _serve("serve-workload-list", ("workload [1]", "ServeWorkload"), workload=[1]),
    _serve("serve-workload-train", ("workload <TrainWorkload>", "ServeWorkload"),
           workload=TrainWorkload()),
    _serve("serve-workload-mode", ("workload: mode",), workload={"mode": "train"}),
    _sest("serve-layout-text-value", ("serving layout: tp", "'a'"), layout={"tp": "a"}),
    _sest("serve-layout-text", ("layout 'tp=2'", "ServeLayout"), layout="tp=2"),
    _sest("serve-layout-huge", ("serving layout: pp", "at most"), layout={"pp": 10**40}),
    _sest("serve-layout-dp-and-replicas", ("layout dp=2", "alias of replicas"),
          layout={"dp": 2, "replicas": 4}),
    _sest("serve-layout-kv-ignored", ("layout kv_precision='fp8'", "differs from the workload"),
          layout={"tp": 2, "kv_precision": "fp8"}),
    _sest("serve-layout-object-precision-ignored",
          ("layout precision='fp8'", "differs from the workload"),
          layout=ServeLayout(tp=2, replicas=4, precision="fp8", kv_precision="bf16")),
    Case("serve-does-not-fit", "serve_estimate",
         {"model": "70B", "cluster": "hgx_h100x8", "layout": {"tp": 1}},
         ("memory", "GiB"), InfeasibleError),
    # --- migrate ------------------------------------------------------------------------------
    _mig("migrate-fix-list", ("fix [1]", "must be a dict"), fix=[1]),
    _mig("migrate-fix-value", ("fix tp='two'", WHOLE), fix={"tp": "two"}),
    _mig("migrate-fix-key", ("fix bogus=1", "cannot pin"), fix={"bogus": 1}),
    _mig("migrate-prices-text", ("prices 'x'", "USD per GPU-hour"), prices="x"),
    _mig("migrate-prices-key", ("prices 1=2.0", "cluster or system name"), prices={1: 2.0}),
    _mig("migrate-prices-value", ("price_per_gpu_hour",), prices={"hgx_b200": -1.0}),
    _mig("migrate-unknown-setting", ("unknown argument 'sequence'", "seq_len"), sequence=4),
    _mig("migrate-layout-setting", ("zero is a layout field", "fix={'zero'"), zero=1),
    _mig("migrate-setting-twice", ("seq_len is given twice",), seq_len=4096,
         workload={"seq_len": 2048}),
    _mig("migrate-layout-list", ("layout [1, 2]", "Layout"), layout=[1, 2]),
    _mig("migrate-config", ("config 'fast'",), config="fast"),
    _mig("migrate-workload", ("workload 7",), workload=7),
    # --- export -------------------------------------------------------------------------------
    Case("export-format-unknown", "export", {"format": "nope"},
         ("format 'nope'", "unknown export format", "megatron"), args=(PLAN,)),
    Case("export-format-int", "export", {"format": 3}, ("format 3", "megatron"), args=(PLAN,)),
    Case("export-format-list", "export", {"format": ["vllm"]}, ("format ['vllm']",),
         args=(PLAN,)),
    Case("export-plan-int", "export", {"format": "megatron"}, ("plan 42", "Plan"), args=(42,)),
    Case("export-plan-dict", "export", {"format": "megatron"}, ("plan {}", "got dict"),
         args=({},)),
    Case("export-other-cluster", "export", {"format": "megatron", "cluster": "hgx_h100x16"},
         ("cluster 'hgx_h100x16'", "not the cluster the plan was made on", "hgx_h100x8: 8 x"),
         args=(PLAN,)),
    Case("export-other-cluster-result", "export", {"format": "megatron", "cluster": "hgx_b200x8"},
         ("cluster 'hgx_b200x8'", "not the cluster the plan"), args=(RESULT,)),
    Case("export-serve-other-cluster", "export", {"format": "vllm", "cluster": "hgx_h200x8"},
         ("cluster 'hgx_h200x8'", "not the cluster the plan"), args=(SERVE_PLAN,)),
    Case("export-other-model", "export", {"format": "megatron", "model": "70B"},
         ("the plan is for model 'llama3.1-8b'",), args=(PLAN,)),
    Case("export-cluster-int", "export", {"format": "megatron", "cluster": 8}, ("cluster 8",),
         args=(PLAN,)),
    Case("export-serve-workload", "export", {"format": "vllm", "workload": [1]},
         ("workload [1]", "ServeWorkload"), args=(SERVE_RESULT,)),
    Case("export-train-workload", "export", {"format": "megatron", "workload": "x"},
         ("workload 'x'", "TrainWorkload"), args=(PLAN,)),
    # --- placement ------------------------------------------------------------------------------
    Case("placement-text", "placement", {}, ("plan 'x'", "training Plan"), args=("x",)),
    Case("placement-none", "placement", {}, ("plan None",), args=(None,)),
    Case("placement-serve", "placement", {}, ("plan <ServePlan>", "needs a training plan"),
         args=(SERVE_PLAN,)),
    Case("placement-serve-result", "placement", {}, ("needs a training plan",),
         args=(SERVE_RESULT,)),
    Case("placement-other-cluster", "placement", {"cluster": "hgx_h100x16"},
         ("cluster 'hgx_h100x16'", "not the cluster the plan"), args=(PLAN,)),
    Case("placement-cluster-list", "placement", {"cluster": [8]}, ("cluster [8]",),
         args=(RESULT,)),
    # --- report -------------------------------------------------------------------------------
    Case("report-format-pdf", "render_report", {"format": "pdf"},
         ("format 'pdf'", "unknown report format", "html, markdown"), args=(RESULT,)),
    Case("report-format-none", "render_report", {"format": None}, ("format None",), args=(RESULT,)),
    Case("report-serve-plan", "render_report", {}, ("result <ServePlan>", "training Plan"),
         args=(SERVE_PLAN,)),
    Case("report-text", "render_report", {}, ("result 'x'", "WhatIfResult"), args=("x",)),
    # --- loaders and not_fitting_reason ---------------------------------------------------------
    Case("load-model-int", "load_model", {}, ("model 42", "got int"), args=(42,)),
    Case("load-model-list", "load_model", {}, ("model ['8B']",), args=(["8B"],)),
    Case("load-model-empty", "load_model", {}, ("model name is empty",), args=("",)),
    Case("load-cluster-none", "load_cluster", {}, ("cluster None",), args=(None,)),
    Case("load-cluster-edits-text", "load_cluster", {"edits": "fast"},
         ("edits 'fast'", "ClusterEdits"), args=("hgx_h100x8",)),
    Case("load-cluster-edits-value", "load_cluster", {"edits": {"nic_gbps": -1}},
         ("cluster edits: nic_gbps",), args=("hgx_h100x8",)),
    Case("load-cluster-edits-unknown", "load_cluster", {"edits": {"bogus": 1}},
         ("cluster edits: bogus: unknown key",), args=("hgx_h100x8",)),
    Case("not-fitting-plan-int", "not_fitting_reason", {}, ("plan 42", "training Plan"),
         args=(42, "8B", "hgx_h100x8", None)),
    Case("not-fitting-serve-plan", "not_fitting_reason", {},
         ("plan <ServePlan>", "training Plan"),
         args=(SERVE_PLAN, "8B", "hgx_h100x8", None)),
    Case("not-fitting-other-cluster", "not_fitting_reason", {},
         ("cluster 'hgx_h100x16'", "not the cluster the plan"),
         args=(PLAN, "8B", "hgx_h100x16", None)),
    Case("not-fitting-cluster-none", "not_fitting_reason", {}, ("cluster None",),
         args=(PLAN, "8B", None, None)),
    Case("not-fitting-other-model", "not_fitting_reason", {}, ("the plan is for model",),
         args=(PLAN, "70B", "hgx_h100x8", None)),
    Case("not-fitting-workload", "not_fitting_reason", {}, ("workload 5",),
         args=(PLAN, "8B", "hgx_h100x8", 5)),
    # --- whatif: argument types, generators, pins, knobs set twice (issue 17, third pass) -------
    Case("whatif-vary-none", "whatif", {**SMALL, "vary": None}, ("vary None", "must be a dict")),
    Case("whatif-vary-string", "whatif", {**SMALL, "vary": "nic_gbps=400"},
         ("vary 'nic_gbps=400'", "list of 'KEY=V1,V2' strings", "(got str)")),
    Case("whatif-vary-number", "whatif", {**SMALL, "vary": 5}, ("vary 5",)),
    Case("whatif-unknown-setting", "whatif", {**SMALL, "vary": ["nic_gbps=400"], "sequence": 4},
         ("unknown argument 'sequence'",)),
    Case("whatif-vary-empty", "whatif", {**SMALL, "vary": {}}, ("vary {}", "at least one knob")),
    Case("whatif-vary-scalar-value", "whatif", {**SMALL, "vary": {"nic_gbps": 400}},
         ("--vary nic_gbps=400", "must be a list of values")),
    Case("whatif-vary-mapping-value", "whatif", {**SMALL, "vary": {"nic_gbps": {"a": 1}}},
         ("--vary nic_gbps={'a': 1}", "must be a list of values")),
    Case("whatif-vary-bytes-value", "whatif", {**SMALL, "vary": {"nic_gbps": b"400"}},
         ("must be a list of values",)),
    Case("whatif-vary-list-of-numbers", "whatif", {**SMALL, "vary": [1, 2]},
         ("vary entry 1", "'KEY=V1,V2' string")),
    Case("whatif-vary-endless-generator", "whatif",
         {**SMALL, "vary": {"nic_gbps": itertools.count(1)}, "max_scenarios": 10},
         ("--vary nic_gbps=count(1)", "more than 10 values", "cap of 10")),
    Case("whatif-progress-not-callable", "whatif", {**SMALL, "vary": ["nic_gbps=400"],
                                                    "progress": 5},
         ("progress 5", "progress(done, total)")),
    Case("whatif-note-not-callable", "whatif", {**SMALL, "vary": ["nic_gbps=400"], "note": "x"},
         ("note 'x'", "note(line)")),
    Case("whatif-fix-unknown", "whatif", {**SMALL, "vary": ["nic_gbps=400"], "fix": {"bogus": 1}},
         ("fix bogus=1", "cannot pin 'bogus'")),
    Case("whatif-fix-not-a-dict", "whatif", {**SMALL, "vary": ["nic_gbps=400"], "fix": [1]},
         ("fix [1]", "must be a dict")),
    Case("whatif-workload-and-vary", "whatif",
         {**SMALL, "vary": {"seq_len": [2048]}, "workload": {"seq_len": 4096}},
         ("--vary seq_len and workload seq_len=4096",)),
    Case("whatif-precision-and-vary", "whatif",
         {**SMALL, "vary": {"precision": ["fp8"]}, "workload": {"precision": "bf16"}},
         ("--vary precision and workload precision='bf16'",)),
    Case("whatif-fix-and-vary", "whatif",
         {**SMALL, "vary": {"precision": ["fp8"]}, "fix": {"precision": "bf16"}},
         ("--vary precision and fix precision='bf16'",)),
    Case("whatif-gpus-absurd", "whatif", {**SMALL, "vary": {"gpus": [1e300]}},
         ("--vary gpus", "from 1 to 1,048,576 (accelerators)")),
    Case("whatif-workers-absurd", "whatif", {**SMALL, "vary": ["nic_gbps=400"],
                                             "workers": 10**30},
         ("workers 1000000000000000000000000000000", "from 1 to 1,024 processes")),
    Case("check-plan-no-model", "check_plan", {"model": None, "cluster": "hgx_h100x8"},
         ("model None", "(got NoneType)"), args=(PLAN,)),
    Case("check-plan-not-a-plan", "check_plan", {"model": "8B", "cluster": "hgx_h100x8"},
         ("plan None", "Plan or ServePlan"), args=(None,)),
    Case("check-plan-workload-type", "check_plan", {"model": "8B", "cluster": "hgx_h100x8",
                                                    "workload": 5},
         ("workload 5",), args=(PLAN,)),
    Case("check-plan-warn-type", "check_plan", {"model": "8B", "cluster": "hgx_h100x8",
                                                "warn": 3}, ("warn 3",), args=(PLAN,)),
    # --- plausible ranges of workload numbers (issue 17, third pass) ----------------------------
    _serve("serve-target-absurd", ("workload: target_tokens_per_s: 1e+308",
                                   "at most 1,000,000,000,000 tokens/s"),
           workload={"target_tokens_per_s": 1e308}),
    _serve("serve-tpot-absurd", ("tpot_ms", "at most 3,600,000 ms"), workload={"tpot_ms": 1e300}),
    _s("search-seq-len-absurd", ("workload: seq_len", "from 1 to 16,777,216 tokens"),
       workload={"seq_len": 10**300}),
    _s("search-gpus-absurd", ("gpus 1000000000000", "from 1 to 1,048,576"), gpus=10**12),
    _s("search-target-step-absurd", ("config: target_step_time_s", "at most 86,400 s"),
       config={"target_step_time_s": 1e300}),
    # --- nothing fits ---------------------------------------------------------------------------
    Case("search-nothing-fits", "search", {"model": "405B", "cluster": "hgx_h100x8"},
         ("nothing fits 'llama3.1-405b'", "GiB"), InfeasibleError),
]
# fmt: on


def assert_planner_error(exc: BaseException, case_error: type[PlannerError]) -> str:
    """``exc`` is exactly ``case_error`` with a one-line, non-empty message; returns it."""
    assert type(exc) is case_error, f"{type(exc).__name__}: {exc}"
    message = str(exc)
    assert message.strip() and "\n" not in message and "\r" not in message, repr(message)
    assert "Traceback" not in message and "validation error for" not in message, message
    return message


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_api(case: Case) -> None:
    call = getattr(api, case.function)
    args = [_resolve(a) for a in case.args]
    kwargs = {k: _resolve(v) for k, v in case.kwargs.items()}
    with pytest.raises(PlannerError) as info:
        call(*args, **kwargs)
    message = assert_planner_error(info.value, case.error)
    for text in case.expect:
        assert text in message, f"{text!r} not in {message!r}"


def test_case_ids_are_unique() -> None:
    assert len({c.id for c in CASES}) == len(CASES)


def test_every_public_function_is_covered() -> None:
    public = {"search", "estimate", "serve_search", "serve_estimate", "migrate", "export"}
    public |= {"placement", "load_model", "load_cluster", "not_fitting_reason", "render_report"}
    assert public <= {c.function for c in CASES}


# --- what must still work ------------------------------------------------------------------------


def test_valid_arguments_still_work() -> None:
    """Each checked argument in its accepted forms: dict config, tuple or list bounds, a
    precision in capitals, top above the cap (clamped as on the CLI), numpy-like ints."""

    class Index:
        """An integer type other than int (as numpy's int64): accepted through __index__."""

        def __index__(self) -> int:
            return 2

    result = api.search(
        **SMALL,
        fix={"tp": Index(), "recompute": "selective", "zero": 1, "precision": "BF16"},
        bounds={"pp": [None, 4], "mbs": (1, None)},
        top=10**6,
        config={"solver": "exhaustive"},
        precisions=("bf16",),
        gpus=8,
    )
    assert isinstance(result, SearchResult)
    assert result.best.layout.tp == 2 and result.best.layout.pp <= 4
    assert api.search(**SMALL, top=60).solver.name == "sort"
    serve = api.serve_search(**SMALL, fix={"dp": 2}, top=1, config=SolverConfig())
    assert isinstance(serve, ServeSearchResult) and serve.best.layout.replicas == 2
    plan = api.estimate(**SMALL, layout=Layout(tp=2, dp=4))
    assert isinstance(plan, Plan) and api.not_fitting_reason(plan, "8B", "hgx_h100x8", None) == ""
    assert isinstance(api.serve_estimate(**SMALL, layout={"tp": 2, "dp": 2}), ServePlan)


def test_the_plans_own_cluster_is_accepted() -> None:
    """export / placement with the plan's cluster (by name or spec), including a plan on the
    first ``gpus`` accelerators of a larger cluster."""
    plan, result = _resolve(PLAN), _resolve(RESULT)
    assert api.export(plan, format="megatron", cluster="hgx_h100x8").args
    assert api.export(result, format="megatron", cluster=api.load_cluster("hgx_h100x8")).args
    assert len(api.placement(plan, cluster="hgx_h100x8")) == 8
    assert api.export(_resolve(SERVE_PLAN), format="vllm", cluster="hgx_h100x8").args
    part = api.search(model="8B", cluster="hgx_h100x16", gpus=8, top=1)
    assert part.best.num_gpus == 8
    assert len(api.placement(part, cluster="hgx_h100x16")) == 8
    assert api.export(part, format="torchtitan", cluster="hgx_h100x16").text
    edited = api.load_cluster("hgx_h100x8", edits={"nic_gbps": 100})
    with pytest.raises(SpecError, match="not the cluster the plan was made on"):
        api.export(plan, format="megatron", cluster=edited)


# --- interrupts propagate ----------------------------------------------------------------------


class _Interrupting:
    """A value whose integer conversion is interrupted (Ctrl-C while the API checks it)."""

    def __index__(self) -> int:
        raise KeyboardInterrupt

    def __repr__(self) -> str:
        return "<interrupting>"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gpus": _Interrupting()},
        {"top": _Interrupting()},
        {"fix": {"tp": _Interrupting()}},
        {"bounds": {"tp": (_Interrupting(), None)}},
    ],
    ids=["gpus", "top", "fix", "bounds"],
)
def test_keyboard_interrupt_propagates_from_checks(kwargs: dict[str, object]) -> None:
    with pytest.raises(KeyboardInterrupt):
        api.search(**SMALL, **kwargs)


def test_keyboard_interrupt_propagates_from_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(api.engine, "search", interrupted)
    monkeypatch.setattr(api.serving_search, "serve_search", interrupted)
    with pytest.raises(KeyboardInterrupt):
        api.search(**SMALL)
    with pytest.raises(KeyboardInterrupt):
        api.serve_search(**SMALL)
    with pytest.raises(KeyboardInterrupt):
        api.migrate(model="8B", from_cluster="hgx_h100x8", to_cluster="hgx_b200x8")


# --- fuzzing ---------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
"""Arbitrary JSON-like values (NaN and infinities included)."""
SMALL_INTS = st.integers(min_value=-2, max_value=2 * MAX_LAYOUT_NUMBER)
FIX_KEYS = st.sampled_from([*PINNABLE, *SERVE_PINNABLE]) | st.text(max_size=6)
FIX_VALUES = (
    SMALL_INTS | st.sampled_from(["none", "selective", "full", "bf16", "fp8", "FP8", "auto"]) | JSON
)
FIXES = st.none() | JSON | st.dictionaries(FIX_KEYS, FIX_VALUES, max_size=3)
SIDES = st.none() | SMALL_INTS | JSON
BOUNDS = (
    st.none()
    | JSON
    | st.dictionaries(
        st.sampled_from(BOUNDABLE) | st.text(max_size=6),
        st.tuples(SIDES, SIDES) | JSON,
        max_size=3,
    )
)
COUNTS = st.none() | st.integers(min_value=-3, max_value=64) | JSON
GPUS = st.none() | st.sampled_from([1, 2, 4, 8]) | COUNTS


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fix=FIXES, bounds=BOUNDS, top=COUNTS, gpus=GPUS)
def test_fuzzed_search_arguments(fix: object, bounds: object, top: object, gpus: object) -> None:
    """Whatever ``fix``, ``bounds``, ``top`` and ``gpus`` hold, ``search`` returns a result or
    raises SpecError / InfeasibleError with a one-line message."""
    try:
        result = api.search(**SMALL, fix=fix, bounds=bounds, top=top, gpus=gpus)  # type: ignore[arg-type]
    except (SpecError, InfeasibleError) as exc:
        assert_planner_error(exc, type(exc))
        return
    assert isinstance(result, SearchResult)
    assert 1 <= 1 + len(result.alternatives) <= (top if isinstance(top, int) else 5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fix=FIXES, top=COUNTS)
def test_fuzzed_serve_arguments(fix: object, top: object) -> None:
    """The same for ``serve_search``'s ``fix`` and ``top``."""
    try:
        result = api.serve_search(**SMALL, fix=fix, top=top)  # type: ignore[arg-type]
    except (SpecError, InfeasibleError) as exc:
        assert_planner_error(exc, type(exc))
        return
    assert isinstance(result, ServeSearchResult)


def test_max_top_is_the_solver_configs_limit() -> None:
    from annotated_types import Le

    assert Le(api.MAX_TOP) in SolverConfig.model_fields["top"].metadata


# --- plans edited in Python are re-validated before export and placement (issue 17) --------


def _edit(plan: Plan | ServePlan, edit: str) -> object:
    """``plan`` with one hand edit made the way Python allows: model_copy(update=...), which
    pydantic does not validate."""
    memory = plan.memory
    edits: dict[str, dict[str, object]] = {
        "fits-false": {"fits": False},
        "fits-text": {"fits": "yes"},
        "num-gpus": {"num_gpus": 4096},
        "peak": {"memory": memory.model_copy(update={"peak_gib": 500.0})},
        "weights": {"memory": memory.model_copy(update={"weights_gib": 1.0})},
        "layout-text": {"layout": "tp=2"},
        "tp16": {"layout": plan.layout.model_copy(update={"tp": 16})},
        "model": {"model": "llama3.1-70b"},
        "cluster": {"cluster": "hgx_b200x8"},
        "placement": {"placement": {}},
        "step-negative": {"step_time_s": -1.0},
        "tokens-inf": {"tokens_per_s": float("inf")},
    }
    return plan.model_copy(update=edits[edit])


EDITS = ["fits-false", "fits-text", "num-gpus", "peak", "weights", "layout-text", "tp16",
         "model", "cluster", "placement", "step-negative", "tokens-inf"]  # fmt: skip
SERVE_EDITS = ["fits-false", "fits-text", "num-gpus", "weights", "layout-text", "model",
               "cluster", "placement"]  # fmt: skip


@pytest.mark.parametrize("edit", EDITS)
@pytest.mark.parametrize("function", ["export", "placement"])
def test_an_edited_training_plan_is_refused(function: str, edit: str) -> None:
    plan = _edit(_fixtures()[PLAN], edit)  # type: ignore[arg-type]
    kwargs = {"format": "megatron"} if function == "export" else {}
    with pytest.raises(PlannerError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 'the plan was made on ...': then refused
        getattr(api, function)(plan, **kwargs)
    assert_planner_error(info.value, SpecError)


@pytest.mark.parametrize("edit", SERVE_EDITS)
def test_an_edited_serving_plan_is_refused(edit: str) -> None:
    plan = _edit(_fixtures()[SERVE_PLAN], edit)  # type: ignore[arg-type]
    with pytest.raises(PlannerError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        api.export(plan, format="vllm")
    assert_planner_error(info.value, SpecError)


def test_an_edited_search_result_is_refused() -> None:
    result = _fixtures()[RESULT]
    best = _edit(result.best, "num-gpus")  # type: ignore[attr-defined]
    edited = result.model_copy(update={"best": best})  # type: ignore[attr-defined]
    for call in (lambda: api.export(edited, format="megatron"), lambda: api.placement(edited)):
        with pytest.raises(PlannerError) as info:
            call()
        assert "num_gpus 4096" in assert_planner_error(info.value, SpecError)


def test_untouched_plans_export_and_place_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in (PLAN, RESULT):
            api.export(_fixtures()[name], format="megatron")  # type: ignore[arg-type]
            api.placement(_fixtures()[name])  # type: ignore[arg-type]
        api.export(_fixtures()[SERVE_RESULT], format="vllm")  # type: ignore[arg-type]
        fewer = api.search(model="8B", cluster="hgx_h100x16", gpus=8)  # the first 8 of 16
        api.export(fewer, format="megatron")
        assert len(api.placement(fewer)) == 8
