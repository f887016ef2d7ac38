"""An OpenAI-compatible HTTP server for Copy-as-Decode edits (``cad-outlines serve``).

``POST /v1/chat/completions`` takes OpenAI's chat schema. With ``prediction`` (OpenAI's
predicted outputs) the prediction is the file and the conversation the instruction; a
last user message in the apply-model form (``<code>`` + ``<update>``, optional
``<instruction>``) merges the snippet into the code; anything else is plain chat with the
same model. Modules: :mod:`.protocol` (the schema, checked; responses and error objects),
:mod:`.engine` (the model on one worker thread, a bounded queue), :mod:`.app` (FastAPI
routes, the API key, the access log), :mod:`.main` (load the model, run uvicorn).
FastAPI and uvicorn come with the ``serve`` extra. docs/serving.md has every field.
"""

from __future__ import annotations

__all__ = ["create_app", "serve"]


def __getattr__(name: str):
    # FastAPI is an extra: importing the package costs nothing until it is used.
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "serve":
        from .main import serve

        return serve
    raise AttributeError(f"module 'cad_outlines.server' has no attribute {name!r}")
