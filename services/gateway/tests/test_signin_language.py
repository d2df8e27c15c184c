"""The sign-in and setup pages speak the dashboard's language: the switcher's cookie, else Accept-Language."""

from __future__ import annotations

import pytest
from gateway_helpers import PASSWORD, Browser, StartGateway, csrf_of, unique

from memvault_gateway.__main__ import setup_link
from memvault_gateway.auth import credentials, sessions
from memvault_gateway.dashboard import i18n
from memvault_gateway.settings import MigrateSettings
from memvault_gateway.signin import login

INDONESIAN = {"accept-language": "id-ID,id;q=0.9,en;q=0.5"}


def test_the_catalogue_holds_auths_english_answers_as_auth_words_them() -> None:
    assert sessions.CROSS_SITE in login.FROM_AUTH
    for password in ("short", "x" * (credentials.MAX_PASSWORD_CHARS + 1)):
        assert credentials.password_problem(password) in login.FROM_AUTH
    indonesian = i18n.words_of_language("id")
    assert all(indonesian(message) != message for message in login.FROM_AUTH)


@pytest.mark.integration
async def test_the_sign_in_page_follows_accept_language_and_the_switchers_cookie(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    username, _ = await gateway.create_user()
    browser = Browser(gateway)

    english = await browser.http.get("/login")
    assert english.status_code == 200 and "<html lang=en>" in english.text
    assert "<title>Sign in to memvault · memvault</title>" in english.text and "User name <input" in english.text

    indonesian = await browser.http.get("/login", headers=INDONESIAN)
    assert indonesian.status_code == 200 and "<html lang=id>" in indonesian.text
    assert "<h1>Masuk ke memvault</h1>" in indonesian.text
    assert "Nama pengguna <input" in indonesian.text and "Kata sandi <input" in indonesian.text
    assert "Sign in" not in indonesian.text and "Password" not in indonesian.text
    assert indonesian.headers["content-security-policy"] == english.headers["content-security-policy"]

    wrong = await browser.http.post(
        "/login",
        data={"username": username, "password": "not it", "next": "/", "csrf_token": csrf_of(indonesian.text)},
        headers=INDONESIAN,
    )
    assert wrong.status_code == 401 and "Nama pengguna atau kata sandi salah." in wrong.text
    expired = await browser.http.post(
        "/login", data={"username": username, "password": "x", "csrf_token": "forged"}, headers=INDONESIAN
    )
    assert expired.status_code == 403 and "Formulir masuk sudah kedaluwarsa; coba lagi." in expired.text
    refused = await browser.http.post("/login", data={"username": username, "password": "x", "csrf_token": "forged"})
    assert refused.status_code == 403 and "The sign-in form expired; try again." in refused.text

    # Single sign-on's answers too (here it is not set up).
    sso = await browser.http.get("/login/oidc/callback", headers=INDONESIAN)
    assert sso.status_code == 404 and "<h1>Tidak tersedia</h1>" in sso.text
    assert "Single sign-on is not set up on this gateway." in (await browser.http.get("/login/oidc/callback")).text

    # The switcher's remembered choice wins over what the browser asks for, both ways.
    chosen = Browser(gateway)
    chosen.http.cookies.set(i18n.LANGUAGE_COOKIE, "id")
    assert "Masuk ke memvault" in (await chosen.http.get("/login", headers={"accept-language": "en"})).text
    chosen.http.cookies.set(i18n.LANGUAGE_COOKIE, "en")
    assert "Sign in to memvault" in (await chosen.http.get("/login", headers=INDONESIAN)).text
    # An app sent the person here: the reason is said in their language too.
    connecting = await browser.http.get("/login", params={"next": "/authorize?client_id=x"}, headers=INDONESIAN)
    assert "Sebuah aplikasi meminta terhubung ke memvault Anda." in connecting.text
    await browser.close()
    await chosen.close()


@pytest.mark.integration
async def test_the_setup_page_and_its_answers_follow_the_language(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    settings = MigrateSettings(gateway=gateway.settings.gateway, postgres=gateway.settings.postgres)
    username = unique("owner")
    link = await setup_link(settings, username, force=False)
    assert link is not None
    path = link.removeprefix(gateway.url)
    browser = Browser(gateway)

    english = await browser.http.get(path)
    assert english.status_code == 200 and "<h1>Set up your memvault account</h1>" in english.text
    assert f"Choose a password for <strong>{username}</strong>. This link works once." in english.text

    form = await browser.http.get(path, headers=INDONESIAN)
    assert form.status_code == 200 and "<html lang=id>" in form.text
    assert "<h1>Siapkan akun memvault Anda</h1>" in form.text
    assert f"Pilih kata sandi untuk <strong>{username}</strong>. Tautan ini hanya berlaku sekali." in form.text
    assert "Simpan kata sandi dan masuk" in form.text and "Set password" not in form.text
    csrf = csrf_of(form.text)
    short = await browser.http.post(
        path, data={"password": "short", "password_again": "short", "csrf_token": csrf}, headers=INDONESIAN
    )
    assert short.status_code == 400 and "pakai sedikitnya 12 karakter" in short.text
    differ = await browser.http.post(
        path, data={"password": PASSWORD, "password_again": PASSWORD + "x", "csrf_token": csrf}, headers=INDONESIAN
    )
    assert differ.status_code == 400 and "kedua kata sandi berbeda" in differ.text
    forged = await browser.http.post(
        path, data={"password": PASSWORD, "password_again": PASSWORD, "csrf_token": "forged"}, headers=INDONESIAN
    )
    assert forged.status_code == 403 and "<h1>Permintaan ditolak</h1>" in forged.text

    unknown = await browser.http.get("/setup/mvsetup_unknown", headers=INDONESIAN)
    assert unknown.status_code == 404 and "<h1>Tautan tidak berlaku</h1>" in unknown.text
    assert "Tautan penyiapan ini tidak dikenal di sini" in unknown.text
    english_unknown = await browser.http.get("/setup/mvsetup_unknown")
    assert (
        "<h1>Link not valid</h1>" in english_unknown.text
        and "This setup link is not known here" in english_unknown.text
    )
    await browser.close()
