"""Reaching a transformers model's attention: loading, the two doors into attention (the registered function and
the interception), layer discovery, pooling, prompts, and the checks on model folders and remote code."""
