"""Alembic's environment: migrations run on the connection torchmark passes in."""

from alembic import context

from torchmark.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
