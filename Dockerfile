# syntax=docker/dockerfile:1
# One image for the operator, the workers and the replay model:
#   operator  python -m sessionops.manager   (the default command)
#   worker    python -m sessionops.worker    (Jobs created by the operator)
#   replay    python -m sessionops.replay --host 0.0.0.0 --port 8089 --dirs /scenarios
#
# Base image. For reproducible builds pin it by digest:
#   docker buildx imagetools inspect python:3.11-slim   # prints "Digest: sha256:..."
#   docker build --build-arg PYTHON_IMAGE=python:3.11-slim@sha256:<digest> .
ARG PYTHON_IMAGE=python:3.11-slim

# ---- builder: wheels for the project and every dependency (versions from constraints.txt)
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY operator/ ./operator/
# Dependencies must come as prebuilt wheels (the final stage has no compiler); only the
# project itself (pure Python) is built here.
RUN pip wheel --wheel-dir /wheels --no-deps . \
 && pip wheel --wheel-dir /wheels --only-binary=:all: --constraint constraints.txt /wheels/sessionops-*.whl

# ---- final: the runtime only (no compiler, no apt, no sources, no wheels left behind)
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="sessionops" \
      org.opencontainers.image.description="LLM agents as Kubernetes resources: operator, worker and replay model" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/sessionops/sessionops"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    HOME=/tmp
# The wheels are bind-mounted from the builder, so they never land in a layer. The venv
# has no pip of its own: the base interpreter's pip installs into it (explicit paths:
# PATH already points at the venv). No extra: the kubectl plugin's (cli) and the suite's (dev)
# packages stay out. pip compiles the bytecode as it installs (its default), so no process
# compiles at start (PYTHONDONTWRITEBYTECODE: the non-root user could not write it anyway).
# The last line imports what a worker imports, the way it does (sessionops.worker.startup).
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    /usr/local/bin/python -m venv --without-pip /opt/venv \
 && /usr/local/bin/python -m pip --python /opt/venv/bin/python install --no-cache-dir --no-index \
        --only-binary=:all: --find-links=/wheels sessionops \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin nonroot \
 && python -c "import sessionops, kopf, langgraph, psycopg" \
 && python -c "from sessionops.worker.startup import load_segment; load_segment()"
WORKDIR /tmp
# Numeric, so that Kubernetes can verify runAsNonRoot.
USER 65532:65532
EXPOSE 8080 9443
ENTRYPOINT ["python", "-m"]
CMD ["sessionops.manager"]
