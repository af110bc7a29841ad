"""``callgate``: thin click commands over the library, so the two can never disagree.

The commands are grouped by what they work on, as the library is: ``harness`` (check one
call, simulate scenarios, run policy tests, score a control set), ``authoring`` (lint, fmt,
export, catalog), ``store`` (receipts, the review queue), ``gateway`` (the MCP gateway),
``init`` (a new project, or drafts from tool lists and MCP servers), ``replay`` (a
decision log against changed documents) and ``serve`` (the decision service,
``hash-password``). This module puts them under one group, which is the one place a
``CallgateError`` becomes a message and an exit code: each exception class carries its
``exit_code``, as click's own exceptions do.

Exit codes: 0 success, 1 the check found problems (lint errors, failed scenarios, a call
``check`` would not execute), 2 bad input (a file that cannot be read, a bad option) —
always one clear line, never a traceback. Each command's help lists its own, and the main
group's help all of them: the CLI reference is generated from these help texts.
"""

from __future__ import annotations

import io
import sys
from importlib import import_module
from typing import Any

import click

from callgate_rules.errors import CallgateError, ConfigError

# Where each command is defined. A command's module is imported when the command runs (or
# help lists it), so ``callgate check`` never loads lint, the store, the gateway or the
# service; tests/test_import_set.py holds this table to each module's COMMANDS.
COMMAND_MODULES = {
    **dict.fromkeys(("check", "simulate", "test", "eval"), "harness"),
    **dict.fromkeys(("lint", "fmt", "export", "catalog"), "authoring"),
    **dict.fromkeys(("receipts", "review"), "store"),
    "gateway": "gateway",
    "init": "init",
    "replay": "replay",
    "analyze": "analyze",
    **dict.fromkeys(("serve", "hash-password"), "serve"),
    **dict.fromkeys(("bundle", "log"), "bundle"),
}


class CallgateGroup(click.Group):
    """A click group that shows callgate's own errors to a person instead of a traceback.

    Every command and sub-group runs inside ``invoke`` of the top group, so catching here
    covers them all; click's own usage errors never reach it (click reports them, exit 2).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMAND_MODULES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            module = import_module(f"callgate_rules.cli.{COMMAND_MODULES[cmd_name]}")
            for command in module.COMMANDS:
                self.add_command(command)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        # Text from the model or a file may hold what the terminal's encoding cannot show
        # (a lone surrogate): it is shown escaped, never a UnicodeEncodeError.
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(errors="backslashreplace")
        try:
            return super().invoke(ctx)
        except CallgateError as error:
            show_error(error)
            sys.exit(error.exit_code)
        except click.BadParameter as error:
            # A file or folder argument that is not there (click.Path): one line naming
            # the option and the path, as callgate's own errors; other usage errors keep
            # click's usage text.
            if error.param is None or not isinstance(error.param.type, click.Path):
                raise
            click.echo(f"callgate: {error.format_message()}", err=True)
            sys.exit(error.exit_code)


def show_error(error: CallgateError) -> None:
    """``error`` on stderr: each finding of the documents on its line, else one line."""
    if isinstance(error, ConfigError):
        for finding in error.findings:
            click.echo(str(finding), err=True)
        click.echo(f"callgate: {len(error.findings)} error(s) in the documents; "
                   "run `callgate lint` for details", err=True)
    else:
        click.echo(f"callgate: {error}", err=True)


@click.group(cls=CallgateGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="callgate-rules")
def main() -> None:
    """callgate — a declarative gate between a model's proposed tool call and its action.

    Every command takes the documents as PATHS, folders or files (default: contracts
    policies in the current directory); `callgate COMMAND -h` shows a command's options.

    \b
    Exit codes (each command's help lists those it uses):
      0 success: documents clean, every case or scenario passed, the call would execute
      1 the command's check failed: lint errors, a failed case or scenario, coverage or a
        score below --fail-under, files fmt --check would change, a call check would not
        execute (refused, or sent back to the model, the user or a person)
      2 bad input: a file or folder that is not there or cannot be read, documents with
        errors, a bad option — one line on stderr naming the file, never a traceback
    """

