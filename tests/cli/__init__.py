"""Tests of the kubectl plugin (sessionops.cli): pure parts, commands against a fake API, and e2e."""
