"""The JSON Schema of everything ``layout`` prints as JSON (``layout schema``).

Generated from the pydantic models, in serialization mode (the shape ``--json`` prints):
``SearchResult`` (search), ``Plan`` (estimate), ``ServeSearchResult`` / ``ServePlan`` (search /
estimate ``--mode serve``), ``MigrateResult`` (migrate), ``WhatIfResult`` (whatif),
``ValidationReport`` / ``ServingValidationReport`` (validate), ``ExportResult`` (export --json)
``PlacementRecord`` (each line of a ``--placement`` JSON-lines file) and ``PackResult``
(``pack``). Each has a
``schema_version`` major.minor; the schema accepts any minor of the current major, since minor
bumps only add fields.
``docs/schema/layout.schema.json`` is the committed copy, pinned by a golden test.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from planner.accuracy.run import ValidationReport
from planner.accuracy.serving import ServingValidationReport
from planner.report.export.job import ExportResult
from planner.report.placement_file import PlacementRecord
from planner.specs.fleet import PackResult
from planner.specs.result import Plan, SearchResult, ServePlan, ServeSearchResult
from planner.specs.scenarios import MigrateResult, WhatIfResult

SchemaKind = Literal[
    "all",
    "search",
    "plan",
    "serve-search",
    "serve-plan",
    "migrate",
    "whatif",
    "validate",
    "validate-serving",
    "export",
    "placement",
    "pack",
]

OUTPUTS: dict[str, type[BaseModel]] = {
    "search": SearchResult,
    "plan": Plan,
    "serve-search": ServeSearchResult,
    "serve-plan": ServePlan,
    "migrate": MigrateResult,
    "whatif": WhatIfResult,
    "validate": ValidationReport,
    "validate-serving": ServingValidationReport,
    "export": ExportResult,
    "placement": PlacementRecord,
    "pack": PackResult,
}
"""Schema kind -> the model of that JSON output."""

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _current_version(model: type[BaseModel]) -> str:
    return str(model.model_fields["schema_version"].default)


def _pin_major(definition: dict[str, Any], version: str) -> None:
    """Accept any minor version of ``version``'s major in ``schema_version``."""
    prop = definition.get("properties", {}).get("schema_version")
    if prop is not None:
        major = version.split(".")[0]
        prop["pattern"] = rf"^{major}\.[0-9]+$"


def json_schema(kind: SchemaKind = "all") -> dict[str, Any]:
    """The JSON Schema of one output (``kind``) or of all (``oneOf``), with every model under
    ``$defs``.

    >>> schema = json_schema()
    >>> sorted(ref["$ref"] for ref in schema["oneOf"])[0]
    '#/$defs/ExportResult'
    """
    _, top = models_json_schema(
        [(model, "serialization") for model in OUTPUTS.values()],
        ref_template="#/$defs/{model}",
    )
    definitions: dict[str, Any] = top["$defs"]
    for model in OUTPUTS.values():
        _pin_major(definitions[model.__name__], _current_version(model))
    versions = ", ".join(f"{k} {_current_version(m)}" for k, m in OUTPUTS.items())
    schema: dict[str, Any] = {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": f"layout JSON output ({kind})",
        "description": f"Generated from the planner's pydantic models; schema_version: {versions}.",
    }
    refs = [{"$ref": f"#/$defs/{OUTPUTS[k].__name__}"} for k in OUTPUTS if kind in ("all", k)]
    if kind == "all":
        schema["oneOf"] = refs
    else:
        schema.update(refs[0])
    schema["$defs"] = dict(sorted(definitions.items()))
    return schema


def schema_text(kind: SchemaKind = "all") -> str:
    """:func:`json_schema` as indented JSON with a final newline (what ``layout schema`` prints)."""
    return json.dumps(json_schema(kind), indent=2, sort_keys=False) + "\n"
