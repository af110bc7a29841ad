"""``callgate init``: start a project, or draft contracts from tools a model already uses.

Without a source it writes the project template (``authoring/scaffold.py``); with
``--example NAME`` one of the example projects (``authoring/example_sets.py``); with
``--from-openai`` / ``--from-anthropic`` a tool list file, with ``--from-mcp`` /
``--from-mcp-url`` an MCP server (the gateway extra), each drafted into contracts and a
default-deny AccessPolicy with the fields only a person can decide marked FILL-IN.
"""

from __future__ import annotations

from pathlib import Path

import click

from callgate_rules.errors import InputError

DEFAULT_OWNER = "owner@example.com"


@click.command("init")
@click.argument("directory", default=".", type=click.Path(path_type=Path, file_okay=False))
@click.option("--from-openai", "from_openai",
              type=click.Path(exists=True, path_type=Path, dir_okay=False),
              help="Draft a contract per tool of this OpenAI tool list (JSON).")
@click.option("--from-anthropic", "from_anthropic",
              type=click.Path(exists=True, path_type=Path, dir_okay=False),
              help="Draft a contract per tool of this Anthropic tool list (JSON).")
@click.option("--from-mcp", "from_mcp", metavar='"CMD ARGS"',
              help="Start this MCP server over stdio and draft a contract per tool.")
@click.option("--from-mcp-url", "from_mcp_url", metavar="URL",
              help="Reach this MCP server over streamable HTTP and draft a contract per tool.")
@click.option("--owner", default=None,
              help=f"The owner written into every document [default: {DEFAULT_OWNER}, or "
                   "FILL-IN@example.com for drafts].")
@click.option("--example", "example", metavar="NAME",
              help="Write the example project NAME instead of the template (see --list).")
@click.option("--list", "list_examples", is_flag=True,
              help="List the example projects --example writes, and exit.")
@click.option("--force", is_flag=True, help="Overwrite files that already exist.")
def init(directory: Path, from_openai: Path | None, from_anthropic: Path | None,
         from_mcp: str | None, from_mcp_url: str | None, owner: str | None,
         example: str | None, list_examples: bool, force: bool) -> None:
    """Start a callgate project in DIRECTORY (default: here).

    Without options: contracts/ with a write tool and a read tool, policies/ with an
    AccessPolicy, a RoutingTable and PolicyTests, examples/ with actors, a world and a
    scenario, and a README; `callgate lint`, `callgate test --coverage --fail-under 100` and
    `callgate simulate` pass on it as written.

    With --from-openai/--from-anthropic FILE or --from-mcp/--from-mcp-url: contracts/NAME.yaml
    per tool (description, input schema with `additionalProperties: false`, an example) and
    policies/access.yaml, which denies everything until you add allow rules. The fields only a
    person can decide say FILL-IN, and `callgate lint` points at each until it is filled.

    With --example NAME: one of the example projects that ship with callgate (--list names
    them), e.g. `callgate init --example support-desk desk && cd desk && callgate simulate`.

    \b
    Exit codes:
      0 written (or, with --list, listed)
      2 bad input: a file that is there already (without --force), an unknown example, two
        sources, a tool list that cannot be read or drafted
    """
    from callgate_rules.authoring import scaffold

    if list_examples:
        from callgate_rules.authoring.example_sets import EXAMPLE_SETS

        for listed in EXAMPLE_SETS:
            click.echo(f"{listed.name:<14} {listed.summary}")
        return
    sources = [name for name, value in (("--example", example),
                                        ("--from-openai", from_openai),
                                        ("--from-anthropic", from_anthropic),
                                        ("--from-mcp", from_mcp),
                                        ("--from-mcp-url", from_mcp_url)) if value]
    if len(sources) > 1:
        raise InputError(f"callgate init takes one source, not {' and '.join(sources)}")
    draft_owner = owner or f"{scaffold.MARK}@example.com"
    if from_mcp is not None or from_mcp_url is not None:
        from callgate_rules.cli.extras import require_gateway_extra

        require_gateway_extra()
        from callgate_rules.gateway.contracts import draft_from_mcp

        written = draft_from_mcp(directory, command=from_mcp, url=from_mcp_url,
                                 owner=draft_owner, force=force)
    elif from_openai is not None or from_anthropic is not None:
        api, path = ("openai", from_openai) if from_openai else ("anthropic", from_anthropic)
        assert path is not None
        tools = scaffold.read_tool_list(path, api)
        written = scaffold.draft_from_tools(directory, tools, source=f"--from-{api}",
                                            owner=draft_owner, force=force)
    elif example is not None:
        from callgate_rules.authoring.example_sets import example_set

        written = scaffold.new_example(example, directory, owner=owner or DEFAULT_OWNER,
                                       force=force)
        for path in written:
            click.echo(f"wrote {path}")
        chosen = example_set(example)
        assert chosen is not None
        click.echo(f"next: cd {directory} && {' && '.join(chosen.checks)}", err=True)
        return
    else:
        written = scaffold.new_project(directory, owner=owner or DEFAULT_OWNER, force=force)
        for path in written:
            click.echo(f"wrote {path}")
        click.echo(f"next: cd {directory} && callgate lint && callgate test --coverage && "
                   "callgate simulate; then make the tools your own (README.md)", err=True)
        return
    for path in written:
        click.echo(f"wrote {path}")
    click.echo(f"next: fill in every FILL-IN, then `callgate lint {directory / 'contracts'} "
               f"{directory / 'policies'}`", err=True)


COMMANDS = (init,)
