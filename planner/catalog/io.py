"""Safe file loading: every failure becomes one SpecError line naming the file and the rule."""

from __future__ import annotations

import json
import re
import reprlib
import stat
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from planner.errors import SpecError

MAX_FILE_BYTES = 16 * 2**20
"""Largest catalog / config file the planner reads (16 MiB): anything larger is not a spec."""

MAX_ALIAS_EXPANSION = 10_000
"""Most YAML nodes that aliases (``*name``) may add to a document once expanded. The catalogs use
no aliases at all; a "billion laughs" file of 1 KB expands to 10^9 nodes and would take minutes
and gigabytes to validate or to print."""

MAX_YAML_NODES = 50_000
"""Most YAML nodes a file may hold: PyYAML's pure-Python parser takes ~50 us a node, so this
bounds a refusal to ~2 s there (a 1 MB list of 500,000 values took 25 s and 500 MB before);
libyaml composes the whole file in C first (a few us a node) and the count refuses it before
anything is built from it. tests/validation/heldout/mlperf.yaml, the largest file the planner
reads, has ~21,000."""

MAX_LIBYAML_CHARS = 2**20
"""Longest YAML text (characters) parsed with libyaml: it composes a whole file before the node
count can refuse it, so a hostile text of 2^20 characters (500,000 one-character values) takes
~2 s and ~140 MiB to refuse, about what the pure-Python loader takes to reach its 50,000-node
limit; a longer text goes to the pure-Python loader, whose count stops it at that limit however
long the text is. The largest catalog file (tests/validation/heldout/mlperf.yaml) is 0.6 MB."""

MAX_SHOWN_CHARS = 60
"""Longest rendering of a user's value in an error message."""

SpecT = TypeVar("SpecT", bound=BaseModel)

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 2, 4, 4, 4
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = MAX_SHOWN_CHARS, MAX_SHOWN_CHARS, 40


def short_repr(value: object) -> str:
    """A bounded ``repr`` of a user's value for an error message: nested containers, long
    strings and long numbers are elided, so the cost is bounded however large the value
    (``repr`` of an alias-expanded list would walk every element), and control characters are
    escaped as ``repr`` escapes them.

    >>> short_repr("a\\nb")
    "'a\\\\nb'"
    >>> short_repr(list(range(1000)))
    '[0, 1, 2, 3, ...]'
    >>> len(short_repr(10**400)) <= 60
    True
    """
    try:
        text = _SHORT.repr(value)
    except ValueError:  # an int past Python's 4,300-digit str() limit
        text = "<a number of more than 4,300 digits>"
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 3] + "..."


_CParser: type = yaml.cyaml.CParser if yaml.__with_libyaml__ else object  # type: ignore[attr-defined]
"""libyaml's parser and composer where PyYAML was built with it."""


class _StrictConstructor(yaml.constructor.SafeConstructor):
    """PyYAML's safe constructor that also refuses duplicate keys (PyYAML keeps the last one)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[object] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<:` would hide a duplicate
                    line = key_node.start_mark.line + 1
                    raise yaml.constructor.ConstructorError(
                        None, None, f"merge key '<<' (line {line}): write the keys out", None
                    )
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: the base class names it
                    break
                if duplicate:
                    line = key_node.start_mark.line + 1
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {short_repr(key)} (line {line})", None
                    )
        return super().construct_mapping(node, deep=deep)


class _StrictResolver(yaml.resolver.Resolver):
    """The plain scalars YAML 1.2's core schema resolves, and nothing else (below)."""


