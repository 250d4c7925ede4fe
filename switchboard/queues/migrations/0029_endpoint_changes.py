"""A web process keeps the endpoints its agents' tokens named (agents/token_cache.py), so an
agent's request is not one statement more for its token: each change to an endpoint that
could change a request's answer is said on ``switchboard_endpoint`` (the endpoint's id) in the
transaction that made it, and every process's doorbell connection hears it and forgets that
endpoint (agents/doorbell.py). A TRUNCATE says ``*``: forget them all.

Whatever writes the row (the Board, admin's bulk actions, the revoke statement, a fix by hand)
is heard, because the trigger is on the table. Every column counts except the admission
window a claim may write (SWITCHBOARD_CLAIMS_PER_MINUTE): a claim must not make every process
forget its endpoint. The WHEN clause is evaluated in C, before any function is called.
"""

from django.db import migrations

FORWARD = r"""
CREATE FUNCTION switchboard_endpoint_changed() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_LEVEL = 'STATEMENT' THEN
        PERFORM pg_notify('switchboard_endpoint', '*');
    ELSE
        PERFORM pg_notify('switchboard_endpoint', OLD.id::text);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER endpoints_changed AFTER UPDATE ON endpoints
    FOR EACH ROW
    WHEN ((to_jsonb(OLD) - 'admission_window_at' - 'admission_claims')
          IS DISTINCT FROM (to_jsonb(NEW) - 'admission_window_at' - 'admission_claims'))
    EXECUTE FUNCTION switchboard_endpoint_changed();
CREATE TRIGGER endpoints_deleted AFTER DELETE ON endpoints
    FOR EACH ROW EXECUTE FUNCTION switchboard_endpoint_changed();
CREATE TRIGGER endpoints_truncated AFTER TRUNCATE ON endpoints
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_endpoint_changed();
"""

BACKWARD = r"""
DROP TRIGGER endpoints_truncated ON endpoints;
DROP TRIGGER endpoints_deleted ON endpoints;
DROP TRIGGER endpoints_changed ON endpoints;
DROP FUNCTION switchboard_endpoint_changed();
"""


class Migration(migrations.Migration):
    dependencies = [("queues", "0028_result_words")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
