"""The HTTP clients the OpenAI SDK talks through: one TLS context for the whole process.

The SDK builds a TLS context for every client it makes, reading the system's certificate
bundle each time (about 40 ms of CPU); a process that opens several clients (a chat model
and an embedding endpoint, an owner serving profile after profile) reads it once here. The
context is the one the SDK would build (`httpx2.create_ssl_context()`, honouring
SSL_CERT_FILE and SSL_CERT_DIR), and each client keeps the SDK's own defaults (timeouts,
connection limits, redirects).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

    import httpx2


@functools.cache
def tls_context() -> ssl.SSLContext:
    import httpx2  # the OpenAI SDK's HTTP library, imported with it

    return httpx2.create_ssl_context()


def async_client() -> httpx2.AsyncClient:
    """An HTTP client for `AsyncOpenAI`, with the SDK's defaults and the shared context."""
    from openai import DefaultAsyncHttpxClient

    return DefaultAsyncHttpxClient(verify=tls_context())


def sync_client() -> httpx2.Client:
    """An HTTP client for `OpenAI`, with the SDK's defaults and the shared context."""
    from openai import DefaultHttpxClient

    return DefaultHttpxClient(verify=tls_context())
