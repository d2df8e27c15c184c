"""Shared HTTP plumbing: problem answers and addresses (`http`), the HTML pages and their CSP (`pages`),
body caps, tracing and rate limits. Imports nothing from the wings."""
