"""What a person sees after a wrong turn: an agents' address opened in a browser, an unknown page.

Browsers (an Accept header naming text/html) get a short page with links to where they meant to
go; programs keep getting JSON.
"""

from __future__ import annotations

from html import escape

from fastapi import Request
from fastapi.responses import HTMLResponse, Response

from memvault_gateway.web import pages
from memvault_gateway.web.http import problem

_LINKS = (
    "<p>To connect an agent, follow <a href='{base}/connect'>{base}/connect</a> (give that address to the"
    " agent, it can read it too). To see and revoke the apps that have access, open"
    " <a href='{base}/account'>your account</a>.</p>"
)


def wants_html(request: Request) -> bool:
    """A browser navigating here: it asks for HTML and not for an event stream."""
    accept = request.headers.get("accept", "").lower()
    return "text/html" in accept and "text/event-stream" not in accept


def _links(base: str) -> str:
    return _LINKS.format(base=escape(base, quote=True))


def mcp_endpoint(base: str) -> HTMLResponse:
    """GET /mcp from a browser: this address is for agents."""
    body = (
        f"<p><code>{escape(base)}/mcp</code> is memvault's MCP endpoint: the address you add to an AI agent"
        " (Claude Code, Codex, Cursor, ...). It speaks to programs, not to browsers, so there is nothing"
        " to see here.</p>" + _links(base)
    )
    return pages.page("This address is for your agents", body)


def not_found(request: Request, base: str) -> Response:
    """An unknown path: an HTML page for browsers, an RFC 9457 problem for programs."""
    if wants_html(request):
        body = "<p>There is no page at this address.</p>" + _links(base)
        return pages.page("Page not found", body, status=404)
    return problem(
        404,
        "Not found",
        f"no such path {request.url.path[:100]!r}; agents connect to {base}/mcp, instructions at {base}/connect",
    )


def wrong_host(request: Request, base: str, host: str) -> Response:
    """/mcp asked for under a host name this gateway does not serve (DNS rebinding, or a proxy's own name)."""
    detail = (
        f"this gateway answers MCP at {base}/mcp, not for host {host[:100]!r}; connect to that URL, or ask "
        "the operator to add this host to MEMVAULT_GATEWAY__EXTRA_HOSTS"
    )
    if wants_html(request):
        body = (
            f"<p>memvault answers agents at <code>{escape(base)}/mcp</code>, and this request was for the host"
            f" <code>{escape(host[:100])}</code>. If that is a name for this gateway, the operator can add it to"
            " <code>MEMVAULT_GATEWAY__EXTRA_HOSTS</code>.</p>" + _links(base)
        )
        return pages.page("Wrong address", body, status=421)
    return problem(421, "Misdirected request", detail)
