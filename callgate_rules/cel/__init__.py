"""CEL: one small interface (``expression``) over a compiler to Python (``compiler``).
"""
