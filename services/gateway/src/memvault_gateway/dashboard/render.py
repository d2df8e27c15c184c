"""Jinja2 templates for the dashboard, one environment per language, every value escaped.

Pages carry the gateway's security headers (`pages.security_headers`) with scripts and styles
allowed only from the gateway itself: no inline script, no CDN, no framing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined

from memvault_gateway.dashboard import i18n
from memvault_gateway.web import pages

HEADERS = pages.security_headers(style_src="'self'", script_src="'self'")


def when(value: str | datetime | None) -> str:
    """An ISO time (as the API writes it) as a short UTC time; empty stays empty."""
    if not value:
        return ""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


@cache
def environment(language: str) -> Environment:
    env = Environment(
        loader=PackageLoader("memvault_gateway.dashboard", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        extensions=["jinja2.ext.i18n"],
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.install_gettext_translations(i18n.translations(language), newstyle=True)  # type: ignore[attr-defined]
    env.filters["when"] = when
    env.globals["languages"] = i18n.LANGUAGES
    return env


def render(language: str, template: str, context: Mapping[str, Any], status: int = 200) -> HTMLResponse:
    html = environment(language).get_template(template).render({**context, "language": language})
    return HTMLResponse(html, status_code=status, headers=HEADERS)
