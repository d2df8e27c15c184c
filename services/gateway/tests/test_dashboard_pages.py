"""The dashboard's templates and catalogues without a server: every page renders in both languages,
memory text is escaped, every message has its Indonesian translation, the language is chosen right."""

from __future__ import annotations

import io
import re
from importlib import resources
from typing import Any

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po
from starlette.requests import Request

from memvault.vault.v1 import archive_pb2 as apb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_gateway.dashboard import i18n, map_layout, overview, render
from memvault_gateway.web.pages import GrantRow

pytestmark = pytest.mark.unit

HOSTILE = "<script>alert(1)</script> <img src=x onerror=alert(1)>"
FOLDER = resources.files("memvault_gateway.dashboard")


class FakeOwner:
    """What templates read of `common.Owner`."""

    role = "owner"
    can_review = True
    is_owner = True
    delete_after = "2026-12-11 10:00 UTC"

    def url(self, section: str) -> str:
        return f"/dashboard/default/{section}"


def memory(**fields: Any) -> dict[str, Any]:
    return {
        "id": "0b5f0d4e-1111-2222-3333-444455556666",
        "content": HOSTILE,
        "type": "fact",
        "status": "proposed",
        "key": "deploy.target",
        "scope": "",
        "tags": ["ops"],
        "source": "agent",
        "client": "mcp:Deploy agent",
        "trust": "stated",
        "valid_from": None,
        "valid_to": None,
        "review_after": "2027-01-01T00:00:00+00:00",
        "expires_at": None,
        "version": 2,
        "status_reason": None,
        "created_at": "2026-12-01T10:00:00+00:00",
        "score": 0.5,
        "meaning_score": 0.42,
        "keyword_score": 1.0,
        **fields,
    }


def source_change(**fields: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "source_id": "s1",
        "memory_id": "0b5f0d4e-1111-2222-3333-444455556666",
        "kind": "json_file",
        "location": HOSTILE,
        "status": "pending",
        "old_hash": "a" * 64,
        "new_hash": "b" * 64,
        "old_value": HOSTILE,
        "new_value": HOSTILE,
        "proposed_statement": HOSTILE,
        "needs_statement": False,
        "detected_at": "2026-12-01T10:00:00+00:00",
        **fields,
    }


