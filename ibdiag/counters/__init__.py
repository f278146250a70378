"""Counter logic: judge change, not lifetime totals (DESIGN §5).

- ``catalogue``: every counter ibdiag knows (meaning, category, width, unit, default rule), read
  from the data file ``catalogue.toml`` shipped beside it; the one table behind check messages,
  ``ibdiag explain``, HTML tooltips and Prometheus HELP text.
- ``baseline``: reading and writing the saved Snapshot that counters are compared with.
- ``deltas``: a Snapshot against its baseline: deltas, rates per hour, restarts.
- ``grading``: counter changes (or lifetime values) into Results, by the catalogue's rules.
- ``increases``: the error counters that went up, kept on the Report for the fleet.

Importing this package imports none of them: each is imported where it is used.
"""
