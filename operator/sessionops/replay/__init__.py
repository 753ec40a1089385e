"""The replay model: a deterministic model server speaking OpenAI chat completions.

What belongs here: scenario files and their loading (`scenarios`), the strict history
checks a real provider applies (`history`), the pure mapping of a scenario response to
OpenAI payloads (`protocol`), and the aiohttp server with its CLI (`server`,
`__main__`). Nothing here talks to Kubernetes or PostgreSQL; the only I/O is reading
scenario files and serving HTTP.

The answer to a request is chosen by the number of assistant messages already in its
history, so a retried call gets the same answer (ARCHITECTURE.md, section 1.3); a
scenario's `branches` pick a different list of answers by the first user message, and a
scenario with `turns` answers every user message by its cue words (the demo assistant).
"""

from sessionops.replay.history import HistoryError, validate_history
from sessionops.replay.scenarios import (
    Scenario,
    ScenarioError,
    dirs_from_env,
    load_scenario_dirs,
    load_scenario_file,
    parse_scenario,
)
from sessionops.replay.server import ReplayServer, running_replay_server, start_replay_server

__all__ = [
    "HistoryError",
    "ReplayServer",
    "Scenario",
    "ScenarioError",
    "dirs_from_env",
    "load_scenario_dirs",
    "load_scenario_file",
    "parse_scenario",
    "running_replay_server",
    "start_replay_server",
    "validate_history",
]
