"""Admin registrations of this app (none yet: it has no models)."""
