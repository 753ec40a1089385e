"""Agent readiness: whether sessions of an Agent can run, shown on the Agent's status
(``Ready`` condition, effective model and approval mode for the printer columns).
``agents`` decides (pure); ``reconcile`` reads and writes (event-driven, never polling)."""
