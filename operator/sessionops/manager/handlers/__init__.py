"""kopf handlers: decorators only register; each handler is a few lines that call plain
functions from admission/, scheduling/, execution/, cancellation/, readiness/ and delegation/.
"""
