"""The e2e module reuses the local-stack fixtures of tests/e2e (a module-scoped ``stack``)."""

from tests.e2e.conftest import name, stack  # noqa: F401
