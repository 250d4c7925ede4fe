"""ADR-0039's reference (bench/nohist.sql) held to the ledger's schema file: a column it names
that the schema no longer has fails here, in make test, before a bench run would stop on it."""

import re

from bench import db
from bench.workers import twin_columns


def test_every_column_the_twin_names_is_a_column_of_its_table_in_the_schema_file():
    tables = (db.ROOT / "switchboard" / "queues" / "schema" / "tables.sql").read_text()
    for table, columns in twin_columns().items():
        body = re.search(rf"^CREATE TABLE {table} \((.*?)^\)", tables, re.M | re.S)
        assert body, f"no table {table} in queues/schema/tables.sql"
        assert columns <= set(re.findall(r"^    (\w+) ", body[1], re.M)), table
