-- depends: 0002_email_sign_in
-- A setup link made stale by a newer one for the same person is kept (until the usual purge,
-- seven days after it would have expired) and marked, so opening it can say that it was
-- replaced and where the newest one comes from, instead of "unknown link".

ALTER TABLE gateway.setup_link ADD COLUMN replaced_at timestamptz;
