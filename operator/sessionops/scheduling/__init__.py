"""Scheduling: the session controller. ``queue`` decides (pure: objects in, a Plan out);
``reconcile`` reads the objects, applies the plan, and is safe to run again at any time."""
