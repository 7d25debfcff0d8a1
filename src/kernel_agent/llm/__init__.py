"""Talking to models: the client and its retries, the stream decoder, the two code
protocols, what the model sees of a cell, endpoints and the bundled local model.

- :mod:`.client`: :class:`~.client.LLMClient`, one async client for any
  OpenAI-compatible endpoint;
- :mod:`.stream`: streamed chunks -> deltas and one :class:`~.stream.Completion` (pure);
- :mod:`.protocol`: the ``tools`` and ``fenced`` protocols, fences, message builders (pure);
- :mod:`.view`: a cell's outputs -> the text and images the model reads (pure);
- :mod:`.endpoint`: which endpoint a run talks to;
- :mod:`.local_model`, :mod:`.local_server`: the bundled model, assembled and served
  (:mod:`.local_daemon` is the server process, :mod:`.local_state` its kept-alive state).
"""
