"""The one table of model providers: the ``provider:`` prefixes of ``--model``.

Everything that reads a model spec asks here: :func:`~.protocol.parse_model_spec` (which
prefixes split off), :func:`~.endpoint.resolve_endpoint` (the default URL, whether a key
is needed) and the local-model checks (``local`` and ``local:PATH`` are served by
kernel-agent itself, and so is no model at all when there is no key and no URL).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROVIDERS", "Provider", "is_local_spec"]


@dataclass(frozen=True)
class Provider:
    name: str
    #: the base URL when ``--base-url`` is not given (None: the provider's own default)
    base_url: str | None = None
    #: the endpoint refuses requests without an API key
    needs_key: bool = False
    #: served by kernel-agent (the bundled model, or a GGUF file) on loopback
    local: bool = False


PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider("openai", needs_key=True),
        Provider("ollama", "http://localhost:11434/v1"),
        Provider("vllm", "http://localhost:8000/v1"),
        Provider("llamacpp", "http://localhost:8080/v1"),
        Provider("local", local=True),
    )
}


def is_local_spec(spec: str | None) -> bool:
    """True for the specs kernel-agent serves itself: None, ``local``, ``local:PATH``."""
    if spec is None:
        return True
    prefix, sep, _ = spec.strip().partition(":")
    return prefix.lower() == "local" and (bool(sep) or spec.strip().lower() == "local")
