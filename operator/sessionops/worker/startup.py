"""How the worker process loads the segment: importing is most of its time to the first model
request, so it imports nothing a segment never uses and lets no collector run meanwhile.

- **Optional packages, marked absent.** Some dependencies import a package merely because it is
  installed, behind an ``except ImportError``: openai its aiohttp transport (~0.2 s; aiohttp is
  the operator's, through kopf), httpx its command line (click, also kopf's, then rich, the
  kubectl plugin's), kubernetes its schema validation (kubernetes-validate) and langsmith its
  process metrics (psutil), both only in development environments. ``None`` in ``sys.modules``
  makes such an import raise ``ImportError``: each dependency takes the path it takes where the
  package is not installed, and a development environment starts its workers like the image.
- **Index packages, initialized on first use.** Some packages' ``__init__`` only re-exports
  every module under it: openai's and langsmith's generated API types (``openai.types`` alone
  is ~0.3 s of pydantic models for every endpoint), langgraph's SDK for its server, every
  middleware of langchain and every model of langchain-openai (Azure, embeddings, completions),
  of which the segment uses a few modules (imported from them, not from the package) or none.
  Such a package's submodules import without its ``__init__``; the ``__init__`` runs, whole and
  as before, when an attribute it would have set is first asked for (``__getattr__``, PEP 562).
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
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType

ABSENT = ("aiohttp", "click", "rich", "kubernetes_validate", "psutil")
"""Packages no code path of a segment uses, which a dependency imports when it finds them."""

DEFERRED_INIT = ("openai.types", "openai.types.responses", "langsmith.types", "langgraph_sdk",
                 "langchain.agents.middleware", "langchain_openai", "langchain_openai.chat_models")
"""Index packages (their ``__init__`` only imports their modules) whose ``__init__`` waits for first use."""


class _DeferredInit(importlib.abc.Loader):
    """Runs a package's ``__init__`` at the first attribute the module lacks, not at its import."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module, with ``__path__``: submodules import without the ``__init__``

    def exec_module(self, module: ModuleType) -> None:
        loader = self.loader
        # Another thread asking meanwhile waits for the whole ``__init__``; the ``__init__``'s own
        # look-ups (``from . import x`` tries the attribute first) see a module still initializing.
        lock = threading.RLock()
        running: list[bool] = []

        def __getattr__(name: str) -> object:
            with lock:
                if not running:
                    running.append(True)
                    try:
                        loader.exec_module(module)
                    finally:
                        del module.__dict__["__getattr__"]
            try:
                return module.__dict__[name]
            except KeyError:
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None

        module.__getattr__ = __getattr__  # type: ignore[method-assign]


class _DeferredInitFinder(importlib.abc.MetaPathFinder):
    def __init__(self, packages: Sequence[str]) -> None:
        self.packages = frozenset(packages)

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name not in self.packages:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None and spec.submodule_search_locations is not None:
            spec.loader = _DeferredInit(spec.loader)
        return spec


def load_segment() -> ModuleType:
    """Import ``sessionops.worker.segment`` the lean way: first thing in the process."""
    for name in ABSENT:
        # A module someone already imported stays; only a later import sees "not installed".
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    sys.meta_path.insert(0, _DeferredInitFinder(DEFERRED_INIT))
    enabled = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module("sessionops.worker.segment")
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
