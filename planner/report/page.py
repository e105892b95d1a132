"""The HTML document around a report (what-if, serving): one head with the charset, the
viewport, the title and the report's style sheet, and a body that opens with the title."""

from __future__ import annotations

from string import Template

DOCUMENT = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title</title>
<style>
$css</style>
</head>
<body>
<h1>$title</h1>
$body</body>
</html>
""")


def html_document(title: str, css: str, body: str) -> str:
    """A whole page: ``title`` (already escaped for HTML) in the head and as the heading,
    ``css`` (rules, one per line, ending in a newline), then ``body`` (HTML, ending in a
    newline).

    >>> print(html_document("T", "p { margin: 0; }\\n", "<p>x</p>\\n"))  # doctest: +ELLIPSIS
    <!DOCTYPE html>
    ...
    <style>
    p { margin: 0; }
    </style>
    </head>
    <body>
    <h1>T</h1>
    <p>x</p>
    </body>
    </html>
    <BLANKLINE>
    """
    return DOCUMENT.substitute(title=title, css=css, body=body)