class _StrictLoader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _StrictConstructor,
    _StrictResolver,
):
    """The pure-Python strict loader: PyYAML's safe loader with the strict constructor and
    resolver, refusing more than :data:`MAX_YAML_NODES` values as it composes them and aliases
    that expand past :data:`MAX_ALIAS_EXPANSION` nodes. Used where PyYAML has no libyaml."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _StrictConstructor.__init__(self)
        _StrictResolver.__init__(self)
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            raise _too_many_values()
        return super().compose_node(parent, index)

    def compose_document(self) -> Any:
        node = super().compose_document()
        _check_alias_expansion(node)
        return node


class _CStrictLoader(_CParser, _StrictConstructor, _StrictResolver):  # type: ignore[misc]
    """The same rules on libyaml's parser, which scans and composes ~10x faster than PyYAML's
    Python one (the catalog files a search loads took a fifth of its time): the node tree
    composed in C is counted and its aliases sized before anything is constructed from it. The
    one difference found: libyaml takes a tab after a key's colon as the separating space
    (``a:<TAB>1`` is ``{a: 1}``, as YAML 1.2 allows), where PyYAML's scanner refuses the tab."""

    def __init__(self, stream: str) -> None:
        _CParser.__init__(self, stream)
        _StrictConstructor.__init__(self)
        _StrictResolver.__init__(self)

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            if _count_nodes(node) > MAX_YAML_NODES:
                raise _too_many_values()
            _check_alias_expansion(node)
        return node


def _too_many_values() -> yaml.YAMLError:
    return yaml.YAMLError(
        f"more than {MAX_YAML_NODES:,} values: too large to be a spec (the longest "
        "catalog file has about 21,000)"
    )


