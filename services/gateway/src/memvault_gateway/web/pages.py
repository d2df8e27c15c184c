"""The few HTML pages the gateway itself serves: sign-in, first-time setup, consent, messages.

Every value is escaped; every page forbids framing and scripts. The referrer policy is
`same-origin`: a setup link's token never leaves in a Referer header for another site, while our
own form posts carry their real Origin (under `no-referrer` browsers send `Origin: null`, which the
CSRF check must refuse, so no form could be submitted).

The sign-in, setup and message pages speak the dashboard's languages: their callers pass `Words`
(`dashboard.i18n.words_of(request)`: the switcher's cookie, else Accept-Language), and every
visible string goes through its gettext catalogue, marked `_()` so `pybabel extract` finds it.
The consent page stays English.
"""

from __future__ import annotations

import gettext
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

from fastapi.responses import HTMLResponse

from memvault_core.identity import SCOPES

_STYLE = """
body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}fieldset{border:1px solid #ccc;border-radius:6px;margin:1rem 0}
label{display:block;margin:.3rem 0}input[type=text],input[type=password],input[type=email]{width:100%;padding:.4rem;box-sizing:border-box}
button{padding:.5rem 1.2rem;margin:.5rem .5rem 0 0;border-radius:6px;border:1px solid #888;cursor:pointer}
button.primary{background:#1f5fbf;color:#fff;border-color:#1f5fbf}.error{color:#a00}.notice{color:#1b6e2e}.muted{color:#666;font-size:.9rem}
code{background:#f3f3f3;padding:0 .2rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;width:100%;font-size:.9rem}td,th{text-align:left;padding:.3rem;border-bottom:1px solid #ddd;vertical-align:top}
"""

SCOPE_TEXT = {
    "read": "read memories and the operating guide",
    "write": "save, import and forget memories",
    # What the vault's admin-scope checks allow (service.py: _reviewer, _owner); an app holding it can lift
    # the review of its own proposals by switching the vault to auto approval, so say so plainly.
    "admin": (
        "approve or reject proposed memories, undo imports, change vault settings (including whether"
        " agents' changes wait for your review), edit the operating guide and read the vault's audit log"
    ),
}


@dataclass(frozen=True)
class Words:
    """The language a page is shown in and its gettext catalogue (English: the messages as written)."""

    language: str = "en"
    catalogue: gettext.NullTranslations = field(default_factory=gettext.NullTranslations)

    def __call__(self, message: str, values: Mapping[str, object] | None = None) -> str:
        """`message` in this language, its `%(name)s` placeholders filled from `values` when given."""
        text = self.catalogue.gettext(message)
        return text % dict(values) if values is not None else text


ENGLISH = Words()


def security_headers(
    *, style_src: str = "'unsafe-inline'", script_src: str = "", form_action: Iterable[str] = ()
) -> dict[str, str]:
    """The headers every gateway page carries: a strict CSP (no framing, no inline script), no caching.

    `script_src`: where scripts may come from ('self' for the dashboard's own files, which may then also fetch
    from the gateway itself); none by default."""
    sources = " ".join(["'self'", *form_action])
    scripts = f" script-src {script_src};" if script_src else ""
    images = " img-src 'self';" if script_src else ""
    # the dashboard's script reads a download as it streams (the archive export's progress line): same origin only
    fetches = " connect-src 'self';" if script_src else ""
    csp = (
        f"default-src 'none'; style-src {style_src};{scripts}{images}{fetches} base-uri 'none'; frame-ancestors 'none';"
        f" form-action {sources}"
    )
    return {
        "Content-Security-Policy": csp,
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
    }


