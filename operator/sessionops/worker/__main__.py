"""``python -m sessionops.worker``: run one execution segment and exit (see ``segment.main``;
``startup`` says how its modules are loaded)."""

from sessionops.worker.startup import load_segment

load_segment().main()
