"""sessionops: LLM agents as Kubernetes resources (AgentSession, AgentInput, AgentRun)."""

GROUP = "sessionops.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
