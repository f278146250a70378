"""Support bundles: write one (``ibdiag collect``), open one safely, replay it into a Snapshot.

Three modules, one step each, and this facade over them, so callers import one name:

- ``ibdiag.bundle_write``: ``write_bundle`` (the layout is in its docstring), built and
  published atomically, with an ``ibdiag.bundle_manifest.Manifest`` listing every file;
- ``ibdiag.bundle_open``: ``open_bundle`` verifies a directory or tarball against its manifest
  within ``ibdiag.bundle_limits`` and yields an ``OpenedBundle``; ``BundleError`` otherwise;
- ``ibdiag.bundle_replay``: ``replay`` rebuilds the Snapshot the live run built, parsing the raw
  files and command outputs with today's code.
"""

from __future__ import annotations

from ibdiag.bundle_open import BundleError, OpenedBundle, open_bundle
from ibdiag.bundle_replay import BundleReader, replay, replay_baseline
from ibdiag.bundle_write import Renderer, bundle_name, default_renderers, sanitise, write_bundle

__all__ = [
    "BundleError",
    "BundleReader",
    "OpenedBundle",
    "Renderer",
    "bundle_name",
    "default_renderers",
    "open_bundle",
    "replay",
    "replay_baseline",
    "sanitise",
    "write_bundle",
]
