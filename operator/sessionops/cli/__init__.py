"""``kubectl sessionops``: the kubectl plugin for sessionops (console script ``kubectl-sessionops``).

Commands: ``send``, ``approve``, ``reject``, ``answer``, ``cancel``, ``continue``, ``status``,
``watch`` and ``transcript``. The plugin only creates AgentInputs and sets ``spec.cancel`` on AgentRuns;
everything it shows is read from the resources' status. The modules:

- ``main``: the typer app (commands, options, exit codes);
- ``client``: kubeconfig / context / namespace handling like kubectl, and the CustomObjectsApi calls;
- ``inputs``: pure builders of AgentInput manifests, decision planning, answer parsing and the
  idempotency-key intent comparison;
- ``render``: rich output (waitpoint tables, session overview, results);
- ``errors``: API errors and admission rejections as one clear line and an exit code;
- ``watch``: following a run (or a session's next run) until it waits or ends;
- ``transcript``: a turn's (or a session's) steps from its AgentTranscripts, optionally followed live.

See ``docs/plugin.md`` for the user guide.
"""
