"""The root of ibdiag's own errors: what it was asked cannot be done as asked.

A bad profile or config file (``ibdiag.config.ConfigError``), a check that cannot be loaded
(``ibdiag.registry.RegistryError``), a setting the pipeline cannot use
(``ibdiag.pipeline.SetupError``), a support bundle that cannot be read
(``ibdiag.bundle.opener.BundleError``), a Slurm hook or fleet run that cannot start, a file the
command line cannot write (``ibdiag.cli.options.UsageFailure``): each is an ``IbdiagError``
whose ``str()`` is one line naming what and why. The command line (``ibdiag.cli``) prints it as
``ibdiag: error: LINE`` and exits UNKNOWN (3), in one place; no traceback.
"""

from __future__ import annotations


class IbdiagError(Exception):
    """ibdiag cannot do what it was asked: one line (``str()``), exit 3 on the command line."""
