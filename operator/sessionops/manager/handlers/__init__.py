"""kopf handlers: decorators only register; each handler is a few lines that call plain
functions from admission/, scheduling/, execution/, cancellation/, readiness/ and delegation/.
The watched kinds' event handlers are one per kind (``events``), which feeds the store first
(``store``) and then calls the steps in ``sessions``, ``runs``, ``cancellation`` and ``agents``.
"""
