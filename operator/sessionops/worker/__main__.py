"""``python -m sessionops.worker``: run one execution segment and exit (see ``segment.main``)."""

from sessionops.worker.segment import main

main()
