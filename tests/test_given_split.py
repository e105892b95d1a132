"""A pipeline split the user gives in Megatron-LM's spellings (planner.search.given_split): the
layout string parses to the layers Megatron-LM builds, each rule it enforces is refused in one
line, the split is scored as given and exported as given."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner import api
from planner.catalog import load_cluster, load_model
from planner.errors import SpecError
from planner.report.export.megatron import pipeline_layout
from planner.search import engine
from planner.search.evaluate import score
from planner.search.given_split import (
    layout_stages,
    split_from_accounting,
    split_from_first_last,
    split_from_flags,
    split_from_layout,
)
from planner.specs.layout import Layout
from planner.specs.pipeline import PipelineSplit
from planner.specs.workload import TrainWorkload
from tests.test_cli import run_main


def test_megatrons_own_example_parses_to_its_stages() -> None:
    """``parse_str_to_list``'s docstring: "Ettt|(tt|)*29,m|L" is [E,t,t,t] + [t,t] x 29 +
    [m] + [L]: 32 stages, 61 decoder layers, the MTP layer alone in stage 30, which with pp 16
    is rank 14's last virtual stage (30 = 1 x 16 + 14)."""
    stages = layout_stages("Ettt|(tt|)*29,m|L")
    assert stages == ["Ettt"] + ["tt"] * 29 + ["m", "L"]
    split = split_from_layout("Ettt|(tt|)*29,m|L", pp=16, num_layers=61, mtp_layers=1)
    assert split.chunk_layers == (3,) + (2,) * 29 + (0, 0)
    assert split.mtp_chunk == 30


def test_deepseek_v3s_layout_on_16_ranks() -> None:
    """NVIDIA's DeepSeek-V3 layout "Et*4|(t*4|)*14tmL": 16 stages of 4 layers, the last holding
    one layer, the MTP module and the loss; on pp 8 the same string is 8 ranks x 2 chunks."""
    split = split_from_layout("Et*4|(t*4|)*14tmL", pp=16, num_layers=61, mtp_layers=1)
    assert split.chunk_layers == (4,) * 15 + (1,)
    assert split.mtp_chunk == 15
    on_eight = split_from_layout("Et*4|(t*4|)*14tmL", pp=8, num_layers=61, mtp_layers=1)
    assert on_eight.num_chunks == 16  # vpp 2: chunk 15 is rank 7's second
    # Megatron-LM's code lets the first rank hold them in its last virtual stage (its message
    # says otherwise; the check skips that stage): chunk 2 of pp 2 x vpp 2 is rank 0's second
    assert split_from_layout("Et*4|t*4|m|L", pp=2, num_layers=8, mtp_layers=1).mtp_chunk == 2


