"""``python -m switchboard.queues.schema --write``: migrate a scratch database from zero, read its catalogs
and write queues/schema/*.sql from them. Without ``--write``, say how the files differ from
it (exit status 1 if they do).

The scratch database is made on the test settings' PostgreSQL (``DATABASE_URL``, else a
throwaway embedded server) and dropped after; no other database is touched.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m switchboard.queues.schema", description=__doc__
    )
    parser.add_argument("--write", action="store_true", help="write the files")
    write = parser.parse_args(argv).write

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "switchboard.settings_test")
    import django

    django.setup()
    from django.db import connection

    from switchboard.queues.schema import FOLDER, catalog

    # A name of its own: a test run's database on the same server is not clobbered.
    connection.settings_dict["TEST"]["NAME"] = f"switchboard_schema_{os.getpid()}"
    before = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        texts = catalog.files(connection)
    finally:
        connection.creation.destroy_test_db(before, verbosity=0)

    differ = False
    for name, text in texts.items():
        path = FOLDER / name
        old = path.read_text() if path.exists() else ""
        if old == text:
            continue
        differ = True
        if write:
            path.write_text(text)
            print(f"wrote {path}")
        else:
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    f"{path} (committed)",
                    f"{path} (migrated from zero)",
                )
            )
    return 1 if differ and not write else 0


if __name__ == "__main__":
    sys.exit(main())
