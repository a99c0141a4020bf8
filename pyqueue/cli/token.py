"""`pyqueue token create`: a new token, and the lines that grant it rights in the auth file."""

import click


@click.group()
def token() -> None:
    """Tokens for a server started with --auth-file."""


@token.command()
@click.argument("name")
@click.option(
    "--grant",
    "grants",
    multiple=True,
    required=True,
    help="ROLE:QUEUE_PATTERN, ROLE one of produce, work, read, admin (repeatable), e.g. produce:emails.",
)
def create(name: str, grants: tuple[str, ...]) -> None:
    """Print a new token for NAME, and the [[token]] entry to add to the server's auth file.

    The file keeps only the token's SHA-256: keep the token itself where the client runs
    (PYQUEUE_TOKEN). Restart the server to load a changed file."""
    import json

    from pyqueue.tokens import AuthFileError, hash_token, new_token, parse_grant

    try:
        for grant in grants:
            parse_grant(grant)
    except AuthFileError as exc:
        raise click.UsageError(str(exc)) from None
    secret = new_token()
    click.echo(f"token: {secret}")
    click.echo("\n# add to the auth file:")
    click.echo("[[token]]")
    click.echo(f"name = {json.dumps(name)}")
    click.echo(f'sha256 = "{hash_token(secret)}"')
    click.echo(f"grants = [{', '.join(json.dumps(g) for g in grants)}]")