@pytest.mark.parametrize(
    ("text", "pp", "layers", "mtp", "words"),
    [
        ("Et*4|t*4L", 3, 8, 0, "2 stages do not divide over pp 3 ranks"),
        ("t*4E|t*4L", 2, 8, 0, "the embedding E must come first, once"),
        ("Et*4L|t*4", 2, 8, 0, "the loss L must come last, once"),
        ("Et*4|t*3L", 2, 8, 0, "it has 7 decoder layers t, the model 8"),
        ("Et*4|t*4mL", 2, 8, 0, "it has 1 MTP layers m, the workload 0"),
        ("Et*3m|t*5L", 2, 8, 1, "decoder layers t come before m"),
        ("Et*2|t*2|t*2|t*2m||L", 2, 8, 1, "the last virtual stage of its rank"),
        ("E|t*8L|", 3, 8, 0, "a stage before E or after L cannot be scored"),
        ("Et*4|t*4X", 2, 8, 0, "invalid character 'X'"),
        ("Et*4|t*4L ", 2, 8, 0, "invalid character ' '"),
        ("Et*4|(t*4|", 2, 8, 0, "invalid character '('"),
        ("Et*99999999999|L", 2, 8, 0, "unrolls to more than 100,000 characters"),
        ("E(t|)*99999|L", 2, 8, 0, "unrolls to more than 100,000 characters"),
    ],
)
def test_each_rule_is_one_line(text: str, pp: int, layers: int, mtp: int, words: str) -> None:
    """Every rule Megatron-LM's ``validate_layer_layout`` enforces, the planner's own (the
    embedding in the first stage, the loss in the last) and a repeat too long to unroll."""
    with pytest.raises(SpecError) as caught:
        split_from_layout(text, pp=pp, num_layers=layers, mtp_layers=mtp)
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_uneven_first_and_last_ranks() -> None:
    """Megatron-LM's ``get_num_layers_to_build``: 80 layers, pp 4, first 18 and last 18 leave
    22 for each middle rank; with vpp 2 each rank's count splits in two; a rest that does not
    divide is refused."""
    assert split_from_first_last(pp=4, vpp=1, num_layers=80, first=18, last=18).chunk_layers == (
        18, 22, 22, 18,
    )  # fmt: skip
    assert split_from_first_last(pp=4, vpp=2, num_layers=80, first=18, last=18).chunk_layers == (
        9, 11, 11, 9, 9, 11, 11, 9,
    )  # fmt: skip
    with pytest.raises(SpecError, match="cannot share the remaining 61"):
        split_from_first_last(pp=4, vpp=1, num_layers=80, first=19, last=None)
    with pytest.raises(SpecError, match="do not divide over its vpp 2"):
        split_from_first_last(pp=4, vpp=2, num_layers=80, first=17, last=19)


def test_embedding_and_loss_counted_as_layers() -> None:
    """Qwen3-235B's recipe: 94 layers + embedding + loss = 96 slots over pp 8 x vpp 4 = 32
    chunks of 3, the first and last building 2."""
    split = split_from_accounting(pp=8, vpp=4, num_layers=94, embedding=True, loss=True)
    assert split.chunk_layers == (2,) + (3,) * 30 + (2,)
    with pytest.raises(SpecError, match="95 slots"):
        split_from_accounting(pp=8, vpp=4, num_layers=94, embedding=True, loss=False)


def test_a_chunk_may_hold_only_the_embedding_or_the_loss() -> None:
    """NVIDIA's 26.06 Llama 3.1 405B recipe on 256 GB200 (Megatron-Bridge v0.5.0,
    LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_MX_V2): TP4 PP16 VPP8 with the embedding and the loss
    counted as layers, 126 + 2 = 128 slots over 128 chunks, so the first chunk holds only the
    embedding and the last only the loss. Megatron-LM runs it; the planner scores it under that
    split (the layout string spells the same split), and still refuses pp x vpp above the layers
    when no split says where the layers go."""
    common = {"model": "405B", "cluster": "gb200_nvl72x256", "seq_len": 8192,
              "global_batch": 1536, "precision": "fp8"}  # fmt: skip
    layout = {"tp": 4, "pp": 16, "vpp": 8, "mbs": 1}
    flags = {"account_for_embedding_in_pipeline_split": True,
             "account_for_loss_in_pipeline_split": True}  # fmt: skip
    plan = api.estimate(**common, layout=layout, pipeline_split=flags)
    stages = [s.num_layers for s in plan.pipeline_stages]
    assert len(stages) == 128 and stages[0] == stages[-1] == 0 and sum(stages) == 126
    text = api.estimate(**common, layout=layout, pipeline_split="E|(t|)*126L")
    assert text.step_time_s == plan.step_time_s
    with pytest.raises(SpecError, match=r"pp x vpp \(128\) exceeds the 126 layers"):
        api.estimate(**common, layout=layout)


