"""The dashboard over HTTP, in-process against a real vault: who may see it, forms' CSRF, headers,
errors as pages, static files, the language switcher, and roles enforced by the server."""

from __future__ import annotations

import re

import pytest
from gateway_helpers import Browser, RunningGateway, StartGateway

pytestmark = pytest.mark.integration


async def signed_in(gateway: RunningGateway) -> tuple[Browser, str]:
    """A new person's browser, signed in, and the name of their own vault (where /dashboard leads)."""
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    assert (await browser.sign_in(username, password)).status_code == 303
    home = await browser.http.get("/dashboard")
    assert home.status_code == 303, home.text
    return browser, home.headers["location"].removeprefix("/dashboard/")


async def test_signed_out_visitors_are_sent_to_sign_in_and_back(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    async with gateway.http() as http:
        answer = await http.get("/dashboard/default/review")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/login?next=/dashboard/default/review"
        posted = await http.post("/dashboard/default/review", data={"decide_one": "approve:x"})
        assert posted.status_code == 303 and posted.headers["location"].startswith("/login?next=")


async def test_pages_carry_a_strict_policy_and_no_inline_script(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await signed_in(gateway)
    for path in ("", "/review", "/memories", "/sources", "/imports", "/guide", "/settings", "/apps", "/audit"):
        page = await browser.http.get(f"/dashboard/{vault}{path}")
        assert page.status_code == 200, (path, page.text)
        policy = page.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy
        assert page.headers["x-frame-options"] == "DENY"
        assert re.findall(r"<script(?![^>]*\bsrc=)", page.text) == [], path
        assert re.findall(r"\son[a-z]+=", page.text) == [], path
        assert "https://" not in page.text.split("<main", 1)[0], "no asset from another site"
    await browser.close()


async def test_forms_need_the_sessions_token_and_this_site(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await signed_in(gateway)
    stored = await browser.api("POST", f"/api/v1/vaults/{vault}/memories", json={"content": "Kept.", "propose": True})
    memory_id = stored.json()["id"]
    no_token = await browser.http.post(f"/dashboard/{vault}/review", data={"decide_one": f"approve:{memory_id}"})
    assert no_token.status_code == 403 and "Page out of date" in no_token.text
    csrf = await browser.csrf()
    elsewhere = await browser.http.post(
        f"/dashboard/{vault}/review",
        data={"decide_one": f"approve:{memory_id}", "csrf_token": csrf},
        headers={"Origin": "https://evil.example"},
    )
    assert elsewhere.status_code == 403 and "not sent from this site" in elsewhere.text
    still = await browser.api("GET", f"/api/v1/vaults/{vault}/memories/{memory_id}")
    assert still.json()["memory"]["status"] == "proposed"
    done = await browser.http.post(
        f"/dashboard/{vault}/review", data={"decide_one": f"approve:{memory_id}", "csrf_token": csrf}
    )
    assert (
        done.status_code == 303
        and done.headers["location"] == f"/dashboard/{vault}/review?done=approve&count=1&failed=0"
    )
    assert (await browser.api("GET", f"/api/v1/vaults/{vault}/memories/{memory_id}")).json()["memory"][
        "status"
    ] == "active"
    await browser.close()


async def test_errors_are_pages_never_json_or_a_500(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await signed_in(gateway)
    other = await browser.http.get("/dashboard/someone-elses/review")
    assert other.status_code == 404 and other.headers["content-type"].startswith("text/html")
    assert "no vault named" in other.text
    bad_page = await browser.http.get(f"/dashboard/{vault}/audit", params={"before": "-1"})
    assert bad_page.status_code == 400 and "before" in bad_page.text
    bad_filter = await browser.http.get(f"/dashboard/{vault}/memories", params={"status": "sideways"})
    assert bad_filter.status_code == 400 and "status must be one of" in bad_filter.text
    csrf = await browser.csrf()
    bad_number = await browser.http.post(
        f"/dashboard/{vault}/settings",
        data={"csrf_token": csrf, "approval_mode": "review", "superseded_retention_days": "lots"},
    )
    assert bad_number.status_code == 400 and "whole number" in bad_number.text
    empty = await browser.http.post(f"/dashboard/{vault}/imports", data={"csrf_token": csrf, "text": " "})
    assert empty.status_code == 400 and "text" in empty.text
    missing = await browser.http.get(f"/dashboard/{vault}/memories/not-a-memory")
    assert missing.status_code in (400, 404) and missing.headers["content-type"].startswith("text/html")
    await browser.close()


async def test_a_viewer_is_refused_every_change_by_the_server(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    owner, _ = await signed_in(gateway)
    viewer, viewer_name = await signed_in(gateway)  # their own vault bears their user name
    vault = "shared-" + viewer_name[-6:]
    assert (await owner.api("POST", "/api/v1/vaults", json={"name": vault})).status_code == 201
    added = await owner.api("PUT", f"/api/v1/vaults/{vault}/members/{viewer_name}", json={"role": "viewer"})
    assert added.status_code == 200, added.text
    proposed = await owner.api("POST", f"/api/v1/vaults/{vault}/memories", json={"content": "Hold.", "propose": True})
    memory_id = proposed.json()["id"]
    page = await viewer.http.get(f"/dashboard/{vault}/review")
    assert page.status_code == 200 and "Hold." in page.text and "decide_one" not in page.text
    csrf = await viewer.csrf()
    attempts = {
        f"/dashboard/{vault}/review": {"decide_one": f"approve:{memory_id}"},
        f"/dashboard/{vault}/settings": {"approval_mode": "auto"},
        f"/dashboard/{vault}/guide": {"text": "Mine now.", "version": "0"},
        f"/dashboard/{vault}/imports": {"text": "- A viewer's import."},
        f"/dashboard/{vault}/memories/{memory_id}/forget": {},
        f"/dashboard/{vault}/memories/{memory_id}/edit": {"content": "Held.", "version": "1"},
        f"/dashboard/{vault}/exclusions/lift": {"text": "Anything."},
    }
    for path, form in attempts.items():
        refused = await viewer.http.post(path, data={**form, "csrf_token": csrf})
        assert refused.status_code == 403, (path, refused.text)
        assert "Not allowed" in refused.text
    assert (await viewer.http.get(f"/dashboard/{vault}/audit")).status_code == 403
    after = await owner.api("GET", f"/api/v1/vaults/{vault}/memories/{memory_id}")
    assert after.json()["memory"]["status"] == "proposed" and after.json()["memory"]["content"] == "Hold."
    settings = await owner.api("GET", f"/api/v1/vaults/{vault}/settings")
    assert settings.json()["approval_mode"] == "review"
    await owner.close()
    await viewer.close()


async def test_static_files_and_the_language_switcher(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await signed_in(gateway)
    css = await browser.http.get("/static/dashboard/dashboard.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert (
        (await browser.http.get("/static/dashboard/dashboard.js")).headers["content-type"].startswith("text/javascript")
    )
    for name in ("common.py", "..%2Fcommon.py", ".hidden.css", "nothing.css"):
        assert (await browser.http.get(f"/static/dashboard/{name}")).status_code == 404, name
    csrf = await browser.csrf()
    chosen = await browser.http.post(
        "/dashboard/language", data={"csrf_token": csrf, "language": "id", "next": "https://evil.example/"}
    )
    assert chosen.status_code == 303 and chosen.headers["location"] == "/account"
    page = await browser.http.get(f"/dashboard/{vault}", headers={"Accept-Language": "en"})
    assert '<html lang="id">' in page.text and "Ringkasan" in page.text
    unknown = await browser.http.post("/dashboard/language", data={"csrf_token": csrf, "language": "xx"})
    assert unknown.status_code == 400
    await browser.close()


async def test_members_service_tokens_and_guide_versions(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    admin_name, _ = await gateway.create_user(admin=True)
    owner = Browser(gateway)
    assert (await owner.sign_in(admin_name)).status_code == 303
    vault = (await owner.http.get("/dashboard")).headers["location"].removeprefix("/dashboard/")
    csrf = await owner.csrf()

    # A new account, given a role here, with its setup link shown once; then its role changed, then removed.
    newcomer = "new-" + vault[-8:]
    made = await owner.http.post(
        f"/dashboard/{vault}/members/new-account", data={"csrf_token": csrf, "username": newcomer, "role": "editor"}
    )
    assert made.status_code == 201, made.text
    assert re.search(rf"{re.escape(gateway.url)}/setup/mvsetup_\w+", made.text)
    members = (await owner.api("GET", f"/api/v1/vaults/{vault}/members")).json()["members"]
    assert {m["subject"]: m["role"] for m in members}[newcomer] == "editor"
    changed = await owner.http.post(
        f"/dashboard/{vault}/members", data={"csrf_token": csrf, "subject": newcomer, "role": "viewer"}
    )
    assert changed.status_code == 303
    page = await owner.http.get(changed.headers["location"])
    assert "Role saved." in page.text
    members = (await owner.api("GET", f"/api/v1/vaults/{vault}/members")).json()["members"]
    assert {m["subject"]: m["role"] for m in members}[newcomer] == "viewer"
    removed = await owner.http.post(
        f"/dashboard/{vault}/members/remove", data={"csrf_token": csrf, "subject": newcomer}
    )
    assert removed.status_code == 303
    members = (await owner.api("GET", f"/api/v1/vaults/{vault}/members")).json()["members"]
    assert newcomer not in {m["subject"] for m in members}
    unknown = await owner.http.post(
        f"/dashboard/{vault}/members", data={"csrf_token": csrf, "subject": "nobody-at-all", "role": "viewer"}
    )
    assert unknown.status_code == 404 and "no account" in unknown.text

    # A service token: shown once, works on the API for what it was given, listed with Revoke.
    token_page = await owner.http.post(
        f"/dashboard/{vault}/service-tokens",
        content=f"csrf_token={csrf}&name=backup+script&scope=read&vault={vault}&expires_in_days=",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert token_page.status_code == 201, token_page.text
    token = re.search(r'id="new-token" class="secret">([^<]+)<', token_page.text)
    assert token is not None
    async with gateway.http() as http:
        listed = await http.get(
            f"/api/v1/vaults/{vault}/memories", headers={"Authorization": f"Bearer {token.group(1)}"}
        )
        assert listed.status_code == 200, listed.text
    again = await owner.http.get(f"/dashboard/{vault}/apps")
    assert "backup script" in again.text and token.group(1) not in again.text
    no_scope = await owner.http.post(
        f"/dashboard/{vault}/service-tokens", data={"csrf_token": csrf, "name": "x", "vault": vault}
    )
    assert no_scope.status_code == 400 and "scopes" in no_scope.text

    # Guide versions: save one, compare an earlier version with the current one.
    first = await owner.api("GET", f"/api/v1/vaults/{vault}/guide")
    saved = await owner.http.post(
        f"/dashboard/{vault}/guide",
        data={"csrf_token": csrf, "text": "# Rules\n\nNew line here.", "version": str(first.json()["version"])},
    )
    assert saved.status_code == 303
    stale = await owner.http.post(
        f"/dashboard/{vault}/guide",
        data={"csrf_token": csrf, "text": "Lost update.", "version": str(first.json()["version"])},
    )
    assert stale.status_code == 409
    compared = await owner.http.get(f"/dashboard/{vault}/guide", params={"show": first.json()["version"]})
    assert '<span class="diff-added">+New line here.</span>' in compared.text
    await owner.close()


async def test_replacing_a_memory_supersedes_it_and_keeps_it_as_history(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await signed_in(gateway)
    stored = await browser.api(
        "POST", f"/api/v1/vaults/{vault}/memories", json={"content": "Lunch at 12.", "key": "lunch"}
    )
    old_id = stored.json()["id"]
    await browser.api("POST", f"/api/v1/vaults/{vault}/memories/{old_id}/approve", json={})
    page = await browser.http.get(f"/dashboard/{vault}/memories/{old_id}")
    version = re.search(r'name="version" value="(\d+)"', page.text)
    assert version is not None
    csrf = await browser.csrf()
    replaced = await browser.http.post(
        f"/dashboard/{vault}/memories/{old_id}/replace",
        data={"csrf_token": csrf, "version": version.group(1), "content": "Lunch at 13.", "tags": "food, daily"},
    )
    assert replaced.status_code == 303, replaced.text
    new_page = await browser.http.get(replaced.headers["location"])
    assert "This memory replaces the previous one" in new_page.text and "Lunch at 13." in new_page.text
    new_id = replaced.headers["location"].split("/")[-1].split("?")[0]
    new = (await browser.api("GET", f"/api/v1/vaults/{vault}/memories/{new_id}")).json()["memory"]
    assert new["tags"] == ["food", "daily"] and new["key"] == "lunch" and new["supersedes"] == old_id
    old = (await browser.api("GET", f"/api/v1/vaults/{vault}/memories/{old_id}")).json()["memory"]
    assert old["status"] == "superseded"
    stale = await browser.http.post(
        f"/dashboard/{vault}/memories/{old_id}/replace",
        data={"csrf_token": csrf, "version": version.group(1), "content": "Lunch at 14."},
    )
    assert stale.status_code in (400, 409) and stale.headers["content-type"].startswith("text/html")
    await browser.close()


async def test_editing_a_memory_in_place_keeps_its_id_and_the_old_text_in_history(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await signed_in(gateway)
    stored = await browser.api("POST", f"/api/v1/vaults/{vault}/memories", json={"content": "Lunch at noom."})
    memory_id = stored.json()["id"]
    page = await browser.http.get(f"/dashboard/{vault}/memories/{memory_id}")
    assert "Edit in place" in page.text
    csrf = await browser.csrf()
    edited = await browser.http.post(
        f"/dashboard/{vault}/memories/{memory_id}/edit",
        data={"csrf_token": csrf, "version": "1", "content": "Lunch at noon.", "tags": "food, daily"},
    )
    assert edited.status_code == 303, edited.text
    assert edited.headers["location"] == f"/dashboard/{vault}/memories/{memory_id}?done=edited"
    shown = await browser.http.get(edited.headers["location"])
    assert "Saved in place" in shown.text and "Lunch at noom." in shown.text  # the old text, in the history
    memory = (await browser.api("GET", f"/api/v1/vaults/{vault}/memories/{memory_id}")).json()["memory"]
    assert memory["content"] == "Lunch at noon." and sorted(memory["tags"]) == ["daily", "food"]
    stale = await browser.http.post(
        f"/dashboard/{vault}/memories/{memory_id}/edit",
        data={"csrf_token": csrf, "version": "1", "content": "Lunch at one."},
    )
    assert stale.status_code == 409 and stale.headers["content-type"].startswith("text/html")
    audit = await browser.http.get(f"/dashboard/{vault}/audit", params={"action": "memory.edit"})
    assert audit.status_code == 200 and "memory.edit" in audit.text
    await browser.close()


async def test_forgotten_texts_are_listed_and_lifted_from_the_dashboard(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    browser, vault = await signed_in(gateway)
    base = f"/api/v1/vaults/{vault}"
    texts = ["Door code hint: the blue one.", "Parks the car on level 3."]
    for text in texts:
        stored = await browser.api("POST", f"{base}/memories", json={"content": text})
        memory_id = stored.json()["id"]
        confirm = await browser.http.get(f"/dashboard/{vault}/memories/{memory_id}/forget")
        assert "Its text will be refused from then on" in confirm.text and "can be lifted" in confirm.text
        csrf = await browser.csrf()
        forgot = await browser.http.post(f"/dashboard/{vault}/memories/{memory_id}/forget", data={"csrf_token": csrf})
        assert forgot.status_code == 303
    page = await browser.http.get(f"/dashboard/{vault}/exclusions")
    assert page.status_code == 200 and "2 of 2" in page.text and "the blue one" not in page.text
    hashes = re.findall(r'name="content_hash" value="([0-9a-f]{64})"', page.text)
    assert len(hashes) == 2
    csrf = await browser.csrf()
    by_text = await browser.http.post(
        f"/dashboard/{vault}/exclusions/lift", data={"csrf_token": csrf, "text": texts[0], "content_hash": ""}
    )
    assert by_text.status_code == 303 and by_text.headers["location"].endswith("/exclusions?lifted=true")
    lifted_page = await browser.http.get(by_text.headers["location"])
    assert "The exclusion is lifted" in lifted_page.text and "1 of 1" in lifted_page.text
    again = await browser.api("POST", f"{base}/memories", json={"content": texts[0]})
    assert again.json()["outcome"] == "stored"
    remaining = re.findall(r'name="content_hash" value="([0-9a-f]{64})"', lifted_page.text)
    by_hash = await browser.http.post(
        f"/dashboard/{vault}/exclusions/lift", data={"csrf_token": csrf, "content_hash": remaining[0]}
    )
    assert by_hash.status_code == 303
    empty = await browser.http.get(f"/dashboard/{vault}/exclusions", headers={"Accept-Language": "id"})
    assert "Tidak ada teks yang ditolak di vault ini." in empty.text
    unknown = await browser.http.post(
        f"/dashboard/{vault}/exclusions/lift", data={"csrf_token": csrf, "content_hash": remaining[0]}
    )
    assert unknown.status_code == 404 and unknown.headers["content-type"].startswith("text/html")
    await browser.close()
