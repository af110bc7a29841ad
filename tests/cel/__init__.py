"""Tests of callgate_rules.cel and its compiler."""
