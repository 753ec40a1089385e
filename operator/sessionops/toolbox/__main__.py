"""``python -m sessionops.toolbox``: the tools process (see ``server``)."""

from sessionops.toolbox.server import main

main()
