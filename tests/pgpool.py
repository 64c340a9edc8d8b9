"""Postgres databases for the tests, reused: each test still gets a database of its own that
holds exactly the migrated template's schema and rows, but most are not created for it.

CREATE DATABASE ... TEMPLATE and DROP DATABASE cost 0.2-1.5 s each on a loaded machine (the
whole template written through the WAL, fsynced); emptying a used database back to the
template's rows costs a few milliseconds. A test's database, when it is handed back:

1. loses every connection to it (as DROP ... WITH (FORCE) did), and is renamed, so that a
   process the test left behind can never reach the next test's database by its URL;
2. is compared with the template: its schema, privileges, settings and extensions (one
   digest of the catalogs). A test that changed any of them (a downgrade, a renamed table,
   a GRANT, ALTER DATABASE SET) gets its database dropped, as before;
3. has every table emptied and the template's rows put back (the migrations' seed rows:
   alembic_version, chain_head, registry_state, toolgate_schema), and every sequence set
   back to the template's value, in one transaction with triggers and foreign keys off.

Anything unexpected on the way (a lock not released, an error) drops the database instead:
the next test then gets a new copy of the template.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg

SYSTEM = "('pg_catalog', 'information_schema', 'pg_toast')"

# One digest of everything a test could change besides rows: tables and their columns
# (order, types, defaults, nullability, generated), constraints, indexes, triggers,
# functions, types, schemas, extensions, privileges, owners, the database's own settings
# and privileges.
FINGERPRINT = f"""
SELECT md5(string_agg(x, E'\\n' ORDER BY x)) FROM (
  SELECT 'rel ' || n.nspname || '.' || c.relname || ' ' || c.relkind::text || ' '
         || c.relowner::regrole::text || ' ' || coalesce(c.relacl::text, '') AS x
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname NOT IN {SYSTEM} AND n.nspname NOT LIKE 'pg_temp%'
         AND n.nspname NOT LIKE 'pg_toast_temp%'
  UNION ALL
  SELECT 'col ' || a.attrelid::regclass::text || ' ' || a.attnum::text || ' '
         || a.attname || ' '
         || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull::text || ' '
         || a.attgenerated::text || a.attidentity::text || ' '
         || coalesce(a.attacl::text, '') || ' '
         || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE n.nspname NOT IN {SYSTEM} AND n.nspname NOT LIKE 'pg_temp%'
         AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'con ' || conrelid::regclass::text || ' ' || conname || ' '
         || pg_get_constraintdef(oid)
    FROM pg_constraint WHERE connamespace NOT IN
         (SELECT oid FROM pg_namespace WHERE nspname IN {SYSTEM})
  UNION ALL
  SELECT 'idx ' || pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname NOT IN {SYSTEM}
  UNION ALL
  SELECT 'trg ' || pg_get_triggerdef(oid) || ' ' || tgenabled::text FROM pg_trigger
   WHERE NOT tgisinternal
  UNION ALL
  SELECT 'fun ' || p.oid::regprocedure::text || ' ' || md5(coalesce(p.prosrc, ''))
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname NOT IN {SYSTEM}
  UNION ALL
  SELECT 'typ ' || n.nspname || '.' || t.typname || ' ' || t.typtype::text
    FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
   WHERE n.nspname NOT IN {SYSTEM} AND n.nspname NOT LIKE 'pg_temp%'
         AND n.nspname NOT LIKE 'pg_toast_temp%'
  UNION ALL
  SELECT 'nsp ' || nspname || ' ' || nspowner::regrole::text || ' '
         || coalesce(nspacl::text, '')
    FROM pg_namespace WHERE nspname NOT LIKE 'pg_temp%' AND nspname NOT LIKE 'pg_toast_temp%'
  UNION ALL
  SELECT 'ext ' || extname || ' ' || extversion FROM pg_extension
  UNION ALL
  SELECT 'set ' || setrole || ' ' || array_to_string(setconfig, ',') FROM pg_db_role_setting
   WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
  UNION ALL
  SELECT 'db ' || datdba::regrole::text || ' ' || coalesce(datacl::text, '') || ' '
         || datallowconn::text || ' ' || datconnlimit::text
    FROM pg_database WHERE datname = current_database()
) s
"""

TABLES = f"""
SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN {SYSTEM}
       AND n.nspname NOT LIKE 'pg_temp%' ORDER BY 1
"""

SEQUENCES = """
SELECT format('%I.%I', schemaname, sequencename), start_value, last_value FROM pg_sequences
 WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1