def page(
    title: str, body: str, status: int = 200, form_action: Iterable[str] = (), *, language: str = "en"
) -> HTMLResponse:
    """A whole page; `title` and `body` are already in `language` (its code goes in `<html lang>`)."""
    html = (
        f"<!doctype html><html lang={escape(language)}><head><meta charset=utf-8><meta name=viewport "
        f"content='width=device-width,initial-scale=1'><title>{escape(title)} · memvault</title>"
        f"<style>{_STYLE}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(html, status_code=status, headers=security_headers(form_action=form_action))


def message(
    title: str,
    text: str,
    status: int = 200,
    *,
    link: tuple[str, str] | None = None,
    words: Words = ENGLISH,
    values: Mapping[str, object] | None = None,
) -> HTMLResponse:
    """A page that says one thing; `link` (address, words) offers the way on.

    `title`, `text` and the link's words are catalogue messages, shown in `words`' language;
    `values` fill the text's `%(name)s` placeholders after it is translated."""
    onward = f"<p><a href='{escape(link[0])}'>{escape(words(link[1]))}</a></p>" if link else ""
    return page(words(title), f"<p>{escape(words(text, values))}</p>{onward}", status, language=words.language)


def _hidden(fields: Mapping[str, str]) -> str:
    return "".join(f"<input type=hidden name='{escape(k)}' value='{escape(v)}'>" for k, v in fields.items())


def login(
    *,
    next_path: str,
    csrf: str,
    error: str = "",
    notice: str = "",
    username: str = "",
    local_accounts: bool = True,
    oidc_label: str = "",
    form_action: Iterable[str] = (),
    email_sign_in: bool = False,
    status: int = 200,
    words: Words = ENGLISH,
) -> HTMLResponse:
    """The sign-in page; `username` refills the form after a failed attempt.

    `error` and `notice` come already in `words`' language; the operator's `oidc_label` as configured.
    `form_action`: the identity provider's origin, where the single sign-on button's post redirects."""
    _ = words
    parts = []
    if error:
        parts.append(f"<p class=error>{escape(error)}</p>")
    if notice:
        parts.append(f"<p class=notice>{escape(notice)}</p>")
    if local_accounts:
        # After a failed attempt the name is kept and the cursor waits in the password field.
        name_focus, password_focus = (" autofocus", "") if not username else ("", " autofocus")
        parts.append(
            "<form method=post action='/login'>"
            + _hidden({"next": next_path, "csrf_token": csrf})
            + ("<label>" + escape(_("User name")))
            + f" <input type=text name=username value='{escape(username)}' autocomplete=username required{name_focus}>"
            + ("</label><label>" + escape(_("Password")))
            + f" <input type=password name=password autocomplete=current-password required{password_focus}></label>"
            + ("<button class=primary type=submit>" + escape(_("Sign in")) + "</button></form>")
        )
    if oidc_label:
        parts.append(
            "<form method=post action='/login/oidc'>"
            + _hidden({"next": next_path, "csrf_token": csrf})
            + f"<button type=submit>{escape(oidc_label)}</button></form>"
        )
    if email_sign_in:
        parts.append(
            (
                "<p class=muted>" + escape(_("Or have a one-time sign-in link mailed to you:")) + "</p>"
                if local_accounts or oidc_label
                else ""
            )
            + "<form method=post action='/login/email'>"
            + _hidden({"next": next_path, "csrf_token": csrf})
            + ("<label>" + escape(_("Email")))
            + " <input type=email name=email autocomplete=email maxlength=254 required></label>"
            + ("<button type=submit>" + escape(_("Email me a sign-in link")) + "</button></form>")
        )
    if not parts or (not local_accounts and not oidc_label and not email_sign_in):
        parts.append("<p>" + escape(_("No sign-in method is enabled on this gateway; ask its operator.")) + "</p>")
    return page(_("Sign in to memvault"), "".join(parts), status, form_action=form_action, language=words.language)


def setup(
    *, username: str, token: str, csrf: str, error: str = "", status: int = 200, words: Words = ENGLISH
) -> HTMLResponse:
    """The setup link's page: choose a password. `error` comes already in `words`' language."""
    _ = words
    choose = escape(_("Choose a password for %(name)s. This link works once.")) % {
        "name": f"<strong>{escape(username)}</strong>"
    }
    body = (
        (f"<p class=error>{escape(error)}</p>" if error else "")
        + f"<p>{choose}</p>"
        + f"<form method=post action='/setup/{escape(token)}'>"
        + _hidden({"csrf_token": csrf})
        + ("<label>" + escape(_("Password")))
        + " <input type=password name=password autocomplete=new-password minlength=12 required autofocus></label>"
        + ("<label>" + escape(_("Again")))
        + " <input type=password name=password_again autocomplete=new-password required></label>"
        + ("<button class=primary type=submit>" + escape(_("Set password and sign in")) + "</button></form>")
    )
    return page(_("Set up your memvault account"), body, status, language=words.language)


@dataclass(frozen=True)
class VaultChoice:
    name: str
    role: str


@dataclass(frozen=True)
class CurrentAccess:
    """What one of the app's live grants allows, to show next to what it asks for now."""

    scopes: tuple[str, ...]
    vaults: tuple[str, ...]


REQUESTED_SCOPE_FIELD = "requested_scope"
"""Where the consent form carries the app's own `scope`: the checkboxes the owner ticks are named `scope`."""


def request_fields(params: Mapping[str, str]) -> dict[str, str]:
    """The authorization request as the consent form's hidden fields.

    The app's `scope` travels under another name: had it kept its own, a browser would post it
    next to the ticked boxes and the gateway would count it as ticked (an app asking for `admin`
    alone would get it even when the owner unticked it).
    """
    return {(REQUESTED_SCOPE_FIELD if k == "scope" else k): v for k, v in params.items()}


def _current_access(client_name: str, current: Sequence[CurrentAccess], replaces: bool) -> str:
    if not current:
        return ""
    if replaces:
        now = current[0]
        return (
            f"<p><strong>{escape(client_name)}</strong> already has access: {escape(' '.join(now.scopes))} on"
            f" {escape(', '.join(now.vaults))}. Approving replaces it with what you choose here; Deny leaves it"
            " as it is.</p>"
        )
    count = "once" if len(current) == 1 else f"{len(current)} times"
    return (
        f"<p>You have connected <strong>{escape(client_name)}</strong> {count} already (perhaps on another"
        " computer); approving adds a connection and leaves those as they are.</p>"
    )


def consent(
    *,
    client_name: str,
    client_id: str,
    redirect_host: str,
    redirect_origin: str,
    verified_host: bool,
    loopback: bool,
    private_scheme: str,
    user_name: str,
    vaults: list[VaultChoice],
    requested_scopes: tuple[str, ...],
    params: Mapping[str, str],
    csrf: str,
    current: Sequence[CurrentAccess] = (),
    replaces_current: bool = False,
    error: str = "",
    chosen: tuple[Sequence[str], Sequence[str]] | None = None,
) -> HTMLResponse:
    """The consent form; `current` lists the app's live grants, newest first (its vaults come pre-ticked).

    `chosen` is the (vaults, scopes) the owner ticked when the page is shown again after a refused
    answer: exactly those stay ticked (of the valid choices), so deciding again grants nothing unticked.
    """
    held = {v.name for v in vaults}
    if chosen is not None:
        ticked = set(chosen[0]) & held
        ticked_scopes = set(chosen[1]) & set(SCOPES)
    else:
        ticked = set(current[0].vaults) & held if current and replaces_current else set()
        if not ticked:
            ticked = {vaults[0].name} if len(vaults) == 1 else {"default"}
        ticked_scopes = set(requested_scopes)
    vault_boxes = "".join(
        f"<label><input type=checkbox name=vault value='{escape(v.name)}'"
        f"{' checked' if v.name in ticked else ''}> {escape(v.name)}"
        f" <span class=muted>(you are {escape(v.role)})</span></label>"
        for v in vaults
    )
    scope_boxes = "".join(
        f"<label><input type=checkbox name=scope value='{s}'{' checked' if s in ticked_scopes else ''}>"
        f" <strong>{s}</strong>: {escape(SCOPE_TEXT[s])}</label>"
        for s in SCOPES
    )
    if private_scheme:
        # Whatever app on this computer claims the scheme gets the answer; the part after :// proves nothing.
        destination = f"to the app on this computer that opens <strong>{escape(private_scheme)}:</strong> links"
    elif loopback:
        destination = f"back to the app on this computer (<strong>{escape(redirect_host)}</strong>)"
    else:
        destination = f"to <strong>{escape(redirect_host)}</strong>"
    where = (
        f"<p>After you decide, your browser goes {destination}"
        + (" (this app's own address)." if verified_host else ". Only approve if you just started connecting this app.")
        + "</p>"
    )
    body = (
        (f"<p class=error>{escape(error)}</p>" if error else "")
        + f"<p><strong>{escape(client_name)}</strong> wants to use your memvault memory"
        f" as <strong>{escape(user_name)}</strong>.</p>"
        + where
        + _current_access(client_name, current, replaces_current)
        + "<form method=post action='/authorize'>"
        + _hidden({**request_fields(params), "csrf_token": csrf})
        + f"<fieldset><legend>Vaults it may use</legend>{vault_boxes or '<p>You have no vaults yet.</p>'}</fieldset>"
        + f"<fieldset><legend>What it may do</legend>{scope_boxes}</fieldset>"
        + "<button class=primary type=submit name=decision value=approve>Approve</button>"
        "<button type=submit name=decision value=deny>Deny</button></form>"
        + f"<p class=muted>App id: <code>{escape(client_id[:120])}</code>. You can revoke access at any time.</p>"
    )
    return page("Connect an app", body, form_action=[redirect_origin] if redirect_origin else [])


@dataclass(frozen=True)
class GrantRow:
    id: str
    kind: str
    name: str
    scopes: str
    vaults: str
    created: str
    last_used: str
