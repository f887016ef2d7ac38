"""Serving engines other than the transformers decode loop.

``cad_outlines.engines.vllm`` edits documents on a vLLM engine (continuous batching,
paged and prefix-cached KV). It imports vLLM, which is an optional dependency
(``pip install 'cad-outlines[vllm]'``); importing this package does not.
"""
