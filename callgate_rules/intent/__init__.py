"""Run intents: what the user asked for, as a declared, typed bound on what one run may do
(``model``), read and checked against the configuration (``compiling``), a call judged by
it (``within``), and the proof that a later declaration only narrows it (``narrowing``).
The gate binds one to a run and routes a call outside it: ``pipeline.intents``. A model
may draft one from the user's message: ``drafting``."""

from callgate_rules.intent.compiling import IntentError, IntentSource, compile_intent
from callgate_rules.intent.model import (
    INTENT_RULE,
    NO_INTENT,
    NOT_GIVEN,
    ArgumentBound,
    BoundIntent,
    Condition,
    RunIntent,
    ToolBound,
    Total,
)
from callgate_rules.intent.narrowing import widenings
from callgate_rules.intent.within import Spent, leaves, spent_of

__all__ = [
    "INTENT_RULE", "NOT_GIVEN", "NO_INTENT", "ArgumentBound", "BoundIntent", "Condition",
    "IntentError", "IntentSource", "RunIntent", "Spent", "ToolBound", "Total",
    "compile_intent", "leaves", "spent_of", "widenings",
]
