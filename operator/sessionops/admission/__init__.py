"""Admission: where "frozen at receipt" is enforced.

Pure decision functions (objects in, a decision or a Rejection out) live in
``snapshot``, ``sessions``, ``inputs`` and ``resume``; ``webhooks`` is the thin kopf
adapter that reads the objects, allocates sequences and turns Rejections into
admission errors.
"""
