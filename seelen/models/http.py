"""The HTTP clients the OpenAI SDK talks through: one TLS context for the whole process.

The SDK builds a TLS context for every client it makes, reading the system's certificate
bundle each time (about 40 ms of CPU); a process that opens several clients (a chat model
and an embedding endpoint, an owner serving profile after profile) reads it once here. The
context is the one the SDK would build (`httpx2.create_ssl_context()`, honouring
SSL_CERT_FILE and SSL_CERT_DIR), and each client keeps the SDK's own defaults (timeouts,
connection limits, redirects).

An endpoint on plain `http://` (the bundled model, Ollama, llama.cpp, LM Studio on this
machine) speaks no TLS, so its client does not read the bundle at all: it gets a context
that still requires a certificate and its host name but trusts none, so a redirect to an
https address fails closed instead of going unverified.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

    import httpx2


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The SDK's own context, with the system's certificates (read once a process)."""
    import httpx2  # the OpenAI SDK's HTTP library, imported with it

    return httpx2.create_ssl_context()


@functools.cache
def _trusting_none() -> ssl.SSLContext:
    """A context that verifies as strictly as `tls_context` and trusts no certificate."""
    import ssl

    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname


def context_for(base_url: str | None) -> ssl.SSLContext:
    """The TLS context a client of `base_url` needs (none of the bundle for plain http)."""
    plain = (base_url or "").strip().lower().startswith("http://")
    return _trusting_none() if plain else tls_context()


def async_client(base_url: str | None) -> httpx2.AsyncClient:
    """An HTTP client for `AsyncOpenAI`, with the SDK's defaults and the shared context."""
    from openai import DefaultAsyncHttpxClient

    return DefaultAsyncHttpxClient(verify=context_for(base_url))


def sync_client(base_url: str | None) -> httpx2.Client:
    """An HTTP client for `OpenAI`, with the SDK's defaults and the shared context."""
    from openai import DefaultHttpxClient

    return DefaultHttpxClient(verify=context_for(base_url))
