"""``python -m orchestra`` runs the ``forge`` command line."""

from ._cli._main import entry

entry()