@given(
    counts=st.lists(st.integers(0, 4), min_size=1, max_size=40),
    mtp=st.integers(0, 2),
    where=st.integers(0, 39),
)
def test_an_exported_layout_parses_back_to_its_split(
    counts: list[int], mtp: int, where: int
) -> None:
    """What ``layout export`` writes for --pipeline-model-parallel-layout (runs of equal chunks
    as ``( ... |)*n`` groups) reads back, through the same rules Megatron-LM's parser applies,
    as the chunks it was written from: their decoder layers and the MTP chunk."""
    chunk = where % len(counts) if mtp else None
    text = pipeline_layout(counts, (mtp, chunk))
    stages = layout_stages(text)
    assert [s.count("t") for s in stages] == counts
    assert [i for i, s in enumerate(stages) if "m" in s] == ([chunk] if mtp else [])


def test_settings_that_do_not_combine() -> None:
    """The layout string stands alone; first/last do not combine with the accounting flags; an
    unknown setting is named."""
    common = {"pp": 2, "vpp": 1, "num_layers": 8, "mtp_layers": 0}
    with pytest.raises(SpecError, match="does not combine"):
        split_from_flags({"pipeline_model_parallel_layout": "Et*4|t*4L",
                          "decoder_first_pipeline_num_layers": 4}, **common)  # fmt: skip
    with pytest.raises(SpecError, match="Megatron-LM refuses both"):
        split_from_flags({"decoder_first_pipeline_num_layers": 3,
                          "account_for_loss_in_pipeline_split": True}, **common)  # fmt: skip
    with pytest.raises(SpecError, match="unknown pipeline split setting 'pipeline_layout'"):
        split_from_flags({"pipeline_layout": "Et*4|t*4L"}, **common)
    assert split_from_flags({"account_for_loss_in_pipeline_split": False}, **common) is None


def test_the_split_is_scored_as_given() -> None:
    """Llama 3.1 8B, pp 4 x vpp 2 on 16 H100s, 3 layers on the first chunk and 5 on the last:
    the plan is the cost model's score under exactly that split (method "given"), with the even
    split's step beside it, and its stages hold the given layers."""
    model, cluster = load_model("8B"), load_cluster("hgx_h100x16")
    workload = engine.resolve_workload(TrainWorkload(), "NVIDIA")
    layout = Layout(pp=4, vpp=2, dp=4)
    split = split_from_layout("Et*3|(t*4|)*6t*5L", pp=4, num_layers=32, mtp_layers=0)
    plan = engine.estimate(model, cluster, workload, layout, split=split)
    assert plan.pipeline_split is not None and plan.pipeline_split.method == "given"
    assert [s.num_layers for s in plan.pipeline_stages] == [3, 4, 4, 4, 4, 4, 4, 5]
    assert plan.step_time_s == score(model, cluster, workload, layout, split=split).step_time_s
    even = score(model, cluster, workload, layout).step_time_s
    assert plan.pipeline_split.even_step_time_s == even != plan.step_time_s
    with pytest.raises(SpecError, match="has 8 chunks, the layout pp x vpp = 4 x 1 = 4"):
        engine.estimate(model, cluster, workload, Layout(pp=4, dp=4), split=split)
    with pytest.raises(SpecError, match="holds 31 decoder layers"):
        engine.estimate(model, cluster, workload, layout,
                        split=PipelineSplit(chunk_layers=(3, 4, 4, 4, 4, 4, 4, 4)))  # fmt: skip


def test_the_api_takes_a_string_a_dict_or_a_split() -> None:
    """``api.estimate(pipeline_split=...)``: the three spellings give the same plan; anything
    else is one line."""
    common = {"model": "8B", "cluster": "hgx_h100x16", "layout": {"pp": 2}}
    text = api.estimate(**common, pipeline_split="Et*12|t*20L")
    flags = api.estimate(**common, pipeline_split={"decoder_first_pipeline_num_layers": 12})
    given = api.estimate(**common, pipeline_split=PipelineSplit(chunk_layers=(12, 20)))
    assert text.step_time_s == flags.step_time_s == given.step_time_s
    with pytest.raises(SpecError, match="pipeline_split 12: must be a PipelineSplit"):
        api.estimate(**common, pipeline_split=12)


