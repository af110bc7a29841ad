"""The function catalogue: every tool the model may call, described for the people who own it.

For each tool: owner, version, effect, confirmation, idempotency, timeout; its arguments
(type, required, description, bounds); the records it looks up; its business rules in plain
words (what must hold, the error class and route when it does not, what the agent is told);
the rights that apply to it (the access rules naming it or ``"*"``, and how they decide);
and an example call. ``build_catalog`` collects it from the compiled documents once;
``render_markdown`` and ``render_html`` only lay it out, so the two never disagree.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callgate_rules.documents.compiler import compile_paths
from callgate_rules.documents.model import Contract, GateConfig, Idempotency
from callgate_rules.errors import ConfigError
from callgate_rules.taxonomy import ErrorClass

DECIDING_ORDER = ("A matching deny refuses the call, whatever allows it; otherwise a matching "
                  "allow permits it; when no rule matches, the call is denied (default deny).")

_IDEMPOTENCY = {
    Idempotency.KEY: "key: the destination deduplicates by operation ID",
    Idempotency.LOOKUP: "lookup: the destination can be asked by operation ID",
    Idempotency.NONE: "none: after an unknown outcome nothing is re-sent; a person decides",
}

_EFFECTS = {"read": "read: changes nothing", "write": "write: changes data at the destination"}

_DEFAULT_NOT_FOUND = "the routing table's not_found message"

_SHADOW_MODES = {"warn": "warn: reported, does not decide", "audit": "audit: logged only"}


# What the catalogue says ----------------------------------------------------------------------


@dataclass(frozen=True)
class Bound:
    """One limit on an argument: ``length 2–100``, or ``pattern`` with ``^T-[0-9]+$`` as
    code, which renderers show verbatim."""

    text: str
    code: str | None = None


@dataclass(frozen=True)
class Argument:
    name: str  # dotted for nested fields, ``[]`` for list items: ``lines[].sku``
    type: str
    required: bool
    description: str
    bounds: tuple[Bound, ...]


@dataclass(frozen=True)
class LookupEntry:
    name: str
    collection: str
    key: str  # CEL
    matched_on: str
    when: str | None  # CEL
    several: str
    not_found_message: str | None


@dataclass(frozen=True)
class RuleEntry:
    name: str
    requires: str  # CEL that must hold
    error_class: str
    route: str
    agent_message: str
    user_message: str | None
    hint: str | None
    mode: str | None  # None when enforced


@dataclass(frozen=True)
class RightEntry:
    name: str  # document/rule
    effect: str
    every_tool: bool  # the rule names "*" rather than this tool
    condition: str  # CEL
    description: str | None
    message: str | None
    mode: str | None


@dataclass(frozen=True)
class ToolEntry:
    name: str
    version: str
    owner: str
    description: str
    source: str
    effect: str  # "read" or "write"
    confirmation: str  # "required", "when a rule asks" or "not required"
    confirmation_detail: str  # the draft's first line and the expiry, when there are any
    idempotency: str
    timeout: str
    closed: bool  # undeclared arguments are rejected
    arguments: tuple[Argument, ...]
    lookups: tuple[LookupEntry, ...]
    rules: tuple[RuleEntry, ...]
    verify: str | None
    reconcile: str | None
    rights: tuple[RightEntry, ...]
    example_calls: tuple[str, ...]  # JSON

    @property
    def anchor(self) -> str:
        return "tool-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in self.name)

    @property
    def allowed_by_some_rule(self) -> bool:
        return any(right.effect == "allow" for right in self.rights)


@dataclass(frozen=True)
class Catalog:
    tools: tuple[ToolEntry, ...]
    documents: tuple[str, ...]  # "AccessPolicy support-desk-access 1.0.0 (owner)"


# Collecting it --------------------------------------------------------------------------------


def load_catalog(*paths: str | Path) -> Catalog:
    """Compile the documents under ``paths`` (``ConfigError`` if they have errors) and build
    the catalogue; a path that is not there is left out while another is."""
    compilation = compile_paths([p for p in paths if Path(p).exists()] or list(paths))
    if compilation.errors or compilation.config is None:
        raise ConfigError(list(compilation.errors))
    descriptions = {
        (source.data["metadata"]["name"], rule["name"]): rule["description"]
        for source in compilation.sources
        if isinstance(source.data, dict) and source.data.get("kind") == "AccessPolicy"
        for rule in source.data["spec"].get("rules", [])
        if "description" in rule
    }
    return build_catalog(compilation.config, descriptions)


def build_catalog(config: GateConfig,
                  right_descriptions: Mapping[tuple[str, str], str] | None = None) -> Catalog:
    descriptions = right_descriptions or {}
    tools = tuple(_tool(config, config.contracts[name], descriptions)
                  for name in sorted(config.contracts))
    documents = tuple(f"{ref.kind} {ref.name} {ref.version} ({ref.owner})"
                      for ref in config.documents if ref.kind != "ToolContract")
    return Catalog(tools, documents)


def _tool(config: GateConfig, contract: Contract,
          descriptions: Mapping[tuple[str, str], str]) -> ToolEntry:
    schema = contract.arguments_schema
    return ToolEntry(
        name=contract.name,
        version=contract.version,
        owner=contract.document.owner,
        description=contract.document.description,
        source=str(contract.document.location),
        effect=contract.effect,
        confirmation=_confirmation(contract),
        confirmation_detail=_confirmation_detail(contract),
        idempotency=_IDEMPOTENCY[contract.idempotency] if contract.is_write
        else "not needed for a read",
        timeout=_duration(contract.timeout_seconds),
        closed=schema.get("additionalProperties") is False,
        arguments=tuple(_arguments(schema)),
        lookups=tuple(
            LookupEntry(
                name=lookup.name,
                collection=lookup.collection,
                key=lookup.key.source,
                matched_on=" or ".join(lookup.fields),
                when=lookup.when.source if lookup.when else None,
                several=("all of them, as a list" if lookup.many == "list"
                         else "the user is asked to choose, seeing "
                         + ", ".join(lookup.candidate_fields)),
                not_found_message=lookup.message.text if lookup.message else None,
            )
            for lookup in contract.lookups
        ),
        rules=tuple(
            RuleEntry(
                name=rule.name,
                requires=rule.expression.source,
                error_class=str(rule.error_class),
                route=str(rule.route or config.routing.route_for(rule.error_class)),
                agent_message=rule.message.text,
                user_message=rule.user_message.text if rule.user_message else None,
                hint=rule.hint,
                mode=_SHADOW_MODES.get(str(rule.mode)),
            )
            for rule in contract.rules
        ),
        verify=contract.verify.source if contract.verify else None,
        reconcile=contract.reconcile_match.source if contract.reconcile_match else None,
        rights=tuple(
            RightEntry(
                name=rule.qualified_name,
                effect=rule.effect,
                every_tool="*" in rule.tools,
                condition=rule.when.source,
                description=descriptions.get((rule.document.name, rule.name)),
                message=rule.message.text if rule.message else None,
                mode=_SHADOW_MODES.get(str(rule.mode)),
            )
            for rule in config.policies.rules_for(contract.name)
        ),
        example_calls=tuple(
            json.dumps({"name": contract.name, "arguments": example.arguments}, indent=2,
                       ensure_ascii=False, default=str)
            for example in contract.examples
        ),
    )


def _confirmation(contract: Contract) -> str:
    if contract.confirmation.required:
        return "required"
    if any(rule.error_class == ErrorClass.CONFIRMATION_REQUIRED for rule in contract.rules):
        return "when a rule asks"
    return "not required"


def _confirmation_detail(contract: Contract) -> str:
    if _confirmation(contract) == "not required":
        return ""
    confirmation = contract.confirmation
    parts = ["a person approves the call before it runs" if confirmation.required else
             "a person approves the call when a rule answers confirmation_required"]
    if confirmation.summary:
        parts.append(f"the draft reads “{confirmation.summary.text}”")
    if confirmation.expires_seconds:
        parts.append(f"it expires after {_duration(confirmation.expires_seconds)}")
    return "; ".join(parts)


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def _arguments(schema: Mapping[str, Any], prefix: str = "") -> Iterable[Argument]:
    """Each property of an object schema, nested objects and list items flattened."""
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        if not isinstance(prop, Mapping):
            continue
        path = f"{prefix}{name}"
        yield Argument(path, _type(prop), name in required, str(prop.get("description", "")),
                       tuple(_bounds(prop)))
        yield from _nested(prop, path)


def _nested(prop: Mapping[str, Any], path: str) -> Iterable[Argument]:
    if "properties" in prop:
        yield from _arguments(prop, f"{path}.")
    items = prop.get("items")
    if isinstance(items, Mapping) and "properties" in items:
        yield from _arguments(items, f"{path}[].")


def _type(prop: Mapping[str, Any]) -> str:
    kind = prop.get("type")
    text = " or ".join(kind) if isinstance(kind, list) else str(kind or "any")
    items = prop.get("items")
    if kind == "array" and isinstance(items, Mapping) and "type" in items:
        text += f" of {_type(items)}"
    return text


def _bounds(prop: Mapping[str, Any]) -> Iterable[Bound]:
    def span(low_key: str, high_key: str, what: str) -> str | None:
        low, high = prop.get(low_key), prop.get(high_key)
        if low is not None and high is not None:
            return f"{what} {low}–{high}"
        if low is not None:
            return f"{what} ≥ {low}"
        if high is not None:
            return f"{what} ≤ {high}"
        return None

    def as_json(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, default=str)

    for text in (span("minLength", "maxLength", "length"), span("minItems", "maxItems", "items")):
        if text:
            yield Bound(text)
    for key, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"),
                      ("exclusiveMaximum", "<"), ("multipleOf", "multiple of")):
        if key in prop:
            yield Bound(f"{sign} {prop[key]}")
    if "enum" in prop:
        yield Bound("one of", ", ".join(as_json(value) for value in prop["enum"]))
    if "const" in prop:
        yield Bound("exactly", as_json(prop["const"]))
    if "format" in prop:
        yield Bound(f"format {prop['format']}")
    if "pattern" in prop:
        yield Bound("pattern", str(prop["pattern"]))
    if prop.get("uniqueItems"):
        yield Bound("no duplicates")
    if "default" in prop:
        yield Bound("default", as_json(prop["default"]))


def _joined(summary: str, detail: str) -> str:
    return f"{summary}: {detail}" if detail else summary


# Markdown -------------------------------------------------------------------------------------


def _md(text: str) -> str:
    """Prose for Markdown: ``&`` and ``<`` as entities, so a description can never become
    markup in a renderer that lets HTML through."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("\n", " ")


