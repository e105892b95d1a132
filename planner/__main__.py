"""``python -m planner`` is the ``layout`` command."""

from planner.cli import main

raise SystemExit(main())
