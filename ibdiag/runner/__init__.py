"""Process control, apart from the machine readers: how ibdiag runs what it does not trust.

- ``ibdiag.runner.command_runner``: ``Runner``, the one way ibdiag runs an external command
  (argv lists, process groups, timeouts, output caps, a ``CommandRun`` whatever happened);
- ``ibdiag.runner.proctree``: a command's whole process tree, found and killed (cookies, the
  child subreaper, ``PR_SET_PDEATHSIG``);
- ``ibdiag.runner.sentinel``: the standalone script that kills what is left when ibdiag dies;
- ``ibdiag.runner.watchdog``: a bound on reading sysfs and procfs, so a hung read cannot hang
  the run;
- ``ibdiag.runner.interruptible``: waiting on worker threads so a stop signal still lands.

Importing this package loads none of them (``subprocess`` and threads stay off level quick).
"""
