"""Which OpenAI-compatible endpoint a run talks to, from settings.

``--model`` takes a name, ``provider:name`` or ``local``/``local:PATH``:

- ``openai:gpt-4o-mini`` (or a bare name with ``OPENAI_API_KEY`` set): OpenAI;
- ``ollama:qwen2.5-coder`` → http://localhost:11434/v1 unless ``--base-url``;
- ``vllm:NAME`` → http://localhost:8000/v1, ``llamacpp:NAME`` → http://localhost:8080/v1;
- any name with ``--base-url`` → that server;
- the API key goes only to ``--base-url`` or to OpenAI, never to a provider's default URL;
- ``local`` (the default with no key and no base URL) → the bundled model.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ..errors import ConfigError
from ..settings import Settings
from .providers import PROVIDERS, is_local_spec

__all__ = ["Endpoint", "resolve_endpoint", "open_endpoint", "DEFAULT_OPENAI_MODEL"]

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
_NO_KEY_NEEDED = "not-needed"


@dataclass(frozen=True)
class Endpoint:
    base_url: str | None
    api_key: str
    model: str
    provider: str
    local: bool = False

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"


def is_local(settings: Settings) -> bool:
    if settings.model is None:  # no model named: local unless a key or a URL says otherwise
        return not settings.api_key and not settings.base_url
    return is_local_spec(settings.model)


def resolve_endpoint(settings: Settings) -> Endpoint:
    """The remote endpoint for ``settings`` (not the local model: see :func:`open_endpoint`)."""
    model = settings.model or DEFAULT_OPENAI_MODEL
    provider, _, name = model.partition(":") if ":" in model else ("", "", model)
    if provider and (provider not in PROVIDERS or PROVIDERS[provider].local):
        # not a provider prefix (e.g. "qwen2.5:7b" for Ollama): the whole string is the name
        provider, name = "", model
    if not name:
        raise ConfigError(f"model name is empty in {model!r}")
    known = PROVIDERS.get(provider)
    base_url = settings.base_url or (known.base_url if known else None)
    if (known and known.needs_key) or (not provider and not base_url):
        provider = "openai"
        if not settings.api_key:
            raise ConfigError(
                "no API key for OpenAI: set OPENAI_API_KEY or pass --api-key "
                "(or use --base-url for another server, or --model local)"
            )
    # the key belongs to the endpoint it was configured with (--base-url, or OpenAI's
    # own): a provider's default URL on a local port (which any local user can bind)
    # never receives it
    keyed = settings.base_url is not None or provider == "openai"
    return Endpoint(
        base_url=base_url,
        api_key=(settings.api_key if keyed else None) or _NO_KEY_NEEDED,
        model=name,
        provider=provider or "custom",
    )


@contextlib.asynccontextmanager
async def open_endpoint(settings: Settings) -> AsyncIterator[Endpoint]:
    """Yield the endpoint to talk to, serving the bundled model for the run if needed."""
    if not is_local(settings):
        yield resolve_endpoint(settings)
        return
    from .local_server import AsyncLocalModelServer, server_arguments

    path, options = await asyncio.to_thread(server_arguments, settings)
    server = AsyncLocalModelServer(path, **options)  # type: ignore[arg-type]
    # started from this (long-lived) loop thread: a per-run server dies with it, never
    # orphaned; a kept-alive one stops itself when idle
    await server.start()
    try:
        yield Endpoint(
            base_url=server.base_url,
            api_key=server.api_key,
            model=server.model_name,
            provider="local",
            local=True,
        )
    finally:
        await server.shutdown()
