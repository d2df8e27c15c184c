"""`memvault-dev run`: the whole system on this machine, until Ctrl-C; `memvault-dev setup-link`:
a password link for the stack that runs."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from memvault_devstack.claim import running_stack
from memvault_devstack.errors import DevstackError
from memvault_devstack.layout import OWNER_SUBJECT, SERVICES
from memvault_devstack.stack import Stack
from memvault_devstack.supervisor import Supervisor

DEFAULT_GATEWAY_PORT = 8080


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memvault-dev",
        description="Run memvault locally: embedded Postgres and NATS, and the four services as processes.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="start everything and print how to connect an agent; Ctrl-C stops it",
        description=(
            "Start Postgres and NATS (embedded, unless --postgres-dsn / --nats-url name servers), "
            "apply migrations, create the owner and its `default` vault, then start vault, indexer, "
            "mcp and gateway. Prints the MCP URL and how to connect Claude Code, Codex and Cursor. "
            "A service, NATS or Postgres that dies is restarted (after 1, 2, 4 seconds; several in dependency "
            "order: Postgres, NATS, vault and indexer, then mcp and gateway); one that keeps dying stops "
            "everything. Ctrl-C (or SIGTERM) stops the services, NATS and Postgres, in that order. "
            "One memvault-dev per data dir: a second one on the same dir says who runs it and exits (code 1), "
            "changing nothing. "
            "The gateway runs in dev mode: /mcp answers requests from this machine (loopback) as the "
            "owner, without sign-in, and refuses everything else."
        ),
    )
    run.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        default=Path(".data"),
        help="directory for all data, logs and the identity secret; reuse it to keep your memories (default: .data)",
    )
    link = commands.add_parser(
        "setup-link",
        help="print a one-time link to set (or reset) a password, for the running `memvault-dev run`",
        description=(
            "Find the `memvault-dev run` that runs on DIR (its database and gateway URL, whatever port it "
            "uses) and print a new one-time link to set the password of a local account, the owner by "
            "default. It replaces any earlier link for that account; the current password keeps working "
            "until the link is used. Exits 1, saying so, when nothing runs on DIR."
        ),
    )
    link.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        default=Path(".data"),
        help="data dir of the running stack (default: .data, as `make run` uses)",
    )
    link.add_argument(
        "--username", default=OWNER_SUBJECT, help=f"local account to make the link for (default: {OWNER_SUBJECT})"
    )
    run.add_argument(
        "--gateway-port",
        type=int,
        metavar="PORT",
        default=DEFAULT_GATEWAY_PORT,
        help=f"port of the gateway on 127.0.0.1, part of the URL agents use; 0 picks a free one "
        f"(default: {DEFAULT_GATEWAY_PORT})",
    )
    run.add_argument(
        "--postgres-dsn",
        metavar="DSN",
        help="use this Postgres database (it must exist) instead of the embedded server",
    )
    run.add_argument(
        "--nats-url", metavar="URL", help="use this NATS server (with JetStream) instead of the embedded one"
    )
    run.add_argument(
        "--services",
        type=_service_list,
        default=SERVICES,
        metavar="LIST",
        help=f"comma-separated services to start (default: {','.join(SERVICES)})",
    )
    run.add_argument(
        "--log-level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        default="INFO",
        help="log level of the services (default: INFO)",
    )
    run.add_argument(
        "--quiet",
        action="store_true",
        help="do not echo service output here; it still goes to <data-dir>/logs/<service>.log",
    )
    return parser


def _service_list(value: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in SERVICES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose from {','.join(SERVICES)} (got {value!r})")
    return names


def connection_help(stack: Stack, setup_link: str | None = None) -> str:
    """What to tell the user once everything is ready."""
    url = stack.mcp_url
    owner = (
        f"  Owner sign-in  first time: open this one-time link to set your password:\n                   {setup_link}"
        if setup_link
        else f"  Owner sign-in  {stack.gateway_url}/login (user name: owner)"
    )
    command = (
        "make setup-link"
        if stack.data_dir == Path(".data").absolute()
        else f"memvault-dev setup-link --data-dir {stack.data_dir}"
    )
    reset = f"  Password reset {command}   (prints a new one-time link for this stack)"
    lines = [
        "",
        f"memvault is running (data in {stack.data_dir})",
        "",
        f"  MCP endpoint   {url}",
        f"  Agent guide    {stack.connect_url}",
        f"  Postgres       {stack.postgres_dsn}",
        f"  NATS           {stack.nats_url}",
        f"  Logs           {stack.logs_dir}",
        owner,
        reset,
        "",
        "Connect an agent (dev mode: requests from this machine act as the owner, no sign-in):",
        "",
        "  Claude Code    run:",
        f"                   claude mcp add --transport http memvault {url}",
        "  Codex          add to ~/.codex/config.toml:",
        "                   [mcp_servers.memvault]",
        f'                   url = "{url}"',
        "  Cursor         add to ~/.cursor/mcp.json:",
        f'                   {{"mcpServers": {{"memvault": {{"url": "{url}"}}}}}}',
        "",
        "Press Ctrl-C to stop.",
        "",
    ]
    return "\n".join(lines)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # Only the first signal interrupts: stopping is bounded by per-process timeouts, and a second
    # Ctrl-C in the middle of it would leave processes behind.
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    stack = Stack(
        args.data_dir,
        postgres_dsn=args.postgres_dsn,
        nats_url=args.nats_url,
        gateway_port=args.gateway_port or None,
        services=args.services,
        log_level=args.log_level,
        echo=None if args.quiet else sys.stdout,
    )
    # SIGTERM and a closed terminal stop the stack the same way Ctrl-C does. SIGINT is set too:
    # a shell starting us in the background would otherwise have it ignored.
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _interrupt)
    interrupted = False
    try:
        stack.start()
        if "gateway" in stack.services:
            print(connection_help(stack, stack.owner_setup_link()), flush=True)
        else:
            print(f"\nstarted {', '.join(stack.services)}; press Ctrl-C to stop\n", flush=True)
        supervisor = Supervisor(stack, sys.stderr)
        while True:
            time.sleep(0.5)
            supervisor.check()
    except KeyboardInterrupt:
        interrupted = True
        print("\nmemvault-dev: stopping…", file=sys.stderr, flush=True)
        return 0
    except DevstackError as error:
        print(f"memvault-dev: {error}", file=sys.stderr)
        return 1
    finally:
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        # After a failed start everything is stopped already, or nothing had started.
        was_running = stack.running()
        stack.stop()
        if was_running or interrupted:
            print("memvault-dev: stopped", file=sys.stderr, flush=True)


def setup_link(args: argparse.Namespace) -> int:
    """Print a reset link made by the running stack's gateway command, against its database and URL."""
    data_dir = args.data_dir.absolute()
    state = running_stack(data_dir)
    if state is None:
        print(
            f"memvault-dev: no memvault-dev runs on {data_dir}; start it (`make run`) and run this again "
            "(the link is for its gateway and database)",
            file=sys.stderr,
        )
        return 1
    if not state.ready:
        print(
            f"memvault-dev: the memvault-dev on {data_dir} ({state.describe()}) has not finished starting; "
            "run this again once it printed its URL",
            file=sys.stderr,
        )
        return 1
    if state.gateway_url is None or state.postgres_dsn is None or not state.gateway_command:
        print(
            f"memvault-dev: the memvault-dev on {data_dir} runs without the gateway; no link to make", file=sys.stderr
        )
        return 1
    env = {
        **os.environ,
        "MEMVAULT_POSTGRES__DSN": state.postgres_dsn,
        "MEMVAULT_GATEWAY__PUBLIC_URL": state.gateway_url,
        "MEMVAULT_LOG__LEVEL": "WARNING",
    }
    # --force: for an account with a password too; this command is how a password is reset.
    command = [*state.gateway_command, "setup-link", "--username", args.username, "--force"]
    result = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, timeout=60, check=False)
    if result.returncode != 0:
        return result.returncode  # the gateway said why on stderr
    print(result.stdout.strip())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="memvault-dev: %(message)s", stream=sys.stderr)
    # Readiness polling would log every request.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.command == "run":
        return run(args)
    if args.command == "setup-link":
        return setup_link(args)
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