def _count_nodes(root: Any) -> int:
    """Nodes of a composed document, each once however many aliases name it (the pure-Python
    loader counts each alias as well; aliases are bounded apart, by MAX_ALIAS_EXPANSION);
    iterative, so any depth."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if len(seen) > MAX_YAML_NODES:
            break
        stack.extend(_children(node))
    return len(seen)


# The plain scalars YAML 1.2's core schema resolves, and nothing else. PyYAML follows YAML 1.1,
# which also reads `yes`/`no`/`on`/`off` as booleans (`family: no` is False), `017` as octal 15,
# `1:00:00` as the base-60 number 3600, `1_000` as 1000 and `2025-01-01` as a date, while it reads
# `1e-3` (no dot) as text. Here those are text, so a spec's strict number or boolean field
# refuses them by name instead of taking a number the author may not have meant; `1e-3` is a
# number, as in YAML 1.2 and JSON.
_CORE_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_CORE_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$")
_CORE_FLOAT = re.compile(
    r"^(?:[-+]?(?:(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_CORE_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_StrictResolver.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("bool", _CORE_BOOL, "tTfF"),
    ("int", _CORE_INT, "-+0123456789"),
    ("float", _CORE_FLOAT, "-+0123456789."),
    ("null", _CORE_NULL, ["~", "n", "N", ""]),
    ("merge", re.compile(r"^<<$"), ["<"]),  # resolved to be refused by name (construct_mapping)
):
    _StrictResolver.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", _pattern, list(_first))


def _core_number(loader: _StrictConstructor, node: Any) -> Any:
    """An int or float scalar (an explicit ``!!int`` / ``!!float`` too) in YAML 1.2's core
    form: ``!!int 017`` or ``!!int 1:00:00`` is an error, not 15 or 3600."""
    text = loader.construct_scalar(node)
    kind = node.tag.rsplit(":", 1)[-1]
    patterns = (_CORE_INT,) if kind == "int" else (_CORE_FLOAT, _CORE_INT)
    if not isinstance(text, str) or not any(p.match(text) for p in patterns):
        line = node.start_mark.line + 1
        raise yaml.constructor.ConstructorError(
            None, None, f"{short_repr(text)} (line {line}) is not a plain decimal {kind}: "
            "write it with the digits 0-9 (no octal, base 60 or '_')", None
        )  # fmt: skip
    if kind == "int":
        return int(text)
    return yaml.SafeLoader.construct_yaml_float(loader, node)


def _refused_tag(loader: _StrictConstructor, node: Any) -> Any:
    """A YAML 1.1 type a spec never holds (``!!binary``, ``!!timestamp``, ``!!set``, ...)."""
    line = node.start_mark.line + 1
    raise yaml.constructor.ConstructorError(
        None, None, f"tag {node.tag.replace('tag:yaml.org,2002:', '!!')} (line {line}) is not "
        "allowed in a spec: write a number, text, true/false, a list or a mapping", None
    )  # fmt: skip


_StrictConstructor.add_constructor("tag:yaml.org,2002:int", _core_number)
_StrictConstructor.add_constructor("tag:yaml.org,2002:float", _core_number)
for _tag in ("binary", "timestamp", "omap", "pairs", "set"):
    _StrictConstructor.add_constructor(f"tag:yaml.org,2002:{_tag}", _refused_tag)


def _check_alias_expansion(root: Any) -> None:
    """Refuse a document whose aliases add more than MAX_ALIAS_EXPANSION nodes when expanded.

    A node reached a second time is an alias; its expanded size (memoised, so a shared
    sub-tree is sized once) is what the alias adds. The walk is iterative, and a cycle (a node
    that contains an alias of itself) counts as unbounded."""
    sizes: dict[int, int] = {}
    added = 0
    seen: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)] if root is not None else []
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            sizes[key] = 1 + sum(sizes.get(id(c), MAX_ALIAS_EXPANSION + 1) for c in children)
            continue
        if key in seen:  # an alias of a node already walked (or being walked: a cycle)
            added += sizes.get(key, MAX_ALIAS_EXPANSION + 1)
            if added > MAX_ALIAS_EXPANSION:
                raise yaml.YAMLError(
                    f"aliases expand to more than {MAX_ALIAS_EXPANSION:,} nodes (an alias "
                    "bomb?); write the values out"
                )
            continue
        seen.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(children))


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` hook: a key given twice in one object is an error (JSON keeps the last)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {short_repr(key)}")
        out[key] = value
    return out


def parse_json(text: str, where: str) -> Any:
    """JSON text, refusing duplicate keys, numbers past Python's 4,300-digit limit, NaN and
    Infinity literals (not JSON) and nesting too deep to be a spec; one SpecError line."""
    try:
        return json.loads(text, object_pairs_hook=no_duplicate_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise SpecError(f"cannot parse {where}: {exc}") from None
    except RecursionError:
        raise SpecError(f"cannot parse {where}: nested too deeply to be a spec") from None
    except ValueError as exc:  # a duplicate key, a constant, or int() past 4,300 digits
        raise SpecError(f"cannot parse {where}: {describe_value_error(exc)}") from None


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def describe_value_error(exc: ValueError) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "digits" in text and ("int" in text or "Exceeds" in text):
        return "a number has more than 4,300 digits"
    return text


def path_exists(path: Path) -> bool:
    """Whether ``path`` names something, False (not an OSError) for a name too long to exist
    or a NUL byte in it."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def path_is_dir(path: Path) -> bool:
    """Whether ``path`` is a directory, False (not an OSError) for a name too long to exist or
    a NUL byte in it."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def read_text(path: Path) -> str:
    """Read a small UTF-8 text file, refusing directories, huge files and non-UTF-8 bytes."""
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise SpecError(f"file '{path}' does not exist") from None
    except OSError as exc:  # a name too long, a loop of links, no permission
        raise SpecError(f"cannot read '{path}': {exc.strerror}") from None
    except ValueError:  # a NUL byte in the path
        raise SpecError(f"cannot read {str(path)!r}: a file name cannot hold a NUL byte") from None
    if stat.S_ISDIR(info.st_mode):
        raise SpecError(f"'{path}' is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):  # a FIFO or device would block or never end
        raise SpecError(f"'{path}' is not a regular file")
    size = info.st_size
    if size == 0:  # empty, or a /proc file whose read may block for ever (/proc/kmsg)
        raise SpecError(f"file '{path}' is empty")
    if size > MAX_FILE_BYTES:
        raise SpecError(f"file '{path}' is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"file '{path}' is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise SpecError(f"cannot read '{path}': {exc.strerror}") from None
    if not text.strip():
        raise SpecError(f"file '{path}' is empty")
    return text


STDIN_NAME = "-"
"""The file name that means standard input (``layout search --json | layout export --plan -``)."""


def read_stdin_text(what: str) -> str:
    """Read a small UTF-8 text from standard input, with :func:`read_text`'s limits: refusing a
    terminal (nothing was piped in, and the read would wait for typing), more than
    :data:`MAX_FILE_BYTES`, non-UTF-8 bytes and nothing at all. ``what`` names it in errors."""
    import sys

    stream = sys.stdin
    if stream is None or stream.closed:
        raise SpecError(f"{what} '-' reads standard input, but there is none")
    if stream.isatty():
        raise SpecError(
            f"{what} '-' reads standard input, but it is a terminal: pipe it in "
            f"(layout search --json ... | layout export {what} - ...)"
        )
    try:
        data = stream.buffer.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"cannot read standard input: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(f"standard input is over {MAX_FILE_BYTES:,} bytes, the limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"standard input is not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise SpecError(f"{what} '-': standard input is empty")
    return text


def _parse(path: Path) -> object:
    """Parse a YAML (safe loader only) or JSON file; every failure is one SpecError line."""
    text = read_text(path)
    if path.suffix.lower() == ".json":
        return parse_json(text, f"'{path}'")
    return parse_yaml(text, f"'{path}'")


_LIBYAML_TOO_DEEP = "maximum nesting depth"
"""What libyaml's error says when a document nests past its own limit (1,000 levels)."""


