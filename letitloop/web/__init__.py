"""``lil ui``: a local, read-only web view of a journal's runs (the ``letitloop[ui]`` extra).

Its modules, bottom up (each imports only the ones before it): ``views`` (what a page
shows, as plain values), ``pages`` (the pages as HTML, from the templates under
``templates/``), ``app`` (the Starlette app: routes, security headers) and ``server``
(uvicorn). The pages read :mod:`letitloop.inspection`, as ``lil`` does; nothing here is
imported by the core or by ``lil`` before ``lil ui`` or ``lil export --format html`` runs.
"""

from __future__ import annotations

from .app import create_app
from .pages import standalone_run

__all__ = ["create_app", "standalone_run"]
