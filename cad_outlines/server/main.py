"""Run the server: load the model, bind the socket, hand it to uvicorn, exit 0 on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
from typing import Any, Callable

from ..decoding.defaults import MODEL_FLOOR
from ..errors import InputError, MissingDependencyError
from ..tools.calibration import NO_COST_ON_VLLM

#: How long a graceful shutdown (SIGTERM, Ctrl-C) waits for requests in flight before it
#: cancels them (their decodes stop at the next step).
SHUTDOWN_SECONDS = 30


def model_id(preset: str | None, model: str | None) -> str:
    """The name clients send as ``model``: the preset, or the folder's / GGUF file's name."""
    if preset:
        return preset
    assert model is not None
    name = os.path.basename(os.path.normpath(model))
    return name[:-len(".gguf")] if name.endswith(".gguf") else name


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: a free one the OS picks)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise InputError(f"--host {host} --port {port}: cannot listen there ({err.strerror or err})") from None
    sock.listen(2048)
    return sock


def serve(model: Any, name: str, *, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          max_queue: int = 32, max_tokens: int = 2048, prefix_cache: bool = False,
          announce: Callable[[str], None] | None = None, engine: str = "transformers",
          engine_args: dict[str, Any] | None = None, follow_prediction: float | str | None = MODEL_FLOOR,
          forward_cost: Any = None) -> int:
    """Serve ``model`` as ``name`` until SIGTERM or Ctrl-C: an Outlines transformers model
    (``engine="transformers"``), or a model folder run by vLLM (``engine="vllm"``, with
    ``engine_args`` for its engine). ``follow_prediction`` (either engine): apply-form
    snippets' merges as a prior, ``forward_cost`` (transformers only): the machine's
    :class:`~cad_outlines.decoding.drafting.ForwardCost` that cuts drafts to what pays
    (:class:`~cad_outlines.server.engine.Engine`).

    Prints ``serving NAME at http://HOST:PORT/v1`` on stdout once the socket listens (with
    ``port=0`` that is how a caller learns the port). Returns 0 after a graceful shutdown.
    """
    try:
        import uvicorn
    except ImportError:
        raise MissingDependencyError("cad-outlines serve needs FastAPI and uvicorn: "
                                     "pip install 'cad-outlines[serve]'") from None
    from .app import create_app

    if engine == "vllm":
        if forward_cost is not None:  # before vLLM loads
            raise InputError(NO_COST_ON_VLLM)
        from .vllm_engine import VLLMEngine

        backend: Any = VLLMEngine(model, name, max_queue=max_queue, max_tokens=max_tokens,
                                  follow_prediction=follow_prediction, **(engine_args or {}))
    else:
        from .engine import Engine

        backend = Engine(model, name, max_queue=max_queue, max_tokens=max_tokens, prefix_cache=prefix_cache,
                         follow_prediction=follow_prediction, forward_cost=forward_cost)
    app = create_app(backend, api_key=api_key)
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    line = f"serving {name} at http://{shown}:{sock.getsockname()[1]}/v1"
    (announce or (lambda text: print(text, flush=True)))(line)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=SHUTDOWN_SECONDS)
    server = uvicorn.Server(config)
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then raises the signal again for the
    # handler it found. The command line's handler would turn that into an interruption
    # (exit 130); here the signal has been dealt with, so the handler it finds does nothing.
    previous = {sig: signal.signal(sig, _handled) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
    return 0


def _handled(_signum: int, _frame: Any) -> None:
    pass


def check_engine(engine: str) -> None:
    """``--engine vllm``: refuse with the reason when vLLM is not installed."""
    if engine == "transformers":
        return
    try:
        import vllm  # noqa: F401
    except ImportError:
        raise InputError("--engine vllm: vLLM is not installed here (pip install 'cad-outlines[vllm]' on a "
                         "CUDA machine, scripts/vllm_venv.sh on a CPU; see docs/serving.md); use "
                         "--engine transformers") from None


__all__ = ["SHUTDOWN_SECONDS", "bind", "check_engine", "model_id", "serve"]
