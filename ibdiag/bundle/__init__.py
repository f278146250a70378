"""Support bundles: write one (``ibdiag collect``), open one safely, replay it into a Snapshot.

One module per step; callers import the module they use (importing this package loads none of
them, so ``ibdiag.bundle.limits`` alone stays cheap):

- ``ibdiag.bundle.write``: ``write_bundle`` (the layout is in its docstring), built and
  published atomically, with an ``ibdiag.bundle.manifest.Manifest`` listing every file; text
  and names optionally through ``ibdiag.bundle.redact``;
- ``ibdiag.bundle.opener``: ``open_bundle`` verifies a directory or tarball
  (``ibdiag.bundle.archive``) against its manifest within ``ibdiag.bundle.limits`` and yields
  an ``OpenedBundle``; ``BundleError`` otherwise;
- ``ibdiag.bundle.replay``: ``replay`` rebuilds the Snapshot the live run built, parsing the raw
  files and command outputs with today's code.
"""
