"""Parsers: pure functions from a source's text to data. They never raise on odd input.

The argv of the inventory tools live here, light to import: the command plan and the checks
that read their output both need them.
"""

IBSTAT_ARGV = ["ibstat"]
IBV_DEVINFO_ARGV = ["ibv_devinfo"]
