"""The dashboard's languages: gettext catalogues (Babel), chosen by a remembered choice or Accept-Language.

English is the source language; each other language is a `locale/<code>/LC_MESSAGES/messages.po`,
compiled in memory when the gateway starts (the .po file is the only copy kept in the repository).
API and MCP texts stay English; the dashboard's own words are translated, and so are the gateway's
sign-in, setup and email-link pages (`web.pages`, `signin`), through `words_of`: the same choice
and the same catalogue.
"""

from __future__ import annotations

import gettext
from functools import cache
from importlib import resources
from io import BytesIO

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import Translations
from fastapi import Request

from memvault_gateway.web import pages

LANGUAGES = {"en": "English", "id": "Bahasa Indonesia"}
"""Code -> the language's own name, as the switcher shows it."""
DEFAULT_LANGUAGE = "en"
LANGUAGE_COOKIE = "memvault_language"


def N_(message: str) -> str:
    """Marks a message for the catalogue; it is translated where it is shown."""
    return message


@cache
def translations(language: str) -> gettext.NullTranslations:
    """The catalogue for `language` (English: the messages as written)."""
    if language == DEFAULT_LANGUAGE or language not in LANGUAGES:
        return gettext.NullTranslations()
    source = resources.files("memvault_gateway.dashboard").joinpath(f"locale/{language}/LC_MESSAGES/messages.po")
    with source.open("rb") as po:
        catalog = read_po(po, locale=language)
    compiled = BytesIO()
    write_mo(compiled, catalog)
    compiled.seek(0)
    return Translations(fp=compiled)


def accepted_languages(header: str) -> list[str]:
    """The primary language codes of an Accept-Language header, most wanted first (q=0 left out)."""
    ranked: list[tuple[float, int, str]] = []
    for position, part in enumerate(header.split(",")[:32]):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        code = tag.strip().lower().split("-")[0]
        if code and quality > 0:
            ranked.append((-quality, position, code))
    return [code for _, _, code in sorted(ranked)]


def language_of(request: Request) -> str:
    """The switcher's remembered choice, else the first language the browser asks for that we have."""
    chosen = request.cookies.get(LANGUAGE_COOKIE, "")
    if chosen in LANGUAGES:
        return chosen
    for code in accepted_languages(request.headers.get("accept-language", "")):
        if code in LANGUAGES:
            return code
    return DEFAULT_LANGUAGE


def words_of(request: Request) -> pages.Words:
    """The language `request` is answered in and its catalogue, for the pages `web.pages` draws."""
    return words_of_language(language_of(request))


def words_of_language(language: str) -> pages.Words:
    """`language` and its catalogue (an unknown code: English)."""
    language = language if language in LANGUAGES else DEFAULT_LANGUAGE
    return pages.Words(language, translations(language))
