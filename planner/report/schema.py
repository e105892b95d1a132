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

import ast
import inspect
import json
import sys
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, models_json_schema
from pydantic_core import core_schema

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


@cache
def _module_docstrings(module_name: str) -> dict[str, dict[str, str]]:
    """Class qualname -> {attribute: its docstring} for every class in a module's source: the
    string literal right after an annotated assignment (PEP 257's attribute docstrings, the
    convention pydantic's ``use_attribute_docstrings`` reads)."""
    module = sys.modules.get(module_name)
    try:
        tree = ast.parse(inspect.getsource(module)) if module else None
    except (OSError, TypeError):
        tree = None
    found: dict[str, dict[str, str]] = {}
    if tree is None:
        return found

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(node.body, f"{prefix}{node.name}.<locals>.")
            if not isinstance(node, ast.ClassDef):
                continue
            qualname = f"{prefix}{node.name}"
            attrs: dict[str, str] = {}
            for before, after in zip(node.body, node.body[1:], strict=False):
                if (
                    isinstance(before, ast.AnnAssign)
                    and isinstance(before.target, ast.Name)
                    and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                ):
                    attrs[before.target.id] = inspect.cleandoc(after.value.value)
            found[qualname] = attrs
            visit(node.body, f"{qualname}.")

    visit(tree.body, "")
    return found


def field_docstrings(cls: type[BaseModel]) -> dict[str, str]:
    """Field name -> docstring of ``cls``'s fields, each read in the class of its MRO that
    declares it (an inherited field keeps its parent's docstring; a redeclared one needs its
    own)."""
    out: dict[str, str] = {}
    for name in cls.model_fields:
        for klass in cls.__mro__:
            if name in inspect.get_annotations(klass):
                doc = _module_docstrings(klass.__module__).get(klass.__qualname__, {}).get(name)
                if doc is not None:
                    out[name] = doc
                break
    return out


class _DocstringSchema(GenerateJsonSchema):
    """Pydantic's JSON Schema, with each field's docstring as its description where the field
    states none (what ``use_attribute_docstrings`` would give, read only when a schema is made)."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        cls = schema["cls"]
        properties = json_schema.get("properties", {})
        for name, doc in field_docstrings(cls).items():
            info = cls.model_fields[name]
            key = info.serialization_alias or info.alias or name
            prop = properties.get(key)
            if prop is not None and info.description is None:
                prop.setdefault("description", doc)
        return json_schema


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
        schema_generator=_DocstringSchema,
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
