"""The reference pages, generated from the code when the site is built (an MkDocs hook).

Nothing here is committed as Markdown, so the reference cannot drift from what it describes:

- ``reference/documents-schema.md``: every document kind and field, from the JSON Schemas in
  ``callgate_rules/documents/schemas/`` (``$ref`` into ``common.json`` followed);
- ``reference/errors.md``: the error classes and routes of ``callgate_rules/taxonomy.py``, and
  the exceptions of ``callgate_rules/errors.py`` with their exit codes;
- ``reference/cli.md``: every command, argument and option of ``callgate``, read from click;
- ``reference/python-api.md``: the public names of ``callgate_rules`` with their signatures
  and docstrings;
- ``reference/cel-functions.md``: the CEL function library, ``callgate_rules.cel.library``.

``tests/test_docs.py`` builds each page with :func:`pages` and checks them; ``mkdocs build``
calls :func:`on_files`.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "callgate_rules" / "documents" / "schemas"
KINDS = ("ToolContract", "AccessPolicy", "RoutingTable", "Definitions", "PolicyAssertion",
         "RunIntent")
GENERATED_NOTE = ("<!-- Generated at build time by docs/hooks/reference.py from {source}; "
                  "edit the source, not this page. -->\n\n")


def cell(text: Any) -> str:
    """``text`` safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


# Document kinds and fields ---------------------------------------------------------------------


def _resolve(node: dict[str, Any], schemas: dict[str, Any], current: str) -> tuple[
        dict[str, Any], str]:
    """``node`` with its ``$ref`` followed (into this file or common.json)."""
    while isinstance(node, dict) and "$ref" in node:
        target, _, pointer = node["$ref"].partition("#")
        current = target or current
        resolved: Any = schemas[current]
        for part in [p for p in pointer.split("/") if p]:
            resolved = resolved[part]
        extra = {k: v for k, v in node.items() if k != "$ref"}
        node = {**resolved, **extra}
    return node, current


def _type_of(node: dict[str, Any]) -> str:
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
    if "oneOf" in node or "anyOf" in node:
        options = node.get("oneOf") or node.get("anyOf") or []
        return " or ".join(sorted({_type_of(o) for o in options if isinstance(o, dict)}))
    kind = node.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array" and isinstance(node.get("items"), dict):
        return f"list of {_type_of(node['items'])}"
    return str(kind or "any")


def _fields(node: dict[str, Any], path: str, schemas: dict[str, Any], current: str,
            depth: int = 0) -> Iterator[tuple[str, str, bool, str]]:
    node, current = _resolve(node, schemas, current)
    required = set(node.get("required", ()))
    for name, child in (node.get("properties") or {}).items():
        child, where = _resolve(child, schemas, current)
        child_path = f"{path}.{name}" if path else name
        yield child_path, _type_of(child), name in required, child.get("description", "")
        if depth < 6:
            items = child.get("items") if child.get("type") == "array" else None
            named = child.get("additionalProperties")  # a map by name: tools.NAME
            if isinstance(items, dict):
                yield from _fields(items, child_path + "[]", schemas, where, depth + 1)
            elif child.get("properties"):
                yield from _fields(child, child_path, schemas, where, depth + 1)
            elif isinstance(named, dict) and "$ref" in named:
                yield from _fields(named, child_path + ".NAME", schemas, where, depth + 1)


def documents_page() -> str:
    schemas = {path.name: json.loads(path.read_text(encoding="utf-8"))
               for path in sorted(SCHEMAS.glob("*.json"))}
    out = ["# Document kinds and fields", "",
           GENERATED_NOTE.format(source="callgate_rules/documents/schemas/*.json"),
           "Every document is validated against its kind's JSON Schema when it is loaded, and "
           "every error names the file, line and column. Point your editor's YAML plugin at "
           "these schemas for completion. For what the fields mean together, see "
           "[the documents](documents.md).", ""]
    for kind in KINDS:
        schema = schemas[f"{kind}.json"]
        out += [f"## {kind}", "", cell(schema.get("title", "")), "",
                "| field | type | required | meaning |", "|---|---|---|---|"]
        for path, kind_text, required, description in _fields(schema, "", schemas,
                                                               f"{kind}.json"):
            out.append(f"| `{path}` | {cell(kind_text)} | {'yes' if required else ''} | "
                       f"{cell(description)} |")
        out.append("")
    common = schemas["common.json"].get("$defs", {})
    out += ["## Shared vocabularies (`common.json`)", ""]
    for name, node in common.items():
        out.append(f"- `{name}`: {cell(_type_of(node))}"
                   + (f" — {cell(node['description'])}" if node.get("description") else ""))
    return "\n".join(out) + "\n"


