"""The strict YAML loader on libyaml and its pure-Python twin read every catalog file alike and
refuse the same hostile inputs with the same words (planner/catalog/io.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.catalog import io
from planner.catalog.io import MAX_YAML_NODES, parse_yaml
from planner.errors import SpecError

ROOT = Path(__file__).resolve().parents[1]
CATALOG_FILES = sorted(
    path
    for folder in ("models", "topologies", "tests/validation")
    for path in (ROOT / folder).rglob("*.yaml")
)

needs_libyaml = pytest.mark.skipif(
    not io._libyaml_bounds_nesting(), reason="PyYAML without a nesting-bounded libyaml"
)


@needs_libyaml
@pytest.mark.parametrize("path", CATALOG_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_both_loaders_read_every_catalog_file_alike(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    fast = io._CStrictLoader(text).get_single_data()
    slow = io._StrictLoader(text).get_single_data()
    assert repr(fast) == repr(slow)


HOSTILE = {
    "duplicate key": "a: 1\na: 2\n",
    "merge key": "<<: {a: 1}\n",
    "not a plain decimal int": "a: !!int 017\n",
    "is not allowed in a spec": "a: !!timestamp 2025-01-01\n",
    "python/object/apply": 'a: !!python/object/apply:os.system ["true"]\n',
    f"more than {MAX_YAML_NODES:,} values": "a: ["
    + ",".join(["1"] * (MAX_YAML_NODES + 10))
    + "]\n",
    "an alias bomb": "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
    + "".join(
        f"{k}: &{k} [{', '.join([f'*{p}'] * 10)}]\n" for p, k in zip("abcd", "bcde", strict=True)
    ),
    "nested too deeply": "a: " + "[" * 50_000 + "]" * 50_000 + "\n",
    "unacceptable character": "a: b\x07c\n",
}
"""Words of the refusal, by the input refused."""


@pytest.mark.parametrize("fast", [True, False], ids=["libyaml", "python"])
@pytest.mark.parametrize("words", list(HOSTILE), ids=list(HOSTILE))
def test_both_loaders_refuse_the_same_inputs(
    words: str, fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if fast and not io._libyaml_bounds_nesting():
        pytest.skip("PyYAML without a nesting-bounded libyaml")
    monkeypatch.setattr(io, "_libyaml_bounds_nesting", lambda: fast)
    with pytest.raises(SpecError, match=r"cannot parse 'x\.yaml'") as caught:
        parse_yaml(HOSTILE[words], "'x.yaml'")
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_yaml_1_2_core_scalars_on_both_loaders(monkeypatch: pytest.MonkeyPatch) -> None:
    """`no` and `1_000` stay text, `1e-3` is a number, on either loader."""
    text = "a: no\nb: 1_000\nc: 1e-3\nd: true\ne: 017x\n"
    expected = {"a": "no", "b": "1_000", "c": 0.001, "d": True, "e": "017x"}
    for fast in (True, False):
        if fast and not yaml.__with_libyaml__:
            continue
        monkeypatch.setattr(io, "_libyaml_bounds_nesting", lambda fast=fast: fast)
        assert parse_yaml(text, "'x.yaml'") == expected


def test_a_text_past_the_libyaml_limit_goes_to_the_loader_that_stops_early(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """libyaml composes a whole file before it can be counted, so a text past
    MAX_LIBYAML_CHARS is read by the pure-Python loader, which stops at MAX_YAML_NODES."""

    def refuse(text: str) -> None:
        raise AssertionError("libyaml was given a text past its limit")

    monkeypatch.setattr(io, "_CStrictLoader", refuse)
    text = "a: [" + ",".join(["1"] * (io.MAX_LIBYAML_CHARS // 2 + 10)) + "]\n"
    with pytest.raises(SpecError, match=f"more than {MAX_YAML_NODES:,} values"):
        parse_yaml(text, "'x.yaml'")


@needs_libyaml
def test_the_one_known_difference_is_a_tab_as_separation(monkeypatch: pytest.MonkeyPatch) -> None:
    """libyaml reads a tab after a key's colon as separation space, PyYAML's scanner refuses it;
    either way the value is never read as anything but what the author wrote."""
    monkeypatch.setattr(io, "_libyaml_bounds_nesting", lambda: True)
    assert parse_yaml("a:\t1\n", "'x.yaml'") == {"a": 1}
    monkeypatch.setattr(io, "_libyaml_bounds_nesting", lambda: False)
    with pytest.raises(SpecError, match="cannot parse"):
        parse_yaml("a:\t1\n", "'x.yaml'")