def pages() -> dict[str, dict[str, Any]]:
    batch = {
        "id": "b1",
        "source": "notes.md",
        "actor": "owner",
        "item_count": 2,
        "stored_count": 1,
        "outcomes": {"stored": 1, "duplicate": 1},
        "created_at": "2026-12-01T10:00:00+00:00",
        "undone_at": None,
    }
    settings = {
        "approval_mode": "review",
        "superseded_retention_days": 30,
        "rejected_retention_days": 7,
        "audit_retention_days": 0,
    }
    conversation = {
        "id": "0b5f0d4e-1111-2222-3333-444455556666",
        "title": HOSTILE,
        "tags": ["home", "work"],
        "tags_version": 3,
        "head_revision": 2,
        "message_count": 3,
        "source": "claude",
        "updated_at": "2026-12-01 10:00",
    }
    archive_import = {
        "id": "1b5f0d4e-1111-2222-3333-444455556666",
        "state": "running",
        "filename": HOSTILE,
        "format": "chatgpt",
        "size": 1000,
        "sha256": "ab" * 32,
        "parts": 1,
        "total": 30,
        "done": 25,
        "imported": 20,
        "updated": 2,
        "duplicates": 2,
        "failed": 1,
        "failures": [{"conversation_id": "broken", "error": HOSTILE}],
        "retrying": 1,
        "duplicate_of": None,
        "error": None,
        "created_at": "2026-12-01 10:00",
    }
    return {
        "overview.html": {
            "counts": [("proposed", 1), ("active", 2)],
            "total": 3,
            "waiting": 1,
            "index": {
                "indexed": 2,
                "pending": 1,
                "failed": 1,
                "failures": [{"memory_id": "m", "error": HOSTILE, "attempts": 3}],
                "mode": "keyword-only",
                "mode_reason": HOSTILE,
                "model": HOSTILE,
            },
            "type_counts": [("fact", 2), ("preference", 1)],
            "retention": overview.retention_view(
                vpb.RetentionOutlook(
                    runner="cronjob",
                    schedule=HOSTILE,
                    due_rejected=2,
                    due_audit_entries=10_000,
                    due_audit_entries_capped=True,
                )
            ),
            "imports": [batch],
            "settings": settings,
            "sources": {
                "count": 1,
                "errors": 1,
                "overdue": 0,
                "pending": 1,
                "failing": [{"location": HOSTILE, "error": HOSTILE}],
            },
        },
        "review.html": {
            "items": [
                {
                    "memory": memory(),
                    "related": [{"relation": "same_key", "memory": memory(status="active"), "differences": ["status"]}],
                }
            ],
            "total": 1,
            "next_cursor": "abc",
            "failed": 1,
            "source_changes": [
                {**source_change(), "memory": memory(status="active"), "old_shown": HOSTILE, "new_shown": HOSTILE},
                {
                    **source_change(kind="text_file", proposed_statement=None, needs_statement=True),
                    "memory": None,
                    "old_shown": None,
                    "new_shown": None,
                },
            ],
            "changes_total": 30,
            "flagged": [memory(status="active", flagged_reason=HOSTILE)],
            "flagged_total": 40,
        },
        "sources.html": {
            "health": {
                "errors": 1,
                "overdue": 1,
                "pending_changes": 1,
                "sources": [
                    {
                        "id": "s1",
                        "memory_id": "0b5f0d4e-1111-2222-3333-444455556666",
                        "kind": "json_url",
                        "location": HOSTILE,
                        "selector": HOSTILE,
                        "mode": "auto",
                        "interval_seconds": 300,
                        "last_checked_at": None,
                        "next_check_at": "2026-12-01T10:00:00+00:00",
                        "error": HOSTILE,
                        "overdue": True,
                        "pending_changes": 1,
                    }
                ],
            },
            "kinds": ("json_file", "text_file"),
            "modes": ("auto", "review"),
            "chosen": {"memory_id": HOSTILE},
            "limits": {
                "location": 2000,
                "template": 2000,
                "min_interval": 10,
                "max_interval": 100,
                "default_interval": 300,
            },
        },
        "memories.html": {
            "rows": [memory()],
            "q": HOSTILE,
            "mode": "hybrid",
            "warnings": [HOSTILE],
            "scores": True,
            "chosen_status": ["active"],
            "chosen_type": [],
            "tag": "",
            "narrow": {
                "key": HOSTILE,
                "scope": "",
                "source": HOSTILE,
                "client": "",
                "created_from": "",
                "created_to": "",
            },
            "statuses": ["active"],
            "types": ["fact"],
            "next_cursor": "n",
        },
        "memory.html": {
            "m": memory(status="active"),
            "state": [HOSTILE],
            "history": [
                {"version": 1, "change": "create", "actor": "owner", "at": None, "cause": None, "content": HOSTILE}
            ],
            "related": {"supersedes": [memory()]},
            "missing": ["x"],
            "sources": [
                {
                    "id": "s1",
                    "kind": "json_url",
                    "location": HOSTILE,
                    "selector": HOSTILE,
                    "mode": "auto",
                    "error": HOSTILE,
                    "pending_changes": 1,
                }
            ],
        },
        "forget.html": {"m": memory()},
        "imports.html": {
            "batches": [batch],
            "next_cursor": None,
            "result": {
                "summary": {"stored": 1},
                "notices": [],
                "items": [{"index": 0, "outcome": "stored", "id": "m1", "match": None, "message": HOSTILE}],
            },
            "text": HOSTILE,
            "types": ["fact"],
        },
        "guide.html": {
            "guide": {
                "text": HOSTILE,
                "version": 3,
                "updated_by": "owner",
                "updated_at": None,
                "newer_default_available": True,
            },
            "versions": [{"version": 3, "updated_by": "owner", "updated_at": None, "chars": 10, "text": HOSTILE}],
            "shown": {"version": 3, "text": HOSTILE},
            "diff": [("file", "--- version 3"), ("removed", "-" + HOSTILE), ("added", "+new")],
        },
        "settings.html": {
            "settings": settings,
            "saved": True,
            "fields": (),
            "preview": {"rejected": 1, "superseded": 0, "invalidated": 0, "audit_entries": 2, "memories": 1},
            "cleaned": 1,
            "cleaned_audit": 2,
            "grace_days": 7,
            "deletion_notice": HOSTILE,
        },
        "audit.html": {
            "entries": [
                {
                    "at": "2026-12-01T10:00:00+00:00",
                    "actor": "owner",
                    "action": "memory.approve",
                    "target": "m",
                    "details": {"x": HOSTILE},
                }
            ],
            "filters": {"actor": HOSTILE, "action": "", "target": "", "since": "", "until": ""},
            "older": "?before=3",
        },
        "apps.html": {
            "grants": [
                {
                    "id": "g",
                    "kind": "oauth",
                    "name": HOSTILE,
                    "scopes": ["read"],
                    "vaults": ["default"],
                    "created_at": None,
                    "last_used_at": None,
                }
            ],
            "clients": [
                {
                    "client_id": HOSTILE,
                    "kind": "registered",
                    "client_name": HOSTILE,
                    "redirect_hosts": [HOSTILE],
                    "created_at": None,
                    "other_accounts": 1,
                    "deletable": False,
                },
                {
                    "client_id": "https://app.example/client.json",
                    "kind": "metadata_document",
                    "client_name": "App",
                    "redirect_hosts": ["127.0.0.1"],
                    "created_at": None,
                    "other_accounts": 0,
                    "deletable": True,
                },
            ],
            "mcp_url": "http://127.0.0.1/mcp",
            "scopes": ("read", "write", "admin"),
            "created": {"name": HOSTILE, "token": "mvsvc_x"},
        },
        "account.html": {
            "account_name": HOSTILE,
            "mcp_url": "http://127.0.0.1/mcp",
            "grants": [GrantRow("g", "oauth", HOSTILE, "read", "default", "2026-12-01", "never")],
            "dev_subject": "",
            "signed_in_by_proxy": False,
            "email_enabled": True,
            "email": HOSTILE,
            "email_problem": HOSTILE,
            "name_problem": HOSTILE,
            "typed_name": HOSTILE,
            "max_name": 100,
        },
        "members.html": {
            "members": [{"subject": "viewer", "display_name": HOSTILE, "role": "viewer"}],
            "roles": ("owner", "editor", "viewer"),
            "is_admin": True,
            "created": {"username": "new", "role": "viewer", "setup_url": "http://127.0.0.1/setup/x"},
        },
        "archive.html": {
            "raw_size": "1.2 MB",
            "stats": apb.GetArchiveStatsResponse(
                conversations=2,
                revisions=3,
                messages=9,
                tags=1,
                by_source={"chatgpt": 2},
                imports=1,
                imports_by_state={"done": 1},
                indexed=7,
                pending=2,
            ),
            "conversations": [conversation],
            "next_cursor": "c2",
            "tags": HOSTILE,
            "match": "any",
            "imports": [archive_import],
            "formats": ("chatgpt", "claude"),
        },
        "archive_import.html": {"job": archive_import, "retryable": True},
        "conversation.html": {
            "c": conversation,
            "revision": 1,
            "messages": [
                {
                    "role": "user",
                    "content_type": "text",
                    "text": HOSTILE,
                    "node_id": "n1",
                    "active": False,
                    "position": 0,
                    "created_at": "2026-12-01 10:00",
                }
            ],
            "next_cursor": "m2",
            "graph": 1,
            "revisions": [
                {"number": 2, "kind": "append", "message_count": 3, "created_at": "2026-12-01 10:00", "head": True},
                {"number": 1, "kind": "create", "message_count": 2, "created_at": "2026-12-01 09:00", "head": False},
            ],
            "older_revisions": HOSTILE,
            "revisions_cursor": HOSTILE,
            "confirm_error": False,
            "tag_error": HOSTILE,
            "max_tags": 20,
        },
        "vault_map.html": vault_map_context(),
    }


