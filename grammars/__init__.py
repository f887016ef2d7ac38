"""Grammar files, shipped as package data of cad_outlines.grammars (see pyproject.toml)."""
