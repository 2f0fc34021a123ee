"""Evaluation suites: each takes policies and the judge, and returns a table."""
