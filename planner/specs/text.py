"""One-line printable text: the types of every name and free-text field read from a user file.

A model, cluster or hardware YAML (or a Hugging Face ``config.json``, or a saved plan) is written
by the user, and its strings end up in shell exports, Markdown, HTML and the terminal. A newline
there forges a line (``# plan: x`` then ``touch /tmp/PWNED``), an ESC byte drives the terminal,
a bidi override reorders what the reader sees. So these fields are refused at load unless they
are one line of printable text (:meth:`str.isprintable`: no C0/C1 control characters, no
line or paragraph separators, no format characters such as bidi overrides or zero-width
spaces, no unassigned code points) of bounded length; names (:data:`Name`) are further kept
to letters, digits and :data:`NAME_PUNCTUATION`, so no shell or markup character is in them.
The output side quotes them again (:mod:`planner.report.quote`) in case a spec was built
without validation.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated

from pydantic import AfterValidator

from planner.errors import escape_char, printable

__all__ = ["escape_char", "printable"]

MAX_NAME_CHARS = 128
"""Longest name or label (catalog names are under 30 characters)."""
MAX_TEXT_CHARS = 4000
"""Longest free-text field (``source``, ``description``; the longest catalog source is ~1,500)."""
NAME_PUNCTUATION = " ._-+:/@,()="
"""The characters besides letters and digits a name may hold (``llama3.1-8b``, ``hgx_h100x8``,
``org/model``, ``my cluster (lab 2)``)."""


_UNNAMED = {
    "Cc": "a control character",
    "Cs": "a surrogate",
    "Co": "private use",
    "Cn": "unassigned",
}
"""How :func:`_describe` calls a character category whose members have no Unicode name."""
_CONTROL_NAMES = {"\t": "TAB", "\n": "LINE FEED", "\r": "CARRIAGE RETURN", "\x1b": "ESCAPE"}
"""Names of the control characters a hostile name most often holds (Unicode names none)."""


def _describe(char: str) -> str:
    """A character named without writing it.

    >>> _describe("\\x1b"), _describe("\\x07"), _describe("\\u202e")
    ('U+001B (ESCAPE)', 'U+0007 (a control character)', 'U+202E (RIGHT-TO-LEFT OVERRIDE)')
    """
    name = (
        unicodedata.name(char, "")
        or _CONTROL_NAMES.get(char, "")
        or _UNNAMED.get(unicodedata.category(char), "")
    )
    return f"U+{ord(char):04X} ({name})" if name else f"U+{ord(char):04X}"


def check_line(value: str, *, max_chars: int) -> str:
    """``value`` if it is one printable line of at most ``max_chars`` characters, else
    ValueError naming the rule and the first offending character (escaped, never raw).

    >>> check_line("llama3.1-8b", max_chars=128)
    'llama3.1-8b'
    """
    if len(value) > max_chars:
        raise ValueError(f"must be at most {max_chars:,} characters, got {len(value):,}")
    if not value.isprintable():
        i, char = next((i, c) for i, c in enumerate(value) if not c.isprintable())
        raise ValueError(
            "must be one line of printable text (no control, line-break or bidi characters): "
            f"{_describe(char)} at position {i}"
        )
    return value


def is_name_char(char: str) -> bool:
    """Whether a name may hold ``char``: a letter, a digit or one of NAME_PUNCTUATION.

    >>> is_name_char("a"), is_name_char("_"), is_name_char("$"), is_name_char("\\n")
    (True, True, False, False)
    """
    return char in NAME_PUNCTUATION or (char.isalnum() and char.isprintable())


def check_name(value: str) -> str:
    """A name: one printable line of 1 to MAX_NAME_CHARS letters, digits and NAME_PUNCTUATION,
    not blank, not starting with ``-`` (a name becomes a command-line argument, where it would
    read as a flag). Shell and markup characters (``$ ` ' " ; & | < > * # [ ]`` ...) have no
    place in a catalog name, so they are refused here rather than trusted to each output's
    quoting.

    >>> check_name("hgx_h100x8")
    'hgx_h100x8'
    """
    check_line(value, max_chars=MAX_NAME_CHARS)
    if not value.strip():
        raise ValueError("must not be empty or blank")
    bad = next((i for i, c in enumerate(value) if not is_name_char(c)), None)
    if bad is not None:
        raise ValueError(
            f"may hold only letters, digits, spaces and {' '.join(NAME_PUNCTUATION.strip())}: "
            f"{value[bad]!r} at position {bad} is not allowed"
        )
    if value.startswith("-"):
        raise ValueError("must not start with '-' (it would read as a command-line flag)")
    return value


def check_label(value: str) -> str:
    """A short label that may be empty (a model's ``family``): one printable line of at most
    MAX_NAME_CHARS characters."""
    return check_line(value, max_chars=MAX_NAME_CHARS)


def check_text(value: str) -> str:
    """Free text (``source``, ``description``): one printable line of at most MAX_TEXT_CHARS."""
    return check_line(value, max_chars=MAX_TEXT_CHARS)


HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
"""A Hugging Face hub repository id: ``owner/name``, each part letters, digits, ``.``, ``_``
and ``-`` (the hub's own rule for repository names), at most 96 characters each."""


def check_hub_id(value: str) -> str:
    """A Hugging Face hub id (``meta-llama/Llama-3.1-8B``): :data:`HUB_ID`.

    >>> check_hub_id("meta-llama/Llama-3.1-8B")
    'meta-llama/Llama-3.1-8B'
    """
    if not HUB_ID.fullmatch(value):
        raise ValueError(
            "must be a Hugging Face hub id, owner/name (letters, digits, '.', '_', '-'), "
            f"got {printable(value[:120])}"
        )
    return value


Name = Annotated[str, AfterValidator(check_name)]
"""A catalog or display name read from a user file (model, cluster, system, accelerator)."""
Label = Annotated[str, AfterValidator(check_label)]
"""A short label read from a user file that may be empty (family, vendor, versions, dates)."""
Text = Annotated[str, AfterValidator(check_text)]
"""Free text read from a user file (sources, descriptions, methods): one printable line."""
HubId = Annotated[str, AfterValidator(check_hub_id)]
"""A Hugging Face hub id read from a model YAML (``hub_id``)."""
