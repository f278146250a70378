"""`python -m ibdiag` is the same as the `ibdiag` console script."""

from ibdiag.entry import main

main()