def test_the_cli_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``layout estimate --pipeline-model-parallel-layout`` then ``layout export``: the Megatron
    arguments carry the same layout; uneven first/last ranks come back as Megatron's two
    flags."""
    plan_file = tmp_path / "plan.json"
    code, out, err = run_main(["estimate", "--model", "8B", "--cluster", "hgx_h100x16",
                               "--pp", "4", "--vpp", "2", "--pipeline-model-parallel-layout",
                               "Et*3|(t*4|)*6t*5L", "--json"])  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["pipeline_split"]["method"] == "given"
    plan_file.write_text(out)
    code, out, err = run_main(["export", "--format", "megatron", "--plan", str(plan_file)])
    assert code == 0, err
    assert "--pipeline-model-parallel-layout 'Et*3|(t*4|)*6t*5L'" in out
    code, out, err = run_main(["estimate", "--model", "70B", "--cluster", "hgx_h100x64",
                               "--tp", "4", "--pp", "4", "--recompute", "selective",
                               "--decoder-first-pipeline-num-layers", "18",
                               "--decoder-last-pipeline-num-layers", "18", "--json"])  # fmt: skip
    assert code == 0, err
    plan_file.write_text(out)
    code, out, err = run_main(["export", "--format", "megatron", "--plan", str(plan_file)])
    assert code == 0, err
    assert "--decoder-first-pipeline-num-layers 18" in out
    assert "--decoder-last-pipeline-num-layers 18" in out


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--mode", "serve"], "is a training flag: it does not apply to --mode serve"),
        (["--framework", "nanotron"], "places its pipeline layers itself"),
        (["--cluster-state", "examples/cluster_state.yaml"], "with a cluster state"),
        (["--vpp", "2"], "give --vpp 1"),
    ],
)
def test_the_cli_refuses_what_it_cannot_score(extra: list[str], words: str) -> None:
    """Serving, a framework that places its own layers, a cluster state and a vpp the string
    contradicts: exit 2 or 1 with one line, never a traceback."""
    cluster = "hgx_h100x128" if "--cluster-state" in extra else "hgx_h100x16"
    code, _, err = run_main(["estimate", "--model", "8B", "--cluster", cluster, "--pp", "2",
                               "--pipeline-model-parallel-layout", "Et*16|t*16L", *extra])  # fmt: skip
    assert code != 0 and words in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_block_count_recomputes_at_most_a_chunk() -> None:
    """``--recompute-num-layers N`` with a given split: Megatron-LM's block method recomputes
    the first min(N, layers) layers of each chunk, so chunks of 2, 14, 14 and 2 layers with N = 8
    recompute 2, 8, 8 and 2, and the plan is the one scored with those counts spelled out (it was
    scored as if every chunk held N: 14 of each rank's 16 layers instead of 10)."""
    common = {
        "model": "8B",
        "cluster": "hgx_h100x16",
        "layout": {"tp": 2, "pp": 2, "vpp": 2, "dp": 4, "mbs": 1, "recompute": "full"},
    }
    block = api.estimate(
        **common, pipeline_split="Et*2|t*14|t*14|t*2L", workload={"recompute_num_layers": 8}
    )
    spelled = api.estimate(
        **common,
        pipeline_split=PipelineSplit(chunk_layers=(2, 14, 14, 2), recompute_layers=(2, 8, 8, 2)),
    )
    every = api.estimate(
        **common, pipeline_split="Et*2|t*14|t*14|t*2L", workload={"recompute_num_layers": 14}
    )
    assert [s.recompute_layers for s in block.pipeline_stages] == [2, 8, 8, 2]
    assert block.step_time_s == pytest.approx(spelled.step_time_s, rel=1e-9)
    assert block.memory.peak_gib == pytest.approx(spelled.memory.peak_gib, rel=1e-9)
    assert block.step_time_s < every.step_time_s
    assert block.memory.peak_gib > every.memory.peak_gib
