"""``python -m sessionops.cli``: the same as the ``kubectl-sessionops`` console script."""

from sessionops.cli.main import main

main()
