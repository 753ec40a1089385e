"""Typed read views of the objects the controllers decide on (pure, no I/O).

A controller (and the watch-fed cache, and the worker's adapter) reads a status field through
a view, never by walking the raw dict: a renamed field breaks here, in one place. Views are
cheap wrappers over the watched dict (no copy, no validation), so reading one costs what the
dict lookup costs.
"""

from sessionops.views.input import InputView
from sessionops.views.job import JobView
from sessionops.views.run import RunView
from sessionops.views.session import SessionView

__all__ = ["InputView", "JobView", "RunView", "SessionView"]
