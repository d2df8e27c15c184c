"""The owner's dashboard: server-rendered pages per vault (overview, review, memories, sources, imports, archive
with the vault map, guide, settings, index, backup, members, apps, audit), calling the vault through the same
code as /api/v1.

`install(app)` adds its routes; templates, static files and catalogues live beside this module.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import FastAPI
from fastapi.params import Depends

from memvault_gateway.dashboard import (
    apps,
    archive_page,
    audit,
    backup_page,
    guide,
    imports,
    index_page,
    language,
    map_page,
    members,
    memories,
    overview,
    review,
    settings_page,
    sources_page,
)


def install(app: FastAPI, dependencies: Sequence[Depends] = ()) -> None:
    """Add the dashboard's pages, its static files and the language switcher to the gateway.

    `dependencies` run before every page: the app passes `signin.forward_auth.sign_in`, so a trusted
    forward-auth proxy's person is signed in (and up, on first sight) as for /account and /api/v1."""
    app.include_router(language.static_files)
    for module in (
        language,
        overview,
        review,
        memories,
        sources_page,
        imports,
        archive_page,
        map_page,
        guide,
        settings_page,
        index_page,
        backup_page,
        members,
        apps,
        audit,
    ):
        app.include_router(module.router, dependencies=list(dependencies))
