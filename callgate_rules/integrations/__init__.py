"""What connects the gate to the world around it: model API formats, provenance,
the decision log, confirmation tokens.
"""