# Errors -----------------------------------------------------------------------------------------


def errors_page() -> str:
    from callgate_rules import errors
    from callgate_rules.taxonomy import ERROR_CLASSES, ROUTES

    out = ["# Error classes, routes and exceptions", "",
           GENERATED_NOTE.format(source="callgate_rules/taxonomy.py and errors.py"),
           "One closed taxonomy, shared by code, YAML and logs. A `RoutingTable` may change "
           "any default route and text; see [the pipeline](../explanation/pipeline.md).", "",
           "## Error classes", "",
           "| error class | default route | default agent text | default user text | "
           "counts as a failure |", "|---|---|---|---|---|"]
    for error_class, row in ERROR_CLASSES.items():
        out.append(f"| `{error_class}` | `{row.default_route}` | {cell(row.agent_text)} | "
                   f"{cell(row.user_text)} | {'yes' if row.is_failure else 'no'} |")
    out += ["", "## Routes", "", "| route | terminal | advice appended to the agent message |",
            "|---|---|---|"]
    for route, route_row in ROUTES.items():
        out.append(f"| `{route}` | {'yes' if route_row.terminal else 'no'} | "
                   f"{cell(route_row.advice) or '—'} |")
    out += ["", "## Exceptions", "",
            "What the library raises (`callgate_rules.errors`); the command line turns each "
            "into one line on stderr and its exit code.", "",
            "| exception | base | exit code | meaning |", "|---|---|---|---|"]
    for name, value in vars(errors).items():
        if inspect.isclass(value) and issubclass(value, BaseException) \
                and value.__module__ == errors.__name__:
            base = value.__mro__[1].__name__
            code = getattr(value, "exit_code", "")
            doc = (inspect.getdoc(value) or "").split("\n\n")[0]
            out.append(f"| `{name}` | `{base}` | {code} | {cell(doc)} |")
    return "\n".join(out) + "\n"


# The command line -------------------------------------------------------------------------------


def cli_page() -> str:
    import click

    from callgate_rules.cli import main

    out = ["# Command line", "",
           GENERATED_NOTE.format(source="the click commands of callgate_rules/cli"),
           "Exit codes: 0 success, 1 the check found problems (lint errors, failed scenarios "
           "or tests), 2 bad input (a file that cannot be read, a bad option): always one "
           "clear line on stderr, never a traceback. How to use the commands together: "
           "[the command line](../how-to/command-line.md).", ""]
    root = click.Context(main, info_name="callgate")

    def walk(command: click.Command, ctx: click.Context, name: str) -> None:
        out.extend([f"## `{name}`", ""])
        help_text = inspect.cleandoc(command.help or "").replace("\b\n", "")
        if help_text:
            out.extend([_help_markdown(help_text), ""])
        usage = " ".join(command.collect_usage_pieces(ctx))
        out.extend(["```text", f"{name} {usage}".rstrip(), "```", ""])
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        if params:
            out.extend(["| argument or option | meaning |", "|---|---|"])
            for param in params:
                if isinstance(param, click.Option):
                    names = ", ".join(f"`{n}`" for n in param.opts + param.secondary_opts)
                    meaning = param.help or ""
                    if isinstance(param.default, (str, int, float)) and not isinstance(
                            param.default, bool) and param.default != "" \
                            and param.show_default is not False:
                        meaning += f" (default: `{param.default}`)"
                else:
                    names = f"`{param.human_readable_name}`"
                    meaning = "argument" + (", repeatable" if param.nargs == -1 else "")
                out.append(f"| {names} | {cell(meaning)} |")
            out.append("")
        if isinstance(command, click.Group):
            for sub_name in command.list_commands(ctx):
                sub = command.get_command(ctx, sub_name)
                if sub is None or sub.hidden:
                    continue
                walk(sub, click.Context(sub, info_name=sub_name, parent=ctx),
                     f"{name} {sub_name}")

    walk(main, root, "callgate")
    return "\n".join(out) + "\n"


