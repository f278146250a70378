"""Parsers: pure functions from a source's text to data. They never raise on odd input.

They build no command lines: what runs, and with which argv, is ``ibdiag.sources.plan``'s
(read-only commands); the traffic tests' are their families' (``ibdiag.families``).
"""
