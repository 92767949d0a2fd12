"""The serving tier: real vLLM (its CPU build) generates real tokens through a KV connector over
real LMCache releases (``tox -e serve-vllm0.32.0``)."""