def parse_yaml(text: str, where: str) -> object:
    """YAML text through the safe loader, refusing duplicate keys, alias bombs, numbers past
    Python's 4,300-digit limit and nesting too deep to be a spec; one SpecError line."""
    loader: _StrictConstructor | None = None
    try:  # the pure-Python reader refuses control characters as it is built
        fast = len(text) <= MAX_LIBYAML_CHARS and _libyaml_bounds_nesting()
        loader = _CStrictLoader(text) if fast else _StrictLoader(text)
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        if _LIBYAML_TOO_DEEP in str(exc):
            raise SpecError(f"cannot parse {where}: nested too deeply to be a spec") from None
        lines = str(exc).splitlines()
        detail = next((line for line in lines if "duplicate key" in line), None)
        first = detail or (lines[0] if lines else type(exc).__name__)
        raise SpecError(f"cannot parse {where}: {first.strip()}") from None
    except RecursionError:
        raise SpecError(f"cannot parse {where}: nested too deeply to be a spec") from None
    except ValueError as exc:  # int() of a number past 4,300 digits
        raise SpecError(f"cannot parse {where}: {describe_value_error(exc)}") from None
    finally:
        if loader is not None:
            loader.dispose()  # type: ignore[attr-defined]


@cache
def _libyaml_bounds_nesting() -> bool:
    """Whether PyYAML has libyaml, and one that refuses deep nesting itself (0.2.5 and later:
    its composer recurses in C, where an unbounded depth would overflow the stack rather than
    raise); else the pure-Python loader, whose recursion Python bounds."""
    if not yaml.__with_libyaml__:
        return False
    try:
        yaml.load("[" * 5_000 + "]" * 5_000, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as exc:
        return _LIBYAML_TOO_DEEP in str(exc)
    return False


def load_mapping(path: Path) -> dict[str, object]:
    """Parse a YAML or JSON file whose top level must be a mapping."""
    data = _parse(path)
    if not isinstance(data, dict):
        raise SpecError(f"'{path}' must hold a mapping at the top level, got {type(data).__name__}")
    return data


def load_list(path: Path) -> list[object]:
    """Parse a YAML or JSON file whose top level must be a list (of rows)."""
    data = _parse(path)
    if not isinstance(data, list):
        raise SpecError(f"'{path}' must hold a list of rows, got {type(data).__name__}")
    return data


def validate_spec(spec_type: type[SpecT], data: object, *, where: str) -> SpecT:
    """Validate ``data`` as ``spec_type``; a ValidationError becomes one SpecError line."""
    try:
        return spec_type.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{where}: {describe_validation_error(exc)}") from None


def describe_validation_error(exc: ValidationError) -> str:
    """The first pydantic error as 'key.path: message (got value)', plus a count of the rest."""
    errors = exc.errors()
    first = errors[0]
    loc = ".".join(str(p) for p in first["loc"])
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    elif first["type"] == "value_error":  # our own validators' messages name field and value
        msg = msg.removeprefix("Value error, ")
    text = f"{loc}: {msg}" if loc else msg
    shown = bool(loc) and first["type"] not in ("missing", "extra_forbidden")
    if "input" in first and shown:
        text += f" (got {short_repr(first['input'])})"
    if len(errors) > 1:
        text += f" (+{len(errors) - 1} more)"
    return text