def vault_map_context() -> dict[str, Any]:
    answer = apb.GetVaultMapResponse(
        groups=[
            apb.VaultMapGroup(tag="home", memories=9, conversations=3, own_memories=7, own_conversations=3),
            apb.VaultMapGroup(tag="", memories=1, own_memories=1),
        ],
        items=[
            apb.VaultMapItem(kind="memory", id="m1", label=HOSTILE, group="home", tags=["home"], sources=1),
            apb.VaultMapItem(kind="memory", id="m2", label="plain", group="home", tags=["home"]),
            apb.VaultMapItem(
                kind="conversation",
                id="c1",
                label=HOSTILE,
                group="home",
                derived_from=apb.DerivedFrom(vault="other", conversation_id="c0", revision=2),
            ),
            apb.VaultMapItem(kind="memory", id="m3", label="", group=""),
        ],
        links=[
            apb.VaultMapLink(kind="similar", from_id="m1", to_id="m2", to_label="plain", to_drawn=True),
            apb.VaultMapLink(kind="replaces", from_id="m1", to_id="m9", to_label=HOSTILE, to_drawn=False),
        ],
        memories=10,
        conversations=3,
        other_tags=4,
    )
    return {
        "answer": answer,
        "drawing": map_layout.layout(answer),
        "links": [
            {
                "from_kind": "memory",
                "from_id": "m1",
                "from_label": HOSTILE,
                "words": "replaces",
                "kind": "replaces",
                "to_id": "m9",
                "to_label": HOSTILE,
                "to_drawn": False,
            }
        ],
        "copies": [{"id": "c1", "label": HOSTILE, "vault": HOSTILE, "url": "/dashboard/x", "revision": 2}],
        "sources": [{"id": "m1", "label": HOSTILE, "sources": 1}],
        "tags_shown": 12,
        "per_tag": 6,
    }


