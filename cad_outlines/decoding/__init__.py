"""The model side: runner, sampler, constraint, drafting, streaming and the one decode loop (CaD, regeneration, teacher forcing); DCCD on the same runner."""
