"""The fleet view: many nodes' Reports read together to answer what no single node can - which
nodes are sick and why (grouped), which are slower than their peers although each passes its
own floor, which run another firmware or driver, and whether the failing nodes share a switch.

A layer above Reports, never inside checks (DESIGN §10). The parts, each one concept:

- ``ibdiag.fleet.node``: ``NodeSummary``, what one node's Report says that the fleet compares
  (verdict, drain reason, inventory, per-rail metrics, far ends), read through
  ``ibdiag.fleet.report_view``: the typed view of only those Report fields, which pydantic-core
  parses straight from the file without validating the whole Report - a fleet of 10,000 nodes
  is read in about 25 s on two cores (benchmarks/results-issue15.md).
- ``ibdiag.fleet.read``: reports, directories and bundles in, one ``NodeSummary`` (or one
  problem line) at a time out: streaming, so memory is bounded by the summaries.
- ``ibdiag.fleet.stats``, ``outliers``, ``drift``, ``switches``: the analyses.
- ``ibdiag.fleet.report``: ``FleetReport``, the result (JSON with a schema), rendered as text,
  JSON and HTML.
- ``ibdiag.fleet.run``: ``ibdiag fleet run`` - one ``ibdiag check --json`` per node through the
  scheduler the cluster already has (Slurm's ``srun``), never a home-made remote executor.
- ``ibdiag.fleet.run_record``: what ``fleet run`` records - each node task's status line, each
  node's outcome and ``DIR/fleet-run.json``.
"""
