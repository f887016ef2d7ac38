"""The program language, model-free: its syntax, escape rule, grammars, parser, resolver and the oracle that writes programs from a diff."""
