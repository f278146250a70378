"""Sources: the only code that touches the machine (sysfs, procfs, and later commands).

``SOURCE_LEVELS`` names every source a check may declare in ``needs`` and the lowest level at
which it is collected: ``quick`` sources read files only and never run a command.
"""

SOURCE_LEVELS = {
    "sysfs": "quick",
    "procfs": "quick",
}
