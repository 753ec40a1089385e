"""How the worker process loads the segment: importing is most of its time to the first model
request, so it imports nothing a segment never uses and lets no collector run meanwhile.

- **Optional packages, marked absent.** Some dependencies import a package merely because it is
  installed, behind an ``except ImportError``: openai its aiohttp transport (~0.2 s; aiohttp is
  the operator's, through kopf), httpx its command line (click, also kopf's, then rich, the
  kubectl plugin's), kubernetes its schema validation (kubernetes-validate) and langsmith its
  process metrics (psutil), both only in development environments. ``None`` in ``sys.modules``
  makes such an import raise ``ImportError``: each dependency takes the path it takes where the
  package is not installed, and a development environment starts its workers like the image.
- **No garbage collection while importing.** Imports create ~200,000 objects that live as long
  as the process; over them the cyclic collector ran ~480 times and freed ~2 % (a sixth of the
  import time). It is off while the segment's modules load; ``gc.freeze`` then keeps what they
  made out of every later collection, and collection resumes for the segment's work.

``tests/worker/test_startup.py`` checks what the process imports; every worker the suite starts
(``python -m sessionops.worker``) loads this way.
"""

from __future__ import annotations

import gc
import importlib
import sys
from types import ModuleType

ABSENT = ("aiohttp", "click", "rich", "kubernetes_validate", "psutil")
"""Packages no code path of a segment uses, which a dependency imports when it finds them."""


def load_segment() -> ModuleType:
    """Import ``sessionops.worker.segment`` the lean way: first thing in the process."""
    for name in ABSENT:
        # A module someone already imported stays; only a later import sees "not installed".
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    enabled = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module("sessionops.worker.segment")
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
