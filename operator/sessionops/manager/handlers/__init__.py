"""kopf handlers: decorators only register; each handler is a few lines that call plain
functions from admission/, scheduling/, execution/, cancellation/, readiness/ and delegation/.
"""

# Registered before any sibling, whichever is imported first: kopf calls a kind's event handlers
# in registration order, and the store must drop a deleted object before the reconciles its
# event triggers read (see ``store``).
from sessionops.manager.handlers import store  # noqa: E402, F401
