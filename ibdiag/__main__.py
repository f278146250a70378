"""`python -m ibdiag` is the same as the `ibdiag` console script."""

from ibdiag.cli import main

main()
