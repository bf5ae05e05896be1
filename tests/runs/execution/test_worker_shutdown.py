"""A stopping worker closes the model clients its legs used."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from runs.runtime.providers import AnthropicModel
from runs.execution.worker import Worker


@pytest.mark.django_db(transaction=True)
def test_a_stopping_worker_closes_the_model_clients_of_its_event_loop():
    async def run_and_stop() -> bool:
        model = AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-TESTONLY-shutdown", base_url="http://127.0.0.1:9")
        client = model.client
        worker = Worker(worker_id="w", concurrency=1, poll_seconds=0.01)
        worker.stop()
        await worker.run()
        return client.is_closed()

    assert async_to_sync(run_and_stop)()
