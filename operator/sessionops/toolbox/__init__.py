"""The tools process: workspace and shell tools, run apart from the worker.

The worker holds credentials (its ServiceAccount token, the model key, the database
credential); the model's tool calls must reach none of them. So the built-in tools that
touch the workspace or run commands (``read_file``, ``write_file``, ``list_files``,
``run_shell``) run in another process, in another container of the worker pod: its own
UID, no Secret, no ServiceAccount token, an environment of its own. The worker reaches it
over a Unix socket on a volume the two containers share (``protocol``).

``ops``: the operations, confined to one work directory (used by the server, and in-process
by tests and benchmarks); ``server``: ``python -m sessionops.toolbox``; ``client``: the
worker's side. Standard library only: the tools process imports no client library that
could hold or find a credential, and starts in a fraction of the worker's time.
"""
