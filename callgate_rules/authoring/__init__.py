"""Tools for the people who write the documents: lint, fmt, catalog, versioning.
"""
