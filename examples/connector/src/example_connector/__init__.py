"""A small third-party KV connector written against lmcache-compat (see docs/testing.md)."""

from example_connector.connector import ExampleConnector, loaded_tokens, lookup_hits

__all__ = ["ExampleConnector", "loaded_tokens", "lookup_hits"]
