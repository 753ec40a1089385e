"""kopf's webhook server, fitted to what the API server sends and to OpenSSL 3."""

from __future__ import annotations

from collections.abc import Collection

import aiohttp.web
import kopf

from sessionops.platform.certificates import self_signed

API_REQUEST_MAX = 3 * 1024 * 1024
"""kube-apiserver's request body limit (``MaxRequestBodyBytes``): the largest object a review can carry."""

REVIEW_MAX = 2 * API_REQUEST_MAX + 1024 * 1024
"""Bytes of one AdmissionReview we read: an UPDATE carries ``object`` and ``oldObject``, each up to the
API server's request limit, plus the request envelope. aiohttp's default (1 MiB) answered 413 to the
finalizer removal of a large input, which then could never be deleted (issue 14)."""


class WebhookServer(kopf.WebhookServer):
    """kopf's webhook server with certificates from ``cryptography`` instead of oscrypto (which cannot
    load OpenSSL 3's libcrypto) and a request body limit that fits any review the API server sends."""

    @staticmethod
    def build_certificate(hostnames: Collection[str], password: str | None = None) -> tuple[bytes, bytes]:
        if password:
            raise ValueError("encrypted self-signed keys are not supported; pass certfile/pkeyfile instead")
        return self_signed(hostnames)

    @staticmethod
    async def _serve(fn: kopf.WebhookFn, request: aiohttp.web.Request) -> aiohttp.web.Response:
        # kopf builds its aiohttp application without a size option: the limit is set per request.
        return await kopf.WebhookServer._serve(fn, request.clone(client_max_size=REVIEW_MAX))