def _help_markdown(text: str) -> str:
    """click's help as Markdown: a paragraph's indented lines (``Exit codes:`` and its
    codes) become a list, a deeper indent continuing the item above it."""
    paragraphs = []
    for paragraph in text.split("\n\n"):
        lines = paragraph.split("\n")
        if not any(line.startswith("  ") for line in lines[1:]):
            paragraphs.append(paragraph)
            continue
        items: list[str] = []
        head = [line for line in lines if not line.startswith("  ")]
        for line in lines[len(head):]:
            if line.startswith("   ") and items:
                items[-1] += " " + line.strip()
            else:
                items.append("- " + line.strip())
        paragraphs.append("\n".join(head) + "\n\n" + "\n".join(items))
    return "\n\n".join(paragraphs)


# The Python API ---------------------------------------------------------------------------------


def _signature(value: Callable[..., Any]) -> str:
    try:
        return str(inspect.signature(value))
    except (TypeError, ValueError):
        return "(...)"


def python_api_page() -> str:
    import callgate_rules

    out = ["# Python API", "",
           GENERATED_NOTE.format(source="the docstrings of callgate_rules' public names"),
           "Everything below is importable from `callgate_rules` (each name is imported on "
           "first use). How a host uses it: [a host application]"
           "(../how-to/host-application.md).", ""]
    exported = [name for name in sorted(callgate_rules.__all__, key=str.lower)
                if not name.startswith("_")]
    for name in exported:
        value = getattr(callgate_rules, name)
        module = getattr(value, "__module__", "")
        if inspect.isclass(value):
            out.extend([f"## `{name}`", "", f"*class* in `{module}`", ""])
            if not issubclass(value, BaseException):
                out.extend(["```python", f"{name}{_signature(value)}", "```", ""])
            out.extend([inspect.getdoc(value) or "", ""])
            for member_name, member in vars(value).items():
                if member_name.startswith("_"):
                    continue
                function = member.__func__ if isinstance(member, (classmethod, staticmethod)) \
                    else member
                if isinstance(member, property):
                    doc = inspect.getdoc(member) or ""
                    out.extend([f"### `{name}.{member_name}`", "", "*property*", "", doc, ""])
                elif inspect.isfunction(function):
                    out.extend([f"### `{name}.{member_name}`", "", "```python",
                                f"{member_name}{_signature(function)}", "```", "",
                                inspect.getdoc(function) or "", ""])
        elif callable(value):
            out.extend([f"## `{name}`", "", f"*function* in `{module}`", "", "```python",
                        f"{name}{_signature(value)}", "```", "",
                        inspect.getdoc(value) or "", ""])
    return "\n".join(_escape_headings(out)) + "\n"


def _escape_headings(lines: list[str]) -> list[str]:
    """Docstrings are plain text: a line starting with ``#`` there is not a heading."""
    fenced = False
    result = []
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"^#+[^# ]", line):
            line = "\\" + line
        result.append(line)
    return result


# The CEL function library -----------------------------------------------------------------------


def cel_functions_page() -> str:
    from callgate_rules.cel.library import FUNCTIONS

    out = ["# CEL function library", "",
           GENERATED_NOTE.format(source="callgate_rules.cel.library.FUNCTIONS"),
           "Every function callgate's CEL knows, by library, with its typed overloads "
           "(`callgate lint` type-checks every call against them). Semantics and "
           "conformance: [CEL in callgate](cel.md).", ""]
    libraries: dict[str, list[Any]] = {}
    for function in FUNCTIONS.values():
        libraries.setdefault(function.library, []).append(function)
    for library, functions in libraries.items():
        out.extend([f"## {library}", "", "| function | signatures | what it does |",
                    "|---|---|---|"])
        for function in sorted(functions, key=lambda f: f.name):
            signatures = "<br>".join(
                "`" + cell(f"{o.parameters[0]}.{function.name}({', '.join(o.parameters[1:])})"
                           if o.member else f"{function.name}({', '.join(o.parameters)})")
                + f" → {cell(o.result)}`" for o in function.overloads)
            out.append(f"| `{cell(function.name)}` | {signatures} | {cell(function.doc)} |")
        out.append("")
    return "\n".join(out) + "\n"


# The hook ---------------------------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "reference/documents-schema.md": documents_page,
    "reference/errors.md": errors_page,
    "reference/cli.md": cli_page,
    "reference/python-api.md": python_api_page,
    "reference/cel-functions.md": cel_functions_page,
}


def pages() -> dict[str, str]:
    """Every generated page: its path under docs/ and its Markdown."""
    return {path: make() for path, make in PAGES.items()}


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, text in pages().items():
        if files.get_file_from_path(path) is not None:
            raise RuntimeError(f"docs/{path} is generated by docs/hooks/reference.py; "
                               "delete the committed copy")
        files.append(File.generated(config, path, content=text))
    return files
