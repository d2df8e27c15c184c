"""'Clean up now' over /api/v1 and on the dashboard's Settings page, against a real vault: the preview
counts what retention would remove from this vault only (nothing deleted), the run removes it and is
audited with the owner as actor; a service token needs admin, a viewer is refused."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from gateway_helpers import Browser, RunningGateway, StartGateway, unique

pytestmark = pytest.mark.integration


async def signed_in(gateway: RunningGateway) -> tuple[Browser, str]:
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    return browser, username


async def aged_vault(gateway: RunningGateway, browser: Browser) -> tuple[str, dict[str, str]]:
    """A vault with a rejected and an invalidated memory past a 1-day retention, and one active memory."""
    vault = unique("tidy")
    assert (await browser.api("POST", "/api/v1/vaults", json={"name": vault})).status_code == 201
    settings = {"approval_mode": "auto", "rejected_retention_days": 1, "superseded_retention_days": 1}
    assert (await browser.api("PUT", f"/api/v1/vaults/{vault}/settings", json=settings)).status_code == 200
    ids = {}
    for name, content in (("rejected", "A wrong guess."), ("invalidated", "Old office address."), ("kept", "Stays.")):
        body: dict[str, Any] = {"content": content, "propose": name == "rejected"}
        stored = await browser.api("POST", f"/api/v1/vaults/{vault}/memories", json=body)
        assert stored.status_code in (200, 201), stored.text
        ids[name] = stored.json()["id"]
    rejected = await browser.api("POST", f"/api/v1/vaults/{vault}/memories/{ids['rejected']}/reject", json={})
    assert rejected.status_code == 200, rejected.text
    invalidated = await browser.api(
        "POST", f"/api/v1/vaults/{vault}/memories/{ids['invalidated']}/invalidate", json={"reason": "moved"}
    )
    assert invalidated.status_code == 200, invalidated.text
    conn = await asyncpg.connect(gateway.dsn)
    try:
        await conn.execute(
            "UPDATE memory SET updated_at = now() - interval '3 days' WHERE id = ANY($1::uuid[])",
            [ids["rejected"], ids["invalidated"]],
        )
    finally:
        await conn.close()
    return vault, ids


async def test_preview_then_run_for_one_vault_audited_with_the_owner(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, username = await signed_in(gateway)
    vault, ids = await aged_vault(gateway, browser)
    other, other_ids = await aged_vault(gateway, browser)

    preview = await browser.api("GET", f"/api/v1/vaults/{vault}/retention")
    assert preview.status_code == 200, preview.text
    counts = preview.json()
    assert counts["dry_run"] is True and counts["vault"] == vault
    assert (counts["rejected"], counts["invalidated"], counts["superseded"], counts["memories"]) == (1, 1, 0, 2)
    again = await browser.api("GET", f"/api/v1/vaults/{vault}/memories/{ids['rejected']}")
    assert again.status_code == 200  # a preview deletes nothing

    page = await browser.http.get(f"/dashboard/{vault}/settings")
    assert page.status_code == 200 and "Clean up now" in page.text and "/settings/clean-up" in page.text
    csrf = await browser.csrf()
    ran = await browser.http.post(f"/dashboard/{vault}/settings/clean-up", data={"csrf_token": csrf})
    assert ran.status_code == 303, ran.text
    assert ran.headers["location"] == f"/dashboard/{vault}/settings?cleaned=2&cleaned_audit=0"
    shown = await browser.http.get(ran.headers["location"])
    assert "Clean-up done: 2 memories" in shown.text and "Nothing to clean up." in shown.text

    for gone in ("rejected", "invalidated"):
        assert (await browser.api("GET", f"/api/v1/vaults/{vault}/memories/{ids[gone]}")).status_code == 404
    assert (await browser.api("GET", f"/api/v1/vaults/{vault}/memories/{ids['kept']}")).status_code == 200
    audit = (await browser.api("GET", f"/api/v1/vaults/{vault}/audit", params={"action": "retention.purge"})).json()
    entries = audit["entries"]
    assert len(entries) == 1 and entries[0]["actor"] == f"user:{username}", entries
    # the other vault was not touched: its preview is unchanged, and the API run removes it
    assert (await browser.api("GET", f"/api/v1/vaults/{other}/retention")).json()["memories"] == 2
    posted = await browser.api("POST", f"/api/v1/vaults/{other}/retention")
    assert posted.status_code == 200 and posted.json()["memories"] == 2 and posted.json()["dry_run"] is False
    assert (await browser.api("GET", f"/api/v1/vaults/{other}/memories/{other_ids['rejected']}")).status_code == 404
    await browser.close()


async def test_service_tokens_need_admin_and_viewers_are_refused(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    owner, _ = await signed_in(gateway)
    vault, ids = await aged_vault(gateway, owner)
    tokens = {}
    for scopes in (["read", "write"], ["read", "admin"]):
        body = {"name": unique("tidy"), "scopes": scopes, "vaults": [vault]}
        made = await owner.api("POST", "/api/v1/service-tokens", json=body)
        assert made.status_code == 201, made.text
        tokens[scopes[-1]] = made.json()["token"]
    async with gateway.http() as http:
        refused = await http.post(
            f"/api/v1/vaults/{vault}/retention", headers={"Authorization": f"Bearer {tokens['write']}"}
        )
        assert refused.status_code == 403, refused.text
        allowed = await http.get(
            f"/api/v1/vaults/{vault}/retention", headers={"Authorization": f"Bearer {tokens['admin']}"}
        )
        assert allowed.status_code == 200 and allowed.json()["memories"] == 2, allowed.text

    viewer, viewer_name = await signed_in(gateway)
    added = await owner.api("PUT", f"/api/v1/vaults/{vault}/members/{viewer_name}", json={"role": "viewer"})
    assert added.status_code == 200, added.text
    assert (await viewer.api("GET", f"/api/v1/vaults/{vault}/retention")).status_code == 403
    assert (await viewer.api("POST", f"/api/v1/vaults/{vault}/retention")).status_code == 403
    page = await viewer.http.get(f"/dashboard/{vault}/settings")
    assert page.status_code == 200 and "/settings/clean-up" not in page.text
    posted = await viewer.http.post(f"/dashboard/{vault}/settings/clean-up", data={"csrf_token": await viewer.csrf()})
    assert posted.status_code == 403 and "Not allowed" in posted.text
    assert (await owner.api("GET", f"/api/v1/vaults/{vault}/memories/{ids['rejected']}")).status_code == 200
    await owner.close()
    await viewer.close()
