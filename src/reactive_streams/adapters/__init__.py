"""Adapters between reactive streams and other concurrency libraries (``adapters.asyncio``)."""
