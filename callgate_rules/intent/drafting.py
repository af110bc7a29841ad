"""A planner model drafts a run's intent from the user's message and the contracts: the
prompt (``drafting_prompt``), the parser of its answer (``parse_drafted``), and the two
together with one corrected try (``draft_intent``, ``adraft_intent``).

The model sees the user's message and the tools, never a tool's output: what it drafts is
bounded by what the user asked. Its answer is data, read like any intent — bounded in
size, checked against the contracts (``compile_intent``) — and the request it was made
from is the user's message as given, whatever the model wrote there. A model that answers
twice with something that is not an intent gets ``IntentError``: the host then declares
none (and the policy's ``spec.intent.required`` tools wait for a person) or asks the user.

Any model will do: ``complete`` is a function from the prompt to the model's text.
``openai_completion`` makes one of an OpenAI client (``callgate-rules[drafting]``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from callgate_rules.documents.model import Contract, GateConfig
from callgate_rules.intent.compiling import MAX_INTENT_BYTES, IntentError, compile_intent
from callgate_rules.intent.model import RunIntent

Complete = Callable[[str], str]
AsyncComplete = Callable[[str], Awaitable[str]]
# The user's message as the prompt quotes it, at most: a planner needs the request, not a
# pasted document (which would be where an injection hides).
MAX_MESSAGE_CHARACTERS = 8_000

PROMPT = """\
You plan an AI assistant's run before it starts. From the user's message alone, write the
run's intent: the tools the assistant may call to do what the user asked, and bounds on
their arguments. Anything outside the intent will need the user's confirmation, so:

- list every tool the request plausibly needs, reads included;
- for a tool that changes something, say how many calls the request needs at most
  ("calls"), generously but finitely;
- bound an argument only with a value the user's message states exactly ("equals",
  "one_of", "minimum", "maximum"); never invent a value a tool would have to look up;
- add "totals" when the user gives an overall limit (for example the sum of amounts).

Answer with one JSON object and nothing else, of this shape:
{{"tools": {{"TOOL": {{"calls": 1, "arguments": {{"ARGUMENT": {{"equals": "VALUE"}}}}}}}},
 "totals": {{"NAME": {{"tools": ["TOOL"], "argument": "ARGUMENT", "at_most": 100}}}}}}

The tools:
{tools}

The user's message (their words, between the markers):
<<<
{message}
>>>
"""
CORRECTION = """\

Your previous answer could not be used:
{problems}
Answer again with one JSON object of the shape above.
"""


def drafting_prompt(message: str, config: GateConfig,
                    tools: Iterable[str] | None = None) -> str:
    """The prompt a planner model drafts an intent from: the user's ``message`` and the
    ``tools`` (default: all the configuration's), each with its description, whether it
    reads or writes, and its arguments."""
    names = sorted(config.contracts) if tools is None else list(tools)
    listed = "\n".join(_tool_line(config.contracts[name]) for name in names
                       if name in config.contracts)
    quoted = message[:MAX_MESSAGE_CHARACTERS].replace(">>>", "> > >")
    return PROMPT.format(tools=listed, message=quoted)


def _tool_line(contract: Contract) -> str:
    properties = contract.arguments_schema.get("properties", {})
    arguments = ", ".join(f"{name} ({_kind(schema)})" for name, schema in properties.items())
    return (f"- {contract.name} ({'changes something' if contract.is_write else 'reads'}): "
            f"{' '.join(contract.document.description.split())} Arguments: "
            f"{arguments or 'none'}.")


def _kind(schema: Any) -> str:
    kind = schema.get("type", "any") if isinstance(schema, dict) else "any"
    return "/".join(kind) if isinstance(kind, list) else str(kind)


def parse_drafted(answer: str, message: str, config: GateConfig) -> RunIntent:
    """The intent in a model's ``answer`` (its one JSON object, bare or in a fenced
    block), checked against ``config``; its request is ``message``. ``IntentError`` says
    what is wrong."""
    if len(answer.encode("utf-8", "surrogatepass")) > MAX_INTENT_BYTES:
        raise IntentError([f"the model's answer is larger than {MAX_INTENT_BYTES:,} bytes"])
    data = _one_object(answer)
    if not isinstance(data, dict):
        raise IntentError(["the model's answer holds no JSON object"])
    data["request"] = message[:MAX_MESSAGE_CHARACTERS]
    return compile_intent(data, config, name="the drafted intent")


def _one_object(answer: str) -> Any:
    """The first JSON object in ``answer``: the text from its first ``{`` decoded as far as
    one value goes (a fenced block or words around it are left aside)."""
    start = answer.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(answer, start)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value


def draft_intent(message: str, config: GateConfig, complete: Complete, *,
                 tools: Iterable[str] | None = None) -> RunIntent:
    """Ask ``complete`` (the planner model) for the intent of ``message``; once more, with
    what was wrong, if its first answer is not one."""
    prompt = drafting_prompt(message, config, tools)
    try:
        return parse_drafted(complete(prompt), message, config)
    except IntentError as error:
        return parse_drafted(complete(corrected(prompt, error)), message, config)


async def adraft_intent(message: str, config: GateConfig, complete: AsyncComplete, *,
                        tools: Iterable[str] | None = None) -> RunIntent:
    """``draft_intent`` with an async model."""
    prompt = drafting_prompt(message, config, tools)
    try:
        return parse_drafted(await complete(prompt), message, config)
    except IntentError as error:
        return parse_drafted(await complete(corrected(prompt, error)), message, config)


def corrected(prompt: str, error: IntentError) -> str:
    """The prompt asked again, with what was wrong with the first answer."""
    return prompt + CORRECTION.format(problems="\n".join(error.problems[:20]))


def openai_completion(client: Any, model: str, **options: Any) -> Complete:
    """``complete`` for an OpenAI client (``openai.OpenAI()``, or any server speaking its
    Chat Completions API): one user message, the answer's text. ``options`` go to
    ``chat.completions.create`` (default: temperature 0, a JSON object)."""
    settings = {"temperature": 0, "response_format": {"type": "json_object"}, **options}

    def complete(prompt: str) -> str:
        answer = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], **settings)
        return str(answer.choices[0].message.content or "")
    return complete
