"""Settings of the fleet benchmarks' processes (daphne, workers): the project's, with DEBUG off as in
production (DEBUG logs every query) and the bench agents registered, sized by the environment."""

from deuz_project.env import env_int
from deuz_project.settings import *  # noqa: F403
from deuz_project.settings import DEUZ_AGENTS

DEBUG = False
# bench.bench_agents.AGENTS (not imported: a settings module imports no app code).
DEUZ_AGENTS = {
    **DEUZ_AGENTS,
    "bench-approval": "bench.bench_agents.approval_agent",
    "bench-cancel": "bench.bench_agents.cancel_agent",
    "bench-steps": "bench.bench_agents.steps_agent",
    "bench-tail": "bench.bench_agents.tail_agent",
}
DEUZ_BENCH_STEPS = env_int("DEUZ_BENCH_STEPS", default=20, minimum=1)
DEUZ_BENCH_TAIL_PARTS = env_int("DEUZ_BENCH_TAIL_PARTS", default=30, minimum=1)
DEUZ_BENCH_TAIL_INTERVAL_MS = env_int("DEUZ_BENCH_TAIL_INTERVAL_MS", default=100, minimum=0)
DEUZ_BENCH_TAIL_LEAD_MS = env_int("DEUZ_BENCH_TAIL_LEAD_MS", default=2000, minimum=0)
# The cancel bench's model: a word every this many milliseconds (bench.bench_agents.cancel_agent).
DEUZ_BENCH_CANCEL_INTERVAL_MS = env_int("DEUZ_BENCH_CANCEL_INTERVAL_MS", default=20, minimum=0)