@pytest.mark.parametrize("language", list(i18n.LANGUAGES))
@pytest.mark.parametrize("template", list(pages()))
def test_every_page_renders_and_shows_memory_text_as_text(language: str, template: str) -> None:
    context = {
        "owner": FakeOwner(),
        "user_name": HOSTILE,
        "csrf": "token",
        "vault": vpb.VaultInfo(name="default", role="owner", approval_mode="review"),
        "vaults": [vpb.VaultInfo(name="default", role="owner")],
        "section": "review",
        "sections": [("review", "Review", "/dashboard/default/review")],
        "here": "/dashboard/default",
        "notice": HOSTILE,
        **pages()[template],
    }
    response = render.render(language, template, context)
    html = bytes(response.body).decode()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert f'<html lang="{language}">' in html
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy


def test_every_message_has_an_indonesian_translation() -> None:
    wanted = set()
    method_map = [("**.py", "python"), ("templates/**.html", "jinja2")]
    options = {"templates/**.html": {"extensions": "jinja2.ext.i18n", "trim_blocks": "true", "lstrip_blocks": "true"}}
    keywords = {"_": None, "gettext": None, "ngettext": (1, 2), "N_": None}
    # The gateway's own sign-in, setup and email-link pages share the catalogue (web/pages.py, signin/).
    gateway = resources.files("memvault_gateway")
    for folder, files in ((FOLDER, method_map), (gateway.joinpath("signin"), [("**.py", "python")])):
        for _, _, message, _, _ in extract_from_dir(str(folder), files, options_map=options, keywords=keywords):
            wanted.add(message[0] if isinstance(message, tuple) else message)
    for _, _, message, _, _ in extract_from_dir(
        str(gateway.joinpath("web")), [("pages.py", "python")], keywords=keywords
    ):
        wanted.add(message[0] if isinstance(message, tuple) else message)
    assert {"Set up your memvault account", "Link not valid", "Confirm your address"} <= wanted
    catalogue = read_po(io.BytesIO(FOLDER.joinpath("locale/id/LC_MESSAGES/messages.po").read_bytes()), locale="id")
    translated = {
        (m.id[0] if isinstance(m.id, tuple) else m.id)
        for m in catalogue
        if m.id and (all(m.string) if isinstance(m.string, tuple) else m.string)
    }
    assert len(wanted) > 100
    assert sorted(wanted - translated) == []


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("id-ID,id;q=0.9,en-US;q=0.8", "id"),
        ("en-GB,en;q=0.9,id;q=0.8", "en"),
        ("fr-FR,fr;q=0.9,id;q=0.5", "id"),
        ("id;q=0,en;q=0.1", "en"),
        ("de", "en"),
        ("", "en"),
        ("id;q=bogus, en", "en"),
    ],
)
def test_the_language_follows_accept_language(header: str, expected: str) -> None:
    request = Request({"type": "http", "headers": [(b"accept-language", header.encode())]})
    assert i18n.language_of(request) == expected


def test_the_switchers_choice_wins_over_the_browsers_language() -> None:
    cookie = f"{i18n.LANGUAGE_COOKIE}=id".encode()
    request = Request({"type": "http", "headers": [(b"accept-language", b"en"), (b"cookie", cookie)]})
    assert i18n.language_of(request) == "id"


# Names, not words: the same in every language.
NOT_TRANSLATED = ("memvault", "· memvault", "ChatGPT", "Claude.ai")


def test_no_template_shows_text_outside_gettext() -> None:
    """Every word a page shows comes through the catalogue: text between tags, and the attributes a
    person reads (title, placeholder, aria-label, alt), once Jinja's own blocks are taken out."""
    untranslated = []
    for template in sorted(FOLDER.joinpath("templates").iterdir(), key=lambda t: t.name):
        text = template.read_text(encoding="utf-8")
        # gettext's own string literals first: one may show `{{value}}` to the reader.
        for pattern in (r'\b_\("[^"]*"', r"\{#.*?#\}", r"\{\{.*?\}\}", r"\{%.*?%\}"):
            text = re.sub(pattern, " ", text, flags=re.S)
        untranslated += [
            f"{template.name}: {m.group(0)}"
            for m in re.finditer(r"\b(?:title|placeholder|aria-label|alt)=\"[^\"]*[A-Za-z]{2,}[^\"]*\"", text)
        ]
        shown = re.sub(r"<[^>]*>", " ", text)
        untranslated += [
            f"{template.name}: {line.strip()}"
            for line in shown.splitlines()
            if re.search(r"[A-Za-z]{2,}", line) and line.strip() not in NOT_TRANSLATED
        ]
    assert untranslated == []
