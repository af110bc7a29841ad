"""Adapters to the world around the gate: the model APIs' tool-call formats, callers'
identity, OpenTelemetry, and the agent frameworks (``frameworks/``, optional extras).
Nothing in ``pipeline/`` or ``documents/`` imports this package.
"""