"""


@dataclass
class Template:
    """What a reused database must hold again: the template's digest, tables, the rows of
    those that have any, and its sequences' values."""

    fingerprint: str
    tables: list[str]
    rows: dict[str, tuple[list[str], str]]  # table -> (its insertable columns, rows as JSON)
    sequences: list[tuple[str, int, int | None]]


async def read_template(url: str) -> Template:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        tables = [r[0] for r in await conn.fetch(TABLES)]
        rows: dict[str, tuple[list[str], str]] = {}
        for table in tables:
            data = await conn.fetchval(f"SELECT json_agg(t) FROM {table} t")
            if data is not None:
                columns = [r[0] for r in await conn.fetch(
                    "SELECT quote_ident(attname) FROM pg_attribute WHERE attrelid = "
                    "$1::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = '' "
                    "ORDER BY attnum", table)]
                rows[table] = (columns, data)
        sequences = [(r[0], r[1], r[2]) for r in await conn.fetch(SEQUENCES)]
        return Template(await conn.fetchval(FINGERPRINT), tables, rows, sequences)
    finally:
        await conn.close()


@dataclass
class Pool:
    """This process's databases not in use, each as good as a new copy of the template."""

    admin_dsn: str
    template: str
    url_of: Any  # database name -> the URL a test gets
    dsn_of: Any  # database name -> an asyncpg DSN
    shape: Template | None = None
    free: list[str] = field(default_factory=list)
    created: int = 0
    reused: int = 0

    def take(self) -> str:
        if self.shape is None:
            self.shape = asyncio.run(read_template(self.dsn_of(self.template)))
        if self.free:
            self.reused += 1
            return self.free.pop()
        name = f"toolgate_test_{uuid.uuid4().hex[:12]}"
        asyncio.run(self._admin(f"CREATE DATABASE {name} TEMPLATE {self.template}"))
        self.created += 1
        return name

    def give_back(self, name: str) -> None:
        """Reset `name` for the next test under a new name, or drop it."""
        fresh = f"toolgate_test_{uuid.uuid4().hex[:12]}"
        try:
            asyncio.run(self._reset(name, fresh))
        except Exception:
            # Not what the template was (or could not be made so): away with it, under
            # whichever name it has now.
            asyncio.run(self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            asyncio.run(self._admin(f"DROP DATABASE IF EXISTS {fresh} WITH (FORCE)"))
            return
        self.free.append(fresh)

    def close(self) -> None:
        for name in self.free:
            asyncio.run(self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        self.free.clear()

    async def _admin(self, sql: str) -> None:
        conn = await asyncpg.connect(self.admin_dsn, timeout=10)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    async def _reset(self, name: str, fresh: str) -> None:
        assert self.shape is not None
        admin = await asyncpg.connect(self.admin_dsn, timeout=10)
        try:
            # What WITH (FORCE) does: end every session on it; then a new name (refused
            # while any session remains), which a process left behind does not know.
            for _ in range(50):
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = $1 AND pid <> pg_backend_pid()", name)
                try:
                    await admin.execute(f"ALTER DATABASE {name} RENAME TO {fresh}")
                    break
                except asyncpg.ObjectInUseError:
                    await asyncio.sleep(0.02)
            else:
                raise RuntimeError(f"sessions on {name} did not end")
        finally:
            await admin.close()
        conn = await asyncpg.connect(self.dsn_of(fresh), timeout=10)
        try:
            if await conn.fetchval("SELECT count(*) FROM pg_prepared_xacts WHERE database = "
                                   "current_database()"):
                raise RuntimeError("a prepared transaction remains")
            if await conn.fetchval(FINGERPRINT) != self.shape.fingerprint:
                raise RuntimeError("schema changed")
            async with conn.transaction():
                await conn.execute("SET LOCAL session_replication_role = replica; "
                                   "SET LOCAL lock_timeout = '5s'")
                for table in self.shape.tables:
                    await conn.execute(f"DELETE FROM {table}")
                for table, (columns, data) in self.shape.rows.items():
                    listed = ", ".join(columns)
                    await conn.execute(
                        f"INSERT INTO {table} ({listed}) OVERRIDING SYSTEM VALUE "
                        f"SELECT {listed} FROM json_populate_recordset(NULL::{table}, $1)",
                        data)
                for sequence, start, last in self.shape.sequences:
                    if last is None:
                        await conn.execute("SELECT setval($1::regclass, $2, false)",
                                           sequence, start)
                    else:
                        await conn.execute("SELECT setval($1::regclass, $2, true)",
                                           sequence, last)
        finally:
            await conn.close()
