"""``layout schema``: the JSON Schema generated from the pydantic models is pinned by the committed
copy (docs/schema/layout.schema.json, rewritten by ``pytest --update-golden``), and every JSON the
CLI prints validates against it (jsonschema, from the dev extra)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from planner.cli import SCHEMA_KINDS
from planner.report.schema import OUTPUTS, json_schema, schema_text
from tests.test_cli import run_main

jsonschema = pytest.importorskip("jsonschema")

COMMITTED = Path(__file__).resolve().parent.parent / "docs" / "schema" / "layout.schema.json"


@pytest.fixture(scope="module")
def validator() -> object:
    return jsonschema.Draft202012Validator(json_schema())


def _errors(validator: object, data: object) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(data)]  # type: ignore[attr-defined]


def test_committed_schema_is_current(golden: Callable[[Path, str], None]) -> None:
    """Change the JSON shapes only additively (DESIGN.md section 8), then --update-golden."""
    golden(COMMITTED, schema_text())


def test_schema_is_a_valid_json_schema() -> None:
    for kind in ("all", "plan"):
        jsonschema.Draft202012Validator.check_schema(json_schema(kind))


def test_cli_prints_the_schema_and_its_kinds_match() -> None:
    assert ("all", *OUTPUTS) == SCHEMA_KINDS
    code, out, _ = run_main(["schema"])
    assert code == 0 and out == schema_text()
    code, out, _ = run_main(["schema", "--kind", "plan"])
    assert json.loads(out)["$ref"] == "#/$defs/Plan"


def test_every_output_has_a_schema_version_pinned_to_its_major() -> None:
    schema = json_schema()
    for model in OUTPUTS.values():
        prop = schema["$defs"][model.__name__]["properties"]["schema_version"]
        assert prop["pattern"].startswith(
            "^" + str(model.model_fields["schema_version"].default)[0]
        )


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SERVE_8B = ["--mode", "serve", "--model", "8B", "--cluster", "hgx_h100x8"]
CLI_JSON = {
    "search": ["search", "--model", "70B", "--cluster", "hgx_b200x16", "--json"],
    "plan": ["estimate", "--model", "70B", "--cluster", "hgx_b200x16", "--tp", "8", "--pp", "2", "--json"],
    "serve-search": ["search", *SERVE_8B, "--json"],
    "serve-plan": ["estimate", *SERVE_8B, "--tp", "2", "--json"],
    "migrate": ["migrate", "--model", "8B", "--from", "hgx_h100x8", "--to", "hgx_b200x8", "--json"],
    "whatif": ["whatif", "--model", "8B", "--cluster", "hgx_h100x8", "--vary", "nic_gbps=200,400", "--json"],
    "validate": ["validate", "--rows", "S1", "--json"],
    "validate-serving": ["validate", "--serving", "--json"],
    "export": ["export", "--format", "megatron", "--model", "8B", "--cluster", "hgx_h100x8", "--json"],
    "pack": ["pack", "--cluster", "hgx_h100x128", "--job", str(EXAMPLES / "fleet" / "finetune.yaml"),
             "--job", str(EXAMPLES / "fleet" / "chat.yaml"), "--json"],
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(CLI_JSON))
def test_cli_json_validates(kind: str, validator: object) -> None:
    code, out, err = run_main(CLI_JSON[kind])
    assert code == 0, err
    data = json.loads(out)
    assert _errors(validator, data) == []
    own = jsonschema.Draft202012Validator(json_schema(kind))  # type: ignore[arg-type]
    assert list(own.iter_errors(data)) == []
    assert data["schema_version"].split(".")[0] == "1"


def test_placement_lines_validate(tmp_path: Path, validator: object) -> None:
    target = tmp_path / "ranks.jsonl"
    argv = ["estimate", "--model", "70B", "--cluster", "hgx_b200x16", "--tp", "8", "--pp", "2"]
    code, _, err = run_main([*argv, "--placement", str(target)])
    assert code == 0, err
    lines = target.read_text().splitlines()
    assert len(lines) == 16
    for line in lines:
        assert _errors(validator, json.loads(line)) == []


def test_schema_rejects_a_wrong_shape_or_a_new_major(validator: object) -> None:
    _, out, _ = run_main(CLI_JSON["plan"])
    plan = json.loads(out)
    assert _errors(validator, {**plan, "unknown_key": 1})
    assert _errors(validator, {**plan, "schema_version": "2.0"})
    assert _errors(validator, {**plan, "step_time_s": "fast"})


def test_field_docstrings_become_descriptions_at_schema_time() -> None:
    """Descriptions come from the attribute docstrings, read when a schema is made (not at
    import); an inherited field keeps its parent's, an explicit ``description`` wins."""
    from pydantic import Field

    from planner.report.schema import field_docstrings
    from planner.specs.base import FrozenSpec

    class Parent(FrozenSpec):
        size_bytes: int = 0
        """Bytes held."""
        named: str = Field("", description="stated")
        """Not used: the Field's description wins."""

    class Child(Parent):
        count: int = 1
        """How many."""

    assert Parent.model_fields["size_bytes"].description is None  # nothing read at import
    assert field_docstrings(Child) == {
        "size_bytes": "Bytes held.",
        "named": "Not used: the Field's description wins.",
        "count": "How many.",
    }
    plan = json_schema("plan")["$defs"]["Plan"]["properties"]
    assert plan["tokens_per_s_per_gpu"]["description"]