def _md_cell(text: str) -> str:
    return _md(text).replace("|", "\\|") or "—"


def _md_code(text: str, in_table: bool = True) -> str:
    text = text.replace("\n", " ")
    fence = "``" if "`" in text else "`"
    code = f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"
    return code.replace("|", "\\|") if in_table else code


def _md_bound(bound: Bound) -> str:
    return _md_cell(bound.text) + (f" {_md_code(bound.code)}" if bound.code else "")


def _md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def render_markdown(catalog: Catalog) -> str:
    out = ["# Function catalogue", ""]
    out.append("Every tool the model may propose, generated by `callgate catalog` from the "
               "contracts and access policies.")
    if catalog.documents:
        out += ["", "Policies: " + "; ".join(_md(d) for d in catalog.documents) + "."]
    out += [""] + _md_table(
        ("tool", "effect", "owner", "version", "confirmation"),
        ((f"[{_md_cell(t.name)}](#{t.anchor})", t.effect, _md_cell(t.owner),
          _md_cell(t.version), t.confirmation)
         for t in catalog.tools))
    for tool in catalog.tools:
        out += ["", f'<a id="{tool.anchor}"></a>', "", f"## {_md(tool.name)}", "",
                _md(tool.description), ""]
        out += _md_table(("", ""), (  # Markdown tables need a header row, even an empty one
            ("owner", _md_cell(tool.owner)), ("version", _md_cell(tool.version)),
            ("effect", _md_cell(_EFFECTS.get(tool.effect, tool.effect))),
            ("confirmation", _md_cell(_joined(tool.confirmation, tool.confirmation_detail))),
            ("idempotency", _md_cell(tool.idempotency)), ("timeout", _md_cell(tool.timeout)),
            ("defined in", _md_code(tool.source))))
        out += ["", "### Arguments", ""]
        out += _md_table(("argument", "type", "required", "description", "bounds"), (
            (_md_code(a.name), _md_cell(a.type), "yes" if a.required else "no",
             _md_cell(a.description), "; ".join(_md_bound(b) for b in a.bounds) or "—")
            for a in tool.arguments))
        if tool.closed:
            out += ["", "Any other argument is rejected (`unexpected_argument`)."]
        if tool.lookups:
            out += ["", "### Look-ups", ""]
            out += _md_table(
                ("record", "collection", "key", "matched on", "when", "several matches",
                 "not found: the agent is told"),
                ((_md_code(lk.name), _md_cell(lk.collection), _md_code(lk.key),
                  _md_cell(lk.matched_on), _md_code(lk.when) if lk.when else "always",
                  _md_cell(lk.several), _md_cell(lk.not_found_message or _DEFAULT_NOT_FOUND))
                 for lk in tool.lookups))
        out += ["", "### Rules, in order", ""]
        if not tool.rules:
            out.append("No business rules.")
        for number, rule in enumerate(tool.rules, 1):
            shadow = f" ({_md(rule.mode)})" if rule.mode else ""
            out.append(f"{number}. **{_md(rule.name)}**{shadow}: requires "
                       f"{_md_code(rule.requires, False)}; otherwise `{rule.error_class}`, "
                       f"route `{rule.route}`.")
            out.append(f"   - Agent message: “{_md(rule.agent_message)}”")
            if rule.user_message:
                out.append(f"   - User message: “{_md(rule.user_message)}”")
            if rule.hint:
                out.append(f"   - Hint: {_md(rule.hint)}")
        if tool.verify or tool.reconcile:
            out += ["", "### After execution", ""]
            if tool.verify:
                out.append(f"- The result must satisfy {_md_code(tool.verify, False)}.")
            if tool.reconcile:
                out.append("- After an unknown outcome, what the destination holds matches "
                           f"when {_md_code(tool.reconcile, False)}.")
        out += ["", "### Rights", "", DECIDING_ORDER, ""]
        if not tool.allowed_by_some_rule:
            out += ["**No allow rule names this tool: every call is denied.**", ""]
        if tool.rights:
            out += _md_table(("rule", "effect", "applies to", "when (CEL)", "description",
                              "denial message"), (
                (_md_code(r.name), r.effect + (f" ({_md_cell(r.mode)})" if r.mode else ""),
                 "every tool (`*`)" if r.every_tool else _md_cell(tool.name),
                 _md_code(r.condition), _md_cell(r.description or ""),
                 _md_cell(r.message or ""))
                for r in tool.rights))
        for call in tool.example_calls:
            out += ["", "### Example call", "", "```json", call, "```"]
    return "\n".join(out) + "\n"


