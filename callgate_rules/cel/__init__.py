"""CEL: one small interface (``expression``) over a compiler to Python (``compiler``), and
the two exceptions both raise (``errors``). Imports run one way: expression → compiler →
errors.
"""
