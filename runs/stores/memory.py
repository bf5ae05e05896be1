"""In-memory back ends: the runtime's reference stores, for tests and demos (not production)."""

from runs.runtime.effect_ledger import InMemoryEffectLedger
from runs.runtime.stores import InMemorySessionStore
from runs.runtime.wire import InMemoryStreamStateStore

__all__ = ["InMemoryEffectLedger", "InMemorySessionStore", "InMemoryStreamStateStore"]
