"""Tests of the Helm chart, the Dockerfile and the CI workflows (no cluster needed)."""
