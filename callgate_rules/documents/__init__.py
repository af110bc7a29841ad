"""The document model (ToolContract, AccessPolicy, RoutingTable), its JSON Schemas, and the
compiler from YAML to one immutable ``GateConfig``.
"""
