"""The Channels groups of a run, named in one place: its stream's followers (the journal writer's wake-ups) and its
pages (the live pages' notices). Group names allow only a few characters, so a run id goes in as a digest."""

from __future__ import annotations

import hashlib

__all__ = ["APPROVALS_GROUP", "RUNS_GROUP", "run_pages_group", "run_stream_group", "thread_pages_group"]

#: The run list of every signed-in user (each consumer drops runs its user may not read).
RUNS_GROUP = "live.runs"

#: The reviewers' queue and request pages.
APPROVALS_GROUP = "live.approvals"


def _digest(run_id: str) -> str:
    return hashlib.sha256(run_id.encode()).hexdigest()[:40]


def run_stream_group(run_id: str) -> str:
    """The group of a run's stream followers: the journal writer tells it what it committed."""
    return f"run.{_digest(run_id)}"


def run_pages_group(run_id: str) -> str:
    """The group of one run's pages (timeline, live transcript, console request): told what changed."""
    return f"live.run.{_digest(run_id)}"


def thread_pages_group(thread_id: str) -> str:
    """The group of one thread's chat pages: told when any of its turns changed status (a new turn included)."""
    return f"live.thread.{_digest(thread_id)}"
