"""``python -m callgate_rules.cli``: the ``callgate`` command without its console script."""

from callgate_rules.cli import main

main()
