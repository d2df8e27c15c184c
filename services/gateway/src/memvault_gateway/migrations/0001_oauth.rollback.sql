-- Table by table, not DROP SCHEMA: yoyo's own bookkeeping (and its lock, held while this runs)
-- lives in schema `gateway` too.
DROP TABLE IF EXISTS gateway.token, gateway.authorization_code, gateway.access_grant, gateway.oauth_client,
    gateway.login_state, gateway.session, gateway.setup_link, gateway.external_identity, gateway.user_account;
