"""Collaboration (ARCHITECTURE section 6): a run's ``delegate`` tool makes child sessions.

``names``: labels and deterministic child names; ``tree``: pure views of a delegation tree
(what a parent waits on, whether it may resume, how many turns of a tree run);
``reconcile``: the operator's adapter (parent status, cascade of a cancel or a deadline).
"""
