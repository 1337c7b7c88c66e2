"""`torchmark serve`: the dashboard over the store (server/)."""

from __future__ import annotations

import errno

import click

from torchmark.cli.store_options import db_option


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on; any but a loopback one needs a token.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--token", default=None, metavar="TOKEN",
              help="Required on every request (at least 16 characters) and what lets its "
                   "holder acknowledge or dismiss regressions [default: "
                   "$TORCHMARK_SERVE_TOKEN]. Other users see a command line: prefer "
                   "--token-file or the variable.")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None,
              help="Read the token from this file's first line (mode 600).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Processes building pages (2 or more: apart from the one serving "
                   "requests, each taking the oldest page waiting): more answer more "
                   "clients at once on more cores; they share one detection of the "
                   "store's changes.")
@click.option("--page-threads", type=click.IntRange(1, 64), default=1, show_default=True,
              help="With one worker: pages built at once; the others wait their turn "
                   "(more only slow each other down where a page is Python's work).")
@db_option
def serve_cmd(host, port, token, token_file, workers, page_threads, db):
    """Serve the dashboard: the regressions feed, runs, each case's history by commit,
    comparisons of two runs and search, each page at a stable address, and its data as
    JSON under /api/v1/. Read-only without a token; bound to anything but a loopback
    address it needs one (docs/dashboard.md)."""
    from torchmark.cli.store_options import open_store
    from torchmark.server import auth

    token = auth.read_token(token if token is not None else auth.env_token(), token_file)
    auth.check_binding(host, token)
    try:
        import uvicorn

        from torchmark.server.app import create_app
    except ImportError as e:
        from torchmark.core.errors import ToolMissingError

        raise ToolMissingError(f"the dashboard needs the serve extra ({e.name} is missing): "
                               "pip install 'torchmark[serve]'") from None
    store = open_store(db)
    listening = _listen(host, port)  # taken before anything says the server is up
    port = listening.getsockname()[1]  # --port 0: the one the system gave
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address
    click.echo(f"torchmark serve: {store.where} on http://{shown}:{port}/"
               + (" (token required)" if token else " (read-only)")
               + (f", {workers} processes" if workers > 1 else ""), err=True)
    config = uvicorn.Config(create_app(store, token, page_threads,
                                       page_processes=workers if workers > 1 else 0),
                            host=host, port=port, log_level="warning", access_log=False)
    try:
        uvicorn.Server(config).run(sockets=[listening])
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM, which uvicorn raises again once it has
        pass  # shut down gracefully: the way a server is stopped, not an error
    click.echo("torchmark serve: stopped", err=True)
    return 0


def _listen(host: str, port: int):  # -> socket.socket
    """A socket listening on `host`:`port`; a one-line error when it cannot be had (the
    port in use, an address not of this machine)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as e:
        why = "in use (another server?)" if e.errno == errno.EADDRINUSE else \
            (e.strerror or str(e)).split(" (while")[0].lower()
        raise click.UsageError(f"--host {host} --port {port}: cannot listen there: {why}") \
            from None
