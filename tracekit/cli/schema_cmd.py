"""``tracekit schema``: print the run-folder schema (Markdown, as docs/schema.md)."""

from __future__ import annotations

from tracekit.cli.app import app


@app.command("schema")
def schema_cmd():
    """Print the documentation of every run-folder table and column (Markdown)."""
    from tracekit.schema.docs import render_markdown

    print(render_markdown(), end="")
