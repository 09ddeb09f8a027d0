"""``python -m letitloop`` runs the ``lil`` command line."""

from .cli import main

main()
