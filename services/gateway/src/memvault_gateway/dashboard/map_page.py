"""The vault map: the largest tags as boxes, a few memories and conversations in each, the stored links
between them as curves (replaces, similar, depends on) and, under the map, every link of the items
drawn with the copies' provenance and the memories' tracked sources. Drawn on the server as SVG by
`map_layout` (no script; the page's CSP holds), the same drawing for the same data. Anyone who may read
the vault (viewers too) sees it."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from memvault.vault.v1 import archive_pb2 as pb
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, owner
from memvault_gateway.dashboard.i18n import N_
from memvault_gateway.dashboard.map_layout import layout, shorten

router = APIRouter(route_class=DashboardRoute)

MAX_TAGS = 12
ITEMS_PER_TAG = 6
LINK_WORDS = {
    "replaces": N_("replaces"),
    "similar": N_("is similar to"),
    "depends_on": N_("depends on"),
}


@router.get(PREFIX + "/{vault}/archive/map")
async def vault_map(
    vault: str,
    request: Request,
    gw: GatewayDep,
    tags: Annotated[int, Query(ge=1, le=30)] = MAX_TAGS,
    per_tag: Annotated[int, Query(ge=1, le=20)] = ITEMS_PER_TAG,
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    answer = await person.gw.vault.archive_call(
        "GetVaultMap",
        pb.GetVaultMapRequest(vault=vault, max_tags=tags, items_per_tag=per_tag),
        person.caller.identity(),
    )
    drawing = layout(answer)
    labels = {i.id: (i.kind, i.label) for i in answer.items}
    links: list[dict[str, Any]] = [
        {
            "from_kind": labels.get(k.from_id, ("memory", ""))[0],
            "from_id": k.from_id,
            "from_label": shorten(labels.get(k.from_id, ("", k.from_id))[1], 80),
            "words": person.gettext(LINK_WORDS.get(k.kind, k.kind)),
            "kind": k.kind,
            "to_id": k.to_id,
            "to_label": shorten(k.to_label, 80),
            "to_drawn": k.to_drawn,
        }
        for k in sorted(answer.links, key=lambda k: (k.from_id, k.kind, k.to_id))
    ]
    copies = [
        {
            "id": i.id,
            "label": shorten(i.label, 80),
            "vault": i.derived_from.vault,
            "url": f"{PREFIX}/{quote(i.derived_from.vault, safe='')}/archive/c/{i.derived_from.conversation_id}?"
            + urlencode({"revision": i.derived_from.revision}),
            "revision": i.derived_from.revision,
        }
        for i in sorted(answer.items, key=lambda i: i.id)
        if i.HasField("derived_from") and i.derived_from.conversation_id
    ]
    sources = [
        {"id": i.id, "label": shorten(i.label, 80), "sources": i.sources}
        for i in sorted(answer.items, key=lambda i: i.id)
        if i.sources
    ]
    return person.render(
        "vault_map.html",
        "archive",
        answer=answer,
        drawing=drawing,
        links=links,
        copies=copies,
        sources=sources,
        tags_shown=tags,
        per_tag=per_tag,
    )
