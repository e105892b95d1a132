"""Quote user-supplied text for the format it is written into: pure functions, string in, string
out, each safe on any input (including a spec built without validation).

Names, sources and descriptions come from user files and are refused at load unless they are one
printable line (:mod:`planner.specs.text`). These helpers are the second wall: every report and
export passes such strings through the quoting of its format, so that a name can neither add a
line (a shell command after ``# plan: x``, a Markdown heading, a forged ``step:`` line), nor
run (``$(...)``, backticks), nor drive the terminal (ESC/OSC sequences), nor open HTML markup.
Printable text comes out unchanged, so reports of catalog names read as before.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Iterable

from planner.specs.text import printable

__all__ = [
    "comment_text",
    "html_text",
    "markdown_cell",
    "markdown_text",
    "printable",
    "shell_command",
    "shell_word",
    "terminal_lines",
    "terminal_text",
    "toml_string",
]


def terminal_text(text: str) -> str:
    """One terminal line: C0/C1 controls (ESC included), line breaks and bidi/format characters
    become visible escapes, so the text can neither start a new line nor an escape sequence.

    >>> terminal_text("x\\x1b]0;title\\x07\\nstep : 1 s")
    'x\\\\x1b]0;title\\\\x07\\\\nstep : 1 s'
    """
    return printable(text)


def terminal_lines(lines: Iterable[str], width: int | None = None) -> str:
    """The lines of a text report joined by newlines, each made one terminal line first: one
    output line per intended line, and no escape byte anywhere. With ``width``, a longer line
    is then broken between words into indented continuation lines (planner.report.width), so
    no continuation can start with a label."""
    quoted = [terminal_text(line) for line in lines]
    if width is not None:
        from planner.report.width import wrap_all

        quoted = wrap_all(quoted, width)
    return "\n".join(quoted)


def comment_text(text: str) -> str:
    """The body of a ``#`` comment line (shell, TOML, hostfile): a comment ends at the first line
    break, so every line break or other control character becomes a visible escape.

    >>> comment_text("x\\ntouch /tmp/PWNED")
    'x\\\\ntouch /tmp/PWNED'
    """
    return printable(text)


_ANSI_C_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\x1b": "\\e"}


def _ansi_c_char(char: str) -> str:
    """One character inside bash's ANSI-C quotes ``$'...'``."""
    if char in "\\'":
        return "\\" + char
    if char.isprintable():
        return char
    if char in _ANSI_C_NAMED:
        return _ANSI_C_NAMED[char]
    code = ord(char)
    if code < 0x80:  # \\xHH is a byte: above 0x7f it would not be the character's UTF-8
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shell_word(value: str) -> str:
    """One shell word that expands to exactly ``value``: :func:`shlex.quote` for printable text
    (single quotes, nothing inside expands), bash's ANSI-C quoting ``$'...'`` with escapes when
    the value holds control characters, so the line stays one visible line.

    >>> shell_word("llama3.1-8b"), shell_word("$(touch x)"), shell_word("a'b")
    ('llama3.1-8b', "'$(touch x)'", '\\'a\\'"\\'"\\'b\\'')
    >>> shell_word("x\\ntouch y")
    "$'x\\\\ntouch y'"
    """
    if value.isprintable():
        return shlex.quote(value)
    return "$'" + "".join(_ansi_c_char(c) for c in value) + "'"


def shell_command(argv: Iterable[str]) -> str:
    """A command line of shell words (:func:`shell_word` each), like :func:`shlex.join`.

    >>> shell_command(["vllm", "serve", "a b"])
    "vllm serve 'a b'"
    """
    return " ".join(shell_word(arg) for arg in argv)


_TOML_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _toml_char(char: str) -> str:
    if char in _TOML_ESCAPES:
        return _TOML_ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    if 0xD800 <= code <= 0xDFFF:  # a lone surrogate is no Unicode scalar value: TOML refuses it
        return "\\uFFFD"
    return f"\\u{code:04X}" if code < 0x10000 else f"\\U{code:08X}"


def toml_string(value: str) -> str:
    """A TOML basic string (one line): quotes and backslashes escaped, control and other
    non-printable characters as ``\\uXXXX`` (TOML 1.0, section "String").

    >>> toml_string('a"b'), toml_string("x\\ny")
    ('"a\\\\"b"', '"x\\\\ny"')
    """
    return '"' + "".join(_toml_char(c) for c in value) + '"'


_MARKDOWN_SPECIAL = frozenset("\\`*[]<>#|~&")
"""Characters that CommonMark / GFM read as markup anywhere in a line: backslash escapes, code
spans, emphasis, links and images, raw HTML and autolinks, headings, table pipes,
strikethrough, entity references. ``_`` is escaped unless it sits inside a word (where GFM never
reads it as emphasis), so ``hgx_h100`` stays as written."""


def markdown_text(text: str) -> str:
    """Inline Markdown text that renders as ``text``: one line (control characters escaped as
    visible ``\\n`` ...), markup characters backslash-escaped, a leading list or setext marker
    escaped, so it cannot start a heading, a list, a link, a table cell or raw HTML.

    >>> markdown_text("llama3.1-70b on hgx_b200x16")
    'llama3.1-70b on hgx_b200x16'
    >>> markdown_text("x\\n# owned <script>")
    'x\\\\\\\\n\\\\# owned \\\\<script\\\\>'
    """
    line = printable(text)
    out = []
    for i, char in enumerate(line):
        if char in _MARKDOWN_SPECIAL:
            out.append("\\" + char)
        elif char == "_" and not (
            0 < i < len(line) - 1 and line[i - 1].isalnum() and line[i + 1].isalnum()
        ):
            out.append("\\_")
        elif i == 0 and char in "-+=":
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def markdown_cell(text: str) -> str:
    """A GFM table cell: :func:`markdown_text` (which also escapes ``|``)."""
    return markdown_text(text)


def html_text(text: str) -> str:
    """Text for HTML or inline SVG, element content or a quoted attribute value: ``& < > " '``
    as character references, control characters as visible escapes.

    >>> html_text('<script>alert("x")</script>')
    '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'
    """
    return html.escape(printable(text), quote=True)
