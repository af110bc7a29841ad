"""Tests of callgate_rules.cel.expression and its compiler."""
