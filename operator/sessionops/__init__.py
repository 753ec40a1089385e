"""sessionops: LLM agents as Kubernetes resources (AgentSession, AgentInput, AgentRun).

The packages are layers; each imports only the layers below it (``lint-imports`` checks it,
``tests/test_import_contracts.py`` checks the checks):

1. processes: ``manager`` (the operator, kopf handlers), ``worker`` (one segment), ``cli``
   (the kubectl plugin), ``replay`` (the replay model);
2. controllers, independent of each other: ``admission``, ``scheduling``, ``execution``,
   ``cancellation``, ``readiness``; each a pure decision and a thin adapter;
3. ``delegation``: the delegation tree, which several controllers act on;
4. ``agent`` (the LangGraph agent of a turn) and ``policy`` (pure rules shared by admission,
   execution and the worker);
5. ``platform``: Kubernetes and PostgreSQL adapters, the watch-fed cache, locks, logs, metrics,
   settings;
6. ``views``: typed read views of runs, sessions, inputs and Jobs (every reader above uses them);
7. ``api`` (the API types, source of the CRDs; names, labels and timestamps) and ``toolbox`` (the tools process, standard
   library only).
"""

GROUP = "sessionops.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
