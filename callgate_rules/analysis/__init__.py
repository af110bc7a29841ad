"""``callgate analyze``: what a configuration can and cannot let execute, proved with z3.

The CEL of rules and access policies, the JSON Schema bounds of the arguments, the actor and
the looked-up records are encoded as an SMT problem (``encode``); ``tool_model`` states
when a call of one tool executes, waits for a person, or is refused, as the pipeline decides
it; ``questions`` asks the solver (``diff`` of two configurations, ``check`` of one) and
turns its models into concrete calls; ``report`` prints them as text, JSON and paste-able
PolicyTest cases. What cannot be encoded is named with its place, never assumed.

z3 (``z3-solver``) is an optional extra (``pip install 'callgate-rules[analyze]'``).
"""
