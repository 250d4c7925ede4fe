"""A2A push-notification configs (queues/push.py): set (made or replaced by its id), read,
listed and deleted by the endpoint that set them, each write recounting the todo's
``push_configs`` (the trigger ``todos_outbox_task_push`` fires only for a todo that has some).

Why raw SQL: the configs are written on the async path (the A2A front), where the ORM
cannot run; the upsert and the recount are one statement each, in one transaction.
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement

PUSH_CONFIG_COLUMNS = "c.config_id, c.task_id, c.url, c.token, c.auth_scheme, c.auth_credentials"

PUSH_CONFIG_UPSERT = Statement(
    "push_config_upsert",
    f"""
INSERT INTO task_push_configs AS c (todo_id, endpoint_id, team_id, config_id, task_id, url,
                                    token, auth_scheme, auth_credentials, secret, created_at)
VALUES (%(todo_id)s, %(endpoint_id)s, %(team_id)s, %(config_id)s, %(task_id)s, %(url)s,
        %(token)s, %(auth_scheme)s, %(auth_credentials)s, %(secret)s, statement_timestamp())
    ON CONFLICT (todo_id, config_id) DO UPDATE
   SET url = EXCLUDED.url, token = EXCLUDED.token, auth_scheme = EXCLUDED.auth_scheme,
       auth_credentials = EXCLUDED.auth_credentials, secret = EXCLUDED.secret
 WHERE c.endpoint_id = EXCLUDED.endpoint_id
RETURNING {PUSH_CONFIG_COLUMNS}
""",
    why="an upsert by the todo and the config's id, kept to the endpoint that set it",
)
PUSH_CONFIG_LOCK = Statement(
    "push_config_lock",
    """
SELECT 1 FROM todos WHERE id = %(todo_id)s FOR UPDATE
""",
    why="a change of a todo's configs locks the todo first, in a statement of its own (the next"
    " one reads the configs as they are once the lock is held): two changes at once take"
    " turns, so neither the limit nor the count the push trigger reads is decided on configs"
    " the other is changing",
)
PUSH_CONFIG_IDS = Statement(
    "push_config_ids",
    """
SELECT config_id FROM task_push_configs WHERE todo_id = %(todo_id)s
""",
    why="the ids of a todo's configs (it has at most PUSH_CONFIGS_MAX)",
)
PUSH_CONFIGS_RECOUNT = Statement(
    "push_configs_recount",
    """
UPDATE todos t
   SET push_configs = (SELECT count(*) FROM task_push_configs c WHERE c.todo_id = t.id)
 WHERE t.id = %(todo_id)s
""",
    why="the todo's count of configs, which the push trigger's WHEN reads",
)
PUSH_CONFIGS_OF = Statement(
    "push_configs_of",
    f"""
SELECT {PUSH_CONFIG_COLUMNS}
  FROM task_push_configs c
 WHERE c.todo_id = %(todo_id)s AND c.endpoint_id = %(endpoint_id)s
   AND (%(config_id)s::text IS NULL OR c.config_id = %(config_id)s::text)
 ORDER BY c.config_id
""",
    why="the configs an endpoint set on a todo (or the one named)",
)
PUSH_CONFIG_DELETE = Statement(
    "push_config_delete",
    """
DELETE FROM task_push_configs c
 WHERE c.todo_id = %(todo_id)s AND c.endpoint_id = %(endpoint_id)s
   AND c.config_id = %(config_id)s
RETURNING c.id
""",
    why="a config deleted by the endpoint that set it",
)
