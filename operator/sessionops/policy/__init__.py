"""Rules shared by admission, the run controller and the worker (pure: no I/O).

- ``authz``: the SubjectAccessReview of an identity, one shape for every check;
- ``podaccess``: what an Agent's pod-shaping fields would give its author;
- ``egress``: where MCP servers may be reached.
"""
