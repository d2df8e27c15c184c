"""memvault: commands a person runs on a laptop against a remote memvault with a service token.

`memvault import chatgpt|claude FILE --url URL --token TOKEN [--vault NAME]` uploads a ChatGPT or
Claude.ai export (conversations.json or the export's zip) in parts over `/api/v1`, then follows the
import job with a progress bar and prints the final counts."""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm  # type: ignore[import-untyped]

PART_BYTES = 3 * 1024 * 1024
FINISHED = ("done", "failed", "duplicate")


class CommandError(Exception):
    """What went wrong, in one line for the person at the terminal."""


def _check(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail") or response.text
        except ValueError:
            detail = response.text
        raise CommandError(f"{response.request.method} {response.request.url.path}: {response.status_code} {detail}")
    body: dict[str, Any] = response.json()
    return body


def _vault(client: httpx.Client, name: str) -> str:
    if name:
        return name
    vaults = [v["name"] for v in _check(client.get("/api/v1/vaults"))["vaults"]]
    if len(vaults) != 1:
        raise CommandError(f"the token reaches {len(vaults)} vaults; choose one with --vault ({', '.join(vaults)})")
    return str(vaults[0])


FORMATS = {
    "chatgpt": "a ChatGPT data export: conversations.json or the export's zip",
    "claude": "a Claude.ai data export: conversations.json or the export's zip",
}


def import_chatgpt(
    path: Path, url: str, token: str, vault: str = "", *, poll_seconds: float = 1.0, timeout: float = 3600.0
) -> dict[str, Any]:
    """Upload a ChatGPT export and wait for its import job; returns the final status."""
    return import_export("chatgpt", path, url, token, vault, poll_seconds=poll_seconds, timeout=timeout)


def import_export(
    fmt: str,
    path: Path,
    url: str,
    token: str,
    vault: str = "",
    *,
    poll_seconds: float = 1.0,
    timeout: float = 3600.0,
) -> dict[str, Any]:
    """Upload the export (format `chatgpt` or `claude`) and wait for its import job; returns the final status."""
    if not path.is_file():
        raise CommandError(f"{path} is not a file")
    size = path.stat().st_size
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=120) as client:
        name = _vault(client, vault)
        base = f"/api/v1/vaults/{name}/archive/imports"
        started = _check(
            client.post(base, json={"format": fmt, "filename": path.name, "size": size, "sha256": digest.hexdigest()})
        )
        import_id = started["id"]
        part_bytes = int(started.get("part_bytes") or PART_BYTES)
        with (
            path.open("rb") as handle,
            tqdm(total=size, unit="B", unit_scale=True, desc="upload", file=sys.stderr) as bar,
        ):
            for part, block in enumerate(iter(lambda: handle.read(part_bytes), b"")):
                _check(
                    client.put(
                        f"{base}/{import_id}/parts/{part}",
                        content=block,
                        headers={"Content-Type": "application/octet-stream"},
                    )
                )
                bar.update(len(block))
        status = _check(client.post(f"{base}/{import_id}/finish"))
        deadline = time.monotonic() + timeout
        with tqdm(total=status["total"] or None, unit="conv", desc="import", file=sys.stderr) as bar:
            while status["state"] not in FINISHED:
                if time.monotonic() > deadline:
                    raise CommandError(f"import {import_id} is still {status['state']}; check it later")
                time.sleep(poll_seconds)
                status = _check(client.get(f"{base}/{import_id}"))
                if status["total"]:
                    bar.total = status["total"]
                bar.n = status["done"]
                bar.refresh()
        return status


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="memvault", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    imports = commands.add_parser("import", help="import an export into the conversation archive")
    kinds = imports.add_subparsers(dest="kind", required=True)
    for fmt, description in FORMATS.items():
        kind = kinds.add_parser(fmt, help=description)
        kind.add_argument("file", type=Path)
        kind.add_argument(
            "--url", default=os.environ.get("MEMVAULT_URL", ""), help="the memvault address (MEMVAULT_URL)"
        )
        kind.add_argument(
            "--token",
            default=os.environ.get("MEMVAULT_TOKEN", ""),
            help="a service token with write scope (MEMVAULT_TOKEN)",
        )
        kind.add_argument("--vault", default="", help="the vault (needed when the token reaches several)")
    args = parser.parse_args(argv)
    if not args.url or not args.token:
        parser.error("--url and --token (or MEMVAULT_URL and MEMVAULT_TOKEN) are required")
    try:
        status = import_export(args.kind, args.file, args.url, args.token, args.vault)
    except (CommandError, httpx.HTTPError) as error:
        print(f"memvault: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    if status["state"] == "duplicate":
        print(f"this export was already imported (import {status['duplicate_of']}); nothing was done again")
        return
    print(
        f"import {status['id']}: {status['state']}; {status['done']} of {status['total']} conversations, "
        f"{status['imported']} new, {status['updated']} updated, {status['duplicates']} unchanged, "
        f"{status['failed']} failed"
    )
    for failure in status["failures"]:
        print(f"  failed {failure['conversation_id']}: {failure['error']}")
    if status["state"] == "failed" or status["failed"]:
        print(
            f"  once the cause is fixed, an owner retries it from its last checkpoint: the Retry button on its"
            f" dashboard page, or POST /api/v1/vaults/{args.vault or 'VAULT'}/archive/imports/{status['id']}/retry"
        )
    if status["state"] == "failed":
        print(f"  {status['error']}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
