"""Rate limits: password guessing and registration floods are slowed down, with a clear answer."""

from __future__ import annotations

import pytest
from gateway_helpers import Agent, Browser, StartGateway, pkce

from memvault_gateway.web.throttle import RULES, Throttle


@pytest.mark.unit
async def test_a_rule_refuses_past_its_limit_and_says_when_to_retry() -> None:
    throttle = Throttle()
    allowed = [await throttle.allow("login", "198.51.100.7") for _ in range(RULES["login"].amount + 3)]
    assert allowed.count(True) == RULES["login"].amount
    assert allowed[-3:] == [False, False, False]
    assert 1 <= await throttle.retry_after("login", "198.51.100.7") <= 60
    assert await throttle.allow("login", "198.51.100.8")  # another address has its own count


@pytest.mark.unit
async def test_failed_passwords_lock_one_user_name_from_one_address_only() -> None:
    throttle = Throttle()
    for _ in range(RULES["login-failures"].amount):
        assert not await throttle.blocked("login-failures", "owner", "198.51.100.7")
        await throttle.count("login-failures", "owner", "198.51.100.7")
    assert await throttle.blocked("login-failures", "owner", "198.51.100.7")
    assert not await throttle.blocked("login-failures", "someone-else", "198.51.100.7")
    assert not await throttle.blocked("login-failures", "owner", "198.51.100.8")


@pytest.mark.integration
async def test_repeated_wrong_passwords_lock_the_user_name_from_that_address_even_for_the_right_one(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway()
    username, password = await gateway.create_user()
    browser = Browser(gateway)
    for _ in range(RULES["login-failures"].amount):
        assert (await browser.sign_in(username, "not the password")).status_code == 401
    locked = await browser.sign_in(username, password)
    assert locked.status_code == 429
    assert "Too many failed attempts" in locked.text
    assert (await browser.http.get("/api/v1/me")).status_code == 401


@pytest.mark.integration
async def test_wrong_passwords_from_one_address_do_not_lock_the_owner_out_elsewhere(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway()
    username, password = await gateway.create_user()
    stranger = Browser(gateway, address="127.0.0.2")
    for _ in range(RULES["login-failures"].amount):
        assert (await stranger.sign_in(username, "not the password")).status_code == 401
    assert (await stranger.sign_in(username, password)).status_code == 429
    owner = Browser(gateway, address="127.0.0.3")
    signed_in = await owner.sign_in(username, password)
    assert signed_in.status_code == 303
    assert (await owner.http.get("/api/v1/me")).json()["username"] == username


@pytest.mark.integration
async def test_registration_flood_gets_429_with_retry_after(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    body = {"client_name": "flood", "redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"}
    async with gateway.http() as http:
        answers = [await http.post("/register", json=body) for _ in range(RULES["register"].amount + 1)]
    assert {a.status_code for a in answers[:-1]} == {201}
    assert answers[-1].status_code == 429
    assert int(answers[-1].headers["retry-after"]) > 0


@pytest.mark.integration
async def test_authorization_request_flood_gets_429_with_retry_after(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    agent = Agent(gateway, await gateway.register())
    _, challenge = pkce()
    async with gateway.http() as http:
        answers = [await http.get(agent.authorize_url(challenge)) for _ in range(RULES["authorize"].amount + 1)]
    assert {a.status_code for a in answers[:-1]} == {302}  # to the sign-in page
    assert answers[-1].status_code == 429
    assert "too many requests" in answers[-1].json()["detail"]
    assert int(answers[-1].headers["retry-after"]) > 0
