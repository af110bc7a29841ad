"""Tests of callgate_rules.cel (the expression interface and its compiler to Python), and the
CEL conformance harness they and benchmarks/cel_benchmark.py share."""
