"""PolicyAssertion documents that ``callgate analyze check`` could not read: a field the
schema does not allow, CEL that does not parse, a tool no contract defines. The compiler
skips the kind (the gate never reads it), so without this a broken assertion passes lint
and stops ``callgate analyze`` in CI instead.
"""

from __future__ import annotations

from collections.abc import Iterator

from callgate_rules.documents.assertions import read_assertions
from callgate_rules.documents.compiler import Compilation, Finding


def check_assertion_documents(compilation: Compilation) -> Iterator[Finding]:
    # a contract that did not compile may be the tool an assertion names: its own finding
    tools = None if compilation.errors else compilation.contracts
    yield from read_assertions(compilation, tools)[1]