# HTML -----------------------------------------------------------------------------------------

_STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem;
       padding: 0 1rem; color: #1d232a; }
h1 { font-size: 1.8rem; } h2 { margin-top: 2.5rem; border-bottom: 2px solid #d0d7de; }
h3 { font-size: 1.05rem; margin-top: 1.4rem; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; }
th, td { border: 1px solid #d0d7de; padding: .3rem .5rem; text-align: left;
         vertical-align: top; }
th { background: #f3f5f7; }
code, pre { font-family: ui-monospace, monospace; font-size: .9em; background: #f3f5f7; }
code { padding: 0 .2rem; } pre { padding: .6rem; overflow-x: auto; }
.deny { color: #a40e26; font-weight: 600; } .allow { color: #116329; font-weight: 600; }
.warning { background: #fff4e5; border-left: 4px solid #d97706; padding: .4rem .7rem; }
.meta th { width: 10rem; }
"""


def _h(text: str) -> str:
    return html.escape(text, quote=True)


def _code(text: str) -> str:
    return f"<code>{_h(text)}</code>"


def _html_bound(bound: Bound) -> str:
    return _h(bound.text) + (f" {_code(bound.code)}" if bound.code else "")


def _html_table(header: Sequence[str], rows: Iterable[Sequence[str]],
                css: str = "") -> list[str]:
    """``header`` is plain text; ``rows`` hold HTML already escaped by the caller."""
    attribute = f' class="{css}"' if css else ""
    lines = [f"<table{attribute}>"]
    if any(header):
        lines.append("<tr>" + "".join(f"<th>{_h(h)}</th>" for h in header) + "</tr>")
    lines += ["<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows]
    return lines + ["</table>"]


def render_html(catalog: Catalog) -> str:
    """One self-contained page: inline CSS, no scripts, no external assets."""
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           "<title>Function catalogue</title>", f"<style>{_STYLE}</style>", "</head>",
           "<body>", "<h1>Function catalogue</h1>",
           "<p>Every tool the model may propose, generated by <code>callgate catalog</code> "
           "from the contracts and access policies.</p>"]
    if catalog.documents:
        out.append("<p>Policies: " + "; ".join(_h(d) for d in catalog.documents) + ".</p>")
    out += _html_table(("tool", "effect", "owner", "version", "confirmation"), (
        (f'<a href="#{_h(t.anchor)}">{_h(t.name)}</a>', _h(t.effect), _h(t.owner),
         _h(t.version), _h(t.confirmation))
        for t in catalog.tools))
    for tool in catalog.tools:
        out += [f'<section id="{_h(tool.anchor)}">', f"<h2>{_h(tool.name)}</h2>",
                f"<p>{_h(tool.description)}</p>"]
        out += _html_table(("", ""), (
            ("owner", _h(tool.owner)), ("version", _h(tool.version)),
            ("effect", _h(_EFFECTS.get(tool.effect, tool.effect))),
            ("confirmation", _h(_joined(tool.confirmation, tool.confirmation_detail))),
            ("idempotency", _h(tool.idempotency)), ("timeout", _h(tool.timeout)),
            ("defined in", _code(tool.source))), "meta")
        out.append("<h3>Arguments</h3>")
        out += _html_table(("argument", "type", "required", "description", "bounds"), (
            (_code(a.name), _h(a.type), "yes" if a.required else "no", _h(a.description),
             "<br>".join(_html_bound(b) for b in a.bounds))
            for a in tool.arguments))
        if tool.closed:
            out.append("<p>Any other argument is rejected (<code>unexpected_argument</code>)."
                       "</p>")
        if tool.lookups:
            out.append("<h3>Look-ups</h3>")
            out += _html_table(
                ("record", "collection", "key", "matched on", "when", "several matches",
                 "not found: the agent is told"),
                ((_code(lk.name), _h(lk.collection), _code(lk.key), _h(lk.matched_on),
                  _code(lk.when) if lk.when else "always", _h(lk.several),
                  _h(lk.not_found_message or _DEFAULT_NOT_FOUND))
                 for lk in tool.lookups))
        out.append("<h3>Rules, in order</h3>")
        if not tool.rules:
            out.append("<p>No business rules.</p>")
        else:
            out.append("<ol>")
            for rule in tool.rules:
                shadow = f" ({_h(rule.mode)})" if rule.mode else ""
                item = [f"<li><strong>{_h(rule.name)}</strong>{shadow}: requires "
                        f"{_code(rule.requires)}; otherwise <code>{_h(rule.error_class)}"
                        f"</code>, route <code>{_h(rule.route)}</code>.<ul>",
                        f"<li>Agent message: “{_h(rule.agent_message)}”</li>"]
                if rule.user_message:
                    item.append(f"<li>User message: “{_h(rule.user_message)}”</li>")
                if rule.hint:
                    item.append(f"<li>Hint: {_h(rule.hint)}</li>")
                out.append("".join(item) + "</ul></li>")
            out.append("</ol>")
        if tool.verify or tool.reconcile:
            out.append("<h3>After execution</h3><ul>")
            if tool.verify:
                out.append(f"<li>The result must satisfy {_code(tool.verify)}.</li>")
            if tool.reconcile:
                out.append("<li>After an unknown outcome, what the destination holds matches "
                           f"when {_code(tool.reconcile)}.</li>")
            out.append("</ul>")
        out += ["<h3>Rights</h3>", f"<p>{_h(DECIDING_ORDER)}</p>"]
        if not tool.allowed_by_some_rule:
            out.append('<p class="warning">No allow rule names this tool: every call is '
                       "denied.</p>")
        if tool.rights:
            out += _html_table(("rule", "effect", "applies to", "when (CEL)", "description",
                                "denial message"), (
                (_code(r.name), f'<span class="{_h(r.effect)}">{_h(r.effect)}</span>'
                 + (f" ({_h(r.mode)})" if r.mode else ""),
                 "every tool (<code>*</code>)" if r.every_tool else _h(tool.name),
                 _code(r.condition), _h(r.description or ""), _h(r.message or ""))
                for r in tool.rights))
        for call in tool.example_calls:
            out += ["<h3>Example call</h3>", f"<pre>{_h(call)}</pre>"]
        out.append("</section>")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


RENDERERS = {"markdown": render_markdown, "html": render_html}
